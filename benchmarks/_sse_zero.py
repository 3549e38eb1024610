"""A zero-work trtllm-serve for the rack client benchmark: the stand-in's exact bytes, one event per token per step.

Every byte it sends is the stand-in trtllm-serve's own (repro/rehearse/standin/trtllm_serve.py, built from
TensorRT-LLM's `openai_server.py` and `postprocess_handlers.py`): for each answer shape the stand-in's `answer()` is
run once into a buffer, and later answers replay those bytes with a fresh `chatcmpl-<uuid hex>` id. What it does not
do is the stand-in's work per token (a JSON dump and a decode each), so one core can serve many endpoints.

Streams advance as an in-flight-batching engine's do: every `step` seconds each running stream gets its next token,
one write per stream (the head, the role event and the first token in the first; the last token, the usage event,
`[DONE]` and the chunked terminator in the last), so a client reads one event per token per connection, as from a
GPU server, never a whole answer at once. Offered tokens/s = streams running / step; a tick that overruns its step
is followed at once by the next (the server's CPU is then the limit, and the benchmark reports the rate reached).

    python benchmarks/_sse_zero.py TOKENIZER_DIR --ports 9000,9001 --out-len 272 --step-s 0.02
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STANDIN_DIR = ROOT / "repro" / "rehearse" / "standin"
sys.path.insert(0, str(STANDIN_DIR))


class _Capture:
    """A writer that keeps each write: the stand-in's answer() writes one frame per event."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.frames.append(bytes(data))

    async def drain(self) -> None:
        return None


class Templates:
    """The stand-in's answer per (stream, include_usage, max_tokens), captured once; replayed with a new id."""

    def __init__(self, tokenizer: Path, out_len: int, model: str) -> None:
        os.environ["STANDIN_OUT_LEN"] = str(out_len)
        import trtllm_serve as standin  # the stand-in itself, beside the twin it imports

        self.standin = standin
        self.server = standin.Server(standin.parse_args([str(tokenizer), "--tokenizer", str(tokenizer)]))
        self.model = model
        self.cache: dict[tuple[bool, bool, int], tuple[list[list[bytes]], bytes]] = {}

    def get(self, stream: bool, usage: bool, max_tokens: int) -> tuple[list[list[bytes]], bytes]:
        """(frames split around the request id, the id they were captured with)."""
        key = (stream, usage, max_tokens)
        if key not in self.cache:
            st = self.standin
            prompt = [5, 6, 7]
            req: dict[str, object] = {"model": self.model, "stream": stream, "max_tokens": max_tokens}
            if stream and usage:
                req["stream_options"] = {"include_usage": True}
            ids, finish = st.generate(prompt, max_tokens, self.server.vocab)
            cap = _Capture()
            coro = self.server.answer(req, True, prompt, ids, finish, cap, st.PaceTiming(None, prompt, None))
            try:  # with no pace and a writer that never blocks, the stand-in's answer never suspends
                coro.send(None)
            except StopIteration:
                pass
            else:
                coro.close()
                raise RuntimeError("the stand-in's answer waited on something; cannot capture it")
            joined = b"".join(cap.frames)
            marker = b'"id":"chatcmpl-'
            at = joined.find(marker) + len(marker)
            rid = joined[at : at + 32]
            self.cache[key] = ([f.split(rid) for f in cap.frames], rid)
        return self.cache[key]

    def answer(self, stream: bool, usage: bool, max_tokens: int) -> list[bytes]:
        """The frames of one answer with its own id; a streamed answer's head is its first frame."""
        parts, _ = self.get(stream, usage, max_tokens)
        rid = uuid.uuid4().hex.encode()
        return [rid.join(p) for p in parts]


def _groups(frames: list[bytes]) -> list[bytes]:
    """One write per step: head + role + first token; one per middle token; the last token with what follows it."""
    head, role, *rest = frames
    last = max(i for i, f in enumerate(rest) if b'"finish_reason"' in f)
    if last == 0:
        return [b"".join((head, role, *rest))]
    return [b"".join((head, role, rest[0])), *rest[1:last], b"".join(rest[last:])]


class Engine:
    """Every `step` seconds, each running stream's next write."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.running: list[list[object]] = []  # [transport, writes, next index, done callback]
        self.loop = asyncio.get_running_loop()
        self.loop.call_soon(self._tick)
        self.ticks = 0
        self.late_ticks = 0

    def add(self, transport: asyncio.Transport, writes: list[bytes], done) -> None:
        self.running.append([transport, writes, 0, done])

    def _tick(self) -> None:
        t0 = self.loop.time()
        keep = []
        for s in self.running:
            transport, writes, i, done = s
            if transport.is_closing():
                continue
            transport.write(writes[i])  # type: ignore[union-attr]
            i += 1
            if i < len(writes):  # type: ignore[arg-type]
                s[2] = i
                keep.append(s)
            else:
                done()  # type: ignore[operator]
        self.running = keep
        self.ticks += 1
        spent = self.loop.time() - t0
        if spent >= self.step_s:
            self.late_ticks += 1
        self.loop.call_later(max(0.0, self.step_s - spent), self._tick)


class Conn(asyncio.Protocol):
    """One keep-alive connection: requests in order, each answered from the templates."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.buf = b""
        self.busy = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._next()

    def _next(self) -> None:
        while not self.busy and self.transport is not None and not self.transport.is_closing():
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            length = 0
            for h in head[1:]:
                k, _, v = h.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
            method, path = head[0].split(" ")[:2]
            self._route(method, path, body)

    def _route(self, method: str, path: str, body: bytes) -> None:
        assert self.transport is not None
        if method == "GET":
            doc = {"object": "list", "data": [{"id": self.app.templates.model, "object": "model"}]}
            data = json.dumps(doc).encode() if path == "/v1/models" else b""
            self.transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(data) + data
            )
            return
        req = json.loads(body)  # small, once per request: what a request asks decides which answer it gets
        stream = bool(req.get("stream"))
        usage = bool((req.get("stream_options") or {}).get("include_usage"))
        frames = self.app.templates.answer(stream, usage, int(req.get("max_tokens") or 16))
        self.app.requests += 1
        if not stream:
            self.transport.write(b"".join(frames))
            return
        self.busy = True
        self.app.engine.add(self.transport, _groups(frames), self._finished)

    def _finished(self) -> None:
        self.busy = False
        self.app.streams += 1
        self._next()


class App:
    def __init__(self, templates: Templates, step_s: float) -> None:
        self.templates = templates
        self.engine = Engine(step_s)
        self.requests = 0
        self.streams = 0


async def serve(args: argparse.Namespace) -> None:
    app = App(Templates(args.tokenizer, args.out_len, args.model), args.step_s)
    servers = []
    for port in args.ports:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        servers.append(await asyncio.get_running_loop().create_server(lambda: Conn(app), sock=sock, backlog=8192))
    print(f"[zero-sse] listening on {len(servers)} ports, step {args.step_s} s, {args.out_len} tokens", flush=True)
    stats = Path(args.stats) if args.stats else None
    while True:
        await asyncio.sleep(1.0)
        if stats is not None:
            e = app.engine
            doc = {"requests": app.requests, "streams": app.streams, "ticks": e.ticks, "late_ticks": e.late_ticks}
            stats.write_text(json.dumps(doc))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tokenizer", type=Path)
    ap.add_argument("--ports", type=lambda s: [int(p) for p in s.split(",")], required=True)
    ap.add_argument("--out-len", type=int, default=272)
    ap.add_argument("--step-s", type=float, default=0.02)
    ap.add_argument("--model", default="bench")
    ap.add_argument("--stats", default=None, help="a file rewritten every second with the server's counts")
    args = ap.parse_args(argv)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
