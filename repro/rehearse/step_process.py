"""A rehearsal's run and tune steps in their own processes, as a user runs `repro run` and `repro tune`: LoadGen
loads mlperf.conf only on a process's first FromConfig, so a second run in one process logged error_invalid_config
"Multiple conf files are used" and ran without it (issue 42 item 5).

The parent writes what the step needs (the recipe, the workspace, the servers, the LoadGen settings, the time
scale) to a JSON file in the rehearsal's workspace and runs `repro rehearse --run-step FILE --json`; the child
prints the step's row as JSON on stdout. Its stderr is the parent's: the run's bar or heartbeat shows as it runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from repro.core.recipes import Recipe
from repro.core.workspace import Workspace
from repro.rehearse.result import LABEL, run_row

# `repro tune server` in a rehearsal: probes of 2 s / 100 queries from the rehearsal's Server rate, a 50% bracket (the
# step shows the search and that the run uses its rate; a 3% bracket costs minutes of probes per recipe), and the
# demo's 20% margin (the stand-ins share this machine's CPU, as the demo does).
TUNE_PROBE_S = 2.0
TUNE_PROBE_QUERIES = 100
TUNE_RESOLUTION = 0.5
TUNE_MARGIN = 0.2
TUNE_MAX_MINUTES = 2.0
# The warm-up lasts one probe (tune's default is 10 s: a GPU server builds CUDA graphs on its first batches; the
# stand-in has nothing to warm, and 10 s was a quarter of the tune step).
TWIN_READY_S = 300.0
"""How long a published-pace run waits for its stand-ins to take the twin's scenario (a container still starting
on this loaded machine; the readiness wait that follows has its own deadline)."""
STEP_TIMEOUT_S = 1800
"""A step that has not returned in half an hour is stuck (the longest rehearsal run takes about a minute)."""


def run_step(state: dict[str, Any], where: Path) -> dict[str, Any]:
    """Run one step (state['kind']: run or tune) in its own process; its row, or an error row."""
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(json.dumps(state, indent=1, default=str), encoding="utf-8")
    argv = [sys.executable, "-m", "repro", "rehearse", "--recipe", state["recipe"], "--run-step", str(where), "--json"]
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=None, text=True, timeout=STEP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return _error_row(state, f"the step did not return within {STEP_TIMEOUT_S} s: {' '.join(argv)}")
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        return _error_row(state, str(doc["error"].get("message"))[:500])
    if not isinstance(doc, dict):
        return _error_row(state, f"`{' '.join(argv[2:])}` exited {done.returncode} without its row")
    return doc


def _error_row(state: dict[str, Any], message: str) -> dict[str, Any]:
    return {
        "scenario": state.get("scenario"),
        "run_dir": None,
        "valid": False,
        "validity": "ERROR",
        "verdict": "ERROR",
        "label": None,
        "error": message,
    }


def servers_state(servers: Any) -> dict[str, Any]:
    return asdict(servers)


def execute_state(path: Path, bar: Any = None) -> dict[str, Any]:
    """The child's side: the step the file describes, in this process; its row (a failed run's: its error)."""
    from repro.core.errors import ReproError
    from repro.core.recipes import get_recipe
    from repro.core.timescale import TimeScale
    from repro.core.workspace import Workspace
    from repro.run.servers import ServerOptions

    state = json.loads(path.read_text(encoding="utf-8"))
    recipe = get_recipe(state["recipe"])
    ws = Workspace.open(Path(state["workspace"]))
    servers = ServerOptions(**state["servers"])
    scale = TimeScale.from_json(state.get("time_scale"))
    try:
        if state["kind"] == "tune":
            return tune_once(recipe, ws, servers, state["settings"], scale)
        return run_once(
            recipe,
            ws,
            state["scenario"],
            servers,
            state["settings"],
            scale,
            target_qps=state.get("target_qps"),
            twin_scenario=state.get("twin_scenario"),
            into=Path(state["into"]) if state.get("into") else None,
            inputs_from=Workspace.open(Path(state["inputs_from"])) if state.get("inputs_from") else None,
            bar=bar,
        )
    except ReproError as exc:
        return _error_row(state, exc.message)


def run_once(
    recipe: Recipe,
    ws: Workspace,
    scenario: str,
    servers: Any,
    settings: dict[str, Any],
    scale: Any,
    *,
    target_qps: dict[str, Any] | None = None,
    twin_scenario: str | None = None,
    into: Path | None = None,
    inputs_from: Workspace | None = None,
    bar: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """One rehearsal run in this process: `repro run` through the stand-in servers, then `verify_dir`; its row.
    `twin_scenario`: the published pace, whose servers hold every scenario's twin: this run's is picked before its
    warm-up and pre-rolled after it (rehearse/twin_control.py)."""
    from repro.results.verify import verify_dir
    from repro.run.backends import create_backend
    from repro.run.harness import run_benchmark
    from repro.run.options import RunHooks, RunOptions

    factory = None
    if twin_scenario is not None:
        from repro.rehearse.twin_control import twin_backend

        factory = twin_backend(twin_scenario, create_backend, wait_s=TWIN_READY_S)

    out = run_benchmark(
        RunOptions.build(
            recipe,
            ws,
            scenario=scenario,
            detect=False,
            servers=servers,
            settings_override=settings,
            rehearsal=True,
            into=into,
            inputs_from=inputs_from,
            time_scale=scale,
            target_qps=target_qps,
        ),
        RunHooks(bar=bar, backend_factory=factory),
    )
    verdict = verify_dir(Path(out.details["run_dir"]), recipe=recipe)
    return run_row(
        scenario,
        out.details["run_dir"],
        verdict,
        target_qps=out.details.get("target_qps"),
        target_qps_source=out.details.get("target_qps_source"),
    )


def tune_once(recipe: Recipe, ws: Workspace, servers: Any, run: dict[str, Any], scale: Any) -> dict[str, Any]:
    """`repro tune server` in this process (the step's own): the search, the rate chosen and where it was saved."""
    from repro.run.tune import tune
    from repro.run.tune_options import TuneOptions

    found = tune(
        TuneOptions.build(
            recipe,
            ws,
            scenario="Server",
            servers=servers,
            start_qps=float(f"{run['target_qps']:.4g}"),
            margin=TUNE_MARGIN,
            resolution=TUNE_RESOLUTION,
            max_minutes=TUNE_MAX_MINUTES,
            probe_s=TUNE_PROBE_S,
            probe_queries=TUNE_PROBE_QUERIES,
            run_settings={k: run[k] for k in ("min_duration", "min_query_count")},
            rehearsal=True,
            detect=False,
            warmup_s=TUNE_PROBE_S,
        )
    )
    return {
        "label": LABEL,
        "chosen_qps": found.chosen_qps,
        "highest_passing_qps": found.highest_passing_qps,
        "lowest_failing_qps": found.lowest_failing_qps,
        "margin": found.margin,
        "stopped": found.stopped,
        "file": found.file,
        "search": [(p.target_qps, p.passed) for p in found.probes],
        "summary": found.summary,
    }
