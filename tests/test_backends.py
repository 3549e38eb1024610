"""Backends against real things: local HTTP servers speaking trtllm-serve's OpenAI protocol, a tiny HF model,
the simulator.

FakeServe answers like trtllm-serve (text only in chat choices, `usage.completion_tokens`, SSE events) but records
every request; the stand-in in repro/rehearse/standin/ (built from TensorRT-LLM's source) covers readiness and faults.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import write_prepared
from standin_util import VOCAB, LocalStandin, write_tokenizer

from repro.core.errors import InputError
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.results.logs import parse_run
from repro.run.backends.base import Request
from repro.run.backends.http_client import BackendError, build_payload
from repro.run.backends.sim import SimBackend
from repro.run.backends.trtllm import TrtllmBackend, endpoints_for
from repro.run.harness import run_benchmark
from repro.run.options import RunOptions
from repro.run.tokens import load_tokenizer


def reply_ids(prompt: list[int], max_tokens: int) -> list[int]:
    """Deterministic 'generation': the prompt reversed and shifted in the vocabulary, cut at max_tokens."""
    return [3 + (t + 7) % (VOCAB - 3) for t in reversed(prompt)][:max_tokens] or [7]


def words(ids: list[int]) -> str:
    return " ".join(f"w{t}" for t in ids)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    return write_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    return load_tokenizer([tokenizer_dir])


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
            choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
            choice.update(
                {"message": {"role": "assistant", "content": words(ids)}}
                if "chat" in self.path
                else {"text": words(ids)}
            )
            self._send(200, {"id": "cmpl", "choices": [choice], "usage": {"completion_tokens": len(ids)}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._chunk(
            b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}).encode() + b" \n\n"
        )
        for k, t in enumerate(ids):
            delta = {"index": 0, "delta": {"content": ("" if k == 0 else " ") + f"w{t}"}}
            self._chunk(b"data: " + json.dumps({"choices": [delta]}).encode() + b"\n\n")
        self._chunk(
            b"data: " + json.dumps({"choices": [], "usage": {"completion_tokens": len(ids)}}).encode() + b"\n\n"
        )
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
            for i, a, *_ in events:
                self.done[i] = np.array(a)
                self.order.append(("done", i))
            if len(self.done) >= self.expect:
                self.all_done.set()

    def failed(self, exc: BaseException) -> None:
        self.errors.append(exc)
        self.all_done.set()


def _drive(be, reqs: list[Request], timeout_s: float = 30) -> Collect:
    """Start `be`, submit `reqs`, wait until every one completed (or failed), close it; the sink holds the answers."""
    sink = Collect(len(reqs))
    be.start(sink)
    try:
        be.submit(reqs)
        assert sink.all_done.wait(timeout_s)
    finally:
        be.close()
    return sink


def _requests(n: int, max_tokens: int = 16) -> list[Request]:
    rng = np.random.default_rng(1)
    return [
        Request(i, i, rng.integers(3, 1000, size=int(rng.integers(2, 40))).astype(np.int32), max_tokens)
        for i in range(n)
    ]


@pytest.mark.parametrize("api,stream", [("chat", False), ("completions", False), ("chat", True)])
def test_trtllm_round_robin_and_tokens(servers, tokenizer, api: str, stream: bool) -> None:
    """Text-only answers are re-tokenized into exactly the ids the server generated; the count is len(ids)."""
    reqs = _requests(20)
    be = TrtllmBackend(_urls(servers), api=api, stream=stream, max_concurrency=4, tokenizer=tokenizer)
    sink = _drive(be, reqs)
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
    st = be.stats()["tokens"]
    assert st["ids_from_tokenizer"] == 20 and st["ids_from_server"] == 0 and st["count_disagreements"] == 0
    assert st["logged_tokens"] == sum(len(sink.done[r.id]) for r in reqs)
    if stream:
        assert st["first_token_mismatches"] == 0


def test_text_only_server_without_tokenizer_is_refused_before_the_run(servers) -> None:
    be = TrtllmBackend(_urls(servers))
    try:
        with pytest.raises(InputError, match="returns text without token ids.*no tokenizer"):
            be.start(Collect(1))
    finally:
        be.close()


def test_server_count_is_kept_beside_the_logged_ids(tokenizer_dir, tokenizer) -> None:
    """The stand-in counts EOS in usage.completion_tokens but, like trtllm-serve, drops it from the text."""
    with LocalStandin(tokenizer_dir) as srv:
        srv.wait_bound()
        reqs = _requests(12, max_tokens=64)
        reqs = [Request(r.id, r.index, (r.input_ids % (VOCAB - 3) + 3).astype(np.int32), r.max_tokens) for r in reqs]
        be = TrtllmBackend([srv.url], stream=True, tokenizer=tokenizer, health_timeout_s=20)
        sink = _drive(be, reqs)
    st = be.stats()["tokens"]
    assert not sink.errors and st["samples"] == 12
    assert st["logged_tokens"] == sum(len(a) for a in sink.done.values())
    assert st["server_completion_tokens"] == st["logged_tokens"] + st["count_disagreements"] > st["logged_tokens"]
    assert all(2 not in a.tolist() for a in sink.done.values())
    assert all(sink.first[i] == int(sink.done[i][0]) for i in sink.done)


def test_trtllm_port_not_listening_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    waits: list[str] = []
    be = TrtllmBackend(
        [f"http://127.0.0.1:{port}"], health_timeout_s=1, on_wait=lambda url, kind, left: waits.append(kind)
    )
    with pytest.raises(
        BackendError, match=f"did not become ready within 1 s .*Connection refused at http://127.0.0.1:{port}"
    ):
        be.start(Collect(1))
    be.close()
    assert waits and set(waits) == {"refused"}


def test_readiness_waits_for_a_server_that_binds_before_loading(tokenizer_dir, tokenizer) -> None:
    """trtllm-serve refuses connections while it loads; the wait retries with backoff instead of giving up."""
    with LocalStandin(tokenizer_dir, env={"STANDIN_LOAD_S": "2"}) as srv:
        srv.wait_bound()
        waits: list[str] = []
        be = TrtllmBackend(
            [srv.url], tokenizer=tokenizer, health_timeout_s=30, on_wait=lambda url, kind, left: waits.append(kind)
        )
        try:
            be.start(Collect(1))
        finally:
            be.close()
    assert "refused" in waits and be.ready_after_s is not None and be.ready_after_s >= 1.5
    assert be.model == str(tokenizer_dir)


def test_too_many_open_files_is_named(tokenizer_dir, tmp_path: Path) -> None:
    """EMFILE reads as 'Too many open files' with `ulimit -n`, not as 'nothing is listening'."""
    script = tmp_path / "emfile.py"
    script.write_text(
        textwrap.dedent(f"""
        import resource, socket, sys
        sys.path[:0] = {[str(Path(__file__).resolve().parents[1])]!r}
        from repro.run.backends.http_client import BackendError, connect_error
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        held = []
        try:
            while True:
                held.append(socket.socket())
        except OSError as exc:
            err = connect_error("http://127.0.0.1:30000", exc)
            print(err.kind, "|", err.message, "|", err.next_command)
    """)
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    kind, message, fix = (p.strip() for p in out.stdout.split("|"))
    assert kind == "emfile" and "Too many open files" in message and "limit is 64" in message and "ulimit -n" in fix


def test_open_file_limit_is_raised_or_refused_with_ulimit(tmp_path: Path) -> None:
    script = tmp_path / "nofile.py"
    script.write_text(
        textwrap.dedent(f"""
        import resource, sys
        sys.path[:0] = {[str(Path(__file__).resolve().parents[1])]!r}
        from repro.run.limits import ensure_open_files
        from repro.core.errors import InputError
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096))
        print(ensure_open_files(1000)["now"], resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        try:
            ensure_open_files(8704)
        except InputError as exc:
            print(exc.next_command)
    """)
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    raised, refused = out.stdout.strip().splitlines()
    assert raised == "1000 1000" and "ulimit -n 8704" in refused


def test_trtllm_port_held_by_another_program() -> None:
    """A program answering 404 on the port is not a loading server: fail at once, do not wait out the timeout."""

    class NotServe(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_error(404)

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), NotServe)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    be = TrtllmBackend([f"http://127.0.0.1:{srv.server_address[1]}"])
    try:
        with pytest.raises(BackendError, match="not a ready OpenAI-compatible server"):
            be.start(Collect(1))
    finally:
        be.close()
        srv.shutdown()
        srv.server_close()


def test_trtllm_server_error_mid_run_reaches_the_sink(servers, tokenizer) -> None:
    for s in servers:
        s.fail_after = 3
    sink = _drive(TrtllmBackend(_urls(servers), max_concurrency=1, tokenizer=tokenizer), _requests(10))
    assert sink.errors and "HTTP 500" in str(sink.errors[0]) and "engine died" in str(sink.errors[0])


def test_endpoints_from_recipe_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert endpoints_for(get_recipe("nd-gb300-v6")) == [f"http://127.0.0.1:{30000 + i}" for i in range(4)]
    monkeypatch.setenv("REPRO_TRTLLM_ENDPOINTS", "http://a:1, http://b:2/")
    assert endpoints_for(get_recipe("nd-gb300-v6")) == ["http://a:1", "http://b:2"]
    assert build_payload("completions", [1, 2], 5, stream=False, model="m")["prompt"] == [1, 2]


def _dataset(ws: Workspace, recipe: str, n: int) -> None:
    """A prepared dataset plus the model's tokenizer where `repro setup` leaves it (models/<repo name>/)."""
    folder = ws.preprocessed / get_recipe(recipe).dataset.name
    write_prepared(folder, n, name="x", seed=3, prompt_len=(4, 30), vocab=1000, out_len=50, outputs="r", source="")
    write_tokenizer(ws.models / get_recipe(recipe).model.repo_id.split("/")[-1])


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_harness_with_trtllm_backend_over_http(servers, monkeypatch: pytest.MonkeyPatch, scenario: str) -> None:
    ws = Workspace.open().ensure()
    _dataset(ws, "nd-gb300-v6", 24)
    monkeypatch.setenv("REPRO_TRTLLM_ENDPOINTS", ",".join(_urls(servers)))
    out = run_benchmark(RunOptions.build("nd-gb300-v6", ws, scenario=scenario, samples=24, detect=False))
    run = parse_run(Path(out.details["log_dir"]))
    assert run.label == "smoke" and run.scenario == scenario and run.tokens_per_s > 0
    info = json.loads((Path(out.details["log_dir"]) / "run.json").read_text())
    assert info["backend"] == "trtllm" and info["backend_details"]["stream"] is (scenario == "Server")
    # NVIDIA's warm-up burst goes first (10 queries of 90-299 tokens per server), then the run's 24 (4-30 tokens)
    bodies = [b for s in servers for p, b in s.requests if b["max_tokens"] == 1024]
    sent = [b for b in bodies if len(b["prompt_token_ids"]) < 90]
    assert len(sent) == 24 and len(bodies) - len(sent) == 2 * 10
    assert info["measured_by_harness"]["tokens"] == sum(len(reply_ids(b["prompt_token_ids"], 1024)) for b in sent)
    tokens = info["backend_stats"]["tokens"]
    assert tokens["ids_from_tokenizer"] == 24 and tokens["logged_tokens"] == info["measured_by_harness"]["tokens"]
    assert info["backend_details"]["max_concurrency_per_endpoint"] == get_recipe("nd-gb300-v6").trtllm.gpu_batch_size
    assert info["open_files"]["now"] >= info["open_files"]["needed"]


def test_sim_replays_reference_lengths_capped_by_max_tokens() -> None:
    lens = np.array([5, 50, 500, 1])
    sink = _drive(SimBackend(lens), [Request(10 + i, i, np.array([1], dtype=np.int32), 100) for i in range(4)], 10)
    assert [len(sink.done[10 + i]) for i in range(4)] == [5, 50, 100, 1]


def test_sim_rate_holds_when_its_thread_wakes_late() -> None:
    """Every wait the simulator makes oversleeps by 20 ms (a loaded machine): the run still lasts tokens / rate.

    Its clock used to restart at each late wake-up, so the lateness was lost for good and the rate ran slow."""
    lens = np.full(40, 1000)
    be = SimBackend(lens, rate_tokens_per_s=100_000)  # 40 samples x 10 ms each: 0.4 s
    wait = be._stopping.wait

    def late(timeout: float | None = None) -> bool:
        time.sleep(0.02)
        return wait(timeout)

    be._stopping.wait = late  # type: ignore[method-assign]
    start = time.monotonic()
    _drive(be, [Request(i, i, np.array([1], dtype=np.int32), 1000) for i in range(40)], 10)
    elapsed = time.monotonic() - start
    # samples waiting in the queue keep the virtual clock: about 0.4 s plus one late wake-up, never 40 of them (1.2 s)
    assert 0.39 < elapsed < 0.7, elapsed


@pytest.fixture(scope="module")
def demo_paths(tmp_path_factory) -> dict[str, Path]:
    from repro.setup.demo import prepare_demo

    return prepare_demo(Workspace.open(tmp_path_factory.mktemp("demo")))


def test_demo_is_deterministic(demo_paths, tmp_path: Path) -> None:
    from repro.setup.demo import prepare_demo

    again = prepare_demo(Workspace.open(tmp_path / "again"))
    assert (again["model_dir"] / "model.safetensors").read_bytes() == (
        demo_paths["model_dir"] / "model.safetensors"
    ).read_bytes()
    first, second = (json.loads((p["dataset"] / "manifest.json").read_text()) for p in (demo_paths, again))
    assert first["files"] == second["files"] and first["dataset_sha256"] == second["dataset_sha256"]


def test_hf_backend_generates_greedy_tokens(demo_paths) -> None:
    from repro.run.backends.hf import HFBackend
    from repro.setup.dataset import load_prepared

    data = load_prepared(demo_paths["dataset"])
    reqs = [Request(100 + i, i, data.prompt(i), 8) for i in range(6)]
    results = []
    for batch_size in (6, 2):
        sink = _drive(HFBackend(demo_paths["model_dir"], batch_size=batch_size), reqs, 60)
        assert not sink.errors
        for r in reqs:
            toks = sink.done[r.id]
            assert 1 <= len(toks) <= 8 and toks.dtype == np.int32 and sink.first[r.id] == toks[0]
            assert sink.order.index(("first", r.id)) < sink.order.index(("done", r.id))
        results.append({i: sink.done[i].tolist() for i in sink.done})
    assert results[0] == results[1]


def test_hf_backend_refuses_folder_without_weights(tmp_path: Path) -> None:
    from repro.core.errors import InputError
    from repro.run.backends.hf import HFBackend

    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(InputError, match="no weights"):
        HFBackend(tmp_path)


def test_hf_refuses_a_model_the_gpus_cannot_hold(demo_paths, tmp_path: Path) -> None:
    """Llama-2-70B in fp16 (~138 GB) on one 80 GB H100 is refused before loading; spread over 8 it fits."""
    from repro.run.backends.hf import check_gpu_memory, weight_bytes

    demo = demo_paths["model_dir"]
    size = sum(f.stat().st_size for f in demo.glob("*.safetensors"))
    saved = json.loads((demo / "config.json").read_text()).get("torch_dtype") or "float16"
    assert weight_bytes(demo, "float16") == int(size * 2 / {"float32": 4, "float16": 2, "bfloat16": 2}[saved])
    big = tmp_path / "llama-70b"
    big.mkdir()
    (big / "config.json").write_text(json.dumps({"torch_dtype": "float16"}))
    with open(big / "model.safetensors", "wb") as fh:
        fh.truncate(138 * 10**9)
    assert weight_bytes(big, "float16") == 138 * 10**9 and weight_bytes(big, "float32") == 276 * 10**9
    with pytest.raises(InputError, match="needs about 138 GB .* 1 visible GPU\\(s\\) have 80 GB free") as err:
        check_gpu_memory(big, "float16", [80 * 10**9])
    assert "without --backend hf" in err.value.next_command
    assert check_gpu_memory(big, "float16", [80 * 10**9] * 8) == 138 * 10**9


def test_a_kept_alive_connection_closed_unanswered_is_retried_on_a_new_one() -> None:
    """uvicorn (trtllm-serve, `transformers serve`) closes a kept-alive connection after 5 s idle; a request sent on it
    as it closes gets no status line, which ended a tuned Server run through `transformers serve`. This server answers
    the first request of each connection and closes it unanswered on the second: the client sends that request again
    on a new connection, once, and it is answered."""
    import asyncio
    import re

    from repro.run.backends.http_client import Endpoint, HttpClient

    connections: list[int] = []
    body = b'{"ok": 1}'

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        for answered in range(2):
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            match = re.search(rb"Content-Length: (\d+)", head)
            await reader.readexactly(int(match.group(1)) if match else 0)
            if answered:
                break
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        writer.close()

    async def two_requests() -> list[bytes]:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        ep, client = Endpoint(f"http://127.0.0.1:{port}", "127.0.0.1", port), HttpClient(stall_s=10)
        out = []
        for i in range(2):
            out.append(b"".join([p async for p in client.request(ep, "POST", "/v1/completions", {"n": i})]))
        server.close()
        return out

    assert asyncio.run(two_requests()) == [body, body]
    assert len(connections) == 2
