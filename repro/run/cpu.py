"""The harness's own CPU time during a run, so `repro explain` can tell a client-bound run from a slow server.

LoadGen's callbacks, the backend's client and the progress loop share one Python interpreter: when its busiest
thread is runnable about all the time (on a CPU, or waiting for one on a busy machine), samples are issued and
answered late and the GPUs wait. Per-thread times come from /proc/self/task/*/schedstat (Linux: ns on a CPU,
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
    """`start()` before LoadGen starts, `stop()` while the run's threads still live; the result goes into run.json."""

    def __init__(self) -> None:
        self._wall = self._cpu = 0.0
        self._start: dict[str, tuple[str, float, float]] = {}
        self.result: dict[str, Any] | None = None

    def start(self) -> CpuClock:
        self._wall, self._cpu, self._start = time.monotonic(), time.process_time(), _threads()
        return self

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self._wall
        self.result = {"wall_s": round(wall, 3), "cpu_s": round(time.process_time() - self._cpu, 3)}
        busiest: tuple[str, float, float] | None = None
        for tid, (name, on_cpu, waiting) in _threads().items():
            _, cpu0, wait0 = self._start.get(tid, (name, 0.0, 0.0))
            used = (name, on_cpu - cpu0, waiting - wait0)
            if busiest is None or used[1] + used[2] > busiest[1] + busiest[2]:
                busiest = used
        if busiest is not None:
            self.result.update(
                busiest_thread=busiest[0],
                busiest_thread_cpu_s=round(busiest[1], 3),
                busiest_thread_wait_s=round(busiest[2], 3),
            )
        return self.result
