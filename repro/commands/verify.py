"""`repro verify` and `repro aggregate` (issue #2)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from repro.results.aggregate import aggregate as build_rack
from repro.core.fsutil import atomic_write_text
from repro.ui.options import GpusOpt, JsonOpt, RecipeOpt, ResultDirArg
from repro.ui.output import emit
from repro.results.verify import verify_dir


def verify(result_dir: ResultDirArg, recipe: RecipeOpt = None, gpus: GpusOpt = None, json: JsonOpt = False) -> None:
    """Say per GPU whether a run is inside the published band, and why not (exit 0 PASS, 1 not, 2 unreadable)."""
    verdict = verify_dir(result_dir, recipe=recipe, gpus=gpus)
    emit(verdict, json)
    raise typer.Exit(verdict.exit_code)


def aggregate(
    dirs: Annotated[list[Path], typer.Argument(help="One result folder per VM, or a folder holding per-VM folders.")],
    recipe: RecipeOpt = None,
    gpus: GpusOpt = None,
    expect: Annotated[Optional[int], typer.Option("--expect", min=1, help="VMs the rack should have (18 for an NVL72); the rest are reported missing.")] = None,
    markdown: Annotated[Optional[Path], typer.Option("--markdown", help="Also write the rack table as Markdown to FILE.")] = None,
    json: JsonOpt = False,
) -> None:
    """The rack table over per-VM runs: total, max, min, mean, median, spread, and each VM's verdict."""
    report = build_rack(dirs, recipe=recipe, gpus=gpus, expect=expect)
    if markdown:
        atomic_write_text(markdown, report.to_markdown())
    emit(report, json)
    raise typer.Exit(report.exit_code)
