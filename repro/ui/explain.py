"""The Rich view of `repro explain`: headline, ranked causes with their evidence, the diffs, tokens and ceilings."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.markup import escape as _markup_escape
from rich.table import Table
from rich.text import Text

from repro.core.fmt import fmt_num, fmt_rate
from repro.core.textsafe import one_line
from repro.report.explain import Explanation
from repro.ui.wrap import Prose


def escape(text: str) -> str:
    """Names and paths from a result folder on one line each (a newline in a folder name shown as \\x0a)."""
    return _markup_escape(one_line(text))


_EFFECT_STYLE = {"moves": "bold red", "may move": "yellow", "none": "dim"}


def explanation(e: Explanation) -> Group:
    parts: list[RenderableType] = []
    if e.label:
        parts.append(Text(f"[{e.label.upper()}, NOT A REPRODUCTION]", style="bold yellow"))
    parts.append(Prose(one_line(e.headline), style="bold"))
    # the two names above the table, whole: as its first row they were cut to `azure-nd-gb200-v6-v5.1-l…` at 80
    parts.append(Prose(f"yours: {one_line(e.run.name)}"))
    parts.append(Prose(f"reference: {one_line(e.reference.name)}"))
    figures = Table(title="repro explain", title_justify="left")
    for col in ("", "yours", "reference"):
        figures.add_column(col, justify="left" if not col else "right", no_wrap=True)
    figures.add_row("tokens/s", fmt_num(e.run.tokens_per_s), fmt_num(e.reference.tokens_per_s))
    figures.add_row("tokens/s per GPU", fmt_rate(e.run.per_gpu), fmt_rate(e.reference.per_gpu))
    figures.add_row("samples/s", fmt_num(e.run.samples_per_s, 2), fmt_num(e.reference.samples_per_s, 2))
    figures.add_row(
        "output tokens/sample", fmt_num(e.run.tokens_per_sample, 1), fmt_num(e.reference.tokens_per_sample, 1)
    )
    parts.append(figures)
    if e.causes:
        causes = Table(title="Causes, most likely first", title_justify="left", show_lines=True)
        for col in ("#", "cause", "effect", "moves", "evidence"):
            causes.add_column(col)
        for i, c in enumerate(e.causes, 1):
            impact = f" ({c.impact_pct:+.1f}%)" if c.impact_pct is not None else ""
            causes.add_row(
                str(i),
                escape(c.title),
                Text(c.effect, style=_EFFECT_STYLE[c.effect]),
                escape(c.moves + impact),
                "\n".join(escape(x) for x in c.evidence),
            )
        parts.append(causes)
    else:
        parts.append(
            Prose(
                "No cause: nothing that moves the figure differs, and the gap is within run-to-run noise."
                if e.deviation_pct is not None
                else "No cause: there is no published figure to compare with."
            )
        )
    if e.diffs:
        diffs = Table(title="What differs", title_justify="left")
        for col in ("area", "key", "yours", "reference", "effect"):
            diffs.add_column(col)
        for d in e.diffs:
            diffs.add_row(
                d.area,
                escape(d.key),
                escape(str(d.yours)),
                escape(str(d.reference)),
                Text(d.effect, style=_EFFECT_STYLE[d.effect]),
            )
        parts.append(diffs)
    t = e.tokens
    lines = [
        f"output tokens/sample: {fmt_num(t.output_per_sample, 1)} ({t.output_source}); "
        f"MLPerf reference {t.reference_output:g}",
        f"input tokens/sample: {fmt_num(t.input_per_sample, 1)} ({t.input_source})",
        "share at max_tokens: "
        + (
            f"{t.share_at_max * 100:.1f}% of samples ({t.share_source})"
            if t.share_at_max is not None
            else t.share_source
        ),
    ]
    if t.ttft_ns:
        lines.append("first-token latency: " + ", ".join(f"{k} {v / 1e6:,.0f} ms" for k, v in t.ttft_ns.items()))
    parts.append(Prose("Tokens\n" + "\n".join(f"  {one_line(x)}" for x in lines)))
    roof = e.roofline
    if roof is not None:
        text = [
            f"memory bound {fmt_num(roof.hbm_tokens_per_s)} tokens/s per GPU: {roof.explanation}",
            f"compute bound {fmt_num(roof.compute_tokens_per_s)} tokens/s per GPU: {roof.compute_explanation}",
            f"ceiling ({roof.limiter}): {fmt_num(roof.bound_tokens_per_s)}; yours "
            + (
                f"{fmt_num(roof.measured_tokens_per_s)} = {roof.fraction * 100:.1f}% of it"
                if roof.fraction
                else "not comparable"
            ),
            roof.measured_explanation,
        ]
        parts.append(Prose("Roofline\n" + "\n".join(f"  {one_line(x)}" for x in text)))
    if e.rack:
        rack = Table(
            title="VMs side by side" + (f" (straggler: {e.straggler})" if e.straggler else ""), title_justify="left"
        )
        for col in ("VM", "tokens/s", "samples/s", "tokens/sample", "vs median", "differs from the fastest VM"):
            rack.add_column(col)
        for r in e.rack:
            rack.add_row(
                escape(r.name),
                fmt_num(r.tokens_per_s),
                fmt_num(r.samples_per_s, 2),
                fmt_num(r.tokens_per_sample, 1),
                f"{r.deviation_pct:+.1f}%" if r.deviation_pct is not None else "-",
                escape("; ".join(r.differs) or "-"),
            )
        parts.append(rack)
    parts += [Prose(f"note: {one_line(n)}", style="dim") for n in e.notes]
    return Group(*parts)
