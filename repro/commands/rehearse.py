"""`repro rehearse`: try a GPU recipe's flow on a cheap VM before renting the GPU one (issue 23)."""

from __future__ import annotations

from typing import Annotated

import typer

from repro.ui.options import DryRunOpt, JsonOpt, WorkspaceOpt

RehearseRecipeOpt = Annotated[
    str, typer.Option("--recipe", "-r", help="The GPU recipe to rehearse (see `repro recipes list`).")
]
TimeScaleOpt = Annotated[
    float,
    typer.Option("--time-scale", help="LoadGen durations and query counts x this (default 1/400: 2,400 s -> 6 s)."),
]


def rehearse(
    recipe: RehearseRecipeOpt = "nd-gb300-v6",
    time_scale: TimeScaleOpt = 1 / 400,
    workspace: WorkspaceOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Rehearse a GPU recipe here: its image on a stand-in TensorRT-LLM base, its servers, Offline and Server runs,
    verify. Labelled a rehearsal everywhere; never a reproduction (exit 0 when both runs are VALID)."""
    from repro.core.errors import InputError
    from repro.core.workspace import Workspace
    from repro.rehearse import rehearsal
    from repro.ui.output import emit, show_err

    if not 0 < time_scale <= 1:
        raise InputError(f"--time-scale must be in (0, 1] (got {time_scale:g}).", "repro rehearse --time-scale 0.0025")
    root = rehearsal.rehearsal_root(Workspace.open(workspace), recipe)
    if dry_run:
        result = rehearsal.plan(recipe, root, time_scale=time_scale)
    else:
        result = rehearsal.rehearse(recipe, root, time_scale=time_scale, on_step=None if json else show_err)
    emit(result, json)
    raise typer.Exit(result.exit_code)
