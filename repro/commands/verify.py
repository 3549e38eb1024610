"""`repro verify` and `repro aggregate` (issues #2, #13)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from repro.core.errors import InputError
from repro.core.fsutil import atomic_write_text
from repro.results.aggregate import aggregate as build_rack
from repro.results.rules import SCENARIOS
from repro.results.verify import verify_dir
from repro.ui.options import GpusOpt, JsonOpt, RecipeOpt, ResultDirArg
from repro.ui.output import emit
from repro.ui.results import RackView, VerdictView

ScenarioOpt = Annotated[Optional[str], typer.Option(
    "--scenario", help="Offline, Server or Interactive: which run to verify when the folder holds several.")]


def _scenario(value: Optional[str]) -> Optional[str]:
    if value is None:
        return None
    for name in SCENARIOS:
        if name.lower() == value.lower():
            return name
    raise InputError(f"--scenario {value!r}: use {', '.join(SCENARIOS)}.", "`repro verify --help`")


def verify(result_dir: ResultDirArg, recipe: RecipeOpt = None, gpus: GpusOpt = None, scenario: ScenarioOpt = None,
           json: JsonOpt = False) -> None:
    """Say per GPU whether a run is inside the published band, and why not (exit 0 PASS, 1 not, 2 unreadable)."""
    verdict = verify_dir(result_dir, recipe=recipe, gpus=gpus, scenario=_scenario(scenario))
    emit(VerdictView(verdict), json)
    raise typer.Exit(verdict.exit_code)


def aggregate(
    dirs: Annotated[list[Path], typer.Argument(help="One result folder per VM, or a folder holding per-VM folders.")],
    recipe: RecipeOpt = None,
    gpus: GpusOpt = None,
    expect: Annotated[Optional[int], typer.Option("--expect", min=1, help="VMs the rack should have (18 for an NVL72); the rest are reported missing.")] = None,
    markdown: Annotated[Optional[Path], typer.Option("--markdown", help="Also write the rack table as Markdown to FILE.")] = None,
    scenario: ScenarioOpt = None,
    json: JsonOpt = False,
) -> None:
    """The rack table over per-VM runs: total, max, min, mean, median, spread, and each VM's verdict."""
    report = build_rack(dirs, recipe=recipe, gpus=gpus, expect=expect, scenario=_scenario(scenario) or "Offline")
    if markdown:
        atomic_write_text(markdown, report.to_markdown())
    emit(RackView(report), json)
    raise typer.Exit(report.exit_code)
