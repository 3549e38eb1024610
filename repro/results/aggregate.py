"""The rack table: independent per-VM runs summed, as the published 1.1M tokens/s GB300 result was.

Only valid, complete, in-scenario VMs are summed; every other VM is listed with its reason.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from repro.core.errors import InputError, ReproError
from repro.core.textsafe import md_cell
from repro.results.logs import find_runs
from repro.core.recipes import Recipe, get_recipe
from repro.results.verify import Verdict, pick_run, resolve_gpus, resolve_recipe, evaluate
from repro.ui.views import fmt_num


@dataclass
class VMRow:
    name: str
    folder: Path
    verdict: Verdict | None = None
    problem: str | None = None

    @property
    def counted(self) -> bool:
        """Summed into the rack total: a readable, valid, complete run (band verdict aside)."""
        v = self.verdict
        return v is not None and v.run.valid and not v.run.incomplete and v.run.tokens_per_s is not None

    def to_json(self) -> dict[str, Any]:
        v = self.verdict
        return {"vm": self.name, "folder": str(self.folder), "counted": self.counted, "problem": self.problem,
                "status": v.status if v else "MISSING", "tokens_per_s": v.run.tokens_per_s if v else None,
                "tokens_per_s_per_gpu": round(v.per_gpu, 1) if v and v.per_gpu else None,
                "deviation_pct": round(v.deviation_pct, 2) if v and v.deviation_pct is not None else None,
                "gpus": v.gpus if v else None, "reasons": v.reasons if v else [self.problem]}


@dataclass
class RackReport:
    recipe: Recipe
    rows: list[VMRow]
    expect: int | None = None
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def counted(self) -> list[VMRow]:
        return [r for r in self.rows if r.counted]

    @property
    def missing_count(self) -> int:
        return max(0, (self.expect or 0) - len(self.rows))

    @property
    def exit_code(self) -> int:
        ok = all(r.verdict is not None and r.verdict.status == "PASS" for r in self.rows)
        return 0 if ok and self.missing_count == 0 and self.rows else 1

    def compute(self) -> "RackReport":
        values = [r.verdict.run.tokens_per_s for r in self.counted]  # type: ignore[union-attr]
        gpus = sum(r.verdict.gpus for r in self.counted)  # type: ignore[union-attr]
        if values:
            mean = statistics.fmean(values)
            self.stats = {"vms": len(values), "gpus": gpus, "total": sum(values), "max": max(values), "min": min(values),
                          "mean": mean, "median": statistics.median(values),
                          "spread_pct": (max(values) - min(values)) / mean * 100,
                          "per_gpu": sum(values) / gpus}
        return self

    def to_json(self) -> dict[str, Any]:
        rack = self.recipe.published.rack
        return {"recipe": self.recipe.name, "recipe_hash": self.recipe.hash(),
                "stats": {k: round(v, 2) for k, v in self.stats.items()},
                "expected_vms": self.expect, "missing_vms": self.missing_count,
                "excluded": [r.name for r in self.rows if not r.counted],
                "published_rack": rack.model_dump() if rack else None,
                "published_band_per_gpu": self.recipe.published.band(),
                "vms": [r.to_json() for r in self.rows], "all_pass": self.exit_code == 0}

    def _summary_rows(self) -> list[tuple[str, str, str]]:
        s, rack = self.stats, self.recipe.published.rack
        pub = (lambda attr: fmt_num(getattr(rack, attr))) if rack else (lambda attr: "-")
        if not s:
            return [("VMs summed", "0", pub("vms") if rack else "-")]
        rows = [("VMs summed", f"{s['vms']:.0f} of {len(self.rows) + self.missing_count}", f"{rack.vms}" if rack else "-"),
                ("total tokens/s", fmt_num(s["total"]), pub("total_tokens_per_s")),
                ("max per VM", fmt_num(s["max"]), pub("max_tokens_per_s")),
                ("min per VM", fmt_num(s["min"]), pub("min_tokens_per_s")),
                ("average per VM", fmt_num(s["mean"]), pub("mean_tokens_per_s")),
                ("median per VM", fmt_num(s["median"]), pub("median_tokens_per_s")),
                ("spread (max-min)/mean", f"{s['spread_pct']:.1f}%",
                 f"{(rack.max_tokens_per_s - rack.min_tokens_per_s) / rack.mean_tokens_per_s * 100:.1f}%" if rack else "-"),
                ("tokens/s per GPU", fmt_num(s["per_gpu"]), fmt_num(self.recipe.published.tokens_per_s_per_gpu))]
        return rows

    def __rich__(self) -> Group:
        summary = Table(title=f"repro aggregate: {self.recipe.title}", title_justify="left")
        for col in ("", "measured", "published"):
            summary.add_column(col, justify="left" if not col else "right", no_wrap=True)
        for row in self._summary_rows():
            summary.add_row(*row)
        band = self.recipe.published.band()
        per_vm = Table(title="Per VM" + (f" (band {band[0]:,.1f}–{band[1]:,.1f} tokens/s per GPU)" if band else ""),
                       title_justify="left")
        for col in ("VM", "tokens/s", "per GPU", "deviation", "verdict", "why"):
            per_vm.add_column(col, justify="right" if col in ("tokens/s", "per GPU", "deviation") else "left",
                              no_wrap=col != "why")
        for r in self.rows:
            v = r.verdict
            if v is None:
                per_vm.add_row(r.name, "-", "-", "-", "[red]MISSING[/]", escape(r.problem or ""))
                continue
            style = "green" if v.status == "PASS" else "red" if v.status == "FAIL" else "yellow"
            dev = f"{v.deviation_pct:+.1f}%" if v.deviation_pct is not None else "-"
            note = "; ".join(v.reasons) + ("" if r.counted else " (excluded from the total)")
            per_vm.add_row(r.name, fmt_num(v.run.tokens_per_s), fmt_num(v.per_gpu), dev, f"[{style}]{v.status}[/]",
                           escape(note.strip()))
        parts: list[Any] = [summary, per_vm]
        if self.missing_count:
            parts.append(Text(f"{self.missing_count} of {self.expect} expected VMs have no result folder.", style="red"))
        return Group(*parts)

    def to_markdown(self) -> str:
        lines = [f"# Rack result: {self.recipe.title}", "", "| | measured | published |", "|---|---:|---:|"]
        lines += [f"| {a} | {b} | {c} |" for a, b, c in self._summary_rows()]
        lines += ["", "| VM | tokens/s | per GPU | deviation | verdict | why |", "|---|---:|---:|---:|---|---|"]
        for r in self.rows:
            v = r.verdict
            if v is None:
                lines.append(f"| {md_cell(r.name)} | - | - | - | MISSING | {md_cell(r.problem)} |")
            else:
                dev = f"{v.deviation_pct:+.1f}%" if v.deviation_pct is not None else "-"
                lines.append(f"| {md_cell(r.name)} | {fmt_num(v.run.tokens_per_s)} | {fmt_num(v.per_gpu)} | {dev} | {v.status} | "
                             f"{md_cell('; '.join(v.reasons))}{'' if r.counted else ' (excluded)'} |")
        if self.missing_count:
            lines += ["", f"{self.missing_count} of {self.expect} expected VMs have no result folder."]
        return "\n".join(lines) + "\n"


def _natural(name: str) -> list[Any]:
    """VM 2 before VM 10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _vm_folders(path: Path) -> list[tuple[str, Path]]:
    """One VM per argument, or one per child folder when the argument holds several VMs' results."""
    path = Path(path)
    if not path.is_dir():
        return [(path.name, path)]
    try:
        runs = [r for r in find_runs(path) if r.mode == "PerformanceOnly"]
    except InputError:
        return [(path.name, path)]
    if len(runs) <= 1:
        return [(path.name, path)]
    children = sorted({r.folder.relative_to(path).parts[0] for r in runs if r.folder != path}, key=_natural)
    return [(child, path / child) for child in children]


def aggregate(dirs: list[Path], recipe: str | Recipe | None = None, gpus: int | None = None,
              expect: int | None = None) -> RackReport:
    if not dirs:
        raise InputError("no result folders given.", "`repro aggregate DIR...` with one folder per VM")
    chosen: Recipe | None = get_recipe(recipe) if isinstance(recipe, str) else recipe
    rows: list[VMRow] = []
    for arg in dirs:
        for name, folder in _vm_folders(Path(arg)):
            row = VMRow(name, folder)
            try:
                run = pick_run(find_runs(folder), folder, "Offline")
                chosen = chosen or resolve_recipe(run, None)
                count, source = resolve_gpus(run, chosen, gpus)
                row.verdict = evaluate(run, chosen, count, source)
            except ReproError as exc:
                row.problem = exc.message
            rows.append(row)
    if chosen is None:
        raise InputError(f"none of {len(rows)} folders holds a readable run: {rows[0].problem}",
                         "check the folders, then `repro aggregate DIR...`")
    return RackReport(chosen, rows, expect).compute()
