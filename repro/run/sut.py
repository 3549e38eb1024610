"""The LoadGen SUT and QSL over a prepared dataset, driving one backend; it is the backend's sink.

LoadGen owns timing and the logs; this turns backend events into LoadGen's token-level callbacks
(FirstTokenComplete, then QuerySamplesComplete with n_tokens), so the summary reports tokens/s, TTFT and TPOT
exactly as MLPerf's LLM benchmarks do. LoadGen has no abort: on Ctrl-C or a backend failure every outstanding
sample is answered at once (one placeholder token), so LoadGen finishes and writes its logs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from repro.run.backends.base import Backend, Request
from repro.setup.dataset import PreparedDataset

_PLACEHOLDER = np.zeros(1, dtype=np.int32)


def _spans(arrays: list[np.ndarray]) -> tuple[np.ndarray | None, list[tuple[int, int, int, int]]]:
    """(buffer, [(pointer, bytes, tokens, item size)]) of each output, as LoadGen reads them.

    A ctypes pointer lookup costs ~0.8 us, more than the rest of a sample's bookkeeping: outputs of one dtype
    (every backend's int32) are copied into one contiguous buffer by one call and pointed into. The caller keeps
    the buffer alive until LoadGen, which copies response bytes before returning, is done."""
    dtype = arrays[0].dtype
    if len(arrays) > 1 and all(a.dtype == dtype and a.ndim == 1 for a in arrays):
        buf = np.concatenate(arrays)
        size = dtype.itemsize
        out = []
        offset = buf.ctypes.data
        for a in arrays:
            n = len(a)
            out.append((offset, n * size, n, size))
            offset += n * size
        return buf, out
    return None, [(a.ctypes.data, a.nbytes, len(a), a.itemsize) for a in arrays]


class LoadGenSUT:
    """The SUT/QSL pair plus the bookkeeping that keeps LoadGen and the backend in step; it is the backend's sink."""

    def __init__(
        self,
        backend: Backend,
        dataset: PreparedDataset,
        max_tokens: int,
        performance_sample_count: int,
        total_samples: int | None = None,
    ) -> None:
        import mlperf_loadgen as lg

        self.lg = lg
        self.backend = backend
        self.dataset = dataset
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        # Outstanding sample id -> whether its first token has gone to LoadGen (one dict, no per-sample objects).
        self._outstanding: dict[int, bool] = {}
        self.issued = 0
        self.samples_done = 0
        self.tokens_done = 0
        self.t0: float | None = None
        self.error: BaseException | None = None
        self.stopping = False
        self.finished = threading.Event()
        self.sut = lg.ConstructSUT(self._issue, self._flush)
        total = min(total_samples or len(dataset), len(dataset))
        perf = max(1, min(performance_sample_count, total))
        self.qsl = lg.ConstructQSL(total, perf, lambda _: None, lambda _: None)

    def _issue(self, query_samples: Sequence[Any]) -> None:
        prompt, max_tokens = self.dataset.prompt, self.max_tokens
        reqs = [Request(q.id, q.index, prompt(q.index), max_tokens) for q in query_samples]
        with self._lock:
            if self.t0 is None:
                self.t0 = time.monotonic()
            self.issued += len(reqs)
            self._outstanding.update(dict.fromkeys([r.id for r in reqs], False))
            stopping = self.stopping
        if stopping:
            self.drain()
        else:
            self.backend.submit(reqs)

    def _flush(self) -> None:
        pass

    def first_tokens(self, events: Sequence[tuple[int, int]]) -> None:
        with self._lock:
            outstanding = self._outstanding
            events = [(i, t) for i, t in events if outstanding.get(i) is False]
            for i, _ in events:
                outstanding[i] = True
        if not events:
            return
        # One int32 buffer for the batch; LoadGen copies each response before FirstTokenComplete returns.
        tokens = np.fromiter((t for _, t in events), dtype=np.int32, count=len(events))
        base, size = tokens.ctypes.data, tokens.itemsize
        QSR = self.lg.QuerySampleResponse
        self.lg.FirstTokenComplete([QSR(i, base + k * size, size) for k, (i, _) in enumerate(events)])

    def completed(self, events: Sequence[tuple[int, np.ndarray]]) -> None:
        """Each event is (id, output ids); LoadGen's token count is their length, the figure TEST06 checks."""
        kept: list[tuple[int, np.ndarray]] = []
        missing: list[int] = []  # positions in `kept` whose first token LoadGen has not had yet
        tokens = 0
        with self._lock:
            pop = self._outstanding.pop
            for i, a in events:
                sent = pop(i, None)
                if sent is None:
                    continue
                if not sent:
                    missing.append(len(kept))
                kept.append((i, a))
                tokens += len(a)
            self.samples_done += len(kept)
            self.tokens_done += tokens
        if not kept:
            return
        QSR = self.lg.QuerySampleResponse
        buf, spans = _spans([a for _, a in kept])
        if missing:
            self.lg.FirstTokenComplete([QSR(kept[k][0], spans[k][0], min(spans[k][1], spans[k][3])) for k in missing])
        self.lg.QuerySamplesComplete(
            [QSR(i, ptr, nbytes, n) for (i, _), (ptr, nbytes, n, _) in zip(kept, spans, strict=True)]
        )
        del buf  # alive until here: LoadGen has copied every response

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = exc
        self.stop()

    def stop(self) -> None:
        """Stop the backend and answer everything outstanding so LoadGen can finish and write its logs."""
        with self._lock:
            self.stopping = True
        self.backend.cancel()
        self.drain()

    def drain(self) -> None:
        with self._lock:
            ids = list(self._outstanding)
        self.completed([(i, _PLACEHOLDER) for i in ids])

    def start_test(self, settings: Any, log_settings: Any, audit_config: str = "audit.config") -> None:
        """Runs in its own thread; `finished` (not Thread.is_alive, which Ctrl-C during join can corrupt) says when
        LoadGen returned. LoadGen applies `audit_config` on top of the settings when that file exists
        (compliance tests)."""
        try:
            self.lg.StartTestWithLogSettings(self.sut, self.qsl, settings, log_settings, audit_config)
        finally:
            self.finished.set()

    def destroy(self) -> None:
        self.lg.DestroyQSL(self.qsl)
        self.lg.DestroySUT(self.sut)


class KeptThreads:
    """Daemon threads that never exit, each taking the next job when idle: for work that calls into LoadGen from a
    thread of repro's own (a tune probe's watcher answering every outstanding query when it stops the probe).

    LoadGen 6.0.17's logger keeps each thread's log; when the thread exits, its IO thread can still swap that log's
    buffers after freeing it: a segfault in mlperf::logging::TlsLogger::SwapBuffers (core dump), seen in 2 of 5
    `repro tune interactive --recipe demo` runs, whose watcher thread drained hundreds of queries and then exited."""

    def __init__(self) -> None:
        import queue

        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def run(self, job: Callable[[], None], name: str = "repro-kept") -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1
            else:
                threading.Thread(target=self._loop, name=name, daemon=True).start()
            self._jobs.put(job)

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job()
            finally:
                with self._lock:
                    self._idle += 1


KEPT_THREADS = KeptThreads()
