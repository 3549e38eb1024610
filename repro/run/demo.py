"""Sizing the demo's run to this CPU: its backend (numpy, or hf) is timed on demo prompts before LoadGen starts.

The demo model and dataset themselves are built by setup (repro/setup/demo.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.setup.dataset import load_prepared

# The demo's run must outlast LoadGen's min_duration on any CPU: Offline issues 1.1 x target_qps x
# min_duration samples at once, so target_qps is set from a measured rate with this much headroom. 3x was
# INVALID once in a CI run where the probe ran while another job held the CPU and the run itself did not;
# 6x survives a run 6 times faster than its probe, for a ~13 s demo at the measured rate.
CALIBRATION_HEADROOM = 6.0
# With --duration the user asked for a run of about that length: 2x still outlasts a probe twice as slow as the run.
DURATION_HEADROOM = 2.0
# Server: target_qps is an arrival rate, not a sample count. Scheduling above what the CPU sustains grows the queue
# until TTFT fails (the old 6x Server target completed 48 of 1,547 q/s). The demo's backends batch statically, so a
# request waits for the batch in progress, so the probe times a small batch (the size Server batches reach) and the
# run schedules 40% of that rate: batches stay below the probe's and TTFT below its time.
SERVER_LOAD = 0.4
SERVER_PROBE_BATCH = 16
# LoadGen's early stopping states the TTFT/TPOT p99 at 99% confidence only after ~459 queries all within the limits
# (0.99^n <= 0.01), so a shorter Server run is INVALID however fast it is.
SERVER_MIN_QUERIES = 500


LOCAL_BACKENDS = ("numpy", "hf")
"""The backends that run the demo's model in this process, so its speed is this machine's and can be probed."""


def _local_backend(name: str, model_dir: Path, batch: int) -> Any:
    if name == "hf":
        from repro.run.backends.hf import HFBackend

        return HFBackend(model_dir, batch_size=batch)
    from repro.run.backends.numpy import NumpyBackend

    return NumpyBackend(model_dir, batch_size=batch)


class _ProbeSink:
    """Counts completions from a backend outside LoadGen; a failure ends the probe and is re-raised."""

    def __init__(self) -> None:
        import threading

        self.expected = 0
        self.done = 0
        self.error: BaseException | None = None
        self.finished = threading.Event()

    def expect(self, count: int) -> None:
        self.expected, self.done = count, 0
        self.finished.clear()

    def first_tokens(self, events: Any) -> None:
        pass

    def completed(self, events: Any) -> None:
        self.done += len(events)
        if self.done >= self.expected:
            self.finished.set()

    def failed(self, exc: BaseException) -> None:
        self.error = exc
        self.finished.set()


def calibrate(
    model_dir: Path,
    dataset_dir: Path,
    *,
    max_tokens: int,
    min_duration_ms: int,
    scenario: str = "Offline",
    headroom: float = CALIBRATION_HEADROOM,
    batch: int = 64,
    timeout_s: float = 600.0,
    backend_name: str = "numpy",
) -> dict[str, Any]:
    """Time the run's backend on one warm batch of demo prompts; returns the target_qps that keeps the run VALID.

    A warm-up batch runs first (the first generate call pays for lazy initialisation), then one
    timed batch of the size the run uses. The run then issues enough samples to last about
    CALIBRATION_HEADROOM x 1.1 x min_duration at the measured rate.
    """
    import time

    from repro.run.backends.base import Request

    dataset = load_prepared(dataset_dir)
    if scenario == "Server":
        batch = SERVER_PROBE_BATCH
    n = max(1, min(batch, len(dataset)))
    backend = _local_backend(backend_name, model_dir, batch)
    sink = _ProbeSink()
    rates = []
    try:
        backend.start(sink)
        for round_no, count in enumerate((min(8, n), n)):
            sink.expect(count)
            start = time.monotonic()
            backend.submit([Request(round_no * n + i, i, dataset.prompt(i), max_tokens) for i in range(count)])
            if not sink.finished.wait(timeout_s) or sink.error is not None:
                raise sink.error or TimeoutError(f"the demo calibration did not finish in {timeout_s:g} s")
            rates.append(count / max(time.monotonic() - start, 1e-6))
    finally:
        backend.close()
    measured = rates[-1]
    if scenario == "Server":
        qps = max(0.1, round(measured * SERVER_LOAD, 2))
        return {
            "scenario": scenario,
            "probe_samples": n,
            "probe_samples_per_s": round(measured, 2),
            "server_load": SERVER_LOAD,
            "target_qps": qps,
            "min_query_count": SERVER_MIN_QUERIES,
            "min_duration_ms": min_duration_ms,
            "expected_run_s": round(max(min_duration_ms / 1000, SERVER_MIN_QUERIES / qps), 1),
        }
    qps = max(1.0, round(measured * headroom, 1))
    return {
        "scenario": scenario,
        "probe_samples": n,
        "probe_samples_per_s": round(measured, 2),
        "headroom": headroom,
        "target_qps": qps,
        "min_duration_ms": min_duration_ms,
        "expected_run_s": round(1.1 * qps * min_duration_ms / 1000 / measured, 1),
    }


def calibrate_settings(
    settings: dict[str, Any],
    paths: dict[str, Path],
    recipe: Any,
    backend: str,
    *,
    scenario: str = "Offline",
    samples: int | None = None,
    duration_s: float | None = None,
    accuracy: bool = False,
) -> dict[str, Any] | None:
    """The demo's performance run: the recipe's fixed target_qps becomes a measured one (kept in run.json).

    A --samples run fixes its own count and needs none; a --duration run does, or the CPU finishes the recipe's
    fixed count before the duration and LoadGen calls the run INVALID."""
    if backend not in LOCAL_BACKENDS or samples is not None or accuracy:
        return None
    result = calibrate(
        paths["model_dir"],
        paths["dataset"],
        max_tokens=recipe.loadgen.max_tokens,
        min_duration_ms=int(settings["min_duration"]),
        scenario=scenario,
        headroom=CALIBRATION_HEADROOM if duration_s is None else DURATION_HEADROOM,
        backend_name=backend,
    )
    result["recipe_target_qps"] = settings["target_qps"]
    settings["target_qps"] = result["target_qps"]
    if "min_query_count" in result:
        settings["min_query_count"] = max(int(settings["min_query_count"]), result["min_query_count"])
    return result
