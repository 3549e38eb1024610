"""Rich views of verify's Verdict and aggregate's RackReport; the core objects only hold data and to_json()."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from repro.core.fmt import fmt_num, fmt_rate
from repro.core.textsafe import one_line
from repro.results.aggregate import RackReport, excluded_text
from repro.results.series import Series
from repro.results.verify import Verdict
from repro.ui.views import published_phrase
from repro.ui.wrap import Prose, Words

_STYLE = {
    "PASS": "bold green",
    "FAIL": "bold red",
    "NOT A REPRODUCTION": "bold yellow",
    "NO REFERENCE": "bold yellow",
    "UNDECIDED": "bold yellow",
}
_ROW_STYLE = {"PASS": "green", "FAIL": "red", "INVALID": "red", "ERROR": "red"}


def render_verdict(v: Verdict) -> Group:
    pub = v.published
    recipe = v.recipe
    table = Table(
        title=f"repro verify: {v.title}" + (f" ({v.scenario})" if v.scenario != "Offline" else ""),
        title_justify="left",
        show_lines=False,
    )
    table.add_column("check", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("detail")
    unit = "CPU" if recipe is not None and recipe.system.gpu_arch == "cpu" else "GPU"
    one_vm = recipe is not None and v.gpus == recipe.system.gpus_per_vm and recipe.system.vm_size is not None
    count = f"{v.gpus} {unit}{'' if v.gpus == 1 else 's'}"
    table.add_row(
        "tokens/s (VM)" if one_vm else "tokens/s", fmt_num(v.run.tokens_per_s), Words(f"{count} ({v.gpus_source})")
    )
    if pub is not None:
        where = published_phrase(pub, recipe is not None and recipe.demo)
    else:
        where = f"no published {v.scenario} result in {v.reference}"
    table.add_row(f"tokens/s per {unit}", fmt_rate(v.per_gpu), Words(where))
    if v.band and pub is not None:
        table.add_row(
            f"band ±{pub.band_pct:g}%",
            f"{fmt_rate(v.band[0])}–{fmt_rate(v.band[1])}",
            "deviation " + (f"{v.deviation_pct:+.1f}%" if v.deviation_pct is not None else "unknown"),
        )
    for c in v.checks:
        mark = Text("ok", "green") if c.ok else Text("no", "red") if c.ok is False else Text("n/a", "dim")
        table.add_row(c.name, mark, Words(one_line(c.detail)))
    division = v.headline.removeprefix(v.status)
    head = Text.assemble(("Verdict: ", "bold"), (v.status, _STYLE[v.status]), (division, "bold"))
    lines = [Text(f"Compared with: {v.reference}")]
    if v.record is not None and recipe is not None:
        lines.append(Text(f"Published record: {v.record.note}"))
    why: list[Any] = [Prose(f"  - {one_line(r)}") for r in v.reasons]
    if v.audit is not None:
        why.append(Prose(f"  MLPerf audit: {v.audit.text}"))
    if differs := [i.item for i in v.system if i.same is False]:
        why.append(Prose(f"  system: differs from the published system in {', '.join(differs)}"))
    if v.differences:
        why.append(Prose(f"  known differences from the published run ({len(v.differences)}):"))
        why += [Prose(f"    - {one_line(d.text())}") for d in v.differences]
    notes = [Prose(f"  note: {one_line(n)}", style="dim") for n in v.notes]
    return Group(table, *lines, head, *why, *notes)


WHY_MIN = 30
"""Fewer cells than this left for the per-VM `why` column and the reasons go under the table: at 80 columns the
column had 4 cells and cut every word (`acc…`, `mis…`)."""


class PerVmTable:
    """aggregate's per-VM table; its `why` column, or the same reasons one VM a line under it when too narrow."""

    def __init__(self, report: RackReport):
        band = report.band()
        self.title = f"Per {report.unit}" + (f" (band {band[0]:,.1f}–{band[1]:,.1f} tokens/s per GPU)" if band else "")
        self.unit = report.unit
        self.rows: list[tuple[list[Any], str]] = []
        for r in report.rows:
            v = r.verdict
            style = _ROW_STYLE.get(r.status, "yellow")
            if v is None:
                self.rows.append(([r.name, "-", "-", "-", Text(r.status, style)], r.problem or ""))
                continue
            dev = f"{v.deviation_pct:+.1f}%" if v.deviation_pct is not None else "-"
            note = ("; ".join(v.reasons) + excluded_text(r)).strip()
            self.rows.append(
                ([r.name, fmt_num(v.run.tokens_per_s), fmt_rate(v.per_gpu), dev, Text(r.status, style)], note)
            )

    def table(self, why: bool) -> Table:
        t = Table(title=self.title, title_justify="left")
        for col in (self.unit, "tokens/s", "per GPU", "deviation", "verdict", *(["why"] if why else [])):
            right = col in ("tokens/s", "per GPU", "deviation")
            t.add_column(col, justify="right" if right else "left", no_wrap=col != "why")
        for cells, note in self.rows:
            t.add_row(*cells, *([Words(note)] if why else []))
        return t

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        narrow = Measurement.get(console, options, self.table(why=False)).maximum
        if options.max_width - narrow >= WHY_MIN + 3 or not any(note for _, note in self.rows):
            yield self.table(why=True)
            return
        yield self.table(why=False)
        yield Text(f"why, per {self.unit}:", style="bold")
        for cells, note in self.rows:
            if note:
                yield Prose(f"  {cells[0]}: {note}")


def render_rack(report: RackReport) -> Group:
    summary = Table(title=f"repro aggregate: {report.title}", title_justify="left")
    for col in ("", "measured", "published"):
        summary.add_column(col, justify="left" if not col else "right", no_wrap=True)
    for row in report.summary_rows():
        summary.add_row(*row)
    unit = report.unit
    parts: list[Any] = [summary, PerVmTable(report)]
    if report.missing_count:
        parts.append(Prose(f"{report.missing_count} of {report.expect} expected {unit}s have no result folder.", "red"))
    ok = report.exit_code == 0
    parts.append(
        Prose(Text("Rack verdict: ", style="bold") + Text(report.verdict_line, "bold green" if ok else "bold red"))
    )
    parts += [Prose(f"note: {n}", style="dim") for n in report.notes]
    return Group(*parts)


class PricedVerdict:
    """verify's verdict with the cost of a token beside it (`cost` in --json; a table under the verdict)."""

    def __init__(self, verdict: Verdict, cost: Any):
        self.verdict, self.cost = verdict, cost

    def to_json(self) -> dict[str, Any]:
        return {**self.verdict.to_json(), "cost": self.cost.to_json()}

    def __rich__(self) -> Group:
        from repro.ui.wrap import Prose

        lines = [
            Prose(Text(f"{what}: ", style="bold") + Text(one_line(f"{figure} ({basis})")))
            for what, figure, basis in self.cost.rows()
        ]
        return Group(render_verdict(self.verdict), *lines)


def render_series(s: Series) -> Group:
    """Repeated runs: each run's figure and verdict, then mean, spread, the 95% interval and the decision."""
    table = Table(title=f"repro verify: {s.n} runs of {s.verdicts[0].title}", title_justify="left")
    table.add_column("run", overflow="fold")  # a path: folded at 80 columns, never cut
    for col in ("tokens/s", "per GPU", "verdict"):
        table.add_column(col, justify="right" if col != "verdict" else "left", no_wrap=True)
    for v, x in zip(s.verdicts, s.per_gpu, strict=True):
        table.add_row(str(v.run.folder), fmt_num(v.run.tokens_per_s), fmt_num(x), Text(v.status, _STYLE[v.status]))
    ci = s.ci
    lines = [
        Text(
            f"mean {fmt_num(s.mean)} tokens/s per GPU; s.d. {fmt_num(s.sd) if s.sd is not None else 'unknown'}; "
            f"CV {f'{s.cv_pct:.2f}%' if s.cv_pct is not None else 'unknown'}"
        ),
        Text(
            f"95% confidence interval (Student t, {s.n - 1} d.f.): "
            + (f"{fmt_num(ci[0])}–{fmt_num(ci[1])}" if ci else "needs two runs or more")
        ),
    ]
    if s.band is not None:
        lines.append(Text(f"published band ±5%: {fmt_num(s.band[0])}–{fmt_num(s.band[1])} per GPU"))
    if s.audit is not None:
        lines.append(Text(f"MLPerf audit of the mean: {s.audit.text}"))
    head = Text.assemble(("Verdict: ", "bold"), (s.status, _STYLE.get(s.status, "bold")), f" ({s.decision})")
    why = [Text(f"  - {r}") for r in s.reasons]
    if s.arithmetic:
        why.append(Text(f"  {s.arithmetic}", style="dim"))
    if s.more_runs and s.decision == "undecided: run again":
        why.append(Text(f"  run {s.more_runs} more and verify all {s.n + s.more_runs} together"))
    notes = [Prose(f"note: {one_line(n)}", style="yellow") for n in s.notes]
    return Group(table, *lines, head, *why, *notes)
