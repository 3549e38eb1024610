"""Per-sample times of one `repro tune` probe, taken at the backend (issue, first token, completion): what its
watcher stops a failing probe on and what the judge reads when LoadGen printed no percentile."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


class Timeline:
    """Issue, first-token and completion times of every sample of one probe (wraps the backend's sink)."""

    def __init__(self) -> None:
        self.issued: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.done: dict[int, tuple[float, int]] = {}
        self.lock = threading.Lock()

    def answered(self) -> bool:
        """Whether any query has had its first token yet (the server is past its cold start)."""
        with self.lock:
            return bool(self.first)

    def oldest_waiting(self) -> float | None:
        """Issue time of the oldest query still without a first token."""
        with self.lock:
            return next((t0 for i, t0 in self.issued.items() if i not in self.first), None)

    def over(self, ttft_s: float, tpot_s: float, now: float) -> int:
        """Queries already over a limit: first token later than ttft_s (or still waiting past it), or done with a
        TPOT over tpot_s."""
        with self.lock:
            n = 0
            for i, t0 in self.issued.items():
                first = self.first.get(i)
                if (first if first is not None else now) - t0 > ttft_s:
                    n += 1
                elif first is not None and i in self.done:
                    t_done, k = self.done[i]
                    n += k > 1 and (t_done - first) / (k - 1) > tpot_s
            return n

    def samples(self) -> list[tuple[float, float, float | None]]:
        """(issue time, TTFT s, TPOT s or None) for every completed sample, in issue order."""
        out = []
        with self.lock:
            for i, t0 in self.issued.items():
                if i not in self.done or i not in self.first:
                    continue
                t_done, n = self.done[i]
                ttft = self.first[i] - t0
                tpot = (t_done - self.first[i]) / (n - 1) if n > 1 else None
                out.append((t0, ttft, tpot))
        return sorted(out)


class _TimedSink:
    def __init__(self, sink: Any, tl: Timeline) -> None:
        self.sink, self.tl = sink, tl

    def first_tokens(self, events: Sequence[tuple[int, int]]) -> None:
        now = time.monotonic()
        with self.tl.lock:
            for i, _ in events:
                self.tl.first.setdefault(i, now)
        self.sink.first_tokens(events)

    def completed(self, events: Sequence[tuple[int, np.ndarray]]) -> None:
        now = time.monotonic()
        with self.tl.lock:
            for i, ids in events:
                self.tl.first.setdefault(i, now)
                self.tl.done[i] = (now, len(ids))
        self.sink.completed(events)

    def failed(self, exc: BaseException) -> None:
        self.sink.failed(exc)


class _TimedBackend:
    """The probe's backend, unchanged, with submit and the sink timed."""

    def __init__(self, inner: Any, tl: Timeline) -> None:
        self._inner, self._tl = inner, tl

    def start(self, sink: Any) -> None:
        self._inner.start(_TimedSink(sink, self._tl))

    def submit(self, requests: Sequence[Any]) -> None:
        now = time.monotonic()
        with self._tl.lock:
            for r in requests:
                self._tl.issued[r.id] = now
        self._inner.submit(requests)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def timed_factory(tl: Timeline) -> Callable[..., Any]:
    from repro.run.backends import create_backend

    def make(name: str, ctx: Any) -> Any:
        return _TimedBackend(create_backend(name, ctx), tl)

    return make


def watch(
    sut: Any,
    tl: Timeline,
    limit_s: float,
    stopped: list[str],
    limits: tuple[float, float] | None = None,
    allowed: int | None = None,
    cold_limit_s: float | None = None,
) -> None:
    """Stop a probe whose oldest waiting query is past `limit_s` (`cold_limit_s` until the server's first answer),
    or with more queries over a limit than its bound allows (`allowed`): it has failed whatever follows (the
    harness answers the rest and LoadGen ends)."""

    def loop() -> None:
        while not sut.finished.wait(0.25):
            now = time.monotonic()
            oldest = tl.oldest_waiting()
            wait = limit_s if cold_limit_s is None or tl.answered() else cold_limit_s
            if oldest is not None and now - oldest > wait:
                stopped.append(f"a query waited over {wait:g} s for its first token: probe stopped early")
                sut.stop()
                return
            if limits is not None and allowed is not None:
                over = tl.over(limits[0] / 1000, limits[1] / 1000, now)
                if over > allowed:
                    stopped.append(
                        f"{over} {'query' if over == 1 else 'queries'} over a limit, more than the {allowed} its "
                        "p99 bound allows: stopped early"
                    )
                    sut.stop()
                    return

    from repro.run.sut import KEPT_THREADS

    KEPT_THREADS.run(loop, name="repro-tune-watch")  # it may answer LoadGen (sut.stop): a thread that never exits


@dataclass(frozen=True)
class ProbeWatch:
    """What the watcher stops a probe on (see `watch`): the oldest query's wait, the limits and the over-limit
    count its bound allows, and the cold server's first wait."""

    limit_s: float
    limits_ms: tuple[float, float]
    allowed: int | None
    cold_limit_s: float


@dataclass(frozen=True)
class Watched:
    """One probe's run as the search reads it: the run's details, the samples' times and why it was stopped."""

    details: dict[str, Any]
    samples: list[tuple[float, float, float | None]]
    stopped: list[str]


def run_watched(options: Any, w: ProbeWatch) -> Watched:
    """One probe through the run's own harness, timed and watched, in this process."""
    from repro.run.harness import execute
    from repro.run.options import RunHooks
    from repro.run.plan import plan_run

    tl = Timeline()
    stopped: list[str] = []
    hooks = RunHooks(
        progress=False,
        backend_factory=timed_factory(tl),
        on_started=lambda sut: watch(sut, tl, w.limit_s, stopped, w.limits_ms, w.allowed, w.cold_limit_s),
    )
    out = execute(plan_run(options), hooks)  # a probe is never a dry run: the plan goes straight through
    return Watched(dict(out.details), tl.samples(), list(stopped))


def run_watched_in_own_process(options: Any, w: ProbeWatch) -> Watched:
    """The probe in a fresh process, as each `repro run` is (run/own_process.py; issue 42 item 5). Managed servers
    are kept between probes (ServerOptions.keep), so the next process finds them up."""
    from repro.run.own_process import in_own_process

    return in_own_process(run_watched, options, w)
