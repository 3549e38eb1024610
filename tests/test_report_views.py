"""One report model, three views (issue 26 item 4; issue 25 items 11, 12, 18): the same tables in the terminal,
Markdown and HTML; no plotting library for `--json`; whole numbers and names at 80 columns."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from repro.report.html import render_html
from repro.report.markdown import render_markdown
from repro.report.model import build_report
from repro.report.sections import sections
from repro.report.tables import Table

CLI = "from repro.cli import main; main()"
NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+")


def _terminal(args: list[str], columns: int) -> str:
    """`repro` on a real terminal of `columns` columns (script(1) gives it a pty)."""
    cmd = " ".join([sys.executable, "-c", repr(CLI), *args])
    proc = subprocess.run(
        ["script", "-qc", f"stty cols {columns} rows 50; {cmd}", "/dev/null"],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in __import__("os").environ.items() if k not in ("COLUMNS", "LINES")} | {"TERM": "xterm"},
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", proc.stdout).replace("\r", "")


def test_json_needs_no_plotting_library(fixtures: Path) -> None:
    block = "import sys; sys.modules['plotext'] = None; sys.modules['matplotlib'] = None; "
    proc = subprocess.run(
        [sys.executable, "-c", block + CLI, "report", str(fixtures / "azure-nd-gb300-v6-rack"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr  # the rack's verdict: not all PASS
    assert json.loads(proc.stdout)["recipe"] == "nd-gb300-v6"
    md = subprocess.run(
        [sys.executable, "-c", block + CLI, "report", str(fixtures / "azure-nd-gb300-v6-rack")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert md.returncode == 1 and "1. Against every published result" in md.stdout, md.stderr


def test_every_table_cell_appears_in_all_three_views(fixtures: Path) -> None:
    rep = build_report([fixtures / "azure-nd-gb300-v6-rack"])
    md, html = render_markdown(rep), render_html(rep)
    wide = _terminal(["report", str(fixtures / "azure-nd-gb300-v6-rack")], 250)
    for section in sections(rep):
        for block in section.blocks:
            if isinstance(block, Table):
                for row in block.rows:
                    for cell in row:
                        escaped = cell.replace("&", "&amp;")
                        assert escaped in md and escaped in html, cell
                        assert cell in wide, cell


def test_report_at_80_columns_never_breaks_or_truncates_a_number(fixtures: Path) -> None:
    out = _terminal(["report", str(fixtures / "azure-nd-gb300-v6-rack")], 80)
    table_lines = [line for line in out.splitlines() if line.startswith(("│", "┃"))]
    assert table_lines and all(len(line) <= 80 for line in table_lines)
    assert "…" not in "\n".join(table_lines)
    for figure in ("15,672.7", "57,599.1", "12,364.6–13,666.2", "+387.5%", "1,100,948.3", "ND_GB300_v6_16"):
        assert figure in out, figure
    for line in table_lines:  # every number in a cell is whole: no cell starts or ends with a separator
        for cell in line.strip("│┃").split("│"):
            cell = cell.strip()
            assert not cell.startswith((",", ".")) and not cell.endswith((",", ".")), line
    # columns that do not fit go, whole, to a second table keyed by the system: nothing is lost
    rep = build_report([fixtures / "azure-nd-gb300-v6-rack"])
    for section in sections(rep):
        for block in section.blocks:
            if isinstance(block, Table):
                for row in block.rows:
                    for col, cell in zip(block.columns, row, strict=True):
                        assert col.prose or cell in out, cell  # prose cells wrap between words
    assert "too narrow" not in out


def test_recipes_list_at_80_columns_keeps_every_figure_whole() -> None:
    out = _terminal(["recipes", "list"], 80)
    assert max(len(line) for line in out.splitlines()) <= 80
    for figure in ("13,015.4", "15,200.0", "3,065.6", "Standard_ND128isr_NDR_GB200_v6", "published tok/s/GPU"):
        assert figure in out, out
    assert "pu\n" not in out and "bl\n" not in out


def test_terminal_chart_reads_in_thousands_and_business_has_one_precision(fixtures: Path) -> None:
    out = _terminal(["report", str(fixtures / "azure-nd-gb300-v6-rack")], 100)
    assert "e3" not in out and "e4" not in out
    assert "full bar = 15.7k tokens/s per GPU" in out
    rep = build_report([fixtures / "azure-nd-gb300-v6-rack"])
    business = next(b for s in sections(rep) if s.heading.startswith("3.") for b in s.blocks if isinstance(b, Table))
    decimals = {len(cell.split(".")[1]) for row in business.rows for cell in row[2:]}
    assert decimals == {1}


def test_vms_sort_naturally_and_published_vms_outside_the_band_are_named(fixtures: Path) -> None:
    rep = build_report([fixtures / "azure-nd-gb300-v6-rack"])
    run = next(b for s in sections(rep) if s.heading.startswith("2.") for b in s.blocks if isinstance(b, Table))
    assert [r[0] for r in run.rows] == ["ND_GB300_v6_1", "ND_GB300_v6_4", "ND_GB300_v6_16"]
    sentence = rep.published_vms_outside_band()
    assert sentence is not None and "ND_GB300_v6_16 57,599.1 (0.3% below it)" in sentence


@pytest.mark.parametrize("in_band", [True, False])
def test_yours_is_red_only_outside_the_band(fixtures: Path, in_band: bool) -> None:
    from repro.report import html as html_view

    rep = build_report([fixtures / "azure-nd-gb300-v6-rack"])
    own = next(c for c in rep.comparisons if c.own)
    own.deviation_pct = 0.0 if in_band else 20.0
    assert html_view._yours_colour(rep) == ("#2ca02c" if in_band else "#d62728")
