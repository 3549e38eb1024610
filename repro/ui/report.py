"""Rich view of `repro report`."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from repro.core.fmt import fmt_num
from repro.report.model import TDP_LABEL, Report
from repro.ui.render import renderable


def report(r: Report) -> Group:
    parts: list[Any] = [Text(r.title, style="bold")]
    if r.banner:
        parts.append(Text(r.banner, style="bold yellow"))
    lab = f" [{r.label}]" if r.label else ""
    parts.append(
        Text(
            f"Measured: {fmt_num(r.per_gpu)} tokens/s per GPU over {len(r.used)} VM(s), "
            f"{fmt_num(r.total_tokens_per_s)} tokens/s in total{lab}"
        )
    )

    comp = Table(title="1. Against every published result (tokens/s per GPU)" + lab, title_justify="left")
    for col in ("system", "GPU", "published", "band", "yours", "deviation", "in band", "status"):
        comp.add_column(col, justify="right" if col in ("published", "yours", "deviation") else "left", no_wrap=True)
    for c in r.comparisons:
        comp.add_row(
            ("* " if c.own else "") + c.recipe,
            c.gpu,
            fmt_num(c.published_per_gpu),
            f"{fmt_num(c.band[0])}–{fmt_num(c.band[1])}",
            fmt_num(r.per_gpu),
            f"{c.deviation_pct:+.1f}%",
            "yes" if c.in_band else "no",
            c.status,
        )
    parts += [comp, Text(r.terminal_chart())]
    if r.standing:
        parts.append(Text(r.standing.sentence + lab))

    vms = Table(title=("2. Rack table" if r.multi else "2. Run") + lab, title_justify="left")
    for col in ("VM", "tokens/s", "per GPU", "deviation", "verdict", "mean W", "tokens/J"):
        vms.add_column(col, justify="left" if col in ("VM", "verdict") else "right", no_wrap=True)
    for row in r.vm_rows():
        dev = f"{row['deviation_pct']:+.1f}%" if row["deviation_pct"] is not None else "-"
        vms.add_row(
            row["vm"],
            fmt_num(row["tokens_per_s"]),
            fmt_num(row["tokens_per_s_per_gpu"]),
            dev,
            row["status"] + ("" if row["counted"] else " (excluded)"),
            fmt_num(row["mean_watts"], 0) if row["mean_watts"] else "-",
            fmt_num(row["tokens_per_joule"], 2) if row["tokens_per_joule"] else "-",
        )
    parts.append(vms)
    if r.multi:
        parts.append(renderable(r.rack))

    bus = Table(
        title="3. Business translation (interactions/s = tokens/s / tokens per interaction)" + lab, title_justify="left"
    )
    for col in ("profile", "tokens/interaction", "per GPU", "per VM", "total"):
        bus.add_column(col, justify="left" if col == "profile" else "right")
    for b in r.business:
        bus.add_row(
            b.profile, f"{b.tokens_per_interaction:,}", fmt_num(b.per_gpu, 2), fmt_num(b.per_vm, 1), fmt_num(b.total, 1)
        )
    parts.append(bus)

    eff = Table(title="4. Efficiency" + lab, title_justify="left")
    for col in ("what", "tokens/J (= tokens/s per W)", "from"):
        eff.add_column(col)
    for m in r.measured:
        eff.add_row(
            f"measured (NVML), {m.vm}",
            fmt_num(m.tokens_per_joule, 2),
            f"{m.power.path} ({m.power.gpus} GPUs, mean {m.power.mean_watts_total:,.0f} W)",
        )
    if not r.measured:
        eff.add_row("measured (NVML)", "not measured", "no power.csv in the run folders")
    for name, gpu, value in r.tdp:
        eff.add_row(f"{TDP_LABEL}: {name}", fmt_num(value, 2), gpu)
    parts.append(eff)

    if r.roof:
        frac = r.roof.fraction
        parts.append(
            Text(
                f"5. Roofline{lab}: {r.roof.explanation}\n   bound {fmt_num(r.roof.bound_tokens_per_s)} "
                f"tokens/s per GPU; yours {fmt_num(r.per_gpu)} = "
                f"{frac * 100:.1f}% of it"
                if frac is not None
                else ""
            )
        )
    else:
        parts.append(Text(f"5. Roofline: not computed ({r.recipe.name} has no memory bandwidth)."))
    for note in r.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    parts.append(Text("Sources:\n" + "\n".join(f"  {p}" for p in r.sources), style="dim"))
    for kind, path in r.outputs.items():
        parts.append(Text(f"{kind}: {path}"))
    return Group(*parts)
