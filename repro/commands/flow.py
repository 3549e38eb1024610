"""`repro doctor`, `repro status` and the guided flow (issue #6)."""

from __future__ import annotations

from typing import Annotated

import typer

from repro.ui.options import DryRunOpt, JsonOpt, RecipeOpt, WorkspaceOpt, YesOpt, workspace_flag

ProbeOpt = Annotated[
    bool,
    typer.Option(
        "--probe",
        help="Also measure every GPU (FP8/BF16 GEMM, HBM copy; about 30 s, needs torch) and name a slow one.",
    ),
]


def doctor(
    recipe: RecipeOpt = None, workspace: WorkspaceOpt = None, probe: ProbeOpt = False, json: JsonOpt = False
) -> None:
    """Check GPUs, driver, Docker, disk, token and LoadGen before hours are spent (`--probe`: measure the GPUs)."""
    from repro.core.workspace import Workspace
    from repro.flow.doctor import run_doctor
    from repro.ui.output import emit

    report = run_doctor(recipe, Workspace.open(workspace), probe=probe)
    emit(report, json)
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def status(recipe: RecipeOpt = None, workspace: WorkspaceOpt = None, json: JsonOpt = False) -> None:
    """Show the step ledger: done, stale, failed, to do, and the next command."""
    from repro.core.workspace import Workspace
    from repro.flow.status import run_status
    from repro.ui.output import emit, info

    report, note = run_status(recipe, Workspace.open(workspace), workspace_flag(workspace))
    if note:
        info(f"note: {note} A fresh ledger starts with the next step.")
    emit(report, json)


def guide(
    recipe: RecipeOpt = None,
    workspace: WorkspaceOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Walk through doctor -> setup -> build-engine -> run offline -> verify, resuming from the ledger."""
    import sys

    from repro.core.recipes import get_recipe
    from repro.core.systems import NoRecipeForMachine, resolve_recipe
    from repro.core.workspace import Workspace
    from repro.flow.guide import run_guide
    from repro.ui.output import confirm, emit, info, show, show_err
    from repro.ui.progress_bar import RunBar

    ws = Workspace.open(workspace)
    try:
        chosen, reason = resolve_recipe(recipe, ws)
    except NoRecipeForMachine as exc:
        # The front door: say what was found, and on a machine without a GPU offer the CPU demo right here.
        interactive = sys.stdin.isatty() and not yes and not json
        if exc.gpus or not interactive:
            raise
        info(f"No recipe matches this machine: {exc.why}.")
        if not confirm("Without a GPU, the CPU demo runs the whole flow (never a reproduction). Run it now?"):
            raise
        chosen, reason = get_recipe("demo"), "the CPU demo, chosen at the prompt: no GPU found"
    # --json: the narrative goes to stderr so stdout holds only the JSON; it never implies --yes.
    result = run_guide(
        chosen,
        reason,
        ws,
        yes=yes,
        dry_run=dry_run,
        ask=confirm,
        show=show_err if json else show,
        run_bar=RunBar,
        workspace_flag=workspace_flag(workspace),
    )
    emit(result, json)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
