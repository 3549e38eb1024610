"""A raw-socket HTTP server on 127.0.0.1 that misbehaves the ways a hostile mirror or CDN can (issue #36 item 6).

Modes: `trickle` sends headers then one body byte every `interval` s; `silent` accepts and never answers;
`drip-headers` sends its status line and headers one byte every `interval` s, for ever; `endless` sends a body
with no Content-Length that never ends; `long-length` announces a Content-Length larger than asked for.
Every request's raw head is kept in `requests`.
"""

from __future__ import annotations

import socket
import threading
import time

MODES = ("trickle", "silent", "drip-headers", "endless", "long-length")


class TrickleServer:
    def __init__(self, mode: str, *, interval: float = 0.2, size: int = 10_000) -> None:
        assert mode in MODES, mode
        self.mode, self.interval, self.size = mode, interval, size
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests: list[bytes] = []
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> TrickleServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.sock.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

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

    def _sleep(self) -> bool:
        return not self.stop.wait(self.interval)

    def _trickle(self, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % self.size)
        while self._sleep():
            conn.sendall(b"x")

    def _silent(self, conn: socket.socket) -> None:
        self.stop.wait(120)

    def _drip_headers(self, conn: socket.socket) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100_000:
            if not self._sleep():
                return
            conn.sendall(bytes([byte]))

    def _endless(self, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        block = b"y" * 65536
        deadline = time.monotonic() + 120
        while not self.stop.is_set() and time.monotonic() < deadline:
            conn.sendall(block)

    def _long_length(self, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (self.size * 1000))
        conn.sendall(b"z" * self.size)
        self.stop.wait(60)
