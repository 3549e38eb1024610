"""`repro explain` (issue #27): why a run is off the published figure, ranked causes with evidence."""

from __future__ import annotations

from typing import Annotated

import typer

from repro.ui.options import JsonOpt, RecipeOpt, ResultDirArg

ExplainAgainstOpt = Annotated[
    str | None,
    typer.Option(
        "--against",
        help="What to compare with: a published result (5.1-0070, a key; see `repro published`) or another run "
        "folder (a rack's fastest VM). Default: the recipe's published result.",
    ),
]


def explain(
    result_dir: ResultDirArg, against: ExplainAgainstOpt = None, recipe: RecipeOpt = None, json: JsonOpt = False
) -> None:
    """Ranked causes, with evidence, for the gap between a run and a published result (or another run).

    A folder of several VM runs explains its slowest VM against its fastest, with every VM side by side."""
    from repro.report.explain import explain as build
    from repro.ui.output import emit

    emit(build(result_dir, against, recipe), json)
