"""The guided flow: doctor -> setup -> build-engine -> run offline -> verify, resumable from the ledger.

Each step is the same function its own command uses (imported lazily, so a step that is not
installed fails only when reached). Finished steps are skipped from the ledger; expensive ones
are confirmed first unless --yes or stdin is not a terminal.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.errors import Interrupted, ReproError, StepFailed
from repro.core.ledger import Ledger
from repro.core.recipes import Recipe
from repro.core.steps import StepOutcome
from repro.core.workspace import Workspace
from repro.flow.status import (
    STEPS,
    engine_note,
    engines_to_build,
    load_ledger_fresh_if_corrupt,
    record_resume,
    run_dir_of,
    step_command,
    step_state,
)

FLOW = ("doctor", *STEPS)
EXPENSIVE = ("setup", "build-engine", "run-offline")
StepFn = Callable[[Recipe, Workspace, bool], StepOutcome]


def _setup(recipe: Recipe, ws: Workspace, dry_run: bool) -> StepOutcome:
    from repro.setup.download import run_setup

    return run_setup(recipe, ws, dry_run=dry_run, yes=True)


def _build(recipe: Recipe, ws: Workspace, dry_run: bool) -> StepOutcome:
    from repro.engine.plan import run_build

    return run_build(recipe, ws, dry_run=dry_run)


def _run(recipe: Recipe, ws: Workspace, dry_run: bool, bar: Callable[[str], Any] | None = None) -> StepOutcome:
    from repro.run.harness import run_benchmark
    from repro.run.options import RunHooks, RunOptions

    return run_benchmark(RunOptions(recipe, ws, scenario="Offline", dry_run=dry_run), RunHooks(bar=bar))


def latest_run_dir(recipe: Recipe, ws: Workspace) -> Path | None:
    from repro.run.layout import run_dirs

    runs = run_dirs(ws, recipe.name, "Offline")
    return runs[0] if runs else None


def _verify(recipe: Recipe, ws: Workspace, dry_run: bool) -> StepOutcome:
    run_dir = run_dir_of(Ledger.load(ws.ledger_path)) if ws.ledger_path.exists() else None
    run_dir = run_dir or (str(p) if (p := latest_run_dir(recipe, ws)) else None)
    if dry_run:
        return StepOutcome(
            step="verify",
            status="dry-run",
            summary=f"would compare {run_dir or 'the new run folder'} with the published result",
        )
    if not run_dir:
        raise StepFailed("There is no Offline run folder to verify.", step_command("run-offline", recipe))
    from repro.results.verify import verify_dir

    verdict = verify_dir(Path(run_dir), recipe=recipe)
    why = "; ".join(getattr(verdict, "reasons", []) or [])
    return StepOutcome(
        step="verify",
        status="done",
        summary=f"{verdict.status} for {run_dir}" + (f": {why}" if why else ""),
        details={
            "run_dir": run_dir,
            "verdict": verdict.status,
            "exit_code": verdict.exit_code,
            "reasons": list(getattr(verdict, "reasons", []) or []),
            "accuracy_command": verdict.accuracy_command,
        },
    )


DEFAULT_STEPS: dict[str, StepFn] = {"setup": _setup, "build-engine": _build, "run-offline": _run, "verify": _verify}


def _gb(value: Any) -> str:
    return (
        "unknown"
        if value in (None, "unknown")
        else f"{float(value):,.0f} GB"
        if float(value) >= 1
        else f"{float(value):.2f} GB"
    )


def costs(recipe: Recipe) -> dict[str, tuple[str, str]]:
    """(disk, time) per step, from the recipe; 'unknown' where the recipe does not say."""
    runtime = recipe.expected_runtime_min
    return {
        "doctor": ("-", "seconds"),
        "setup": (
            (_gb(recipe.model.size_gb) + " model + dataset", "download time depends on the network")
            if not recipe.demo
            else ("a few MB", "seconds: the tiny model and sample are built here, nothing is downloaded")
        ),
        "build-engine": (
            (_gb(recipe.quantization.quantized_size_gb) + " engine") if recipe.trtllm else "-",
            "quantize + build, time not in the recipe" if recipe.trtllm else "not needed",
        ),
        "run-offline": ("logs only", _run_time(recipe, runtime)),
        "verify": ("-", "seconds"),
    }


def _run_time(recipe: Recipe, runtime: Any) -> str:
    """The recipe's figure for a GPU run; the demo's run lasts LoadGen's min duration plus loading, which depends
    on this machine's cores, so the plan says only that (it said "about 1 min" for runs of 10-18 s)."""
    if recipe.demo:
        return (
            f"LoadGen's {recipe.loadgen.min_duration_ms / 1000:g} s minimum plus model loading; the bar shows the ETA"
        )
    return f"about {runtime:g} min" if runtime != "unknown" else "unknown"


STARTING = {
    "setup": "starting setup; each file is listed when it is ready",
    "build-engine": "starting the engine build; its log follows",
    "run-offline": "starting the run: loading the model and LoadGen first, then the progress bar",
    "verify": "judging the run",
}
"""Said at once when a step starts, so the first seconds of a step never show a silent screen."""


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
        return {
            "recipe": self.recipe,
            "workspace": self.workspace,
            "label": self.label,
            "steps": [o.to_json() for o in self.outcomes],
            "stopped_at": self.stopped_at,
            "exit_code": self.exit_code,
            "next_command": self.next_command,
        }


@dataclass(frozen=True)
class GuideNote:
    """One line of the guided flow's running commentary."""

    text: str
    style: str | None = None


@dataclass(frozen=True)
class GuidePlan:
    """The steps ahead with their state and cost: (step, state, disk, time) per row."""

    title: str
    rows: list[tuple[str, str, str, str]]


def plan(recipe: Recipe, ledger: Ledger) -> GuidePlan:
    cost = costs(recipe)
    rows: list[tuple[str, str, str, str]] = []
    for step in FLOW:
        state = (
            "checks now"
            if step == "doctor"
            else step_state(step, ledger, recipe, list(STEPS[: STEPS.index(step)])).state
        )
        rows.append((step, state, *cost[step]))
    return GuidePlan(f"Plan for {recipe.name} (disk needed in all: {_gb(recipe.disk_needed_gb)})", rows)


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


@dataclass
class _Flow:
    """One guided run's fixed inputs and its growing result, handed to each part of run_guide."""

    recipe: Recipe
    ws: Workspace
    dry_run: bool
    again: str
    """The command that resumes the flow where it stopped."""
    show: Callable[[Any], None]
    result: GuideResult
    workspace_flag: str | None


def _introduce(flow: _Flow, reason: str, interactive: bool, yes: bool) -> None:
    """The header, any ledger trouble, and the plan, before anything runs."""
    recipe, show = flow.recipe, flow.show
    ledger, note = load_ledger_fresh_if_corrupt(flow.ws)
    if note:
        show(GuideNote(f"note: {note} A fresh ledger starts now.", "yellow"))
    show(
        GuideNote(
            f"repro guide: recipe {recipe.name} ({reason}), workspace {flow.ws.root}"
            + (" (demo: never a reproduction)" if flow.result.label else "")
            + (" (dry run: nothing is changed)" if flow.dry_run else ""),
            "bold",
        )
    )
    if not interactive and not yes:
        show(GuideNote("stdin is not a terminal: not asking before expensive steps."))
    show(plan(recipe, ledger))
    for dep in engines_to_build(ledger, recipe):
        show(GuideNote(f"note: {engine_note(dep, flow.workspace_flag)}."))


def _doctor_passes(flow: _Flow, reason: str, doctor: Callable[[], Any] | None) -> bool:
    """Step 1, always run (it changes nothing): False, with the result's next command set, when it fails."""
    flow.show(GuideNote(f"[1/{len(FLOW)}] doctor", "bold"))
    if doctor is None:
        from repro.flow.doctor import run_doctor

        report = run_doctor(flow.recipe.name, flow.ws, reason=reason)
    else:
        report = doctor()
    flow.show(report)
    result = flow.result
    result.outcomes.append(
        StepOutcome(
            step="doctor",
            status="failed" if report.exit_code else "done",
            summary=f"{report.verdict}: {len(report.failed)} failed checks",
        )
    )
    if report.exit_code:
        result.stopped_at, result.exit_code = "doctor", 1
        result.next_command = f"fix the FAIL rows, then `{flow.again.replace(' guide ', ' doctor ', 1)}`"
        return False
    return True


def _call_step(flow: _Flow, step: str, steps: dict[str, StepFn]) -> StepOutcome:
    """Run one step; an interruption or error marks it failed in the ledger and names the command that resumes."""
    recipe, ws, dry_run, again = flow.recipe, flow.ws, flow.dry_run, flow.again
    try:
        return steps[step](recipe, ws, dry_run)
    except KeyboardInterrupt:
        if not dry_run:
            _mark_failed(ws.ledger_path, step, recipe, "interrupted by the user (Ctrl-C)", True)
            record_resume(ws, again, step)
        finished = any(o.status in ("done", "skipped") for o in flow.result.outcomes[1:])
        kept = "; finished steps are kept in the ledger" if finished else ""
        raise Interrupted(f"Interrupted during {step}{kept}.", again) from None
    except ReproError as exc:
        if not dry_run:
            _mark_failed(ws.ledger_path, step, recipe, exc.message, isinstance(exc, Interrupted))
            if isinstance(exc, Interrupted):
                # the flow resumes where it stopped: its command, the one status names too
                exc.next_command = again
                record_resume(ws, again, step)
        raise


def _flow_step(
    flow: _Flow, i: int, step: str, steps: dict[str, StepFn], ask: Callable[[str], bool] | None, confirm: bool
) -> bool:
    """Step i of the flow: skipped when the ledger has it, confirmed first when expensive (`confirm`), then run and
    recorded. False when the flow stops here (declined, cancelled or failed), with the result saying why."""
    recipe, ws, dry_run, show, result = flow.recipe, flow.ws, flow.dry_run, flow.show, flow.result
    ledger = Ledger.load(ws.ledger_path) if ws.ledger_path.exists() else Ledger(path=ws.ledger_path)
    state = step_state(step, ledger, recipe, list(STEPS[: i - 2]))
    disk, time = costs(recipe)[step]
    show(GuideNote(f"[{i}/{len(FLOW)}] {step} (disk: {disk}; time: {time})", "bold"))
    if state.state in ("done", "not needed"):
        why = "already done (ledger)" if state.state == "done" else state.why
        show(GuideNote(f"  skipped: {why}"))
        result.outcomes.append(StepOutcome(step=step, status="skipped", summary=why))
        return True
    expensive = step in EXPENSIVE and confirm
    if state.state != "to do":
        # said before the question, not as if the step were already starting
        show(GuideNote(f"  ledger says {state.state}: {state.why}" + ("" if expensive else "; running it again")))
    word = " again" if state.state != "to do" else ""
    # the step's cost is in the header just above: the question does not repeat it
    if expensive and (ask is None or not ask(f"Run {step} now{word}?")):
        result.stopped_at = step
        result.next_command = flow.again
        show(GuideNote(f"  not run; {flow.again} resumes here."))
        return False
    if not dry_run:
        show(GuideNote(f"  {STARTING[step]}" + (" (demo: a few seconds)" if recipe.demo and step != "verify" else "")))
    outcome = _call_step(flow, step, steps)
    show(outcome)
    result.outcomes.append(outcome)
    if outcome.status == "failed":
        if not dry_run:
            _mark_failed(ws.ledger_path, step, recipe, outcome.summary, False)
        result.stopped_at, result.exit_code = step, 1
        result.next_command = step_command(step, recipe, workspace=flow.workspace_flag)
        return False
    if outcome.status in ("done", "skipped") and not dry_run:
        if step in EXPENSIVE and outcome.status == "skipped" and "cancel" in outcome.summary.lower():
            result.stopped_at = step
            result.next_command = flow.again
            return False
        _record(ws.ledger_path, step, recipe, outcome)
    if step == "verify" and not dry_run and not recipe.demo:
        result.exit_code = int(outcome.details.get("exit_code", 0))
    return True


def _next_command(flow: _Flow) -> str:
    """After the last step: the report of the run, or the accuracy run it still lacks; resuming after a dry run."""
    if flow.dry_run:
        return flow.again
    run_dir = run_dir_of(Ledger.load(flow.ws.ledger_path))
    # a run that lacks only its accuracy run: the verdict's command that writes it comes before the report
    lacking = [o.details.get("accuracy_command") for o in flow.result.outcomes if o.step == "verify"]
    if lacking and lacking[-1]:
        return str(lacking[-1])
    return step_command("report", flow.recipe, run_dir, flow.workspace_flag) if run_dir else flow.again


def run_guide(
    recipe: Recipe,
    reason: str,
    ws: Workspace,
    *,
    yes: bool = False,
    dry_run: bool = False,
    interactive: bool | None = None,
    ask: Callable[[str], bool] | None = None,
    steps: dict[str, StepFn] | None = None,
    doctor: Callable[[], Any] | None = None,
    show: Callable[[Any], None] = lambda _: None,
    run_bar: Callable[[str], Any] | None = None,
    workspace_flag: str | None = None,
) -> GuideResult:
    """Run the remaining steps in order; `show` receives each note, plan, report and outcome as it happens.

    `run_bar` draws the run's progress bar in a terminal, the same one `repro run offline` draws."""
    interactive = sys.stdin.isatty() if interactive is None else interactive
    steps = {**DEFAULT_STEPS, "run-offline": lambda r, w, d: _run(r, w, d, run_bar), **(steps or {})}
    again = shlex.join(
        ["repro", "guide", "--recipe", recipe.name] + (["--workspace", workspace_flag] if workspace_flag else [])
    )
    result = GuideResult(recipe.name, str(ws.root), "demo" if recipe.demo else None)
    flow = _Flow(recipe, ws, dry_run, again, show, result, workspace_flag)
    _introduce(flow, reason, interactive, yes)
    if not _doctor_passes(flow, reason, doctor):
        return result
    confirm = interactive and not yes and not dry_run
    for i, step in enumerate(STEPS, 2):
        if not _flow_step(flow, i, step, steps, ask, confirm):
            return result
    result.next_command = _next_command(flow)
    return result
