"""Views of the published-results index and of comparisons against it: JSON for machines, Rich for people."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from repro.core.fmt import fmt_num
from repro.core.published import Filters, PublishedIndex, PublishedResult
from repro.report.tables import Column
from repro.report.tables import Table as ReportTable
from repro.results.audit import AuditLine
from repro.results.compare import Comparison

_STYLE = {
    "PASS": "bold green",
    "FAIL": "bold red",
    "NOT A REPRODUCTION": "bold yellow",
    "REFUSED": "bold yellow",
    "NO REFERENCE": "bold yellow",
}


def provenance_line(index: PublishedIndex) -> Text:
    srcs = "; ".join(
        sorted({f"{s.round} {s.repository}@{s.commit[:12]}" for s in index.provenance.sources if s.results})
    )
    files = ", ".join(f"{f.path.name} ({f.rows} results, sha256 {f.sha256[:12]})" for f in index.files)
    return Text(f"Index: {files}, read from {srcs}. Coverage: {index.provenance.coverage}", style="dim")


def tokens_text(value: float) -> str:
    """Tokens/s as the summary log gives them: 405B's hundreds keep their third decimal (847.233)."""
    return fmt_num(value, 2 if value >= 1000 else 3)


def accuracy_text(r: PublishedResult) -> str:
    """The row's accuracy scores under the benchmark's own metric names."""
    if not r.metrics:
        return "unknown"
    scores = [f"{k} {v}" for k, v in r.metrics.items()]
    # a figure the source does not give (v6.1's results table has no sample count) is left out, never "None"
    scores += [f"tokens/sample {r.tokens_per_sample}"] if r.tokens_per_sample is not None else []
    return ", ".join(scores + ([f"gen_num {r.gen_num}"] if r.gen_num is not None else []))


def _gpus(r: PublishedResult) -> str:
    return f"{r.accelerators_per_node}x{r.number_of_nodes}={r.total_accelerators}"


@dataclass
class PublishedList:
    index: PublishedIndex
    rows: list[PublishedResult]
    filters: Filters
    sort: str

    def to_json(self) -> dict[str, Any]:
        used = {k: v for k, v in self.filters.__dict__.items() if v is not None}
        return {
            "index": self.index.to_json(),
            "filters": used,
            "sort": self.sort,
            "count": len(self.rows),
            "results": [r.to_json() for r in self.rows],
        }

    def table(self) -> ReportTable:
        """The listing as plain data with a keep-priority per column: at 80 columns the ID, benchmark, scenario,
        GPUs and figures stay on screen whole; who and what system move, whole, to a second table."""
        cols = [
            Column("ID"),
            Column("round", keep=4),
            Column("div", keep=5),
            Column("submitter", keep=3),
            Column("system", keep=1),
            Column("accelerator", keep=2),
            Column("GPUs", keep=6),
            Column("benchmark"),
            Column("scenario"),
            Column("tokens/s", numeric=True, keep=7),
            Column("per GPU", numeric=True),
        ]
        rows = [
            [
                r.result_id or "-",
                r.round,
                r.division,
                r.submitter,
                r.system_folder,
                r.accelerator_model_name,
                _gpus(r),
                r.benchmark_name if r.standard_folder else r.model_folder,
                r.scenario,
                tokens_text(r.tokens_per_second),
                fmt_num(r.per_accelerator),
            ]
            for r in self.rows
        ]
        caption = (
            f"Published MLPerf LLM results: {len(self.rows)} of {len(self.index.rows)} "
            f"(filters: {self.filters.describe()}; sorted by {self.sort})"
        )
        return ReportTable(cols, rows, caption)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from repro.ui.fit import fitted

        yield from fitted(self.table(), options)
        yield Text(
            "GPUs = per node x nodes (system JSON). `repro published show ID` for one result; "
            "rows without an ID "
            "(v4.0, v4.1, v6.1): `repro published show ROUND/DIVISION/SUBMITTER/SYSTEM`.",
            style="dim",
        )
        yield provenance_line(self.index)


@dataclass
class PublishedShow:
    index: PublishedIndex
    ref: str
    rows: list[PublishedResult]

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "index": self.index.to_json(), "results": [r.to_json() for r in self.rows]}

    def __rich__(self) -> Group:
        parts: list[Any] = []
        for r in self.rows:
            t = Table(title=f"{r.ref}", title_justify="left", show_header=False)
            t.add_column("field", no_wrap=True)
            t.add_column("value", overflow="fold")  # keys and source paths are copied: folded, never cut
            for name, value in (
                ("result ID", r.result_id or "none (round without IDs)"),
                ("key", r.key),
                ("round / division", f"{r.round} {r.division}"),
                ("submitter", r.submitter),
                ("system", f"{r.system_name.strip()} (folder {r.system_folder})"),
                ("accelerator", r.accelerator_model_name),
                (
                    "accelerators",
                    f"{r.accelerators_per_node} per node x {r.number_of_nodes} node(s) = {r.total_accelerators}",
                ),
                (
                    "benchmark / scenario",
                    f"{r.benchmark_name} {r.scenario} "
                    + ("(no summary log stored)" if r.table_only else f"(log says {r.log_scenario})")
                    + ("" if r.standard_folder else f"; folder {r.model_folder}"),
                ),
                ("validity", r.result_validity),
                ("tokens/s", tokens_text(r.tokens_per_second)),
                ("tokens/s per accelerator", fmt_num(r.per_accelerator, 2)),
                ("samples/s", fmt_num(r.samples_per_second, 3)),
                ("accuracy", accuracy_text(r)),
                ("LoadGen", r.loadgen_version or "unknown"),
                ("framework", r.framework),
                ("summary-table check", r.summary_crosscheck),
                ("source", f"{r.source_repo} @ {r.source_commit}"),
                ("source path", r.source_path),
                *(
                    [("read from", "the official results table alone: no summary log is stored")]
                    if r.table_only
                    else []
                ),
            ):
                t.add_row(name, str(value))
            parts.append(t)
        parts.append(provenance_line(self.index))
        return Group(*parts)


def _rank_text(c: Comparison) -> str:
    rank = c.rank
    if rank is None:
        return "no comparison made"
    return f"the run ranks {rank[0]} of {rank[1]} by tokens/s per accelerator among the compared results"


@dataclass
class ComparisonView:
    comparison: Comparison
    title: str = "repro verify --against"

    def to_json(self) -> dict[str, Any]:
        return self.comparison.to_json()

    def table(self) -> Table:
        c, f = self.comparison, self.comparison.facts
        t = Table(
            title=f"{self.title}: {tokens_text(f.tokens_per_s)} tokens/s / {f.accelerators} = "
            f"{f.per_accelerator:,.1f} per accelerator "
            f"({f.scenario}, {f.accelerator or 'accelerator unknown'})",
            title_justify="left",
        )
        for col in (
            "published",
            "submitter / system",
            "accelerator",
            "scenario",
            "per accel.",
            "deviation",
            f"±{c.band_pct:g}%",
        ):
            t.add_column(
                col,
                justify="right" if col in ("per accel.", "deviation") else "left",
                no_wrap=col not in ("submitter / system", "accelerator"),
            )
        for e in sorted(c.entries, key=lambda e: -e.row.per_accelerator):
            r = e.row
            mark = Text("refused") if e.refused else Text("in band", "green") if e.in_band else Text("outside", "red")
            t.add_row(
                r.ref,
                f"{r.submitter} {r.system_folder} ({r.round} {r.division})",
                f"{r.accelerator_model_name} x{r.total_accelerators}",
                f"{r.benchmark_name} {r.scenario}",
                fmt_num(r.per_accelerator),
                "-" if e.deviation_pct is None else f"{e.deviation_pct:+.1f}%",
                mark,
            )
        return t

    def checks(self) -> Table:
        """The run's own checks, as plain `repro verify` prints them (the same function built them)."""
        t = Table(title="the run's own evidence", title_justify="left")
        t.add_column("check", no_wrap=True)
        t.add_column("result", no_wrap=True)
        t.add_column("detail")
        for c in self.comparison.evidence.checks:
            mark = Text("ok", "green") if c.ok else Text("no", "red") if c.ok is False else Text("n/a", "dim")
            t.add_row(c.name, mark, c.detail)
        return t

    def __rich__(self) -> Group:
        c, f = self.comparison, self.comparison.facts
        parts: list[Any] = [
            self.table(),
            Text(f"accelerators: {f.accelerators_source}; accelerator: {f.accelerator_source}", style="dim"),
            self.checks(),
        ]
        if c.match:
            parts.append(Text(f"Recognised: {c.match.note}"))
        parts.append(Text(_rank_text(c)))
        for e in c.entries:
            if e.deviation_pct is not None:
                audit = AuditLine(e.deviation_pct, e.row.per_accelerator)
                parts.append(Text(f"MLPerf audit ({e.row.ref}): {audit.text}"))
            for note in e.notes:
                parts.append(Text(f"note ({e.row.ref}): {note}", style="yellow"))
        for note in f.notes:
            parts.append(Text(f"note: {note}", style="yellow"))
        same = [i.item for i in c.system if i.same]
        differ = [f"{i.item} (run {i.run}, published {i.published})" for i in c.system if i.same is False]
        if same or differ:
            text = (f"same {', '.join(same)}" if same else "") + ("; " if same and differ else "")
            parts.append(Text("system vs published: " + text + (f"differs: {'; '.join(differ)}" if differ else "")))
        division = f" ({c.division} division)" if c.division != "closed" else ""
        parts.append(Text.assemble(("Verdict: ", "bold"), (c.status, _STYLE[c.status]), (division, "bold")))
        parts += [Text(f"  - {r}") for r in c.reasons]
        return Group(*parts)
