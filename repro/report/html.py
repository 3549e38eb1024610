"""The report as one self-contained HTML file: inline CSS, matplotlib PNGs as data URIs, no script, no network.

A Content-Security-Policy forbids every external resource, so a browser proves the file stands alone.
"""

from __future__ import annotations

import base64
import io
from html import escape

from matplotlib.figure import Figure

from repro.report.model import Report
from repro.report.sections import sections
from repro.report.tables import Chart, Paragraph, Table, natural_key

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 .5em}th,td{border:1px solid #ccc;padding:.25em .6em}
th{background:#f3f3f3;white-space:nowrap}td.w{white-space:nowrap}td.p{overflow-wrap:normal}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.banner{background:#fff3cd;border:2px solid #e0a800;padding:.6em 1em;font-weight:bold}
.own{font-weight:bold}.FAIL td:nth-child(5){color:#b00}.PASS td:nth-child(5){color:#070}
code{font-size:.9em;overflow-wrap:anywhere}ol.src{font-size:.85em;color:#555;margin:0 0 1.5em}
img{max-width:100%}"""


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _comparison_fig(report: Report) -> Figure:
    names, values = report.chart_bars()
    fig = Figure(figsize=(8, 0.45 * len(names) + 1.2))
    ax = fig.add_subplot()
    colors = ["#999999" if n.endswith("(published)") else _yours_colour(report) for n in names]
    ax.barh(names, values, color=colors)
    own = next((c for c in report.comparisons if c.own), None)
    if own:
        ax.axvspan(own.band[0], own.band[1], color="#2ca02c", alpha=0.2, label=f"{own.recipe} band")
        ax.legend(loc="lower right")
    ax.set_xlabel("tokens/s per GPU")
    ax.set_title("Yours vs published" + (f" [{report.label}]" if report.label else ""))
    ax.invert_yaxis()
    return fig


STANDING_MAX_ROWS = 40


def _yours_colour(report: Report) -> str:
    """Red means outside the band; inside it (or with no band to be inside) the run is green or blue."""
    inside = report.own_in_band()
    return "#1f77b4" if inside is None else "#2ca02c" if inside else "#d62728"


def _standing_fig(report: Report) -> Figure:
    """Every published result for the run's accelerator as a bar, the run as a red bar in its ranked place."""
    st = report.standing
    assert st is not None
    rows = st.rows[:STANDING_MAX_ROWS]
    bars = [
        (
            f"{r.label} {r.submitter} {r.system_folder} ({r.round}, {r.total_accelerators} GPUs)",
            r.per_accelerator,
            "#999999",
        )
        for r in rows
    ]
    bars.insert(
        st.rank - 1,
        (
            f"yours ({report.recipe.name})" + (f" [{report.label}]" if report.label else ""),
            st.per_gpu,
            _yours_colour(report),
        ),
    )
    fig = Figure(figsize=(11, 0.3 * len(bars) + 1.4))
    ax = fig.add_subplot()
    ax.barh([b[0] for b in bars], [b[1] for b in bars], color=[b[2] for b in bars])
    ax.axvline(st.per_gpu, color=_yours_colour(report), lw=1, ls="--")
    ax.set_xlabel("tokens/s per GPU")
    more = f", top {STANDING_MAX_ROWS} shown" if len(st.rows) > STANDING_MAX_ROWS else ""
    ax.set_title(
        f"Among published {st.accelerator} results, {st.benchmark} {st.scenario}{more}"
        + (f" [{report.label}]" if report.label else ""),
        fontsize=9,
    )
    ax.tick_params(axis="y", labelsize=8)
    ax.invert_yaxis()
    return fig


def _rack_fig(report: Report) -> Figure:
    rows = sorted(
        (r for r in report.vm_rows() if r["tokens_per_s_per_gpu"] is not None), key=lambda r: natural_key(r["vm"])
    )
    fig = Figure(figsize=(8, 3.5))
    ax = fig.add_subplot()
    ax.bar(
        [r["vm"] for r in rows],
        [r["tokens_per_s_per_gpu"] for r in rows],
        color=["#2ca02c" if r["status"] == "PASS" else "#d62728" for r in rows],
    )
    pub = report.published
    band = pub.band() if pub is not None else None
    if band and pub is not None:
        ax.axhspan(band[0], band[1], color="#2ca02c", alpha=0.15, label=f"published {pub.scenario} band")
        ax.axhline(float(pub.tokens_per_s_per_gpu), color="#2ca02c", lw=1)
        ax.legend(loc="lower right")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title("Per VM" + (f" [{report.label}]" if report.label else ""))
    ax.tick_params(axis="x", labelrotation=45)
    return fig


def _roofline_fig(report: Report) -> Figure:
    roof = report.roof
    assert roof is not None
    fig = Figure(figsize=(8, 3.5))
    ax = fig.add_subplot()
    batches = [2 ** (i / 4) for i in range(0, 4 * 13)]
    ax.plot(batches, [roof.bound_at(b) for b in batches], label="HBM bound")
    if roof.compute_tokens_per_s is not None:
        ax.axhline(roof.compute_tokens_per_s, color="#2ca02c", linestyle="--", label="tensor-core bound")
    ax.scatter([roof.batch], [roof.bound_tokens_per_s], marker="o", label=f"ceiling at B={roof.batch}")
    ax.scatter(
        [roof.batch],
        [report.per_gpu],
        marker="x",
        color="#d62728",
        s=60,
        label=f"yours ({(roof.fraction or 0) * 100:.1f}%)",
    )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size B (sequences per GPU)")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title("Roofline" + (f" [{report.label}]" if report.label else ""))
    ax.legend(loc="upper left")
    return fig


_FIGURES = {"comparison": _comparison_fig, "standing": _standing_fig, "rack": _rack_fig, "roofline": _roofline_fig}


def _table(t: Table, tid: str) -> str:
    """Names and numbers never wrap (`nowrap`); prose columns wrap between words; a source is a short [n] link
    whose full path is its title and a footnote under the table."""
    out = ["<table><tr>" + "".join(f"<th>{escape(c.name)}</th>" for c in t.columns) + "</tr>"]
    for i, row in enumerate(t.rows):
        cls = t.row_class[i] if i < len(t.row_class) else ""
        cells = []
        for col, value in zip(t.columns, row, strict=True):
            klass = ("n " if col.numeric else "") + ("p" if col.prose else "w")
            text = escape(value)
            if t.footnotes and value.startswith("[") and "]" in value:
                n = value[1 : value.index("]")]
                if n.isdigit() and 0 < int(n) <= len(t.footnotes):
                    full = escape(t.footnotes[int(n) - 1])
                    rest = escape(value[value.index("]") + 1 :])
                    text = f'<a href="#{tid}-{n}" title="{full}">[{n}]</a>{rest}'
            cells.append(f'<td class="{klass}">{text}</td>')
        out.append(f'<tr class="{escape(cls)}">' + "".join(cells) + "</tr>")
    out.append("</table>")
    if t.footnotes:
        out.append(
            '<ol class="src">'
            + "".join(f'<li id="{tid}-{n}"><code>{escape(f)}</code></li>' for n, f in enumerate(t.footnotes, 1))
            + "</ol>"
        )
    return "".join(out)


def render_html(report: Report) -> str:
    """Chart labels are folder names and system names: `$...$` in one is text, never mathtext to parse (or fail on)."""
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False}):
        return _render_html(report)


def _render_html(report: Report) -> str:
    parts = [f"<h1>{escape(report.title)}</h1>"]
    if report.banner:
        parts.append(f'<p class="banner">{escape(report.banner)}</p>')
    parts.append(f"<p>{escape(report.headline)}</p>")
    n_tables = 0
    for section in sections(report):
        parts.append(f"<h2>{escape(section.heading)}</h2>")
        listed = section.heading in ("Notes", "Sources")
        if listed:
            parts.append("<ul>")
        for block in section.blocks:
            if isinstance(block, Table):
                n_tables += 1
                parts.append(_table(block, f"t{n_tables}"))
            elif isinstance(block, Paragraph):
                body = f"<code>{escape(block.text)}</code>" if block.code else escape(block.text)
                parts.append(f"<li>{body}</li>" if listed else f"<p>{body}</p>")
            elif isinstance(block, Chart):
                parts.append(f'<img alt="{escape(block.alt)}" src="{_png(_FIGURES[block.kind](report))}">')
        if listed:
            parts.append("</ul>")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{escape(report.title)}</title><style>{CSS}</style></head><body>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )
