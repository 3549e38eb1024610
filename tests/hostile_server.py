"""Raw-socket HTTP servers on 127.0.0.1 that misbehave the ways a hostile mirror, CDN or inference server can.

One base (`RawServer`: bind, accept, close) and the misbehaviours both kinds share (a byte drip, an endless
body), under two faces:

- `TrickleServer` (issue #36 item 6), a file mirror for the downloader: `trickle` sends headers then one body
  byte every `interval` s; `silent` accepts and never answers; `drip-headers` sends its status line and headers
  one byte every `interval` s, for ever; `endless` sends a body with no Content-Length that never ends;
  `long-length` announces a Content-Length larger than asked for. Every request's raw head is kept in `requests`.
- `HostileServer` (issue 29 item 3 and the fuzz suite), an OpenAI-compatible endpoint: it answers readiness
  honestly (GET /v1/models, and the 10-token probe repro sends first) and then, for every real request
  (max_tokens above 10), behaves as `mode` says: stays silent, streams without ever ending, sends a body with
  no length that never ends, lies in Content-Length (short or huge), drips its headers a byte a second, ignores
  max_tokens, or reports a usage count that disagrees with the ids it sends. `mode="script"` sends `raw`
  (bytes) as the whole answer, for the fuzz suite's generated responses.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any


class RawServer:
    """A listening socket with one thread per connection; subclasses answer in `_serve`."""

    def __init__(self, backlog: int = 64) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def _drip(self, conn: socket.socket, data: Iterable[int], interval: float) -> None:
        """Send `data` one byte every `interval` s until it runs out or the server stops."""
        for byte in data:
            if self.stop.wait(interval):
                return
            conn.sendall(bytes([byte]))

    def _flood(self, conn: socket.socket, head: bytes, block: bytes, seconds: float) -> None:
        """Send `head`, then `block` again and again for `seconds` (a body that never ends)."""
        conn.sendall(head)
        deadline = time.monotonic() + seconds
        while not self.stop.is_set() and time.monotonic() < deadline:
            conn.sendall(block)


TRICKLE_MODES = ("trickle", "silent", "drip-headers", "endless", "long-length")


class TrickleServer(RawServer):
    """A file mirror that stalls, drips or never ends (see the module docstring)."""

    def __init__(self, mode: str, *, interval: float = 0.2, size: int = 10_000) -> None:
        assert mode in TRICKLE_MODES, mode
        self.mode, self.interval, self.size = mode, interval, size
        self.requests: list[bytes] = []
        super().__init__(backlog=64)

    def __enter__(self) -> TrickleServer:
        return self

    def _serve(self, conn: socket.socket) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                part = conn.recv(4096)
                if not part:
                    return
                head += part
            self.requests.append(head)
            if head.startswith(b"HEAD ") and self.mode != "silent":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % self.size)
                return
            getattr(self, "_" + self.mode.replace("-", "_"))(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def _trickle(self, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % self.size)
        self._drip(conn, itertools.repeat(ord("x")), self.interval)

    def _silent(self, conn: socket.socket) -> None:
        self.stop.wait(120)

    def _drip_headers(self, conn: socket.socket) -> None:
        self._drip(conn, b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100_000, self.interval)

    def _endless(self, conn: socket.socket) -> None:
        self._flood(conn, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"y" * 65536, 120)

    def _long_length(self, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (self.size * 1000))
        conn.sendall(b"z" * self.size)
        self.stop.wait(60)


MODES = (
    "honest",
    "silent",
    "sse-no-done",
    "endless-body",
    "short-content-length",
    "huge-content-length",
    "drip-headers",
    "inflated",
    "usage-lies",
    "script",
)


def _ids(n: int) -> list[int]:
    return [100 + (k % 200) for k in range(n)]


def _json_answer(ids: list[int], usage: int) -> bytes:
    doc = {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "", "token_ids": ids}, "token_ids": ids}],
        "usage": {"completion_tokens": usage, "prompt_tokens": 3, "total_tokens": usage + 3},
    }
    body = json.dumps(doc).encode()
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body


class HostileServer(RawServer):
    """An OpenAI-compatible endpoint, honest at readiness, hostile after (see the module docstring)."""

    def __init__(self, mode: str, raw: bytes = b"", hold_s: float = 60.0) -> None:
        assert mode in MODES, mode
        self.mode, self.raw, self.hold_s = mode, raw, hold_s
        self.real_requests = 0
        super().__init__(backlog=256)

    def __enter__(self) -> HostileServer:
        return self

    @staticmethod
    def _read_request(f: Any) -> tuple[str, str, dict[str, Any]] | None:
        line = f.readline()
        if not line:
            return None
        method, path, _ = line.decode("latin-1").split(" ", 2)
        length = 0
        while (h := f.readline()) not in (b"\r\n", b"\n", b""):
            k, _, v = h.decode("latin-1").partition(":")
            if k.strip().lower() == "content-length":
                length = int(v)
        body = json.loads(f.read(length)) if length else {}
        return method, path, body

    def _serve(self, conn: socket.socket) -> None:
        f = conn.makefile("rb")
        try:
            while not self.stop.is_set():
                req = self._read_request(f)
                if req is None:
                    return
                method, path, body = req
                if method == "GET":
                    doc = json.dumps({"object": "list", "data": [{"id": "demo", "object": "model"}]}).encode()
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(doc) + doc)
                    continue
                max_tokens = int(body.get("max_tokens") or 16)
                if max_tokens <= 10 or self.mode == "honest":
                    conn.sendall(self._honest(body, max_tokens))
                    continue
                self.real_requests += 1
                if not self._hostile(conn, body, max_tokens):
                    return
        except OSError:
            return
        finally:
            f.close()
            conn.close()

    @staticmethod
    def _honest(body: dict[str, Any], n: int) -> bytes:
        if not body.get("stream"):
            return _json_answer(_ids(n), n)
        out = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"]
        for tok in _ids(n):
            ev = {"choices": [{"index": 0, "delta": {"content": "", "token_ids": [tok]}, "token_ids": [tok]}]}
            data = f"data: {json.dumps(ev)}\n\n".encode()
            out.append(b"%x\r\n%s\r\n" % (len(data), data))
        data = b"data: [DONE]\n\n"
        out.append(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        return b"".join(out)

    def _hold(self) -> None:
        self.stop.wait(self.hold_s)

    def _hostile(self, conn: socket.socket, body: dict[str, Any], n: int) -> bool:
        """Send the hostile answer; False when the connection is done."""
        mode = self.mode
        if mode == "silent":
            self._hold()
            return False
        if mode == "sse-no-done":
            honest = self._honest({**body, "stream": True}, n)
            conn.sendall(honest[: honest.index(b"data: [DONE]") - 4])  # every event, then neither [DONE] nor an end
            self._hold()
            return False
        if mode == "endless-body":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
            self._flood(conn, head, b"[" + b"1," * (1 << 15), self.hold_s)
            return False
        if mode == "short-content-length":
            answer = _json_answer(_ids(n), n)
            head, _, payload = answer.partition(b"\r\n\r\n")
            conn.sendall(head.replace(b"Content-Length: %d" % len(payload), b"Content-Length: %d" % (len(payload) * 4)))
            conn.sendall(b"\r\n\r\n" + payload)
            self._hold()
            return False
        if mode == "huge-content-length":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n[1,2,3")
            self._hold()
            return False
        if mode == "drip-headers":
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            self._drip(conn, b"X" * int(self.hold_s), 1.0)
            return False
        if mode == "inflated":
            conn.sendall(_json_answer(_ids(n * 5), n * 5))
            return True
        if mode == "usage-lies":
            conn.sendall(_json_answer(_ids(n), n * 3))
            return True
        if mode == "script":
            conn.sendall(self.raw)
            self._hold()
            return False
        raise AssertionError(mode)
