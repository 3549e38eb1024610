"""`repro verify` and `repro aggregate` (issues #2, #13)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from repro.ui.options import GpusOpt, JsonOpt, RecipeOpt, ResultDirArg, WorkspaceOpt

if TYPE_CHECKING:  # the results stack is imported by the command that runs, not by `repro --help`
    from repro.results.compare import Comparison
    from repro.results.logs import LoadGenRun

AgainstOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--against",
        help="Compare with this published result instead of the recipe; repeat for several (the run is ranked "
        "among them). An ID (5.1-0008, narrowed to the run's scenario and benchmark) or a key such as "
        "v4.1/closed/NVIDIA/DGX-H100_H100-SXM-80GBx8_TRT; see `repro published`.",
    ),
]
ScenarioOpt = Annotated[
    str | None,
    typer.Option(
        "--scenario", help="Offline, Server or Interactive: which run to verify when the folder holds several."
    ),
]


def _scenario(value: str | None) -> str | None:
    if value is None:
        return None
    from repro.core.errors import InputError
    from repro.results.rules import SCENARIOS

    for name in SCENARIOS:
        if name.lower() == value.lower():
            return name
    raise InputError(f"--scenario {value!r}: use {', '.join(SCENARIOS)}.", "`repro verify --help`")


def verify(
    result_dir: ResultDirArg,
    recipe: RecipeOpt = None,
    gpus: GpusOpt = None,
    scenario: ScenarioOpt = None,
    json: JsonOpt = False,
    against: AgainstOpt = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Say per GPU whether a run is inside the published band, and why not (exit 0 PASS, 1 not, 2 unreadable).

    A published bundle (its system JSON and path, or its exact tokens/s, match the shipped index) is also
    compared with its own published record, with or without a recipe.
    """
    from repro.core.workspace import Workspace
    from repro.flow.status import record_verify
    from repro.results.compare import recognise, verify_against
    from repro.results.verify import NoRecipeFor, verify_dir
    from repro.ui.output import WithNext, emit
    from repro.ui.published import ComparisonView, VerdictWithRecord

    if against:
        result = verify_against(result_dir, against, gpus=gpus)
        emit(ComparisonView(result), json)
        raise typer.Exit(result.exit_code)
    try:
        verdict = verify_dir(result_dir, recipe=recipe, gpus=gpus, scenario=_scenario(scenario))
    except NoRecipeFor as exc:
        own = None if recipe else _recognised(result_dir, gpus, _scenario(scenario), exc.runs)
        if own is None:
            raise
        emit(ComparisonView(own, "repro verify: published record"), json)
        raise typer.Exit(own.exit_code) from None
    record = None if recipe else recognise(verdict.run, gpus)
    record_verify(Workspace.open(workspace), result_dir, verdict.recipe, verdict.status, verdict.exit_code)
    report = shlex.join(["repro", "report", str(result_dir), "--html", "report.html"])
    emit(WithNext(VerdictWithRecord(verdict, record) if record else verdict, report), json)
    raise typer.Exit(verdict.exit_code)


def _recognised(
    result_dir: Path, gpus: int | None, scenario: str | None, parsed: list[LoadGenRun] | None = None
) -> Comparison | None:
    """The run against its own published record when no recipe fits (e.g. another submitter's bundle)."""
    from repro.core.errors import InputError
    from repro.results.compare import pick_perf_run, recognise

    try:
        return recognise(pick_perf_run(result_dir, scenario, parsed), gpus)
    except InputError:
        return None


def aggregate(
    dirs: Annotated[list[Path], typer.Argument(help="One result folder per VM, or a folder holding per-VM folders.")],
    recipe: RecipeOpt = None,
    gpus: GpusOpt = None,
    expect: Annotated[
        int | None,
        typer.Option(
            "--expect", min=1, help="VMs the rack should have (18 for an NVL72); the rest are reported missing."
        ),
    ] = None,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the rack table as Markdown to FILE.")
    ] = None,
    scenario: ScenarioOpt = None,
    json: JsonOpt = False,
) -> None:
    """The rack table over per-VM runs: total, max, min, mean, median, spread, and each VM's verdict."""
    from repro.core.fsutil import atomic_write_text, check_output
    from repro.results.aggregate import aggregate as build_rack
    from repro.ui.output import emit

    if markdown:
        check_output(markdown, dirs, "markdown", "repro aggregate")
    report = build_rack(dirs, recipe=recipe, gpus=gpus, expect=expect, scenario=_scenario(scenario) or "Offline")
    if markdown:
        atomic_write_text(markdown, report.to_markdown())
    emit(report, json)
    raise typer.Exit(report.exit_code)
