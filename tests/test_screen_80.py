"""What a person sees at 80 columns (issue 37 items 2, 4, 5): every table keeps its columns or names what it
dropped, no number is split from its unit, no ISO time is cut, the progress bar keeps >= 20 cells with the
projection on a line of its own, and the rehearsal's scaling line speaks of Server only when Server ran."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from repro.rehearse.result import RehearsalResult, Scaling
from repro.ui.wrap import Prose, Words, atoms

NUMBER_THEN_UNIT = re.compile(r"\d$")
UNIT_FIRST = re.compile(r"^(s|ms|min|GB|MB|%|GPUs?|CPUs?|tokens/s|queries/s)\b")


def render(obj: object, width: int = 80) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, legacy_windows=False).print(obj, crop=False)
    return out.getvalue().splitlines()


def cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]


def assert_no_split_units(lines: list[str]) -> None:
    """No line (or table cell) ends in a number whose unit starts the next line (or the same cell below)."""
    for a, b in zip(lines, lines[1:], strict=False):
        pairs = list(zip(cells(a), cells(b), strict=False)) if "│" in a and "│" in b else [(a.strip(), b.strip())]
        for top, below in pairs:
            assert not (NUMBER_THEN_UNIT.search(top) and UNIT_FIRST.match(below)), (a, b)


def test_a_number_stays_with_its_unit_and_a_command_stays_whole() -> None:
    words = [m.group() for m in atoms("needs ≥ 600 s; recipe 2 s), ran 8 s: repro run offline --recipe demo now")]
    assert "600 s;" in words and "2 s)," in words and "8 s:" in words
    assert "repro run offline --recipe demo" in words
    for width in range(24, 81):
        assert_no_split_units(
            render(Prose("min duration setting 2 s (MLPerf needs ≥ 600 s; recipe 2 s), ran 8 s"), width)
        )


def test_a_table_cell_never_splits_a_number_from_its_unit() -> None:
    detail = "setting 2 s (MLPerf needs ≥ 600 s; recipe 2 s), ran 8 s; 5,845 required < 24,576 (MLPerf closed)"
    for width in range(50, 81):
        t = Table()
        t.add_column("check", no_wrap=True)
        t.add_column("result", no_wrap=True)
        t.add_column("detail")
        t.add_row("min duration", "no", Words(detail))
        lines = render(t, width)
        assert all(len(line) <= width for line in lines), (width, lines)
        assert_no_split_units(lines)
        text = " ".join(c for line in lines if line.startswith("│") for c in cells(line)[2:3] if c)
        assert " ".join(text.split()) == detail


def test_status_keeps_every_column_and_whole_timestamps_at_80() -> None:
    from repro.flow.status import StatusReport, StepState
    from repro.ui.flow import status_report

    stamp = "2026-11-27T11:36:03+00:00"
    report = StatusReport(
        "/home/user/repro-workspace",
        None,
        "demo",
        [
            StepState("setup", "done", "up to date", stamp),
            StepState("build-engine", "not needed", "recipe demo has no engine to build"),
            StepState("run-offline", "interrupted", "interrupted by the user (Ctrl-C) after 600 s", stamp),
            StepState("verify", "to do", "not run yet"),
        ],
    )
    lines = render(status_report(report))
    header = next(line for line in lines if "step" in line and "finished" in line)
    assert cells(header) == ["step", "state", "finished", "why"]
    assert sum(stamp in line for line in lines) == 2, lines
    assert all(len(line) <= 80 for line in lines)
    assert_no_split_units(lines)


def _rehearsal(nodes: int, scenarios: tuple[str, ...]) -> RehearsalResult:
    runs = [
        {
            "scenario": s,
            "node": "vm-01",
            "validity": "VALID",
            "valid": True,
            "verdict": "NOT A REPRODUCTION",
            "label": "rehearsal",
            "samples_per_s": 12.3456,
            "run_dir": f"/tmp/pytest-of-someone/pytest-123/test_rehearsal0/ws/runs/nd-gb200-v6/{s}/20261127-130541",
        }
        for s in scenarios
    ]
    result = RehearsalResult("nd-gb200-v6", Path("/tmp/ws"), Scaling(1 / 400, 0.01, 60.0), "img", runs=runs)
    result.nodes = nodes
    if nodes > 1:
        result.rack = {"rack_dir": "/tmp/ws/racks/r1", "counted": 2, "total_tokens_per_s": 1038.98,
                       "jobs": ["14"], "left_jobs": []}  # fmt: skip
    return result


@pytest.mark.parametrize("width", [80, 100])
def test_the_rehearsal_table_keeps_its_columns_and_every_run_folder_whole(width: int) -> None:
    from repro.ui.rehearse import rehearsal_result

    result = _rehearsal(1, ("Offline", "Server"))
    lines = render(rehearsal_result(result), width)
    header = next(line for line in lines if "scenario" in line)
    assert cells(header) == ["scenario", "node", "LoadGen", "verdict", "samples/s"], lines
    for r in result.runs:
        assert any(line.endswith(r["run_dir"]) for line in lines), lines  # whole, never cut with …
    assert not any("…" in line for line in lines)
    assert "12.35" in "\n".join(lines)
    scaling = next(line for line in lines if line.startswith("scaling:"))
    assert "Server" in scaling


def test_an_offline_only_rack_rehearsal_never_speaks_of_server_and_gives_units() -> None:
    from repro.ui.rehearse import rehearsal_result

    text = "\n".join(render(rehearsal_result(_rehearsal(2, ("Offline", "Offline")))))
    assert "Server" not in text, text
    assert "total 1,038.98 tokens/s [rehearsal]" in " ".join(text.split())
    assert "Slurm job IDs: 14" in text


def test_a_narrow_rehearsal_table_names_what_it_moved() -> None:
    from repro.ui.rehearse import rehearsal_result

    lines = render(rehearsal_result(_rehearsal(1, ("Offline",))), 60)
    headers = [cells(line) for line in lines if "scenario" in line and "┃" in line]
    assert len(headers) >= 2 and {c for h in headers for c in h} >= {"node", "LoadGen", "verdict", "samples/s"}


def test_the_progress_bar_keeps_20_cells_with_the_projection_below() -> None:
    from repro.run.progress import Snapshot
    from repro.run.projection import Projection
    from repro.ui import output
    from repro.ui.progress_bar import RunBar

    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None, force_terminal=False)
    saved = output._consoles.get("err_console")
    output._consoles["err_console"] = console
    try:
        for what in ("LoadGen Offline", "LoadGen Server", "LoadGen Interactive"):
            bar = RunBar(what)
            bar._progress.live.auto_refresh = False
            bar.start()
            proj = Projection(29_123.0, 32.1, 0.25, None)
            bar.show(Snapshot(1_856, 7_360, 1_856 * 250, 16.0, projection=proj))
            frame = [str(r) for r in bar._progress.get_renderables()]
            lines = render(bar._progress.get_renderable(), 80)
            bar.stop()
            row = next(line for line in lines if line.startswith(what))
            bar_cells = row[len(what) + 1 :].split(" 1,856/7,360")[0]  # uncoloured, its empty part is spaces
            assert len(bar_cells) >= 20, (row, frame)
            assert "projected" not in row and any("projected: 29,123" in line for line in lines), lines
            assert all(len(line) <= 80 for line in lines), lines
    finally:
        if saved is not None:
            output._consoles["err_console"] = saved
        else:
            output._consoles.pop("err_console", None)


@pytest.mark.slow
def test_the_demo_is_per_cpu_in_verify_and_report_alike() -> None:
    """Issue 37 item 5: the report called the demo's figure "per GPU" while verify said "per CPU"."""
    import json

    from typer.testing import CliRunner

    from repro.cli import app
    from repro.report.model import build_report
    from repro.ui.report import report as report_view

    run = CliRunner().invoke(app, ["run", "offline", "--recipe", "demo", "--samples", "8", "--json"])
    run_dir = json.loads(run.stdout)["details"]["run_dir"]
    verdict = json.loads(CliRunner().invoke(app, ["verify", run_dir, "--json"]).stdout)
    assert "A demo run is never a reproduction, so verify exits 1" in verdict["hint"]
    r = build_report([Path(run_dir)], "demo")
    assert r.unit == "CPU" and "tokens/s per CPU over 1 VM(s)" in r.headline
    text = "\n".join(render(report_view(r), 120))
    own = text.split("2. ")[1] if "2. " in text else text  # the run's own section, after the published one
    assert "per CPU" in own and "┃ per GPU" not in own


def test_a_report_source_wraps_between_words_and_a_long_path_stays_whole() -> None:
    """A table's footnotes (`[1] repo path`) were no-wrap lines wider than 80 columns: the terminal cut them inside
    a word, `SXM-8` / `0GBx8`. Now they wrap between words; a path longer than the line gets its own, whole."""
    from repro.report.tables import Column, Table
    from repro.ui.fit import fitted

    source = (
        "mlcommons/inference_results_v4.1 closed/NVIDIA/results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99.9/Offline"
    )
    summary = "/tmp/ws/runs/demo/Offline/20261127-164303/performance/run_1/mlperf_log_summary.txt"
    table = Table(
        [Column("system"), Column("source")], [["dgx-h100", "[1]"], ["mine", "[2]"]], footnotes=[source, summary]
    )

    class Fitted:
        def __rich_console__(self, console, options):  # type: ignore[no-untyped-def]
            yield from fitted(table, options)

    lines = render(Fitted())
    assert "closed/NVIDIA/results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99.9/Offline" in lines
    assert summary in lines  # whole, on its own line
    assert all(len(line) <= 80 or " " not in line for line in lines), lines


def test_the_report_chart_keeps_yours_and_its_label_whole_at_80() -> None:
    """The chart cut `20261127-164303 (yours, demo)` to `20261127-164303 (yours, d…`; labels take what the bar can
    spare down to 20 cells, and a label still too long keeps its `(...)`."""
    from repro.ui.report import bar_chart

    names = ["20261127-164303 (yours, demo)", "nd-gb200-v6 (published)"]
    lines = [line.plain for line in bar_chart(names, [21_712.0, 13_015.4], 80, "tokens/s")]
    assert lines[1].startswith("20261127-164303 (yours, demo) █") and lines[2].startswith("nd-gb200-v6 (published)")
    assert all(len(line) <= 80 for line in lines), lines
    long = ["a-very-long-run-folder-name-from-a-rack-20261127-164303-vm-00 (yours, demo)", "x (published)"]
    lines = [line.plain for line in bar_chart(long, [2.0, 1.0], 80, "tokens/s")]
    assert "… (yours, demo) " in lines[1] and lines[1].count("█") >= 20, lines


@pytest.mark.parametrize("width", [80, 200])
def test_the_rack_table_keeps_its_reasons_readable(fixtures: Path, width: int) -> None:
    """`repro aggregate` of a rack at 80 columns squeezed the per-VM `why` column to 4 cells and cut every word in
    it (`acc…`, `mis…`). Where it cannot have 30 cells the reasons go under the table, one VM a line; wide, the
    column stays."""
    from repro.results.aggregate import aggregate
    from repro.ui.results import render_rack

    report = aggregate([fixtures / "azure-nd-gb300-v6-rack"], expect=18)
    lines = render(render_rack(report), width)
    header = next(cells(line) for line in lines if line.startswith("┃ VM"))
    assert not any("…" in line for line in lines), lines
    assert_no_split_units(lines)
    assert all(len(line) <= width or " " not in line.strip() for line in lines), lines
    text = " ".join(" ".join(lines).split())
    if width == 80:
        assert header == ["VM", "tokens/s", "per GPU", "deviation", "verdict"]
        assert "why, per VM:" in lines
        for row in report.rows:
            assert any(line.startswith(f"  {row.name}: ") for line in lines), lines
        assert "5.3% below the published 15,200.0 per GPU" in text
    else:
        assert header == ["VM", "tokens/s", "per GPU", "deviation", "verdict", "why"]
        assert "why, per VM:" not in lines


def test_tune_dry_run_says_its_probe_settings_in_words() -> None:
    """`repro tune server --dry-run` printed `probe settings: {'min_duration': 60000, ...}` (a Python dict) and
    `1001 queries`; issue 37 item 5: units and words. (100: the Server run asks LoadGen for the benchmark's own
    min_query_count, as the published detail logs do, and a probe never asks for more than the full run.)"""
    from helpers import cli

    out = cli("tune", "server", "--recipe", "nd-gb200-v6", "--dry-run")
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "{" not in text and "'" not in text.split("probe settings:")[1].split(";")[0], text
    assert "probes of 60 s / 100 queries" in text
    assert "probe settings: min_duration 60,000 ms, min_query_count 100; the recipe's user.conf" in text


def test_explain_at_80_keeps_both_names_and_every_path_whole(fixtures: Path) -> None:
    """`repro explain` put the two names in the figures table's first row: at 80 columns both were cut with …
    (`azure-nd-gb200-v6-v5.1-l…`), and Rich folded the run's path in the Tokens lines (`Offl` / `ine`)."""
    from repro.report.explain import explain
    from repro.ui.explain import explanation

    e = explain(fixtures / "azure-nd-gb200-v6-v5.1-llama3.1-405b")
    lines = render(explanation(e))
    assert not any("…" in line for line in lines), lines
    assert f"yours: {e.run.name}" in lines and f"reference: {e.reference.name}" in lines
    header = next(cells(line) for line in lines if line.startswith("┃"))
    assert header == ["", "yours", "reference"]
    run_path = str(fixtures / "azure-nd-gb200-v6-v5.1-llama3.1-405b/llama3.1-405b/Offline/performance/run_1")
    assert any(run_path in line for line in lines), lines  # on one line, never folded
    assert all(len(line) <= 80 or " " not in line.strip() for line in lines), lines
    assert_no_split_units(lines)
