"""`repro verify` and `repro aggregate` (issues #2, #13)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from repro.ui.options import GpusOpt, JsonOpt, PricePerHourOpt, RecipeOpt, ResultDirsArg, WorkspaceOpt

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
    from repro.run.settings import SCENARIOS

    for name in SCENARIOS:
        if name.lower() == value.lower():
            return name
    raise InputError(f"--scenario {value!r}: use {', '.join(SCENARIOS)}.", "`repro verify --help`")


def verify(
    result_dirs: ResultDirsArg,
    recipe: RecipeOpt = None,
    gpus: GpusOpt = None,
    scenario: ScenarioOpt = None,
    json: JsonOpt = False,
    against: AgainstOpt = None,
    workspace: WorkspaceOpt = None,
    price_per_hour: PricePerHourOpt = None,
) -> None:
    """Say per GPU whether a run is inside the published band, and why not (exit 0 PASS, 1 not, 2 unreadable).

    The run is compared with the recipe (named, recorded or detected), else with the published record the shipped
    index recognises it as; validity, duration, accuracy and TEST06 are checked either way. With a recipe, the
    published record the run is (if any) is named too. Several runs of one configuration: each verified, then mean,
    CV and a 95% confidence interval: in band with 95% confidence, out of band, or undecided (run again).
    """
    from repro.core.workspace import Workspace
    from repro.flow.status import record_verify
    from repro.results.compare import verify_against
    from repro.results.verify import verify_dir
    from repro.ui.output import WithNext, emit
    from repro.ui.published import ComparisonView

    if len(result_dirs) > 1:
        _series(result_dirs, recipe, gpus, _scenario(scenario), json, against)
    result_dir = result_dirs[0]
    if against:
        result = verify_against(result_dir, against, gpus=gpus, scenario=_scenario(scenario))
        emit(ComparisonView(result), json)
        raise typer.Exit(result.exit_code)
    verdict = verify_dir(result_dir, recipe=recipe, gpus=gpus, scenario=_scenario(scenario))
    stopped = InterruptedRun.of(verdict)
    if stopped is not None:  # partial logs: say so once, judge nothing else, point at the same run again
        emit(stopped, json)
        raise typer.Exit(verdict.exit_code)
    if verdict.recipe is not None:
        from repro.flow.status import step_command
        from repro.ui.options import workspace_flag

        record_verify(Workspace.open(workspace), result_dir, verdict.recipe, verdict.status, verdict.exit_code)
        # word for word what `repro status`, the run and the guided flow name next
        then = step_command("report", verdict.recipe, str(result_dir), workspace_flag(workspace))
    else:  # judged against its own published record: a report needs a recipe, the record is what to read next
        assert verdict.record is not None
        then = shlex.join(["repro", "published", "show", verdict.record.row.ref])
    if verdict.accuracy_command is not None:  # only the accuracy run is missing: the command that writes it
        then = verdict.accuracy_command
    missing = None
    if verdict.run.detail_path is None:  # no detail log, no PASS: verify again once it is copied in
        then = shlex.join(["repro", "verify", str(result_dir)])
        missing = f"copy the run's mlperf_log_detail.txt beside {verdict.run.summary_path or verdict.run.folder}"
    elif verdict.accuracy_command is not None:
        from repro.results.checks import expected_accuracy_txt

        where = expected_accuracy_txt(verdict.run).parent
        missing = f"copy the result's accuracy.txt and mlperf_log_accuracy.json into {where}"
    after, prose = next_after_verify(then, result_dir, verdict, missing)
    hints = " ".join(filter(None, (prose, labelled_exit(verdict))))
    emit(WithNext(_priced(verdict, price_per_hour), after, hint=hints or None), json)
    raise typer.Exit(verdict.exit_code)


def next_after_verify(then: str | None, result_dir: Path, verdict: Any, missing: str | None) -> tuple[str | None, str]:
    """(the Next command, prose): never the verify just run. What only copying files can fix (a published result's
    accuracy or detail log) is said in words, with the published record to fetch them from as the command."""
    try:
        argv = shlex.split(then or "")
    except ValueError:
        argv = []
    target = next((a for a in argv[2:] if not a.startswith("-")), None) if argv[:2] == ["repro", "verify"] else None
    if target is None or not _same_folder(Path(target), Path(result_dir)):
        return then, ""
    what = missing or "copy the missing files into the folder"
    if verdict.record is not None:
        show = shlex.join(["repro", "published", "show", verdict.record.row.ref])
        return show, f"{what[:1].upper()}{what[1:]} (the published record below names its source), then verify again."
    return None, f"{what[:1].upper()}{what[1:]}, then verify again."


def _same_folder(a: Path, b: Path) -> bool:
    """One result: the same folder, or one inside the other (the result folder and its performance/run_1)."""
    ra, rb = a.resolve(), b.resolve()
    return ra == rb or rb in ra.parents or ra in rb.parents


def labelled_exit(verdict: Any) -> str | None:
    """Why a demo, smoke or rehearsal run exits 1 although nothing failed: said where the exit code is seen."""
    label = verdict.run.label or ("demo" if verdict.recipe is not None and verdict.recipe.demo else None)
    if not label or verdict.exit_code != 1:
        return None
    return (
        f"A {label} run is never a reproduction, so verify exits 1 for it: exit 0 is kept for a run that "
        "reproduces its published result (README, exit codes)."
    )


def _series(
    dirs: list[Path], recipe: str | None, gpus: int | None, scenario: str | None, json: bool, against: list[str] | None
) -> None:
    """Several runs of one configuration: each verified, then mean, CV and a 95% interval against the band."""
    from repro.core.errors import InputError
    from repro.results.series import verify_series
    from repro.ui.output import emit

    if against:
        raise InputError("--against compares one run; repeated runs are judged against the band.", "`repro verify RUN`")
    result = verify_series(dirs, recipe=recipe, gpus=gpus, scenario=scenario)
    emit(result, json)
    raise typer.Exit(result.exit_code)


def _priced(verdict: Any, price_per_hour: float | None) -> Any:
    """The verdict with the cost of its tokens (report/cost.py) beside it, in the text and in --json."""
    from repro.report.cost import token_cost
    from repro.report.explain import dataset_input_tokens
    from repro.ui.results import PricedVerdict

    inputs = dataset_input_tokens(verdict.recipe, verdict.run)
    return PricedVerdict(verdict, token_cost([verdict.run], verdict.recipe, price_per_hour, inputs))


class InterruptedRun:
    """A run stopped by a signal (or that died): its LoadGen errors and short duration are what stopping does, so
    the one thing worth saying is that, and the command that runs it again."""

    def __init__(self, verdict: Any, why: str, again: str | None):
        self.verdict, self.why, self.next_command = verdict, why, again

    @classmethod
    def of(cls, verdict: Any) -> InterruptedRun | None:
        info = verdict.run.run_info
        if info is None or not info.stopped_early:
            return None
        signal = f" by {info.signal}" if info.signal else ""
        what = "was stopped" if info.status == "interrupted" else "did not finish"
        why = f"{verdict.run.folder}: this run {what}{signal}"
        why += "; its logs are partial, so nothing else in them is judged."
        again = shlex.join(info.command) if info.command else None
        return cls(verdict, why, again)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.verdict.status,
            "reproduction": False,
            "interrupted": True,
            "reasons": [self.why],
            "run": str(self.verdict.run.folder),
            "next_command": self.next_command,
        }

    def __rich__(self) -> Any:
        from rich.text import Text

        from repro.ui.wrap import Prose

        return Prose(Text(f"Verdict: {self.verdict.status}. ", style="bold") + Text(self.why))


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
    from repro.core.fsutil import check_output, write_output
    from repro.results.aggregate import aggregate as build_rack
    from repro.ui.output import emit

    if markdown:
        check_output(markdown, dirs, "markdown", "repro aggregate")
    report = build_rack(dirs, recipe=recipe, gpus=gpus, expect=expect, scenario=_scenario(scenario) or "Offline")
    if markdown:
        read = [
            p
            for r in report.rows
            if r.verdict is not None
            for p in (r.verdict.run.summary_path, r.verdict.run.detail_path, r.verdict.run.system_path)
            if p is not None
        ]
        check_output(markdown, dirs, "markdown", "repro aggregate", read=read)
        write_output(markdown, report.to_markdown().encode(), option="markdown")
    if str(markdown) != "-":  # `--markdown -`: stdout holds the table alone
        emit(report, json)
    raise typer.Exit(report.exit_code)
