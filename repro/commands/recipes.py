"""`repro recipes list|show|validate`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from repro.core import recipes as rec
from repro.ui.options import JsonOpt
from repro.ui.output import emit
from repro.ui.views import RecipeList, RecipeShow, ValidationReport


def list_recipes(json: JsonOpt = False) -> None:
    """List the recipes: system, GPUs, precision, backend and published tokens/s per GPU."""
    emit(RecipeList(list(rec.all_recipes())), json)


def show(name: Annotated[str, typer.Argument(help="Recipe name or path.")], json: JsonOpt = False) -> None:
    """Show every field of one recipe."""
    emit(RecipeShow(rec.get_recipe(name)), json)


def validate(
    paths: Annotated[list[Path] | None, typer.Argument(help="Recipe files; all shipped recipes when omitted.")] = None,
    json: JsonOpt = False,
) -> None:
    """Check recipe files against the schema; exit 2 naming the first bad field of each."""
    report = ValidationReport.check(paths or sorted(rec.recipes_dir().glob("*.yaml")))
    emit(report, json)
    if not report.ok:
        raise typer.Exit(2)
