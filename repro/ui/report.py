"""Rich view of `repro report`: the report's sections, fitted to the terminal.

A table wider than the terminal loses its least important columns (named under it) instead of breaking a
number or a name across lines; the comparison chart is text bars whose values read in thousands.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.console import Console, ConsoleOptions, Group
from rich.text import Text

from repro.core.fmt import fmt_num
from repro.core.textsafe import one_line
from repro.report.model import Report
from repro.report.sections import sections
from repro.report.tables import Chart, Paragraph, Table
from repro.ui.fit import fitted
from repro.ui.wrap import Prose


def bar_chart(
    names: list[str], values: list[float], width: int, title: str, yours: str = "cyan", unit: str = "GPU"
) -> list[Text]:
    """One text bar per value, scaled to the widest; each labelled with its exact figure."""
    if not values:
        return [Text("(no chart: no tokens/s value is a plottable number)")]
    num_w = max(len(fmt_num(v)) for v in values)
    # the labels take what the bar can spare down to MIN_BAR cells: at 80 columns `NAME (yours, demo)` lost `demo`
    label_w = min(max(len(n) for n in names), max(12, width - num_w - 3 - MIN_BAR))
    bar_w = max(4, width - label_w - num_w - 3)
    top = max(values) or 1.0
    lines = [Text(title, style="bold")]
    for name, value in zip(names, values, strict=True):
        name = one_line(name)
        label = _shortened(name, label_w)
        n = round(value / top * bar_w)
        line = Text(f"{label:<{label_w}} ")
        line.append("█" * n, style=yours if "(yours" in name else "dim")
        line.append(" " * (bar_w - n) + f" {fmt_num(value):>{num_w}}")
        line.no_wrap = True
        lines.append(line)
    lines.append(
        Text(
            f"{'':<{label_w}} full bar = {fmt_num(top / 1000)}k tokens/s{' per GPU' if unit == 'GPU' else ''}",
            style="dim",
        )
    )
    return lines


MIN_BAR = 20


def _shortened(name: str, width: int) -> str:
    """`name` in `width` characters: cut in its name part so its `(yours, demo)` or `(published)` stays."""
    if len(name) <= width:
        return name
    base, paren, tail = name.rpartition(" (")
    if paren and len(tail) + 3 < width:
        return base[: width - len(tail) - 3] + "…" + paren + tail
    return name[: width - 1] + "…"


class ReportView:
    def __init__(self, report: Report):
        self.report = report

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        r = self.report
        width = options.max_width
        yield Prose(r.title, style="bold")
        if r.banner:
            yield Prose(r.banner, style="bold yellow")
        yield Prose(one_line(r.headline))
        for section in sections(r):
            yield Text("")
            yield Text(section.heading, style="bold")
            for block in section.blocks:
                if isinstance(block, Table):
                    yield from fitted(block, options, "--markdown, --html and --json")
                elif isinstance(block, Paragraph):
                    # a source (`[1] repo path`) wraps between its words: no-wrap, the terminal cut `SXM-8`/`0GBx8`
                    source = section.heading == "Sources"
                    yield Prose(("  " if source else "") + one_line(block.text), style="dim" if source else "")
                elif isinstance(block, Chart) and block.kind == "comparison":
                    names, values = r.chart_bars()
                    inside = r.own_in_band()
                    yours = "cyan" if inside is None else "green" if inside else "red"
                    title = (
                        "tokens/s per GPU" if r.unit == "GPU" else f"tokens/s per {r.unit} (yours), per GPU (published)"
                    )
                    yield from bar_chart(names, values, min(width, 100), title + _lab(r), yours, r.unit)
        for kind, path in r.outputs.items():
            yield Prose(f"{kind}: {one_line(path)}")


def _lab(r: Report) -> str:
    return f" [{r.label}]" if r.label else ""


def report(r: Report) -> Group:
    return Group(ReportView(r))
