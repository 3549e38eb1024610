"""The report's tables, built once from a `Report`: the terminal, Markdown and HTML views all render these.

`model.py` computes the figures from the run folders; this module only decides how they are laid out as
sections of tables, paragraphs and charts, so the three views cannot disagree.
"""

from __future__ import annotations

import math
from typing import Any

from repro.core.fmt import fmt_num
from repro.core.recipes import Recipe
from repro.report.explain import Explanation
from repro.report.model import TDP_LABEL, Report
from repro.report.tables import ALWAYS, Chart, Column, Paragraph, Section, Table, footnote_ref, natural_key
from repro.results.attest import verify_command


def sections(report: Report) -> list[Section]:
    """Every table of the report, once: the terminal, Markdown and HTML views all render these."""
    lab = f" [{report.label}]" if report.label else ""
    out = [_published_section(report, lab), _run_section(report, lab)]
    business = Table(
        [
            Column("profile"),
            Column("tokens/interaction", numeric=True, keep=5),
            Column(f"per {report.unit}", numeric=True, keep=8),
            Column("per VM", numeric=True, keep=7),
            Column("total", numeric=True),
        ],
        [
            [b.profile, f"{b.tokens_per_interaction:,}", fmt_num(b.per_gpu), fmt_num(b.per_vm), fmt_num(b.total)]
            for b in report.business
        ],
    )
    blocks: list[Paragraph | Table | Chart] = [
        Paragraph("interactions/s = tokens/s / tokens per interaction"),
        business,
    ]
    if report.cost is not None:
        blocks += [
            Paragraph("The cost of a token:"),
            Table(
                [Column("what"), Column("figure", numeric=True, keep=9), Column("basis", keep=1, prose=True)],
                [list(row) for row in report.cost.rows()],
            ),
        ]
    out.append(Section(f"3. Business translation{lab}", blocks))
    out.append(Section(f"4. Efficiency{lab}", [_efficiency_table(report)]))
    roof: list[Paragraph | Table | Chart] = []
    if report.roof:
        roof += [
            Paragraph(f"Memory (HBM): {report.roof.explanation}", code=True),
            Paragraph(f"Tensor cores: {report.roof.compute_explanation}", code=True),
            Paragraph(
                f"HBM bound {fmt_num(report.roof.hbm_tokens_per_s)}, compute bound "
                f"{fmt_num(report.roof.compute_tokens_per_s)} tokens/s per GPU; the ceiling is the lower "
                f"({report.roof.limiter}), {fmt_num(report.roof.bound_tokens_per_s)}; yours {fmt_num(report.per_gpu)} "
                f"= {(report.roof.fraction or 0) * 100:.1f}% of it."
            ),
            Paragraph(f"Measured ceilings: {report.roof.measured_explanation}."),
            Chart("roofline", "roofline"),
        ]
    else:
        roof.append(Paragraph(f"Not computed ({roofline_missing(report.recipe)})."))
    out.append(Section(f"5. Roofline{lab}", roof))
    if report.explanation is not None:
        out.append(Section(f"6. Why your number is where it is{lab}", explain_blocks(report.explanation)))
    if report.tune:
        out.append(Section(f"Tuned rate{lab}", tune_blocks(report.tune)))
    if report.notes:
        out.append(Section("Notes", [Paragraph(n) for n in report.notes]))
    if report.attestations:
        out.append(Section("Attestation", _attestation_blocks(report)))
    out.append(Section("Sources", [Paragraph(str(p), code=True) for p in report.sources]))
    return out


def _attestation_blocks(report: Report) -> list[Paragraph | Table | Chart]:
    blocks: list[Paragraph | Table | Chart] = []
    for path, digest, keyid in report.attestations:
        who = f", signed by key id {keyid[:16]} (not checked by this report)" if keyid else ""
        blocks.append(Paragraph(f"{path}: sha256 {digest}{who}."))
        blocks.append(Paragraph("Check it offline, with no GPU, against the signer's public key:"))
        blocks.append(Paragraph(verify_command(path, keyid), code=True))
    return blocks


def _published_section(report: Report, lab: str) -> Section:
    notes: list[str] = []
    table = Table(
        [
            Column("system"),
            Column("GPU", keep=2),
            Column("published", numeric=True, keep=8),
            Column("band", numeric=True, keep=6),
            Column("yours", numeric=True, keep=3),
            Column("deviation", numeric=True),
            Column("in band", keep=7),
            Column("status", keep=4),
            Column("source", keep=1),
        ],
        [
            [
                c.recipe,
                c.gpu,
                fmt_num(c.published_per_gpu),
                f"{fmt_num(c.band[0])}–{fmt_num(c.band[1])}",
                fmt_num(report.per_gpu),
                f"{c.deviation_pct:+.1f}%",
                "yes" if c.in_band else "no",
                c.status,
                footnote_ref(notes, c.source),
            ]
            for c in report.comparisons
        ],
        row_class=["own" if c.own else "" for c in report.comparisons],
        footnotes=notes,
    )
    blocks: list[Paragraph | Table | Chart] = [
        table,
        Chart(
            "comparison",
            "tokens/s per GPU, yours vs published"
            if report.unit == "GPU"
            else f"tokens/s per {report.unit} (yours) vs per GPU (published)",
        ),
    ]
    if report.standing:
        blocks += [
            Paragraph(report.standing.sentence + lab),
            Chart("standing", f"your run among the published {report.standing.accelerator} results"),
        ]
    return Section(f"1. Against every published result (tokens/s per GPU){lab}", blocks)


def _run_section(report: Report, lab: str) -> Section:
    notes: list[str] = []
    rows = sorted(report.vm_rows(), key=lambda r: natural_key(r["vm"]))
    table = Table(
        [
            Column(report.rack.unit),
            Column("tokens/s", numeric=True, keep=8),
            Column(f"per {report.unit}", numeric=True),
            Column("deviation", numeric=True, keep=7),
            Column("verdict"),
            Column("mean W", numeric=True, keep=3),
            Column("tokens/J", numeric=True, keep=2),
            Column("summary", keep=1),
        ],
        [
            [
                r["vm"],
                fmt_num(r["tokens_per_s"]),
                fmt_num(r["tokens_per_s_per_gpu"]),
                f"{r['deviation_pct']:+.1f}%" if r["deviation_pct"] is not None else "-",
                r["status"] + ("" if r["counted"] else " (excluded)"),
                fmt_num(r["mean_watts"], 0) if r["mean_watts"] else "-",
                fmt_num(r["tokens_per_joule"], 2) if r["tokens_per_joule"] else "-",
                footnote_ref(notes, r["summary"] or r["folder"]),
            ]
            for r in rows
        ],
        row_class=[str(r["status"]).replace(" ", "-") for r in rows],
        footnotes=notes,
    )
    blocks: list[Paragraph | Table | Chart] = [table]
    # A verdict other than PASS says why, as verify and aggregate do: a FAIL with no reason is no evidence.
    blocks += [
        Paragraph(f"{r['vm']}: {r['status']}: {reason}")
        for r in rows
        if r["status"] != "PASS"
        for reason in r["reasons"]
        if reason
    ]
    if report.multi:
        blocks += _rack_blocks(report)
    return Section(f"{'2. Rack table' if report.multi else '2. Run'}{lab}", blocks)


def _rack_blocks(report: Report) -> list[Paragraph | Table | Chart]:
    stats = report.rack.to_json()["stats"]
    rack = report.recipe.published.rack
    blocks: list[Paragraph | Table | Chart] = []
    if stats:
        pub = [
            rack.vms if rack else "-",
            *(
                fmt_num(v) if rack else "-"
                for v in (
                    rack.total_tokens_per_s if rack else None,
                    rack.mean_tokens_per_s if rack else None,
                    rack.min_tokens_per_s if rack else None,
                    rack.max_tokens_per_s if rack else None,
                )
            ),
        ]
        mine = [f"{stats['vms']:.0f}", *(fmt_num(stats[k]) for k in ("total", "mean", "min", "max"))]
        u = report.rack.unit  # nodes where the logs describe nodes of a system, not Azure VMs
        names = [f"{u}s", "total tokens/s", f"mean per {u}", f"min per {u}", f"max per {u}"]
        blocks.append(
            Table(
                [Column("rack"), Column("measured", numeric=True), Column("published", numeric=True)],
                [[n, m, str(p)] for n, m, p in zip(names, mine, pub, strict=True)],
            )
        )
    outside = report.published_vms_outside_band()
    if outside:
        blocks.append(Paragraph(outside))
    blocks.append(Chart("rack", "tokens/s per GPU per VM with the published band"))
    return blocks


def _efficiency_table(report: Report) -> Table:
    notes: list[str] = []
    rows = [
        [
            f"measured (NVML), {m.vm}",
            fmt_num(m.tokens_per_joule, 2),
            f"{footnote_ref(notes, str(m.power.path))} {m.power.gpus} GPUs, mean {m.power.mean_watts_total:,.0f} W",
        ]
        for m in report.measured
    ]
    if not rows:
        rows.append(["measured (NVML)", "not measured", "no power.csv in the run folders"])
    rows += [[f"{TDP_LABEL}: {n}", fmt_num(v, 2), g] for n, g, v in report.tdp]
    return Table(
        [
            Column("what", prose=True),
            Column("tokens/J (= tokens/s per W)", numeric=True),
            Column("from", prose=True, keep=ALWAYS - 1),
        ],
        rows,
        footnotes=notes,
    )


TUNE_BAR = 30


def tune_blocks(tune: dict[str, Any]) -> list[Paragraph | Table | Chart]:
    """The search as a small text chart: rate tried -> p99 TTFT (bar against the limit, the | mark), TPOT, result."""
    limits = tune.get("limits_ms") or {}
    ttft_limit = float(limits.get("ttft") or 0) or None
    mark = int(TUNE_BAR / 1.5)
    rows = []
    found = [p for p in tune.get("search") or [] if isinstance(p, dict) and _finite(p.get("target_qps"))]
    for p in sorted(found, key=lambda p: float(p["target_qps"])):
        ttft, tpot = p.get("ttft_p99_ms"), p.get("tpot_p99_ms")
        frac = (
            min(float(ttft) / ttft_limit, 1.5) if isinstance(ttft, (int, float)) and _finite(ttft) and ttft_limit else 0
        )
        n = int(round(frac / 1.5 * TUNE_BAR))
        bar = ["#" if i < n else "." for i in range(TUNE_BAR)]
        bar[mark] = "|"
        rows.append(
            [
                fmt_num(p["target_qps"], 2),
                _ms_cell(ttft),
                "".join(bar),
                _ms_cell(tpot),
                "pass" if p.get("passed") else "FAIL",
            ]
        )
    head = (
        f"target_qps {fmt_num(tune.get('target_qps'), 2)} from repro tune: highest passing "
        f"{fmt_num(tune.get('highest_passing_qps'), 2)}, lowest failing {fmt_num(tune.get('lowest_failing_qps'), 2)}, "
        f"margin {float(tune.get('margin') or 0):.0%}; TTFT limit {fmt_num(ttft_limit, 0)} ms (the | in the bar)."
    )
    head += f" {tune['choice'][:400]}." if isinstance(tune.get("choice"), str) else ""
    table = Table(
        [
            Column("rate q/s", numeric=True),
            Column("p99 TTFT", numeric=True),
            Column("TTFT vs limit", keep=3),
            Column("p99 TPOT", numeric=True, keep=4),
            Column("result"),
        ],
        rows,
    )
    return [Paragraph(head), table]


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _ms_cell(v: Any) -> str:
    return f"{float(v):,.1f} ms" if _finite(v) else "-"


def explain_blocks(e: Explanation) -> list[Paragraph | Table | Chart]:
    """The causes, what differs and the token figures of `repro explain`, as report blocks."""
    blocks: list[Paragraph | Table | Chart] = [Paragraph(e.headline + ".")]
    if e.causes:
        blocks.append(
            Table(
                [Column("#", numeric=True), Column("cause"), Column("effect", keep=6), Column("moves", keep=5)],
                [
                    [
                        str(i),
                        c.title,
                        c.effect,
                        c.moves + (f" ({c.impact_pct:+.1f}%)" if c.impact_pct is not None else ""),
                    ]
                    for i, c in enumerate(e.causes, 1)
                ],
                caption="Causes, most likely first",
            )
        )
        blocks += [Paragraph(f"{i}. Evidence: " + "; ".join(c.evidence) + ".") for i, c in enumerate(e.causes, 1)]
    if e.diffs:
        blocks.append(
            Table(
                [Column("area", keep=4), Column("key"), Column("yours"), Column("reference"), Column("effect", keep=6)],
                [[d.area, d.key, str(d.yours), str(d.reference), d.effect] for d in e.diffs],
                caption=f"What differs from {e.reference.name}",
            )
        )
    t = e.tokens
    share = f"{t.share_at_max * 100:.1f}%" if t.share_at_max is not None else "not measured"
    blocks.append(
        Paragraph(
            f"Output tokens per sample {fmt_num(t.output_per_sample, 1)} ({t.output_source}; MLPerf reference "
            f"{t.reference_output:g}); input {fmt_num(t.input_per_sample, 1)} ({t.input_source}); at max_tokens: "
            f"{share}."
        )
    )
    blocks += [Paragraph(n) for n in e.notes]
    return blocks


def roofline_missing(recipe: Recipe) -> str:
    """Why a recipe's roofline was not drawn, in the words of what is missing."""
    if recipe.system.memory_bandwidth_tbps == "unknown" or recipe.trtllm is None:
        return f"{recipe.name} has no memory bandwidth"
    if recipe.model.architecture is None:
        return f"benchmark {recipe.benchmark} gives no model architecture"
    return (
        f"no input length measured (no prepared dataset for the run) and benchmark {recipe.benchmark} states no "
        "mean prompt"
    )
