"""`repro run offline --target-qps auto`: LoadGen's expected Offline QPS from a short probe through the same
backend (the Offline half of `repro tune`, which searches Server/Interactive rates in run/tune.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from repro.core.errors import StepFailed
from repro.core.recipes import Recipe
from repro.core.workspace import Workspace

OFFLINE_PROBE_SAMPLES = 256
OFFLINE_HEADROOM = 1.2
"""--target-qps auto (Offline): LoadGen issues 1.1 x qps x min_duration samples; 1.2 x the probed rate keeps the run
above min_duration while the full run is up to 1.32x faster than the probe, and no longer than 1.32x min_duration."""


def _probe_details(options: Any) -> dict[str, Any]:
    from repro.run.harness import execute
    from repro.run.options import RunHooks
    from repro.run.plan import plan_run

    return dict(execute(plan_run(options), RunHooks(progress=False)).details)


def _probe_in_own_process(options: Any) -> dict[str, Any]:
    """The probe in a fresh process (run/own_process.py): the run that follows is then this process's first and
    only LoadGen run, with mlperf.conf's seeds."""
    from repro.run.own_process import in_own_process

    return in_own_process(_probe_details, options)


def offline_auto_qps(
    recipe: Recipe,
    ws: Workspace,
    *,
    endpoints: Sequence[str] | None = None,
    backend: str | None = None,
    servers: Any = None,
    served_model: str | None = None,
    samples: int = OFFLINE_PROBE_SAMPLES,
    sim_rate: float | None = None,
    min_duration_s: float | None = None,
    detect: bool = True,
) -> dict[str, Any]:
    """A short Offline run through the same backend measures samples/s; LoadGen's expected QPS is that x headroom.

    The probe runs as the run will (the sim at the run's --sim-rate: unpaced, it measured a rate the paced run then
    took an hour to issue); `min_duration_s` is the run's --duration, if any."""
    from repro.core.clock import new_stamped_dir
    from repro.run.options import RunOptions
    from repro.run.servers import ServerOptions

    folder = new_stamped_dir(ws.tuned / recipe.name / "offline-probe")
    keep = dataclasses.replace(servers or ServerOptions(), keep=True)
    n = min(samples, recipe.dataset.samples or samples)
    options = RunOptions.build(
        recipe,
        ws,
        scenario="Offline",
        backend=backend,
        endpoints=endpoints,
        servers=keep,
        served_model=served_model,
        samples=n,
        sim_rate=sim_rate,
        probe=True,
        into=folder,
        detect=detect,
    )
    details = _probe_in_own_process(options)
    measured = details.get("samples_per_s")
    if not isinstance(measured, (int, float)) or measured <= 0:
        raise StepFailed(
            f"The Offline probe measured no samples/s (logs in {details.get('log_dir')}).",
            f"`repro run offline --recipe {recipe.name} --samples 64`",
        )
    qps = float(f"{measured * OFFLINE_HEADROOM:.4g}")
    min_s = recipe.loadgen.min_duration_ms / 1000 if min_duration_s is None else min_duration_s
    return {
        "from": "--target-qps auto",
        "target_qps": qps,
        "probe_samples": n,
        "probe_samples_per_s": round(float(measured), 3),
        "headroom": OFFLINE_HEADROOM,
        "probe_log_dir": details.get("log_dir"),
        "expected_run_s": round(1.1 * qps * min_s / measured, 1),
    }
