"""`repro rehearse`: try a GPU recipe's flow on a cheap VM before renting the GPU one (issue 23)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from repro.ui.options import DryRunOpt, JsonOpt, WorkspaceOpt

RehearseRecipeOpt = Annotated[
    str, typer.Option("--recipe", "-r", help="The GPU recipe to rehearse (see `repro recipes list`).")
]
TimeScaleOpt = Annotated[
    float,
    typer.Option(
        "--time-scale",
        help="Time here per second of the real machine (default 1/400: 2,400 s -> 6 s): LoadGen's durations, and at "
        "--pace published every deadline, interval and the server twin's clock too.",
    ),
]
PaceOpt = Annotated[
    str,
    typer.Option(
        "--pace",
        help="fixed: stand-in servers at a fixed speed (a quick look at the flow); published: the recipe's server "
        "twin, calibrated from its published logs, at the published run's pace (fails where the real run would).",
    ),
]
RunStepOpt = Annotated[
    str | None, typer.Option("--run-step", hidden=True, help="Run one rehearsal step described by FILE (internal).")
]
NodesOpt = Annotated[
    int,
    typer.Option(
        "--nodes", help="Rehearse the rack: N nodes through the local Slurm, each starting its own servers (1-8)."
    ),
]
RackNodeOpt = Annotated[
    str | None,
    typer.Option(
        "--rack-node", hidden=True, help="Run as one node of the rehearsal rack in folder DIR (a Slurm task)."
    ),
]
RackIntoOpt = Annotated[
    str | None,
    typer.Option(
        "--into", hidden=True, help="With --rack-node: the folder this node's run goes into (RACK_DIR/vm-NN)."
    ),
]
SystemNodeOpt = Annotated[
    str | None,
    typer.Option(
        "--system-node", hidden=True, help="Run the batch step of a system rehearsal's job in rack folder DIR."
    ),
]
SystemScenarioOpt = Annotated[
    str | None, typer.Option("--scenario", hidden=True, help="With --system-node: the scenario the job runs.")
]
ServerImageOpt = Annotated[str | None, typer.Option("--server-image", hidden=True, help="The rack's server image.")]
ImageSourceOpt = Annotated[
    str | None,
    typer.Option(
        "--image-source",
        help="With --nodes: how the image reaches the nodes (archive, registry or enroot), as for `repro run "
        "--launcher slurm`.",
    ),
]


def rehearse(
    recipe: RehearseRecipeOpt = "nd-gb300-v6",
    time_scale: TimeScaleOpt = 1 / 400,
    pace: PaceOpt = "fixed",
    nodes: NodesOpt = 1,
    workspace: WorkspaceOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
    rack_node: RackNodeOpt = None,
    server_image: ServerImageOpt = None,
    image_source: ImageSourceOpt = None,
    into: RackIntoOpt = None,
    run_step: RunStepOpt = None,
    system_node: SystemNodeOpt = None,
    scenario: SystemScenarioOpt = None,
) -> None:
    """Rehearse a GPU recipe here: doctor, setup, build-engine on a stand-in TensorRT-LLM base, Offline and Server
    runs through its servers, verify and report; with --nodes, the rack through Slurm. Labelled a rehearsal
    everywhere; never a reproduction (exit 0 when every run is VALID and nothing is left behind)."""
    from repro.core.errors import InputError
    from repro.core.workspace import Workspace
    from repro.rehearse import rehearsal
    from repro.ui.output import emit, show_err
    from repro.ui.progress_bar import RunBar

    if run_step is not None:  # one step of a rehearsal, in its own process (rehearse/step_process.py)
        import json as json_mod
        import sys

        from repro.rehearse.step_process import execute_state

        row = execute_state(Path(run_step), bar=RunBar if sys.stderr.isatty() else None)
        typer.echo(json_mod.dumps(row, default=str))
        raise typer.Exit(0 if row.get("validity") != "ERROR" else 1)
    if not 0 < time_scale <= 1:
        raise InputError(f"--time-scale must be in (0, 1] (got {time_scale:g}).", "repro rehearse --time-scale 0.0025")
    if system_node is not None:
        from repro.rehearse.system import system_node as run_system_node

        if scenario not in ("Offline", "Server"):
            raise InputError(
                "--system-node needs --scenario Offline or Server (the job passes it).", "repro rehearse --nodes 4"
            )
        result = run_system_node(recipe, Path(system_node), scenario, time_scale, Workspace.open(workspace).root)
    elif rack_node is not None:
        if not server_image or not into:
            raise InputError(
                "--rack-node needs --server-image and --into (the rack passes them).", "repro rehearse --nodes 2"
            )
        ws = Workspace.open(workspace)
        result = rehearsal.rack_node(
            recipe, ws.root, image=server_image, rack=rack_node, time_scale=time_scale, into=Path(into)
        )
    else:
        root = rehearsal.rehearsal_root(Workspace.open(workspace), recipe)
        if dry_run:
            result = rehearsal.plan(
                recipe, root, time_scale=time_scale, pace=pace, nodes=nodes, image_source=image_source
            )
        else:
            say = None if json else show_err
            result = rehearsal.rehearse(
                recipe,
                root,
                time_scale=time_scale,
                pace=pace,
                nodes=nodes,
                on_step=say,
                image_source=image_source,
                bar=RunBar,
            )
    emit(result, json)
    raise typer.Exit(result.exit_code)
