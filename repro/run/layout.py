"""The run folder, laid out like a submission's result folder, so one `repro verify RUN_DIR` reads the
performance run, its accuracy run and its TEST06 together:

    RUN_DIR/performance/run_1/  LoadGen logs, user.conf, run.json, power.csv of the performance run
    RUN_DIR/accuracy/           the AccuracyOnly run: mlperf_log_accuracy.json, accuracy.txt, run.json
    RUN_DIR/TEST06/             verify_accuracy.txt; accuracy/ holds the test run's LoadGen logs and audit.config

RUN_DIR is `runs/<recipe>/<scenario>/<stamp>/` (`<stamp>-2`, `-3`, … for runs started in the same second on one
workspace), or the folder `--into` names (a rack node's `RACK_DIR/vm-NN/`). Which folder a run writes into (a new
one, or the latest performance run it pairs with) is decided here too.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from repro.core.clock import new_stamped_dir, stamp_order, stamped_path
from repro.core.errors import InputError
from repro.core.fsutil import confined
from repro.core.recipes import Recipe
from repro.core.record import RUN_JSON, RunRecord
from repro.core.workspace import Workspace

AUDIT_CONFIG = "audit.config"


def new_run_dir(ws: Workspace, recipe: str, scenario: str, *, create: bool = True) -> Path:
    """A new run folder, created atomically (without create: the name a dry run shows, nothing made); inside runs/
    even when a link was planted on the way."""
    base = confined(ws.runs, ws.runs / recipe / scenario, step="repro run")
    return new_stamped_dir(base) if create else stamped_path(base)


def run_dirs(ws: Workspace, recipe: str, scenario: str) -> list[Path]:
    """The run folders of a recipe and scenario, newest first."""
    base = ws.runs / recipe / scenario
    return sorted((p for p in base.iterdir() if p.is_dir()), key=stamp_order, reverse=True) if base.is_dir() else []


RUN_KINDS = ("performance", "accuracy", "TEST06")
_KIND_DIRS = {
    "performance": Path("performance") / "run_1",
    "accuracy": Path("accuracy"),
    "TEST06": Path("TEST06") / "accuracy",
}


def run_kind(accuracy: bool, compliance: str | None) -> str:
    return compliance or ("accuracy" if accuracy else "performance")


def kind_dir(run_dir: Path, kind: str) -> Path:
    """Where the LoadGen logs of one kind of run go inside a run folder."""
    return Path(run_dir) / _KIND_DIRS[kind]


def performance_record(run_dir: Path) -> RunRecord | None:
    """The run.json of the folder's performance run (None: there is none, or it is unreadable)."""
    return RunRecord.read(kind_dir(run_dir, "performance") / RUN_JSON)


def _belongs(info: RunRecord | None, recipe: Recipe, backend: str) -> str | None:
    """Why a performance run cannot take this accuracy/TEST06 run (None: it can)."""
    if info is None:
        return "it holds no performance run (performance/run_1/run.json)"
    if info.recipe_hash != recipe.hash() or info.recipe != recipe.name:
        used = f"{info.recipe} ({str(info.recipe_hash)[:12]})"
        return f"its performance run used recipe {used}, not this {recipe.name}"
    if info.backend != backend:
        return f"its performance run used backend {info.backend}, not {backend}"
    return None


def choose_run_dir(
    ws: Workspace,
    recipe: Recipe,
    scenario: str,
    kind: str,
    backend: str,
    into: Path | None = None,
    *,
    create: bool = True,
) -> tuple[Path, str | None]:
    """The run folder a run writes into, and the performance run it is paired with (None: a new folder).

    A performance run always starts a new folder (unless --into names an empty one). An accuracy or TEST06
    run joins the latest complete performance run of the same recipe, scenario and backend when that run has
    no such result yet; otherwise it starts a new folder. `--into RUN_DIR` names the folder explicitly.
    """
    if into is not None:
        run_dir = Path(into).expanduser()
        hint = f"`repro run {scenario.lower()} --into RUN_DIR` with a run folder of recipe {recipe.name}"
        if not run_dir.is_dir():
            raise InputError(f"--into {run_dir}: no such run folder.", hint)
        if kind_dir(run_dir, kind).exists() or (kind == "TEST06" and (run_dir / "TEST06").exists()):
            raise InputError(
                f"--into {run_dir}: already holds a{'n' if kind[0] in 'aeiou' else ''} {kind} run "
                f"({kind_dir(run_dir, kind)}); results are never overwritten.",
                f"move that folder away, or `repro run {scenario.lower()}` into a new run folder",
            )
        info = performance_record(run_dir)
        if kind != "performance":
            why = _belongs(info, recipe, backend)
            if why is not None:
                raise InputError(f"--into {run_dir}: {why}.", hint)
            if info and info.scenario != scenario:
                raise InputError(f"--into {run_dir}: a {info.scenario} run, not {scenario}.", hint)
        return run_dir, str(kind_dir(run_dir, "performance")) if info else None
    if kind != "performance":
        newest = None
        for cand in run_dirs(ws, recipe.name, scenario):
            info = performance_record(cand)
            if info is not None and info.status == "complete" and _belongs(info, recipe, backend) is None:
                newest = cand
                break
        if newest is not None and not (newest / ("TEST06" if kind == "TEST06" else "accuracy")).exists():
            return newest, str(kind_dir(newest, "performance"))
    return new_run_dir(ws, recipe.name, scenario, create=create), None


def empty_logs(log_dir: Path) -> list[str]:
    """LoadGen's logs that are missing or empty (a full disk)."""
    return [
        p.name
        for p in (log_dir / "mlperf_log_summary.txt", log_dir / "mlperf_log_detail.txt")
        if not p.is_file() or p.stat().st_size == 0
    ]


def remove_empty(log_dir: Path, run_dir: Path, *, everything: bool = False) -> None:
    """Remove 0-byte files (or, with everything, all files) from log_dir, then the folders up to run_dir left empty."""
    with contextlib.suppress(OSError):
        for p in log_dir.iterdir():
            if p.is_file() and (everything or p.stat().st_size == 0):
                p.unlink()
    folder = log_dir
    while True:
        with contextlib.suppress(OSError):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        if folder == run_dir or run_dir not in folder.parents:
            return
        folder = folder.parent
