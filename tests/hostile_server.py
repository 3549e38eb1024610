"""A hostile OpenAI-compatible server on 127.0.0.1, over raw sockets (issue 29 item 3 and the fuzz suite).

It answers readiness honestly (GET /v1/models, and the 10-token probe repro sends first) and then, for every
real request (max_tokens above 10), behaves as `mode` says: stays silent, streams without ever ending, sends a
body with no length that never ends, lies in Content-Length (short or huge), drips its headers a byte a second,
ignores max_tokens, or reports a usage count that disagrees with the ids it sends. `mode="script"` sends
`raw` (bytes) as the whole answer, for the fuzz suite's generated responses.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

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


class HostileServer:
    def __init__(self, mode: str, raw: bytes = b"", hold_s: float = 60.0) -> None:
        assert mode in MODES, mode
        self.mode, self.raw, self.hold_s = mode, raw, hold_s
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.real_requests = 0
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

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
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
            block = b"[" + b"1," * (1 << 15)
            deadline = time.monotonic() + self.hold_s
            while time.monotonic() < deadline and not self.stop.is_set():
                conn.sendall(block)
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
            deadline = time.monotonic() + self.hold_s
            while time.monotonic() < deadline and not self.stop.is_set():
                conn.sendall(b"X")
                time.sleep(1)
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
