"""`repro status`: the ledger read back as done / stale / failed / to do, and the one next command."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repro.core.ledger import Ledger, StepRecord
from repro.core.recipes import Deployment, Recipe
from repro.core.workspace import Workspace

STEPS = ("setup", "build-engine", "run-offline", "verify")
State = Literal["done", "stale", "failed", "interrupted", "running", "to do", "not needed"]


def step_command(step: str, recipe: Recipe | None, run_dir: str | None = None, workspace: str | None = None) -> str:
    """The one command for a step, with the flags that got the user here (recipe, workspace): pasteable as is.

    Verify without a performance run folder has nothing to read, so it points at the run that makes one.
    """
    flags = (["--recipe", recipe.name] if recipe else []) + (["--workspace", workspace] if workspace else [])
    if step == "verify" and not run_dir:
        step = "run-offline"
    argv = {
        "setup": ["repro", "setup"],
        "build-engine": ["repro", "build-engine"],
        "run-offline": ["repro", "run", "offline"],
        "verify": ["repro", "verify", str(run_dir)],
        "report": ["repro", "report", str(run_dir), "--html", "report.html"],
    }[step]
    return shlex.join(argv + flags)


def needs_step(step: str, recipe: Recipe | None) -> bool:
    """Recipes without TensorRT-LLM (the CPU demo) have no engine to build."""
    return not (step == "build-engine" and recipe is not None and recipe.trtllm is None)


def engines_to_build(ledger: Ledger, recipe: Recipe | None) -> list[Deployment]:
    """The scenarios' own engines (405B Server's TP4xPP1) not built yet: they are outside the main flow (doctor ->
    verify builds the base engine), so the guide and status name the command that builds each."""
    if recipe is None or recipe.trtllm is None or recipe.reference_only or recipe.demo:
        return []
    out = []
    for dep in recipe.deployments()[1:]:
        rec = ledger.get(dep.build_step)
        if rec is None or rec.status != "done":
            out.append(dep)
    return out


def engine_note(dep: Deployment, workspace: str | None = None) -> str:
    """One sentence: which scenario has its own engine, its layout and disk, and the command that builds it."""
    layout = dep.layout.text() if dep.layout else "its own layout"
    over = dep.recipe.scenarios.get(dep.scenario)  # type: ignore[call-overload]
    disk = f", {over.disk_gb:,.0f} GB more disk" if over is not None and over.disk_gb else ""
    return (
        f"{dep.scenario} runs its own engine ({layout}{disk}), as the published {dep.scenario} run did: "
        f"`{dep.build_command(workspace)}` before `repro run {dep.scenario.lower()}`"
    )


@dataclass
class StepState:
    step: str
    state: State
    why: str
    finished: str | None = None
    error: str | None = None
    resume: str | None = None
    """The command the interrupted step was started with (the run's own argv, or the guided flow's): the same
    command the run's or the flow's own `Next:` line named when it stopped."""

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "state": self.state, "why": self.why, "finished": self.finished, "error": self.error}


def expected_inputs_hash(step: str, recipe: Recipe, rec: StepRecord) -> str | None:
    """The step's own inputs hash for this recipe, where its module exposes how it computes one."""
    if step == "setup":
        try:
            from repro.setup.download import inputs_hash

            return inputs_hash(recipe, str(rec.details.get("source") or ("demo" if recipe.demo else "fetch")))
        except (ImportError, TypeError, AttributeError):
            return None
    return None


def inputs_changed(step: str, recipe: Recipe, rec: StepRecord) -> str | None:
    """Why the recorded inputs differ from the current recipe, or None when they match (or cannot be compared)."""
    recorded = rec.details.get("recipe_hash")
    if recorded:
        return None if recorded == recipe.hash() else f"inputs changed: recipe hash {recorded} -> {recipe.hash()}"
    if rec.inputs_hash == recipe.hash():
        return None
    expected = expected_inputs_hash(step, recipe, rec)
    if expected is not None and expected != rec.inputs_hash:
        return f"inputs changed: inputs hash {rec.inputs_hash} -> {expected}"
    return None


def _outputs_present(rec: StepRecord) -> str | None:
    """Size check only: hashing a 138 GB model on every `repro status` would take minutes."""
    for art in rec.outputs:
        p = Path(art.path)
        if not p.exists():
            return f"output {art.path} is missing"
        if p.is_file() and p.stat().st_size != art.size:
            return f"output {art.path} changed size"
    return None


def step_state(step: str, ledger: Ledger, recipe: Recipe | None, upstream: list[str]) -> StepState:
    rec = ledger.get(step)
    if rec is None and step == "setup" and recipe is not None and recipe.demo:
        run = ledger.get("run-offline")
        if run is not None and run.status == "done":
            return StepState(step, "done", "the demo run built its model and sample itself", run.finished)
    if rec is None:
        if not needs_step(step, recipe):
            return StepState(step, "not needed", f"recipe {recipe.name if recipe else '?'} has no engine to build")
        return StepState(step, "to do", "not run yet")
    if rec.status in ("failed", "interrupted"):
        resume = rec.details.get("resume")
        return StepState(
            step,
            rec.status,
            rec.error or rec.status,
            rec.finished,
            rec.error,
            resume if isinstance(resume, str) else None,
        )
    if rec.status == "running":
        dead = rec.stale_reason()
        if dead:  # issue #16: SIGKILL, OOM or a full disk left 'running' behind
            return StepState(step, "stale", f"marked running since {rec.started}, but {dead}; run it again", None)
        where = f" by process {rec.pid} on {rec.host}" if rec.pid and rec.host else ""
        return StepState(step, "running", f"started {rec.started}{where} and not finished", None)
    if rec.status == "interrupted" and rec.signal:
        return StepState(step, "interrupted", f"{rec.error or 'interrupted'} ({rec.signal})", rec.finished, rec.error)
    if recipe is not None:
        recorded_name = rec.details.get("recipe")
        if recorded_name and recorded_name != recipe.name:
            return StepState(step, "stale", f"done for recipe {recorded_name}, not {recipe.name}", rec.finished)
        changed = inputs_changed(step, recipe, rec)
        if changed:
            return StepState(step, "stale", changed, rec.finished)
    missing = _outputs_present(rec)
    if missing:
        return StepState(step, "stale", missing, rec.finished)
    for up in upstream:
        urec = ledger.get(up)
        if urec and urec.finished and urec.status == "done" and urec.finished > (rec.started or ""):
            return StepState(step, "stale", f"{up} was redone after this step", rec.finished)
    return StepState(step, "done", "up to date", rec.finished)


def run_dir_of(ledger: Ledger) -> str | None:
    rec = ledger.get("run-offline")
    return str(rec.details["run_dir"]) if rec and rec.details.get("run_dir") else None


@dataclass
class StatusReport:
    workspace: str
    recipe: Recipe | None
    recipe_reason: str
    states: list[StepState] = field(default_factory=list)
    run_dir: str | None = None
    other_runs: list[StepState] = field(default_factory=list)
    workspace_flag: str | None = None
    no_recipe_command: str | None = None
    engines: list[Deployment] = field(default_factory=list)
    """The scenarios' own engines not built yet (`engines_to_build`)."""

    @property
    def next_step(self) -> StepState | None:
        return next((s for s in self.states if s.state not in ("done", "not needed")), None)

    @property
    def hint(self) -> str | None:
        if self.recipe is None:
            return f"No recipe: {self.recipe_reason}"
        if self.next_step is None:
            again = step_command("run-offline", self.recipe, workspace=self.workspace_flag)
            more = "".join(f"; {engine_note(d, self.workspace_flag)}" for d in self.engines)
            return f"All steps done. The report comes next; another run: {again}{more}"
        return None

    @property
    def stopped_last(self) -> StepState | None:
        """A run outside the main flow (Server, Interactive) stopped by Ctrl-C or a failure after every main-flow
        step last ended: the run named re-running it as it stopped, so status names the same command."""
        stopped = [s for s in self.other_runs if s.state in ("interrupted", "failed") and s.resume and s.finished]
        if not stopped:
            return None
        last = max(stopped, key=lambda s: s.finished or "")
        main = [s.finished for s in self.states if s.finished]
        return last if not main or (last.finished or "") >= max(main) else None  # ledger times are to the second

    @property
    def next_command(self) -> str:
        if self.recipe is None and self.no_recipe_command:
            return self.no_recipe_command
        nxt = self.next_step
        if self.stopped_last is not None:
            return self.stopped_last.resume or ""
        if nxt is None:
            if self.run_dir:
                return step_command("report", self.recipe, self.run_dir, self.workspace_flag)
            return step_command("run-offline", self.recipe, workspace=self.workspace_flag)
        if nxt.resume:
            return nxt.resume
        return step_command(nxt.step, self.recipe, self.run_dir, self.workspace_flag)

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "recipe": self.recipe.name if self.recipe else None,
            "recipe_hash": self.recipe.hash() if self.recipe else None,
            "recipe_reason": self.recipe_reason,
            "steps": [s.to_json() for s in self.states],
            "other_runs": [s.to_json() for s in self.other_runs],
            "run_dir": self.run_dir,
            "hint": self.hint,
            "next_command": self.next_command,
        }


def other_run_steps(ledger: Ledger) -> list[str]:
    """Runs outside the main flow (Server, accuracy, TEST06), so status shows them, interrupted ones too."""
    return sorted(name for name in ledger.steps if name.startswith("run-") and name not in STEPS)


def build_status(
    ws: Workspace, ledger: Ledger, recipe: Recipe | None, reason: str, workspace_flag: str | None = None
) -> StatusReport:
    report = StatusReport(str(ws.root), recipe, reason, run_dir=run_dir_of(ledger), workspace_flag=workspace_flag)
    for i, step in enumerate(STEPS):
        report.states.append(step_state(step, ledger, recipe, list(STEPS[:i])))
    for step in other_run_steps(ledger):
        report.other_runs.append(step_state(step, ledger, recipe, ["setup", "build-engine"]))
    report.engines = engines_to_build(ledger, recipe)
    return report


def record_verify(ws: Workspace, folder: Path, recipe: Recipe, verdict: str, exit_code: int) -> bool:
    """`repro verify` of this workspace's Offline run marks the verify step done (with its verdict), so status moves
    on to the report; verifying any other folder leaves the ledger alone. True when it recorded."""
    if not ws.ledger_path.exists():
        return False
    ledger = Ledger.load(ws.ledger_path)
    run_dir = run_dir_of(ledger)
    if run_dir is None:
        return False
    target, folder = Path(run_dir).resolve(), Path(folder).resolve()
    if folder != target and target not in folder.parents:
        return False
    ledger.start("verify", recipe.hash(), recipe=recipe.name, recipe_hash=recipe.hash(), run_dir=run_dir)
    ledger.finish("verify", verdict=verdict, exit_code=exit_code)
    return True


def record_resume(ws: Workspace, command: str, step: str | None = None) -> None:
    """After Ctrl-C: the command that resumes, kept on the interrupted step (`step`, else the latest interrupted
    one), so `repro status` names the same command the run or the guided flow printed as it stopped."""
    if not ws.ledger_path.exists():
        return
    from repro.core.errors import LedgerError

    try:
        ledger = Ledger.load(ws.ledger_path)
    except LedgerError:
        return
    stopped = [(r.started or "", name) for name, r in ledger.steps.items() if r.status in ("interrupted", "failed")]
    name = step if step is not None else (max(stopped)[1] if stopped else None)
    rec = ledger.get(name) if name else None
    if rec is None or rec.status not in ("interrupted", "failed"):
        return
    rec.details["resume"] = command
    ledger.save()


def load_ledger_fresh_if_corrupt(ws: Workspace) -> tuple[Ledger, str | None]:
    """Status is where a corrupt ledger is kept aside and a fresh one started, with a note saying so."""
    from repro.core.errors import LedgerError

    try:
        return Ledger.load(ws.ledger_path), None
    except LedgerError as exc:
        if "newer repro" in exc.message:
            raise
        return Ledger(path=ws.ledger_path), exc.message


def run_status(
    explicit_recipe: str | None, ws: Workspace, workspace_flag: str | None = None
) -> tuple[StatusReport, str | None]:
    from repro.core.errors import ReproError
    from repro.core.systems import resolve_recipe

    ledger, note = load_ledger_fresh_if_corrupt(ws)
    recipe: Recipe | None
    fallback = None
    try:
        recipe, reason = resolve_recipe(explicit_recipe, ws)
    except ReproError as exc:
        if explicit_recipe:
            raise
        recipe, reason, fallback = None, exc.message, exc.next_command
    report = build_status(ws, ledger, recipe, reason, workspace_flag)
    if fallback:
        keep = workspace_flag is not None and fallback.startswith("repro run")
        report.no_recipe_command = fallback + (f" --workspace {shlex.quote(workspace_flag or '')}" if keep else "")
    return report, note
