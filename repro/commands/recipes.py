"""`repro recipes list|show|validate`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from repro.ui.options import JsonOpt


def list_recipes(json: JsonOpt = False) -> None:
    """List the recipes: system, GPUs, precision, backend and published tokens/s per GPU."""
    from repro.core import recipes as rec
    from repro.ui.output import emit
    from repro.ui.views import RecipeList

    emit(RecipeList(list(rec.all_recipes())), json)


def show(name: Annotated[str, typer.Argument(help="Recipe name or path.")], json: JsonOpt = False) -> None:
    """Show every field of one recipe."""
    from repro.core import recipes as rec
    from repro.ui.output import emit
    from repro.ui.views import RecipeShow

    emit(RecipeShow(rec.get_recipe(name)), json)


def validate(
    paths: Annotated[list[Path] | None, typer.Argument(help="Recipe files; all shipped recipes when omitted.")] = None,
    json: JsonOpt = False,
) -> None:
    """Check recipe files against the schema; exit 2 naming the first bad field of each."""
    from repro.core import recipes as rec
    from repro.ui.output import emit
    from repro.ui.views import ValidationReport

    report = ValidationReport.check(paths or sorted(rec.recipes_dir().glob("*.yaml")))
    emit(report, json)
    if not report.ok:
        raise typer.Exit(2)
