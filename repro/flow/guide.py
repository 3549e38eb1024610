"""The guided flow: doctor -> setup -> build-engine -> run offline -> verify, resumable from the ledger.

Each step is the same function its own command uses (imported lazily, so a step that is not
installed fails only when reached). Finished steps are skipped from the ledger; expensive ones
are confirmed first unless --yes or stdin is not a terminal.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from repro.core.errors import Interrupted, ReproError, StepFailed
from repro.core.ledger import Ledger
from repro.core.recipes import Recipe
from repro.flow.status import STEPS, load_ledger_fresh_if_corrupt, needs_step, run_dir_of, step_command, step_state
from repro.core.steps import StepOutcome
from repro.core.workspace import Workspace

FLOW = ("doctor", *STEPS)
EXPENSIVE = ("setup", "build-engine", "run-offline")
StepFn = Callable[[Recipe, Workspace, bool], StepOutcome]


def _missing(step: str, exc: ImportError) -> StepFailed:
    return StepFailed(f"The {step} step is not available in this repro installation ({exc}).",
                      "`pip install -e .` with the full source, then `repro guide`")


def _setup(recipe: Recipe, ws: Workspace, dry_run: bool) -> StepOutcome:
    try:
        from repro.setup.download import run_setup
    except ImportError as exc:
        raise _missing("setup", exc) from None
    return run_setup(recipe, ws, dry_run=dry_run, yes=True)


def _build(recipe: Recipe, ws: Workspace, dry_run: bool) -> StepOutcome:
    try:
        from repro.engine.plan import run_build
    except ImportError as exc:
        raise _missing("build-engine", exc) from None
    return run_build(recipe, ws, dry_run=dry_run)


def _run(recipe: Recipe, ws: Workspace, dry_run: bool) -> StepOutcome:
    try:
        from repro.run.harness import run_benchmark
    except ImportError as exc:
        raise _missing("run-offline", exc) from None
    return run_benchmark(recipe, ws, scenario="Offline", dry_run=dry_run)


def latest_run_dir(recipe: Recipe, ws: Workspace) -> Path | None:
    base = ws.runs / recipe.name / "Offline"
    runs = sorted(p for p in base.glob("*") if p.is_dir()) if base.is_dir() else []
    return runs[-1] if runs else None


def _verify(recipe: Recipe, ws: Workspace, dry_run: bool) -> StepOutcome:
    run_dir = run_dir_of(Ledger.load(ws.ledger_path)) if ws.ledger_path.exists() else None
    run_dir = run_dir or (str(p) if (p := latest_run_dir(recipe, ws)) else None)
    if dry_run:
        return StepOutcome(step="verify", status="dry-run",
                           summary=f"would compare {run_dir or 'the new run folder'} with the published result")
    if not run_dir:
        raise StepFailed("There is no Offline run folder to verify.", step_command("run-offline", recipe))
    from repro.results.verify import verify_dir
    verdict = verify_dir(Path(run_dir), recipe=recipe)
    from repro.ui.results import render_verdict
    _console().print(render_verdict(verdict))
    return StepOutcome(step="verify", status="done", summary=f"{verdict.status} for {run_dir}",
                       details={"run_dir": run_dir, "verdict": verdict.status, "exit_code": verdict.exit_code})


DEFAULT_STEPS: dict[str, StepFn] = {"setup": _setup, "build-engine": _build, "run-offline": _run, "verify": _verify}


def _console() -> Console:
    from repro.ui.output import console
    return console


def _gb(value: Any) -> str:
    return "unknown" if value in (None, "unknown") else f"{float(value):,.0f} GB" if float(value) >= 1 else f"{float(value):.2f} GB"


def costs(recipe: Recipe) -> dict[str, tuple[str, str]]:
    """(disk, time) per step, from the recipe; 'unknown' where the recipe does not say."""
    runtime = recipe.expected_runtime_min
    return {
        "doctor": ("-", "seconds"),
        "setup": (_gb(recipe.model.size_gb) + " model + dataset", "download time depends on the network"),
        "build-engine": ((_gb(recipe.model.quantized_size_gb) + " engine") if recipe.trtllm else "-",
                         "quantize + build, time not in the recipe" if recipe.trtllm else "not needed"),
        "run-offline": ("logs only", f"about {runtime:g} min" if runtime != "unknown" else "unknown"),
        "verify": ("-", "seconds"),
    }


@dataclass
class GuideResult:
    recipe: str
    workspace: str
    label: str | None
    outcomes: list[StepOutcome] = field(default_factory=list)
    stopped_at: str | None = None
    exit_code: int = 0
    next_command: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"recipe": self.recipe, "workspace": self.workspace, "label": self.label,
                "steps": [o.to_json() for o in self.outcomes], "stopped_at": self.stopped_at,
                "exit_code": self.exit_code, "next_command": self.next_command}

    def __rich__(self) -> Group:
        t = Table(title=f"Guided flow, recipe {self.recipe}" + (f" [{self.label}]" if self.label else ""),
                  title_justify="left")
        for col in ("step", "result", "summary"):
            t.add_column(col, overflow="fold")
        for o in self.outcomes:
            t.add_row(o.step, o.status, Text(o.summary))
        end = f"Stopped at {self.stopped_at}." if self.stopped_at else "All steps finished."
        if self.next_command:
            end += f" Next: {self.next_command}"
        return Group(t, Text(end, style="bold"))


def plan_table(recipe: Recipe, ledger: Ledger) -> Table:
    t = Table(title=f"Plan for {recipe.name} (disk needed in all: {_gb(recipe.disk_needed_gb)})", title_justify="left")
    for col in ("#", "step", "state", "disk", "time"):
        t.add_column(col)
    cost = costs(recipe)
    for i, step in enumerate(FLOW, 1):
        state = "checks now" if step == "doctor" else step_state(step, ledger, recipe, list(STEPS[:STEPS.index(step)])).state
        t.add_row(str(i), step, state, *cost[step])
    return t


def _record(ledger_path: Path, step: str, recipe: Recipe, outcome: StepOutcome) -> None:
    """Make sure the ledger knows the step and which recipe it ran for, whether or not the step wrote it."""
    ledger = Ledger.load(ledger_path)
    rec = ledger.get(step)
    if rec is None or rec.status != "done":
        ledger.start(step, recipe.hash(), **outcome.details)
        ledger.finish(step)
        rec = ledger.steps[step]
    rec.details.setdefault("recipe", recipe.name)
    rec.details.setdefault("recipe_hash", recipe.hash())
    for key, value in outcome.details.items():
        rec.details.setdefault(key, value if isinstance(value, (str, int, float, bool, type(None))) else str(value))
    ledger.facts["recipe"] = recipe.name
    ledger.save()


def _mark_failed(ledger_path: Path, step: str, recipe: Recipe, error: str, interrupted: bool) -> None:
    ledger = Ledger.load(ledger_path)
    rec = ledger.get(step)
    if rec is None or rec.status in ("running", "done"):
        if rec is None:
            ledger.start(step, recipe.hash(), recipe=recipe.name)
        ledger.fail(step, error, interrupted=interrupted)


def run_guide(recipe: Recipe, reason: str, ws: Workspace, *, yes: bool = False, dry_run: bool = False,
              interactive: bool | None = None, ask: Callable[[str], bool] | None = None,
              steps: dict[str, StepFn] | None = None, doctor: Callable[[], Any] | None = None,
              console: Console | None = None) -> GuideResult:
    out = console or _console()
    interactive = sys.stdin.isatty() if interactive is None else interactive
    steps = {**DEFAULT_STEPS, **(steps or {})}
    label = "demo" if recipe.demo else None
    result = GuideResult(recipe.name, str(ws.root), label)
    ledger, note = load_ledger_fresh_if_corrupt(ws)
    if note:
        out.print(Text(f"note: {note} A fresh ledger starts now.", style="yellow"))
    out.print(Text.from_markup(f"[bold]repro guide[/]: recipe [bold]{escape(recipe.name)}[/] ({escape(reason)}), "
                               f"workspace {escape(str(ws.root))}" + (" [yellow](demo: never a reproduction)[/]" if label else "")
                               + (" [yellow](dry run: nothing is changed)[/]" if dry_run else "")))
    if not interactive and not yes:
        out.print("stdin is not a terminal: not asking before expensive steps.")
    out.print(plan_table(recipe, ledger))

    out.print(Text.from_markup(f"[bold][1/{len(FLOW)}] doctor[/]"))
    if doctor is None:
        from repro.flow.doctor import run_doctor
        report = run_doctor(recipe.name, ws)
    else:
        report = doctor()
    out.print(report)
    result.outcomes.append(StepOutcome(step="doctor", status="failed" if report.exit_code else "done",
                                       summary=f"{report.verdict}: {len(report.failed)} failed checks"))
    if report.exit_code:
        result.stopped_at, result.exit_code = "doctor", 1
        result.next_command = f"fix the FAIL rows, then `repro doctor --recipe {recipe.name}`"
        return result

    for i, step in enumerate(STEPS, 2):
        ledger = Ledger.load(ws.ledger_path) if ws.ledger_path.exists() else Ledger(path=ws.ledger_path)
        state = step_state(step, ledger, recipe, list(STEPS[:i - 2]))
        disk, time = costs(recipe)[step]
        out.print(Text.from_markup(f"[bold][{i}/{len(FLOW)}] {step}[/] (disk: {escape(disk)}; time: {escape(time)})"))
        if state.state in ("done", "not needed"):
            why = "already done (ledger)" if state.state == "done" else state.why
            out.print(f"  skipped: {why}")
            result.outcomes.append(StepOutcome(step=step, status="skipped", summary=why))
            continue
        if state.state != "to do":
            out.print(f"  ledger says {state.state}: {state.why}; running it again")
        if step in EXPENSIVE and interactive and not yes and not dry_run:
            asker = ask or _confirm
            if not asker(f"Run {step} now ({disk}, {time})?"):
                result.stopped_at = step
                result.next_command = f"`repro guide --recipe {recipe.name}` resumes here"
                out.print(f"  not run. {result.next_command}")
                return result
        try:
            outcome = steps[step](recipe, ws, dry_run)
        except KeyboardInterrupt:
            if not dry_run:
                _mark_failed(ws.ledger_path, step, recipe, "interrupted by the user (Ctrl-C)", True)
            raise Interrupted(f"Interrupted during {step}; finished steps are kept in the ledger.",
                              f"`repro guide --recipe {recipe.name}` resumes and skips them") from None
        except ReproError as exc:
            if not dry_run:
                _mark_failed(ws.ledger_path, step, recipe, exc.message, isinstance(exc, Interrupted))
            raise
        out.print(outcome)
        result.outcomes.append(outcome)
        if outcome.status == "failed":
            if not dry_run:
                _mark_failed(ws.ledger_path, step, recipe, outcome.summary, False)
            result.stopped_at, result.exit_code = step, 1
            result.next_command = step_command(step, recipe)
            return result
        if outcome.status in ("done", "skipped") and not dry_run:
            if step in EXPENSIVE and outcome.status == "skipped" and "cancel" in outcome.summary.lower():
                result.stopped_at = step
                result.next_command = f"`repro guide --recipe {recipe.name}` resumes here"
                return result
            _record(ws.ledger_path, step, recipe, outcome)
        if step == "verify" and not dry_run and not recipe.demo:
            result.exit_code = int(outcome.details.get("exit_code", 0))
    result.next_command = "`repro status`" if not dry_run else f"`repro guide --recipe {recipe.name}` without --dry-run"
    return result


def _confirm(question: str) -> bool:
    from rich.prompt import Confirm
    return Confirm.ask(question, default=True, console=_console())
