"""Typer options shared by several commands, defined once."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from repro.core.recipes import Recipe
    from repro.core.workspace import Workspace

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
ResultDirsArg = Annotated[
    list[Path],
    typer.Argument(
        help="A LoadGen result folder (searched recursively for mlperf_log_summary.txt); several runs of one "
        "configuration give mean, spread and a 95% confidence interval."
    ),
]


def finite_in(low: float, high: float, *, above: bool = True) -> Callable[[float | None], float | None]:
    """A float option's check: finite and in (low, high]; Click reads `nan` and `1e400` as floats, so it must."""

    def check(value: float | None) -> float | None:
        if value is None:
            return None
        sign = ">" if above else ">="
        if not math.isfinite(value) or value > high or value < low or (above and value == low):
            raise typer.BadParameter(f"must be a finite number {sign} {low:g} and <= {high:g} (got {value!r}).")
        return value

    return check


def _price(value: float | None) -> float | None:
    """--price-per-hour: refused when 0, negative, NaN or infinite (core/prices.check_price, exit 2, one line)."""
    if value is None:
        return None
    from repro.core.errors import ReproError
    from repro.core.prices import check_price

    try:
        return check_price(value)
    except ReproError as exc:
        raise typer.BadParameter(exc.message.split(": ", 1)[-1].rstrip(".") + f" (got {value!r}).") from None


PricePerHourOpt = Annotated[
    float | None,
    typer.Option(
        "--price-per-hour",
        callback=_price,
        help="USD per VM-hour for the cost of a token (default: the shipped Azure list price for the VM size, "
        "when one is known; none is guessed).",
    ),
]


def endpoint_urls(values: list[str] | None) -> list[str] | None:
    """Each --endpoint is an http(s) URL with a host and a port in 1-65535, checked before any request is made."""
    from urllib.parse import urlsplit

    from repro.core.secrets import redact_url

    for url in values or []:
        shown = redact_url(url)
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise typer.BadParameter(f"{shown!r} is not a URL ({exc}).") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise typer.BadParameter(f"{shown!r} must be http://HOST[:PORT] or https://HOST[:PORT].")
        if port == 0:
            raise typer.BadParameter(f"{shown!r}: port 0 is not a port a server listens on.")
    return values


def recipe_flag(recipe: str | None, ws: Workspace) -> Recipe:
    """--recipe resolved once for a step command; says why when a detected GPU's recipe outranks the ledger's demo."""
    from repro.core.systems import DEMO_OUTRANKED, resolve_recipe
    from repro.ui.output import info

    chosen, why = resolve_recipe(recipe, ws)
    if DEMO_OUTRANKED in why:
        info(f"Recipe {chosen.name}: {why}.")
    return chosen


def workspace_flag(workspace: Path | None) -> str | None:
    """--workspace as the user gave it, so hints keep it; None when it only came from $REPRO_HOME."""
    if workspace is None or str(workspace) == os.environ.get("REPRO_HOME"):
        return None
    return str(workspace)


BenchmarkOpt = Annotated[
    str | None,
    typer.Option(
        "--benchmark",
        help="MLPerf benchmark: llama2-70b-99 (or 99), llama2-70b-99.9 (or 99.9), llama3.1-405b (or 405b), "
        "deepseek-r1, or any other benchmark file's name; a model's prefix covers its accuracy targets (llama2-70b: "
        "both).",
    ),
]
