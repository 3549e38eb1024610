"""Backends against real things: a local HTTP server speaking trtllm-serve's OpenAI protocol, a tiny HF model, the simulator."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from repro.run.backends.base import Request
from repro.run.backends.sim import SimBackend
from repro.run.backends.trtllm import BackendError, TrtllmBackend, build_payload, endpoints_for
from repro.setup.dataset import save_prepared
from repro.run.harness import run_benchmark
from repro.results.logs import parse_run
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace


def reply_ids(prompt: list[int], max_tokens: int) -> list[int]:
    """The fake server's deterministic 'generation': the prompt reversed, plus 7, cut at max_tokens."""
    return [t + 7 for t in reversed(prompt)][:max_tokens] or [7]


class FakeServe(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fail_after: int | None = None

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv = self.server
        with srv.lock:
            srv.requests.append((self.path, body))
            n = len(srv.requests)
        if srv.fail_after is not None and n > srv.fail_after:
            self._send(500, {"error": "engine died"})
            return
        prompt = body.get("prompt_token_ids") if self.path == "/v1/chat/completions" else body.get("prompt")
        if not isinstance(prompt, list) or body.get("min_tokens") != 1 or body.get("top_k") != 1:
            self._send(400, {"error": "bad request"})
            return
        ids = reply_ids(prompt, body["max_tokens"])
        if not body.get("stream"):
            choice = {"index": 0, "token_ids": ids, "finish_reason": "stop"}
            choice.update({"message": {"role": "assistant", "content": "x"}} if "chat" in self.path else {"text": "x"})
            self._send(200, {"id": "cmpl", "choices": [choice], "usage": {"completion_tokens": len(ids)}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for t in ids:
            delta = {"index": 0, "delta": {"content": "x"}, "token_ids": [t]}
            self._chunk(b"data: " + json.dumps({"choices": [delta]}).encode() + b"\n\n")
        self._chunk(b"data: " + json.dumps({"choices": [], "usage": {"completion_tokens": len(ids)}}).encode() + b"\n\n")
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")


@pytest.fixture
def servers():
    """Two real HTTP servers on 127.0.0.1, like two trtllm-serve processes (one per GPU)."""
    running = []
    for _ in range(2):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeServe)
        srv.daemon_threads = True
        srv.lock, srv.requests, srv.fail_after = threading.Lock(), [], None
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        running.append(srv)
    yield running
    for srv in running:
        srv.shutdown()
        srv.server_close()


def _urls(servers) -> list[str]:
    return [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]


class Collect:
    def __init__(self, expect: int) -> None:
        self.first: dict[int, int] = {}
        self.done: dict[int, np.ndarray] = {}
        self.order: list[tuple[str, int]] = []
        self.errors: list[BaseException] = []
        self.lock = threading.Lock()
        self.expect = expect
        self.all_done = threading.Event()

    def first_tokens(self, events) -> None:
        with self.lock:
            for i, t in events:
                self.first[i] = t
                self.order.append(("first", i))

    def completed(self, events) -> None:
        with self.lock:
            for i, a in events:
                self.done[i] = np.array(a)
                self.order.append(("done", i))
            if len(self.done) >= self.expect:
                self.all_done.set()

    def failed(self, exc: BaseException) -> None:
        self.errors.append(exc)
        self.all_done.set()


def _requests(n: int, max_tokens: int = 16) -> list[Request]:
    rng = np.random.default_rng(1)
    return [Request(i, i, rng.integers(3, 1000, size=int(rng.integers(2, 40))).astype(np.int32), max_tokens) for i in range(n)]


@pytest.mark.parametrize("api,stream", [("chat", False), ("completions", False), ("chat", True)])
def test_trtllm_round_robin_and_tokens(servers, api: str, stream: bool) -> None:
    reqs = _requests(20)
    sink = Collect(len(reqs))
    be = TrtllmBackend(_urls(servers), api=api, stream=stream, max_concurrency=4)
    be.start(sink)
    try:
        be.submit(reqs)
        assert sink.all_done.wait(30)
    finally:
        be.close()
    assert not sink.errors
    for r in reqs:
        want = reply_ids(r.input_ids.tolist(), r.max_tokens)
        assert sink.done[r.id].tolist() == want and sink.first[r.id] == want[0]
        assert sink.order.index(("first", r.id)) < sink.order.index(("done", r.id))
    posted = [[b for p, b in s.requests if b["max_tokens"] == 16] for s in servers]
    assert [len(p) for p in posted] == [10, 10]
    body = posted[0][0]
    assert body["stream"] is stream and body["top_p"] == 0.001 and body["temperature"] == 1.0
    if api == "chat":
        assert body["messages"] == [] and "prompt_token_ids" in body
    health = [b for s in servers for p, b in s.requests if b["max_tokens"] == 10]
    assert len(health) == 2


def test_trtllm_port_not_listening_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    be = TrtllmBackend([f"http://127.0.0.1:{port}"], health_timeout_s=1)
    with pytest.raises(BackendError, match=f"Nothing is listening at http://127.0.0.1:{port}"):
        be.start(Collect(1))
    be.close()


def test_trtllm_port_held_by_another_program() -> None:
    class NotServe(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_error(404)

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), NotServe)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    be = TrtllmBackend([f"http://127.0.0.1:{srv.server_address[1]}"])
    try:
        with pytest.raises(BackendError, match="in use by something that is not a ready trtllm-serve"):
            be.start(Collect(1))
    finally:
        be.close()
        srv.shutdown()
        srv.server_close()


def test_trtllm_server_error_mid_run_reaches_the_sink(servers) -> None:
    for s in servers:
        s.fail_after = 3
    sink = Collect(10)
    be = TrtllmBackend(_urls(servers), max_concurrency=1)
    be.start(sink)
    try:
        be.submit(_requests(10))
        assert sink.all_done.wait(30)
    finally:
        be.close()
    assert sink.errors and "HTTP 500" in str(sink.errors[0]) and "engine died" in str(sink.errors[0])


def test_endpoints_from_recipe_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert endpoints_for(get_recipe("nd-gb300-v6")) == [f"http://127.0.0.1:{30000 + i}" for i in range(4)]
    monkeypatch.setenv("REPRO_TRTLLM_ENDPOINTS", "http://a:1, http://b:2/")
    assert endpoints_for(get_recipe("nd-gb300-v6")) == ["http://a:1", "http://b:2"]
    assert build_payload("completions", [1, 2], 5, stream=False, model="m")["prompt"] == [1, 2]


def _dataset(ws: Workspace, recipe: str, n: int) -> None:
    rng = np.random.default_rng(3)
    prompts = [rng.integers(3, 1000, size=int(rng.integers(4, 30))).tolist() for _ in range(n)]
    save_prepared(ws.preprocessed / get_recipe(recipe).dataset.name, "x", prompts, [50] * n, ["r"] * n)


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_harness_with_trtllm_backend_over_http(servers, monkeypatch: pytest.MonkeyPatch, scenario: str) -> None:
    ws = Workspace.open().ensure()
    _dataset(ws, "nd-gb300-v6", 24)
    monkeypatch.setenv("REPRO_TRTLLM_ENDPOINTS", ",".join(_urls(servers)))
    out = run_benchmark("nd-gb300-v6", ws, scenario=scenario, samples=24, detect=False)
    run = parse_run(Path(out.details["log_dir"]))
    assert run.label == "smoke" and run.scenario == scenario and run.tokens_per_s > 0
    info = json.loads((Path(out.details["log_dir"]) / "run.json").read_text())
    assert info["backend"] == "trtllm" and info["backend_details"]["stream"] is (scenario == "Server")
    sent = [b for s in servers for p, b in s.requests if b["max_tokens"] == 1024]
    assert len(sent) == 24
    assert info["measured_by_harness"]["tokens"] == sum(len(reply_ids(b["prompt_token_ids"], 1024)) for b in sent)


def test_sim_replays_reference_lengths_capped_by_max_tokens() -> None:
    lens = np.array([5, 50, 500, 1])
    sink = Collect(4)
    be = SimBackend(lens)
    be.start(sink)
    be.submit([Request(10 + i, i, np.array([1], dtype=np.int32), 100) for i in range(4)])
    assert sink.all_done.wait(10)
    be.close()
    assert [len(sink.done[10 + i]) for i in range(4)] == [5, 50, 100, 1]


@pytest.fixture(scope="module")
def demo_paths(tmp_path_factory) -> dict[str, Path]:
    from repro.run.demo import prepare_demo
    return prepare_demo(Workspace.open(tmp_path_factory.mktemp("demo")))


def test_demo_is_deterministic(demo_paths, tmp_path: Path) -> None:
    from repro.run.demo import prepare_demo
    again = prepare_demo(Workspace.open(tmp_path / "again"))
    assert (again["model_dir"] / "model.safetensors").read_bytes() == (demo_paths["model_dir"] / "model.safetensors").read_bytes()
    first, second = (json.loads((p["dataset"] / "manifest.json").read_text()) for p in (demo_paths, again))
    assert first["files"] == second["files"] and first["dataset_sha256"] == second["dataset_sha256"]


def test_hf_backend_generates_greedy_tokens(demo_paths) -> None:
    from repro.run.backends.hf import HFBackend
    from repro.setup.dataset import load_prepared

    data = load_prepared(demo_paths["dataset"])
    reqs = [Request(100 + i, i, data.prompt(i), 8) for i in range(6)]
    results = []
    for batch_size in (6, 2):
        sink = Collect(len(reqs))
        be = HFBackend(demo_paths["model_dir"], batch_size=batch_size)
        be.start(sink)
        be.submit(reqs)
        assert sink.all_done.wait(60)
        be.close()
        assert not sink.errors
        for r in reqs:
            toks = sink.done[r.id]
            assert 1 <= len(toks) <= 8 and toks.dtype == np.int32 and sink.first[r.id] == toks[0]
            assert sink.order.index(("first", r.id)) < sink.order.index(("done", r.id))
        results.append({i: sink.done[i].tolist() for i in sink.done})
    assert results[0] == results[1]


def test_hf_backend_refuses_folder_without_weights(tmp_path: Path) -> None:
    from repro.run.backends.hf import HFBackend
    from repro.core.errors import InputError

    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(InputError, match="no weights"):
        HFBackend(tmp_path)
