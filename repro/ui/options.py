"""Typer options shared by several commands, defined once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object for machines instead of tables.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print exactly what would be done, change nothing.")]
RecipeOpt = Annotated[
    str | None,
    typer.Option(
        "--recipe", "-r", help="Recipe name (see `repro recipes list`) or path to a recipe YAML; detected when omitted."
    ),
]
WorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace", "-w", help="State directory (default: $REPRO_HOME or ./repro-workspace).", envvar="REPRO_HOME"
    ),
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before expensive steps.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Redo the step even if the ledger says it is up to date.")]
GpusOpt = Annotated[
    int | None,
    typer.Option(
        "--gpus",
        min=1,
        help="Accelerators the run used in all (overrides the system JSON, run.json and recipe, with a note).",
    ),
]
ResultDirArg = Annotated[
    Path, typer.Argument(help="A LoadGen result folder (searched recursively for mlperf_log_summary.txt).")
]
