"""`repro run ... --repeat N`: the same run N times, each in a fresh process, then the runs verified together.

Each run is its own process's first LoadGen run: LoadGen loads mlperf.conf only on a process's first FromConfig,
so a second run in one process would lose MLPerf's seeds and log "Multiple conf files are used", which verify
FAILs (the same reason the --target-qps auto probe is spawned, repro/run/tune.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.core.errors import InputError

MAX_REPEAT = 100


def _one_run(options: Any, bar: Any) -> dict[str, Any]:
    """One run with the command's progress bar, in this (spawned) process; what the parent needs back."""
    from repro.run.harness import run_benchmark
    from repro.run.options import RunHooks

    return run_benchmark(options, RunHooks(bar=bar)).to_json()


def run_repeated(options: Any, n: int, announce: Any = None, bar: Any = None) -> list[Path]:
    """Run `options` n times, each in its own process; the run folders in order. A run that does not finish
    stops the series (the folders so far are named in the error)."""
    if not 2 <= n <= MAX_REPEAT:
        raise InputError(f"--repeat {n}: use 2 to {MAX_REPEAT} runs.", "`repro run offline --repeat 3`")
    from repro.run.own_process import in_own_process

    folders: list[Path] = []
    for i in range(n):
        if announce is not None:
            announce(f"run {i + 1} of {n} (each in its own process)")
        done = in_own_process(_one_run, options, bar)
        if done["status"] != "done" or not done["details"].get("log_dir"):
            so_far = ", ".join(str(f) for f in folders) or "none"
            raise InputError(
                f"run {i + 1} of {n} ended {done['status']}: {done['summary']} (finished runs: {so_far}).",
                "fix what it names, then `repro run ... --repeat N` again",
            )
        folders.append(Path(done["details"]["log_dir"]))
    return folders
