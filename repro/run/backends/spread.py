"""One client over several processes, for a rack's traffic through one LoadGen (issue 46 item 6).

One Python process reads about 31,000 streamed tokens/s on a core of its own (benchmarks/rack_client.py,
docs/BENCHMARKS.md); a GB300 NVL72 x72 system streams 1.14M through one LoadGen. LoadGen and the SUT stay in the run's
process; each worker process runs the HTTP backend (TrtllmBackend) over its share of the servers, reads every SSE
event and re-tokenizes there, and sends back only each sample's first token and its output ids: two small messages
a sample instead of one parse per token.

The workers are spawned (never forked: LoadGen's threads are running), each started as the one-process backend is
(readiness, NVIDIA's warm-up), and a worker that fails or exits fails the run through the sink, as a server error
does. Ctrl-C and SIGTERM reach them with the run (one process group) and are ignored there: the run's process
decides what they mean, and its close() (the harness's cleanup) ends them.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, cast

from repro.run.backends.base import Backend, Request

READY_MARGIN_S = 120.0
"""Beyond the backend's own readiness wait and warm-up: spawning a worker imports repro and the tokenizer."""
STATS_WAIT_S = 10.0
JOIN_S = 10.0


def split_endpoints(urls: Sequence[str], processes: int) -> list[list[str]]:
    """Worker i takes urls[i::n]: the parent's round robin over workers then visits every server in turn."""
    n = max(1, min(processes, len(urls)))
    return [list(urls[i::n]) for i in range(n)]


class _PipeSink:
    """The worker's sink: every event goes to the parent, which answers LoadGen."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()

    def send(self, *msg: Any) -> None:
        with self.lock:
            self.conn.send(msg)

    def first_tokens(self, events: Sequence[tuple[int, int]]) -> None:
        self.send("first", list(events))

    def completed(self, events: Sequence[tuple[int, Any]]) -> None:
        self.send("done", list(events))

    def failed(self, exc: BaseException) -> None:
        self.send("failed", _portable(exc))


def _portable(exc: BaseException) -> BaseException:
    """The exception as the parent can unpickle it (a ReproError as it is, anything else as its message)."""
    import pickle

    from repro.run.backends.http_client import BackendError

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - an exception that does not pickle still fails the run, by its message
        return BackendError(f"client worker: {type(exc).__name__}: {exc}", kind="protocol")


def worker_main(conn: Connection, make: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """A worker process: the one-process backend over its endpoints, driven by the parent's messages. Ctrl-C and
    SIGTERM reach the whole process group: the run's process decides what they mean and closes its workers (a
    worker that died of them first would read as a client failure); a parent that is gone ends the worker (EOF)."""
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)

    sink = _PipeSink(conn)
    try:
        be = make(**kwargs)
        be.start(sink)
    except BaseException as exc:  # noqa: BLE001 - the parent raises it as the run's readiness failure
        sink.send("start_failed", _portable(exc))
        return
    sink.send("ready", be.describe())
    try:
        while True:
            try:
                msg = conn.recv()
            except EOFError:  # the parent is gone
                break
            if msg[0] == "submit":
                be.submit(msg[1])
            elif msg[0] == "cancel":
                be.cancel()
            elif msg[0] == "stats":
                sink.send("stats", be.stats(), be.tokens)
            else:
                break
    finally:
        be.close()
        with contextlib.suppress(OSError):
            sink.send("closed")


class SpreadBackend(Backend):
    """An HTTP backend's client in `processes` worker processes, each over its share of the endpoints: `make`
    builds the one-process backend from `kwargs` in each worker (a class or module-level function: it is sent by
    name), `merge_tokens` sums the workers' token counts."""

    name = "trtllm"

    def __init__(
        self,
        make: Callable[..., Any],
        kwargs: dict[str, Any],
        processes: int,
        *,
        merge_tokens: Callable[[list[Any]], Any],
        alive: Callable[[], None] | None = None,
        ready_s: float,
    ) -> None:
        super().__init__()
        self.make, self.kwargs, self.merge_tokens = make, kwargs, merge_tokens
        self.urls = [u.rstrip("/") for u in kwargs["endpoints"]]
        self.max_concurrency = int(kwargs.get("max_concurrency") or 0)
        self.shares = split_endpoints(self.urls, processes)
        self.alive = alive
        self.ready_s = ready_s
        self.on_wait: Any = None
        self.on_warmup: Any = None
        self._conns: list[Connection] = []
        self._locks: list[threading.Lock] = []
        self._procs: list[Any] = []
        self._described: list[dict[str, Any]] = []
        self._replies: list[Any] = []
        self._reply = threading.Condition()
        self._rr = 0
        self._closing = False
        self._reader: threading.Thread | None = None

    def start(self, sink: Any) -> None:
        """Spawn every worker, then wait until each says its servers are ready (the first failure is raised)."""
        super().start(sink)
        if self.on_warmup is not None and self.kwargs.get("warmup") is not None:
            self.on_warmup(f"each of {len(self.shares)} client processes warms its own servers once they are ready")
        ctx = multiprocessing.get_context("spawn")
        for share in self.shares:
            parent, child = ctx.Pipe()
            p = ctx.Process(
                target=worker_main,
                args=(child, self.make, {**self.kwargs, "endpoints": share}),
                name="repro-client",
                daemon=True,
            )
            p.start()
            child.close()
            self._conns.append(parent)
            self._locks.append(threading.Lock())
            self._procs.append(p)
        try:
            self._described = [self._wait_ready(i) for i in range(len(self._conns))]
        except BaseException:
            self._stop_workers()
            raise
        self._reader = threading.Thread(target=self._read, name="repro-spread-read", daemon=True)
        self._reader.start()

    def _wait_ready(self, i: int) -> dict[str, Any]:
        from repro.run.backends.http_client import BackendError

        conn, deadline = self._conns[i], time.monotonic() + self.ready_s + READY_MARGIN_S
        while not conn.poll(1.0):
            if self.alive is not None:
                self.alive()
            if not self._procs[i].is_alive() and not conn.poll(0):
                raise BackendError(
                    f"client process {i + 1} of {len(self._procs)} exited (code {self._procs[i].exitcode}) before "
                    "its servers were ready",
                    kind="died",
                )
            if time.monotonic() > deadline:
                raise BackendError(
                    f"client process {i + 1} of {len(self._procs)} did not report its servers "
                    f"({', '.join(self.shares[i])}) ready within {self.ready_s + READY_MARGIN_S:.0f} s",
                    kind="timeout",
                )
        msg = conn.recv()
        if msg[0] == "start_failed":
            raise msg[1]
        return dict(msg[1])

    def _read(self) -> None:
        """Every worker's events to the sink, in the order each worker sent them."""
        from repro.run.backends.http_client import BackendError

        assert self.sink is not None
        live = list(self._conns)
        while live:
            for ready in wait(live):
                conn = cast(Connection, ready)
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    live.remove(conn)
                    if not self._closing:
                        i = self._conns.index(conn)
                        self.sink.failed(
                            BackendError(
                                f"client process {i + 1} of {len(self._conns)} (servers {', '.join(self.shares[i])}) "
                                f"exited mid-run (code {self._procs[i].exitcode})",
                                kind="died",
                            )
                        )
                    continue
                kind = msg[0]
                if kind == "first":
                    self.sink.first_tokens(msg[1])
                elif kind == "done":
                    self.sink.completed(msg[1])
                elif kind == "failed":
                    self.cancel()
                    self.sink.failed(msg[1])
                elif kind == "stats":
                    with self._reply:
                        self._replies.append(msg[1:])
                        self._reply.notify_all()
                elif kind == "closed":
                    live.remove(conn)

    def _send(self, i: int, *msg: Any) -> None:
        with self._locks[i], contextlib.suppress(OSError, ValueError):
            self._conns[i].send(msg)

    def submit(self, requests: Sequence[Request]) -> None:
        """Round robin over the workers (each round-robins over its servers), one message per worker per call."""
        n = len(self._conns)
        groups: list[list[Request]] = [[] for _ in range(n)]
        for r in requests:
            groups[self._rr % n].append(r)
            self._rr += 1
        for i, group in enumerate(groups):
            if group:
                self._send(i, "submit", group)

    def cancel(self) -> None:
        super().cancel()
        for i in range(len(self._conns)):
            self._send(i, "cancel")

    def close(self) -> None:
        self._closing = True
        self.cancel()
        self._stop_workers()

    def _stop_workers(self) -> None:
        self._closing = True
        for i in range(len(self._conns)):
            self._send(i, "close")
        for p in self._procs:
            p.join(JOIN_S)
            if p.is_alive():
                p.terminate()
                p.join(JOIN_S)
        if self._reader is not None:
            self._reader.join(JOIN_S)

    @property
    def pids(self) -> list[int | None]:
        """The workers' process ids (benchmarks/rack_client.py reads their CPU time)."""
        return [p.pid for p in self._procs]

    def describe(self) -> dict[str, Any]:
        first = self._described[0] if self._described else {"backend": self.name}
        return {
            **first,
            "endpoints": self.urls,
            "client_processes": len(self.shares),
            "request_form": _one_or_each([d.get("request_form") for d in self._described]) or first.get("request_form"),
        }

    def stats(self) -> dict[str, Any]:
        """Every worker's stats merged (token counts summed, warnings joined); what each worker served."""
        with self._reply:
            self._replies.clear()
        for i in range(len(self._conns)):
            self._send(i, "stats")
        deadline = time.monotonic() + STATS_WAIT_S
        with self._reply:
            while len(self._replies) < len(self._conns) and time.monotonic() < deadline:
                self._reply.wait(0.2)
            replies = list(self._replies)
        if not replies:
            return {"spread": {"processes": len(self.shares), "answered": 0}}
        docs = [r[0] for r in replies]
        tokens = self.merge_tokens([r[1] for r in replies])
        out = dict(docs[0])
        out["tokens"] = tokens.to_json()
        out["ready_after_s"] = max((d.get("ready_after_s") or 0.0) for d in docs)
        out["ready_retries"] = sum(int(d.get("ready_retries") or 0) for d in docs)
        for key in ("request_fallbacks", "stream_options"):
            merged: dict[str, Any] = {}
            for d in docs:
                merged.update(d.get(key) or {})
            out[key] = merged if any(d.get(key) is not None for d in docs) else None
        out["warnings"] = sorted({w for d in docs for w in d.get("warnings") or []} | set(tokens.warnings()))
        out["spread"] = {
            "processes": len(self.shares),
            "answered": len(replies),
            "endpoints_per_process": [len(s) for s in self.shares],
        }
        return out


def _one_or_each(forms: list[Any]) -> Any:
    """One request form when every worker found the same, else each server's."""
    flat: dict[str, Any] = {}
    for f in forms:
        if isinstance(f, dict):
            flat.update(f)
    if flat:
        return flat
    distinct = {f for f in forms if isinstance(f, str)}
    return distinct.pop() if len(distinct) == 1 else None
