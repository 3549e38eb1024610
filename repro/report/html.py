"""The report as one self-contained HTML file: inline CSS, matplotlib PNGs as data URIs, no script, no network.

A Content-Security-Policy forbids every external resource, so a browser proves the file stands alone.
"""

from __future__ import annotations

import base64
import io
from html import escape
from typing import Any

from matplotlib.figure import Figure

from repro.core.fmt import fmt_num
from repro.report.model import TDP_LABEL, Report

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:.25em .6em}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}
.banner{background:#fff3cd;border:2px solid #e0a800;padding:.6em 1em;font-weight:bold}
.own{font-weight:bold}.FAIL{color:#b00}.PASS{color:#070}code{font-size:.9em}img{max-width:100%}"""


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _comparison_fig(report: Report) -> Figure:
    names, values = report.chart_bars()
    fig = Figure(figsize=(8, 0.45 * len(names) + 1.2))
    ax = fig.add_subplot()
    colors = ["#999999" if n.endswith("(published)") else "#1f77b4" for n in names]
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


def _standing_fig(report: Report) -> Figure:
    """Every published result for the run's accelerator as a bar, the run as a red bar in its ranked place."""
    st = report.standing
    assert st is not None
    rows = st.rows[:STANDING_MAX_ROWS]
    bars = [
        (
            f"{r.label} {r.submitter} {r.system_folder[:28]} ({r.round}, {r.total_accelerators} GPUs)",
            r.per_accelerator,
            "#999999",
        )
        for r in rows
    ]
    bars.insert(
        st.rank - 1,
        (f"yours ({report.recipe.name})" + (f" [{report.label}]" if report.label else ""), st.per_gpu, "#d62728"),
    )
    fig = Figure(figsize=(9, 0.32 * len(bars) + 1.4))
    ax = fig.add_subplot()
    ax.barh([b[0] for b in bars], [b[1] for b in bars], color=[b[2] for b in bars])
    ax.axvline(st.per_gpu, color="#d62728", lw=1, ls="--")
    ax.set_xlabel("tokens/s per GPU")
    more = f", top {STANDING_MAX_ROWS} shown" if len(st.rows) > STANDING_MAX_ROWS else ""
    ax.set_title(
        f"Among published {st.accelerator} results, llama2-70b-{st.benchmark} {st.scenario}{more}"
        + (f" [{report.label}]" if report.label else ""),
        fontsize=9,
    )
    ax.tick_params(axis="y", labelsize=7)
    ax.invert_yaxis()
    return fig


def _rack_fig(report: Report) -> Figure:
    rows = [r for r in report.vm_rows() if r["tokens_per_s_per_gpu"] is not None]
    fig = Figure(figsize=(8, 3.5))
    ax = fig.add_subplot()
    ax.bar(
        [r["vm"] for r in rows],
        [r["tokens_per_s_per_gpu"] for r in rows],
        color=["#2ca02c" if r["status"] == "PASS" else "#d62728" for r in rows],
    )
    band = report.recipe.published.band()
    if band:
        ax.axhspan(band[0], band[1], color="#2ca02c", alpha=0.15, label="published band")
        ax.axhline(float(report.recipe.published.tokens_per_s_per_gpu), color="#2ca02c", lw=1)
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
    ax.plot(batches, [roof.bound_at(b) for b in batches], label="bandwidth bound")
    ax.scatter([roof.batch], [roof.bound_tokens_per_s], marker="o", label=f"bound at B={roof.batch}")
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


def _table(head: list[str], rows: list[list[Any]], numeric: set[int]) -> str:
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        cells = "".join(
            f'<td class="n">{escape(str(c))}</td>' if i in numeric else f"<td>{escape(str(c))}</td>"
            for i, c in enumerate(row)
        )
        out.append(f"<tr>{cells}</tr>")
    return "".join(out) + "</table>"


def render_html(report: Report) -> str:
    """Chart labels are folder names and system names: `$...$` in one is text, never mathtext to parse (or fail on)."""
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False}):
        return _render_html(report)


def _render_html(report: Report) -> str:
    lab = f" [{report.label}]" if report.label else ""
    parts = [f"<h1>{escape(report.title)}</h1>"]
    if report.banner:
        parts.append(f'<p class="banner">{escape(report.banner)}</p>')
    parts.append(
        f"<p>Measured: <b>{fmt_num(report.per_gpu)} tokens/s per GPU</b> over {len(report.used)} VM(s), "
        f"{fmt_num(report.total_tokens_per_s)} tokens/s in total{escape(lab)}.</p>"
    )
    parts.append(f"<h2>1. Against every published result{escape(lab)}</h2>")
    parts.append(
        _table(
            ["system", "GPU", "published tok/s/GPU", "band", "yours", "deviation", "in band", "status", "source"],
            [
                [
                    ("* " if c.own else "") + c.recipe,
                    c.gpu,
                    fmt_num(c.published_per_gpu),
                    f"{fmt_num(c.band[0])}–{fmt_num(c.band[1])}",
                    fmt_num(report.per_gpu),
                    f"{c.deviation_pct:+.1f}%",
                    "yes" if c.in_band else "no",
                    c.status,
                    c.source,
                ]
                for c in report.comparisons
            ],
            {2, 4, 5},
        )
    )
    parts.append(f'<img alt="tokens/s per GPU, yours vs published" src="{_png(_comparison_fig(report))}">')
    if report.standing:
        parts.append(f"<p>{escape(report.standing.sentence + lab)}</p>")
        parts.append(
            f'<img alt="your run among the published {escape(report.standing.accelerator)} results" '
            f'src="{_png(_standing_fig(report))}">'
        )
    parts.append(f"<h2>2. {'Rack table' if report.multi else 'Run'}{escape(lab)}</h2>")
    parts.append(
        _table(
            ["VM", "tokens/s", "per GPU", "deviation", "verdict", "mean W", "tokens/J", "source"],
            [
                [
                    r["vm"],
                    fmt_num(r["tokens_per_s"]),
                    fmt_num(r["tokens_per_s_per_gpu"]),
                    f"{r['deviation_pct']:+.1f}%" if r["deviation_pct"] is not None else "-",
                    r["status"] + ("" if r["counted"] else " (excluded)"),
                    fmt_num(r["mean_watts"], 0) if r["mean_watts"] else "-",
                    fmt_num(r["tokens_per_joule"], 2) if r["tokens_per_joule"] else "-",
                    r["summary"] or r["folder"],
                ]
                for r in report.vm_rows()
            ],
            {1, 2, 3, 5, 6},
        )
    )
    if report.multi:
        stats = report.rack.to_json()["stats"]
        rack = report.recipe.published.rack
        if stats:
            parts.append(
                _table(
                    ["", "measured", "published"],
                    [
                        ["VMs", f"{stats['vms']:.0f}", rack.vms if rack else "-"],
                        ["total tokens/s", fmt_num(stats["total"]), fmt_num(rack.total_tokens_per_s) if rack else "-"],
                        ["mean per VM", fmt_num(stats["mean"]), fmt_num(rack.mean_tokens_per_s) if rack else "-"],
                        ["min per VM", fmt_num(stats["min"]), fmt_num(rack.min_tokens_per_s) if rack else "-"],
                        ["max per VM", fmt_num(stats["max"]), fmt_num(rack.max_tokens_per_s) if rack else "-"],
                    ],
                    {1, 2},
                )
            )
        parts.append(f'<img alt="tokens/s per GPU per VM with the published band" src="{_png(_rack_fig(report))}">')
    parts.append(
        f"<h2>3. Business translation{escape(lab)}</h2><p>interactions/s = tokens/s / tokens per interaction</p>"
    )
    parts.append(
        _table(
            ["profile", "tokens/interaction", "per GPU", "per VM", "total"],
            [
                [
                    b.profile,
                    f"{b.tokens_per_interaction:,}",
                    fmt_num(b.per_gpu, 2),
                    fmt_num(b.per_vm, 1),
                    fmt_num(b.total, 1),
                ]
                for b in report.business
            ],
            {1, 2, 3, 4},
        )
    )
    parts.append(f"<h2>4. Efficiency{escape(lab)}</h2>")
    eff = [
        [
            f"measured (NVML), {m.vm}",
            fmt_num(m.tokens_per_joule, 2),
            f"{m.power.path} ({m.power.gpus} GPUs, mean {m.power.mean_watts_total:,.0f} W)",
        ]
        for m in report.measured
    ]
    if not eff:
        eff.append(["measured (NVML)", "not measured", "no power.csv in the run folders"])
    eff += [[f"{TDP_LABEL}: {n}", fmt_num(v, 2), g] for n, g, v in report.tdp]
    parts.append(_table(["what", "tokens/J (= tokens/s per W)", "from"], eff, {1}))
    parts.append(f"<h2>5. Roofline{escape(lab)}</h2>")
    if report.roof:
        parts.append(
            f"<p><code>{escape(report.roof.explanation)}</code></p><p>Bound "
            f"{fmt_num(report.roof.bound_tokens_per_s)} tokens/s per GPU; yours {fmt_num(report.per_gpu)} = "
            f"{(report.roof.fraction or 0) * 100:.1f}% of it.</p>"
        )
        parts.append(f'<img alt="roofline" src="{_png(_roofline_fig(report))}">')
    else:
        parts.append(f"<p>Not computed ({escape(report.recipe.name)} has no memory bandwidth).</p>")
    if report.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>" for n in report.notes) + "</ul>")
    parts.append(
        "<h2>Sources</h2><ul>" + "".join(f"<li><code>{escape(str(p))}</code></li>" for p in report.sources) + "</ul>"
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{escape(report.title)}</title><style>{CSS}</style></head><body>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )
