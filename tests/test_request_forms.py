"""Request-form negotiation against a local stand-in for `transformers serve` (fast; no third-party server).

StrictServe answers what `transformers serve` (transformers 5.23.0, `transformers/cli/serving/`) answered to repro
on this machine, recorded in tests/test_thirdparty_server.py's fixture:
- GET /v1/models: HTTP 500 `Internal Server Error` (text/plain; `list_models` scans the hub cache, offline here);
- a body with fields outside the request class: 422 `{"detail": "Unexpected fields in the request: {...}"}`
  (`BaseHandler._validate_request` in utils.py; the field sets below are the classes' `__mutable_keys__`);
- /v1/completions with a non-string prompt: 400 `{"detail": "prompt must be a string."}` (completion.py);
- a model other than the pinned one: 400 `{"detail": "Server is pinned to 'X'; requested 'Y'."}` (utils.py);
- completions answer `choices[0].text` and `usage` (no token ids); streamed, `data:` events, usage in the last one.
`token_prompts=True` turns it into a server that accepts the OpenAI token-array prompt (vLLM does); `models_ok=True`
into one whose /v1/models lists the pinned model; `usage_extra=k` into one whose usage counts k more tokens than its
text holds (as `transformers serve`'s usage, which counts ids the text does not round-trip to); `text_extra=k` into
one whose text holds k more words than its usage counts.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import word_tokenizer

from repro.run.backends.base import Request
from repro.run.backends.http_client import FORM_OPENAI_IDS, FORM_OPENAI_TEXT, FORM_TRTLLM, BackendError
from repro.run.backends.trtllm import TrtllmBackend

PINNED = "/models/tiny-llama-chat"
CHAT_FIELDS = {
    "audio",
    "chat_template_kwargs",
    "frequency_penalty",
    "function_call",
    "functions",
    "generation_config",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "messages",
    "metadata",
    "modalities",
    "model",
    "moderation",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_options",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
}
COMPLETION_FIELDS = {
    "best_of",
    "echo",
    "frequency_penalty",
    "generation_config",
    "logit_bias",
    "logprobs",
    "max_tokens",
    "model",
    "n",
    "presence_penalty",
    "prompt",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "suffix",
    "temperature",
    "top_p",
    "user",
}


class StrictServe(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _detail(self, status: int, detail: str) -> None:
        self._send(status, json.dumps({"detail": detail}).encode())

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.requests.append((self.path, None))
        if self.path == "/v1/models" and self.server.models_ok:
            doc = {"object": "list", "data": [{"id": PINNED, "object": "model", "owned_by": "stand-in"}]}
            self._send(200, json.dumps(doc).encode())
        elif self.path == "/v1/models":
            self._send(500, b"Internal Server Error", "text/plain; charset=utf-8")
        elif self.path == "/health":
            self._send(200, b'{"status":"ok"}')
        else:
            self._detail(404, "Not Found")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv = self.server
        with srv.lock:
            srv.requests.append((self.path, body))
        fields = CHAT_FIELDS if self.path == "/v1/chat/completions" else COMPLETION_FIELDS
        unexpected = set(body) - fields
        if unexpected:
            self._detail(422, f"Unexpected fields in the request: {unexpected}")
            return
        if self.path == "/v1/chat/completions":
            self._detail(400, "this stand-in answers completions only")
            return
        prompt = body.get("prompt", "")
        if not isinstance(prompt, str) and not (srv.token_prompts and isinstance(prompt, list)):
            self._detail(400, "prompt must be a string.")
            return
        if body.get("model") is not None and body["model"] != PINNED:
            self._detail(400, f"Server is pinned to '{PINNED}'; requested '{body['model']}'.")
            return
        n = max(1, min(int(body.get("max_tokens") or 16), 5))
        pieces = [f"w{10 + k}" for k in range(n + srv.text_extra)]
        made = n + srv.usage_extra
        usage = {"completion_tokens": made, "prompt_tokens": 3, "total_tokens": made + 3}
        base = {"id": "x", "created": 1795443340, "model": f"{PINNED}@main", "object": "text_completion"}
        if not body.get("stream"):
            choice = {"finish_reason": "length", "index": 0, "text": " ".join(pieces)}
            self._send(200, json.dumps({**base, "choices": [choice], "usage": usage}).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        texts = [("" if k == 0 else " ") + p for k, p in enumerate(pieces)]
        events = [{**base, "choices": [{"index": 0, "text": t}]} for t in texts]
        events.append({**base, "choices": [{"finish_reason": "length", "index": 0, "text": ""}], "usage": usage})
        for ev in events:
            data = f"data: {json.dumps(ev)}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _start(
    token_prompts: bool = False, models_ok: bool = False, usage_extra: int = 0, text_extra: int = 0
) -> ThreadingHTTPServer:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), StrictServe)
    srv.daemon_threads = True
    srv.lock, srv.requests, srv.token_prompts, srv.models_ok = threading.Lock(), [], token_prompts, models_ok
    srv.usage_extra, srv.text_extra = usage_extra, text_extra
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def strict() -> Iterator[list[ThreadingHTTPServer]]:
    running = [_start(usage_extra=1), _start(usage_extra=1)]
    yield running
    for srv in running:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return word_tokenizer(tmp_path_factory.mktemp("tok"))


def _url(srv: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


class Sink:
    def __init__(self, expect: int) -> None:
        self.first: dict[int, int] = {}
        self.done: dict[int, np.ndarray] = {}
        self.counts: dict[int, int] = {}
        self.errors: list[BaseException] = []
        self.expect = expect
        self.all_done = threading.Event()
        self.lock = threading.Lock()

    def first_tokens(self, events: Any) -> None:
        with self.lock:
            self.first.update(dict(events))

    def completed(self, events: Any) -> None:
        with self.lock:
            for i, a, *count in events:
                self.done[i] = np.array(a)
                self.counts[i] = count[0] if count else len(a)  # what LoadGenSUT reports as the token count
            if len(self.done) >= self.expect:
                self.all_done.set()

    def failed(self, exc: BaseException) -> None:
        self.errors.append(exc)
        self.all_done.set()


def _drive(be: TrtllmBackend, n: int = 6) -> Sink:
    sink = Sink(n)
    reqs = [Request(i, i, np.array([1, 20 + i, 30 + i, 40], dtype=np.int32), 8) for i in range(n)]
    try:
        be.start(sink)
        be.submit(reqs)
        assert sink.all_done.wait(30), "requests did not finish"
    finally:
        be.close()
    assert not sink.errors, sink.errors
    return sink


def test_models_500_is_unknown_not_not_ready(strict, tokenizer) -> None:
    """A 500 on /v1/models means "name unknown": readiness goes on at once with the recipe's name, no retry."""
    waits: list[str] = []
    be = TrtllmBackend(
        [_url(strict[0])],
        default_model=PINNED,
        tokenizer=tokenizer,
        health_timeout_s=20,
        on_wait=lambda url, kind, left: waits.append(kind),
    )
    _drive(be, 2)
    assert waits == [] and be.ready_retries == 0
    assert [p for p, _ in strict[0].requests].count("/v1/models") == 1
    assert be.model == PINNED and be.describe()["served_model_given"] is False


def test_served_model_is_sent_in_every_request_without_asking(strict, tokenizer) -> None:
    be = TrtllmBackend(
        [_url(strict[0])], model=PINNED, default_model="unused", tokenizer=tokenizer, health_timeout_s=20
    )
    _drive(be, 2)
    assert "/v1/models" not in [p for p, _ in strict[0].requests]
    posted = [b for _, b in strict[0].requests if b is not None]
    assert len(posted) == 5 and all(b["model"] == PINNED for b in posted)


def test_first_id_of_v1_models_names_the_model(tokenizer) -> None:
    srv = _start(models_ok=True)
    try:
        be = TrtllmBackend(
            [_url(srv)], default_model="repro-local/tiny-llama", tokenizer=tokenizer, health_timeout_s=20
        )
        _drive(be, 2)
        assert be.model == PINNED and be.describe()["request_form"] == FORM_OPENAI_TEXT
    finally:
        srv.shutdown()
        srv.server_close()


def test_strict_server_falls_back_to_text_completions(strict, tokenizer) -> None:
    """TensorRT-LLM's form -> 422, token-id prompt -> 400, text prompt -> answered; each fallback recorded once."""
    be = TrtllmBackend([_url(s) for s in strict], model=PINNED, tokenizer=tokenizer, health_timeout_s=20)
    sink = _drive(be)
    d = be.describe()
    assert d["request_form"] == FORM_OPENAI_TEXT
    assert set(d["request_fallbacks"]) == {FORM_TRTLLM, FORM_OPENAI_IDS}
    assert "Unexpected fields" in d["request_fallbacks"][FORM_TRTLLM] and "422" in d["request_fallbacks"][FORM_TRTLLM]
    assert "prompt must be a string" in d["request_fallbacks"][FORM_OPENAI_IDS]
    assert len(be.warnings) == 2, "two endpoints, but each fallback is logged once"
    probes = [(p, b) for p, b in strict[0].requests if b is not None][:3]
    assert [p for p, _ in probes] == ["/v1/chat/completions", "/v1/completions", "/v1/completions"]
    assert probes[0][1]["prompt_token_ids"] == [1, 2, 3] and probes[0][1]["min_tokens"] == 1
    assert probes[1][1]["prompt"] == [1, 2, 3] and probes[1][1]["temperature"] == 0
    runs = [b for s in strict for p, b in s.requests if b is not None and "w20" in str(b.get("prompt"))]
    assert len(runs) == 1
    body = runs[0]
    assert body == {
        "model": PINNED,
        "prompt": tokenizer.decode([1, 20, 30, 40], skip_special_tokens=True),
        "max_tokens": 8,
        "temperature": 0,
        "stream": False,
    }
    assert "<s>" not in body["prompt"], "BOS is the server's to add; no template is added either"
    for out in sink.done.values():
        assert out.tolist() == list(range(10, 15)), "the returned text re-tokenized with the model's tokenizer"
    st = be.stats()["tokens"]
    assert st["ids_from_tokenizer"] == 6 and st["logged_tokens"] == 30 and st["count_disagreements"] == 6


@pytest.mark.parametrize("stream", [False, True], ids=["offline", "streamed"])
def test_count_for_a_text_answer_is_the_ids_logged(strict, tokenizer, stream: bool) -> None:
    """TEST06 compares each count LoadGen got with the ids logged: a text-only answer's count is its re-tokenized
    ids, not the server's usage (here one more, as `transformers serve` counts ids its text does not give back)."""
    be = TrtllmBackend([_url(strict[0])], model=PINNED, stream=stream, tokenizer=tokenizer, health_timeout_s=20)
    sink = _drive(be, 4)
    assert {i: len(a) for i, a in sink.done.items()} == sink.counts == {i: 5 for i in range(4)}
    count = be.stats()["tokens"]["loadgen_count"]
    assert count["source"] == "re-tokenized text" and count["tokens"] == 20
    assert count["other_source"] == "server usage.completion_tokens" and count["other_tokens"] == 24
    assert count["samples_that_differ"] == 4 and count["other_differs_pct"] == 20.0


@pytest.mark.parametrize(("usage_extra", "text_extra"), [(0, 4), (4, 4)], ids=["text-only-long", "usage-too"])
def test_text_past_max_tokens_is_cut_and_only_the_servers_count_says_it_lied(
    tokenizer, usage_extra: int, text_extra: int
) -> None:
    """9 words for max_tokens 8: ids logged and counted are cut at 8 alike; it is the server ignoring max_tokens only
    when its usage says so too (9), not when its usage keeps within it (5) and only the re-tokenized text runs over."""
    srv = _start(usage_extra=usage_extra, text_extra=text_extra)
    try:
        be = TrtllmBackend([_url(srv)], model=PINNED, tokenizer=tokenizer, health_timeout_s=20)
        sink = _drive(be, 2)
    finally:
        srv.shutdown()
        srv.server_close()
    assert all(a.tolist() == list(range(10, 18)) for a in sink.done.values()) and sink.counts == {0: 8, 1: 8}
    st = be.stats()["tokens"]
    lied = usage_extra > 0
    clipped = (st["clipped_samples"], st["clipped_tokens"], st["retokenized_clipped"])
    assert clipped == ((2, 2, 0) if lied else (0, 0, 2))
    warned = " ".join(be.stats()["warnings"])
    assert ("ignores max_tokens" in warned) is lied and ("re-tokenized to more ids" in warned) is not lied


def test_token_array_server_gets_token_ids(tokenizer) -> None:
    srv = _start(token_prompts=True)
    try:
        be = TrtllmBackend([_url(srv)], model=PINNED, tokenizer=tokenizer, health_timeout_s=20)
        _drive(be, 2)
        assert be.describe()["request_form"] == FORM_OPENAI_IDS
        assert list(be.describe()["request_fallbacks"]) == [FORM_TRTLLM]
        sent = [b for p, b in srv.requests if b is not None and b.get("prompt") and b["prompt"] != [1, 2, 3]]
        assert sent and all(isinstance(b["prompt"], list) and b["prompt"][0] == 1 for b in sent)
    finally:
        srv.shutdown()
        srv.server_close()


def test_streaming_uses_the_negotiated_form(strict, tokenizer) -> None:
    """Server scenario: the same text form with stream true; first tokens come from the first text piece."""
    be = TrtllmBackend([_url(strict[0])], model=PINNED, stream=True, tokenizer=tokenizer, health_timeout_s=20)
    sink = _drive(be, 3)
    streamed = [b for p, b in strict[0].requests if b is not None and b.get("stream")]
    assert len(streamed) == 3 and all(isinstance(b["prompt"], str) for b in streamed)
    assert all(b["stream_options"] == {"include_usage": True} for b in streamed)
    assert sink.first == {0: 10, 1: 10, 2: 10}
    assert be.stats()["tokens"]["first_token_mismatches"] == 0


def test_refused_every_form_names_what_it_said_and_served_model(strict, tokenizer) -> None:
    """No --served-model and a broken /v1/models: the recipe's name is sent, the pinned server refuses it."""
    be = TrtllmBackend(
        [_url(strict[0])], default_model="repro-local/tiny-llama", tokenizer=tokenizer, health_timeout_s=20
    )
    try:
        with pytest.raises(BackendError) as info:
            be.start(Sink(1))
    finally:
        be.close()
    msg = info.value.message
    assert "refused every request form" in msg and "Unexpected fields" in msg
    assert "Server is pinned to '/models/tiny-llama-chat'; requested 'repro-local/tiny-llama'" in msg
    assert "--served-model NAME" in (info.value.next_command or "")
    assert be.ready_retries == 0


def test_served_model_option_reaches_the_requests(tmp_path: Path, strict) -> None:
    """`repro run offline --recipe demo --endpoint URL --served-model NAME --accuracy --samples 4` end to end."""
    from typer.testing import CliRunner

    from repro.cli import app

    ws = tmp_path / "ws"
    res = CliRunner().invoke(
        app,
        [
            "run",
            "offline",
            "--recipe",
            "demo",
            "--endpoint",
            _url(strict[0]),
            "--served-model",
            PINNED,
            "--accuracy",
            "--samples",
            "4",
            "--workspace",
            str(ws),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    run_dir = Path(json.loads(res.stdout)["details"]["log_dir"])
    info = json.loads((run_dir / "run.json").read_text())
    assert info["backend_details"]["request_form"] == FORM_OPENAI_TEXT
    assert info["backend_details"]["model"] == PINNED
    assert set(info["backend_stats"]["request_fallbacks"]) == {FORM_TRTLLM, FORM_OPENAI_IDS}
    logged = json.loads((run_dir / "mlperf_log_accuracy.json").read_text())
    assert len(logged) == 4, "--samples bounds an accuracy run too"
    assert all(bytes.fromhex(e["data"]) and any(bytes.fromhex(e["data"])) for e in logged)
    # The server sends text and usage: LoadGen counts the re-tokenized ids it logs; usage is the other count.
    count = info["backend_stats"]["tokens"]["loadgen_count"]
    assert count["source"] == "re-tokenized text" and count["other_source"] == "server usage.completion_tokens"
    logged_ids = sum(len(bytes.fromhex(e["data"])) // 4 for e in logged)
    assert info["measured_by_harness"]["tokens"] == count["tokens"] == logged_ids


def test_the_token_count_line_states_two_figures_and_their_gap(tokenizer) -> None:
    """Issue 34 item 5: "LoadGen got 32,713 tokens ...; usage gives 32,735 (-17.1%)" compared usage with the ids
    before the cut at max_tokens. Now both figures are over the same samples, after the cut, and the gap is theirs."""
    from repro.core.fmt import token_count_comparison

    be = TrtllmBackend(["http://127.0.0.1:9"], model=PINNED, tokenizer=tokenizer)
    words = " ".join(f"w{i}" for i in range(12))  # re-tokenizes to more ids than max_tokens 8
    for _ in range(3):
        assert len(be.output_ids(None, words, 8, max_tokens=8)) == 8  # usage 8: within max_tokens, text ran over
    be.output_ids(None, "w1 w2 w3", None, max_tokens=8)  # no usage: not in the comparison
    count = be.stats()["tokens"]["loadgen_count"]
    assert count["tokens"] == 27 and count["compared_tokens"] == 24 and count["other_tokens"] == 24
    assert count["compared_samples"] == 3 and count["other_differs_pct"] == 0.0
    line = token_count_comparison(count)
    assert "LoadGen got 27 tokens from re-tokenized text" in line
    assert "over the 3 samples with both counts LoadGen got 24" in line and "gives 24 (+0 tokens, +0.0%)" in line
    # a gap: every figure in the line is consistent with the percent printed beside it
    line = token_count_comparison({**count, "tokens": 32_713, "compared_tokens": 32_713, "other_tokens": 32_735})
    assert line.endswith("gives 32,735 (+22 tokens, +0.1%)"), line
