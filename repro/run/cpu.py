"""The harness's own CPU time during a run, so `repro explain` can tell a client-bound run from a slow server.

LoadGen's callbacks, the backend's client and the progress loop share one Python interpreter: when its threads
together are runnable about a whole core's worth of the run (on a CPU, or waiting for one on a busy machine; a
thread waiting for the GIL sleeps, so one core is what Python code can use), samples are issued and answered late
and the GPUs wait. Per-thread times come from /proc/self/task/*/schedstat (Linux: ns on a CPU,
ns waiting in a run queue); elsewhere only the process total is recorded.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

_TASKS = Path("/proc/self/task")


def _threads() -> dict[str, tuple[str, float, float]]:
    """tid -> (thread name, seconds on a CPU, seconds runnable but waiting) for every live thread."""
    out: dict[str, tuple[str, float, float]] = {}
    try:
        tasks = list(_TASKS.iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            on_cpu, waiting = (int(x) / 1e9 for x in (task / "schedstat").read_text().split()[:2])
            name = (task / "comm").read_text().strip()
        except (OSError, ValueError):
            continue
        out[task.name] = (name, on_cpu, waiting)
    return out


class CpuClock:
    """`start()` before LoadGen starts, `sample()` while it runs (threads that end are kept), `stop()` at the end."""

    def __init__(self) -> None:
        self._wall = self._cpu = 0.0
        self._seen: dict[str, tuple[str, float, float]] = {}
        self._used: dict[str, tuple[str, float, float]] = {}
        self.result: dict[str, Any] | None = None

    def start(self) -> CpuClock:
        self._wall, self._cpu, self._seen = time.monotonic(), time.process_time(), _threads()
        return self

    def sample(self) -> None:
        """Add what each live thread used since the last look; a thread first seen now counts from its start."""
        for tid, (name, on_cpu, waiting) in _threads().items():
            _, cpu0, wait0 = self._seen.get(tid, (name, 0.0, 0.0))
            _, cpu_sum, wait_sum = self._used.get(tid, (name, 0.0, 0.0))
            self._used[tid] = (name, cpu_sum + on_cpu - cpu0, wait_sum + waiting - wait0)
            self._seen[tid] = (name, on_cpu, waiting)

    def stop(self) -> dict[str, Any]:
        self.sample()
        wall = time.monotonic() - self._wall
        self.result = {"wall_s": round(wall, 3), "cpu_s": round(time.process_time() - self._cpu, 3)}
        if self._used:
            busiest = max(self._used.values(), key=lambda u: u[1] + u[2])
            self.result.update(
                busiest_thread=busiest[0],
                busiest_thread_cpu_s=round(busiest[1], 3),
                busiest_thread_wait_s=round(busiest[2], 3),
                threads_cpu_s=round(sum(u[1] for u in self._used.values()), 3),
                threads_wait_s=round(sum(u[2] for u in self._used.values()), 3),
            )
        return self.result
