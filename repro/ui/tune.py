"""The view of a `repro tune` search: each probe (rate -> p99 TTFT/TPOT -> pass/fail) as a small chart."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from repro.ui.wrap import Prose

BAR = 24


def search_chart(probes: list[dict[str, Any]], limits: dict[str, float]) -> Table:
    """One row per probe in rate order; the bar is p99 TTFT against the limit (the | mark)."""
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    table.add_column("rate q/s", justify="right")
    table.add_column("p99 TTFT", justify="right")
    table.add_column(f"TTFT vs {limits['ttft']:g} ms", no_wrap=True)
    table.add_column("p99 TPOT", justify="right")
    table.add_column("")
    for p in sorted(probes, key=lambda p: p["target_qps"]):
        ttft = p.get("ttft_p99_ms")
        frac = 0.0 if ttft is None else min(ttft / limits["ttft"], 1.5)
        n = int(round(frac / 1.5 * BAR))
        mark = int(round(BAR / 1.5))
        cells = ["█" if i < n else " " for i in range(BAR)]
        cells[min(mark, BAR - 1)] = "|" if n <= mark else "┃"
        style = "green" if p["passed"] else "red"
        table.add_row(
            f"{p['target_qps']:g}",
            "-" if ttft is None else f"{ttft:,.1f} ms",
            Text("".join(cells), style=style),
            "-" if p.get("tpot_p99_ms") is None else f"{p['tpot_p99_ms']:,.1f} ms",
            Text("pass" if p["passed"] else "FAIL", style=style),
        )
    return table


def probe_settings_text(settings: dict[str, Any]) -> str:
    """LoadGen's user.conf keys as words a user reads (`min_duration 60,000 ms`), never a Python dict."""
    shown = [
        f"{k} {v:,}{' ms' if k.endswith('duration') else ''}" if isinstance(v, (int, float)) else f"{k} {v}"
        for k, v in settings.items()
        if k != "note"
    ]
    note = f"; {settings['note']}" if settings.get("note") else ""
    return ", ".join(shown) + note


def tune_result(result: Any) -> Group:
    doc = result.to_json()
    parts: list[Any] = []
    if result.dry_run:
        parts.append(Prose(result.summary))
        parts.append(Prose(f"probe settings: {probe_settings_text(doc['probe_settings'])}", style="dim"))
        return Group(*parts)
    parts.append(Text(f"{result.scenario} search for {result.recipe} ({result.stopped})", style="bold"))
    parts.append(search_chart(doc["probes"], result.limits_ms))
    ok, bad = result.chosen_probe(), result.failed_probe()
    if result.chosen_qps is not None and ok is not None:
        parts.append(Text(result.choice, style="green" if result.confirmed else "yellow"))
    if bad is not None:
        parts.append(Text(f"failed at {bad.target_qps:g} q/s: {bad.reason}", style="red"))
    elif result.chosen_qps is not None:
        parts.append(Text("no failing rate found within --max-minutes: the chosen rate may be low", style="yellow"))
    full = doc["full_run"]
    if "expected_s" in full:
        parts.append(
            Text(
                f"the full run: {full['expected_queries']:,} queries at {full['target_qps']:g} q/s, about "
                f"{full['expected_s'] / 60:,.1f} min (min duration {full['min_duration_s']:g} s, "
                f"min queries {full['min_query_count']:,})"
            )
        )
    if result.file:
        parts.append(Text(f"saved to {result.file}; `repro run {result.scenario.lower()}` uses it and says so"))
    if result.label:
        parts.append(Text(f"label: {result.label} (never counted as a reproduction)", style="yellow"))
    return Group(*parts)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f} ms"
