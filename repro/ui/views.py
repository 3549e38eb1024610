"""Result objects for the small commands: each knows its JSON form and its Rich form."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console, ConsoleOptions
from rich.table import Table
from rich.text import Text

from repro.core.errors import RecipeError
from repro.core.fmt import fmt_rate
from repro.core.recipes import Published, Recipe, load_recipe_file
from repro.core.serving import gpus_served, serving_text


def _result(r: Recipe) -> str:
    """The official ID where known, else the index key (`repro published show` takes either)."""
    pub = r.published
    return pub.mlperf_id if pub.mlperf_id != "unknown" else (pub.result_id or "unknown")


def _known(value: Any) -> bool:
    return value not in (None, "unknown", "")


def device_count(n: int, recipe: Recipe) -> str:
    """'1 GPU', '8 GPUs', or '1 CPU' for the demo: never '1 GPUs'."""
    unit = "CPU" if recipe.system.gpu_arch == "cpu" else "GPU"
    return f"{n} {unit}{'' if n == 1 else 's'}"


def published_phrase(pub: Published, demo: bool = False) -> str:
    """What the run is compared with, naming only what is known: no 'unknown (unknown, MLPerf unknown, ID unknown)'."""
    if not _known(pub.tokens_per_s_per_gpu):
        return "nothing published to compare with" + (" (demo)" if demo else "")
    facts = [str(pub.status)] if _known(pub.status) else []
    if _known(pub.mlperf_round):
        facts.append(f"MLPerf {pub.mlperf_round}")
    if _known(pub.mlperf_id):
        facts.append(f"ID {pub.mlperf_id}")
    return f"published {fmt_rate(pub.tokens_per_s_per_gpu)}" + (f" ({', '.join(facts)})" if facts else "")


@dataclass
class RecipeList:
    recipes: list[Recipe]

    def to_json(self) -> dict[str, Any]:
        return {
            "recipes": [
                {
                    "name": r.name,
                    "title": r.title,
                    "vm_size": r.system.vm_size,
                    "gpu": r.system.gpu_name,
                    "gpus_per_vm": r.system.gpus_per_vm,
                    "precision": r.precision,
                    "backend": r.backend,
                    "published_status": r.published.status,
                    "benchmark": r.benchmark,
                    "published_tokens_per_s_per_vm": r.published.tokens_per_s_per_vm,
                    "published_tokens_per_s_per_gpu": r.published.tokens_per_s_per_gpu,
                    "published_mlperf_id": r.published.mlperf_id,
                    "published_result_id": r.published.result_id,
                    "reference_only": r.reference_only,
                    "demo": r.demo,
                    "hash": r.hash(),
                }
                for r in self.recipes
            ]
        }

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        """Name and VM size (what a user matches against the machine) always show; in a narrow terminal the
        least needed columns are dropped whole, never a number or a name broken down a column."""
        from repro.report.tables import Column
        from repro.report.tables import Table as Data
        from repro.ui.fit import fitted

        rows = []
        for r in self.recipes:
            status = "demo" if r.demo else ("reference only" if r.reference_only else r.published.status)
            rows.append(
                [
                    r.name,
                    r.system.vm_size or "-",
                    r.benchmark,
                    f"{r.system.gpus_per_vm} x {r.system.gpu_name}",
                    r.precision,
                    r.backend,
                    _as_published(r.published.tokens_per_s_per_vm),
                    fmt_rate(r.published.tokens_per_s_per_gpu),
                    _result(r),
                    status,
                ]
            )
        columns = [
            Column("name"),
            Column("VM size"),
            Column("benchmark", keep=9),
            Column("GPUs", keep=8),
            Column("precision", keep=6),
            Column("backend", keep=3),
            Column("published tok/s", numeric=True, keep=4),
            Column("published tok/s/GPU", numeric=True, keep=7),
            Column("result", keep=2),
            Column("status", keep=5),
        ]
        yield Text("Recipes", style="italic")
        yield from fitted(Data(columns, rows), options)


def _as_published(value: Any) -> str:
    """A published figure with the digits its log printed (847.233, 52,061.6), thousands separated."""
    if not isinstance(value, (int, float)):
        return "unknown"
    text = f"{float(value):,.3f}".rstrip("0")
    return text[:-1] if text.endswith(".") else text


@dataclass
class RecipeShow:
    recipe: Recipe

    def serving(self) -> list[dict[str, Any]]:
        """Each scenario the recipe serves: its layout in words, where a system's servers, ranks and LoadGen go (the
        launcher's own placement, run/launchers/layout.py, on the system's nodes), and its published figure with its
        band (per GPU over the system's GPUs as MLPerf counts them, whatever share of them the config served from)."""
        r = self.recipe
        out = []
        for scenario in (s for s in ("Offline", "Server", "Interactive") if s in r.bench.scenarios):
            pub = r.published_for(scenario)
            dep = r.deployment(scenario)
            used, total = gpus_served(dep)
            figure = pub.tokens_per_s_per_gpu if pub is not None else None
            band = pub.band() if pub is not None else None
            out.append(
                {
                    "scenario": scenario,
                    "layout": serving_text(dep),
                    "gpus_served": used,
                    "system_gpus": total,
                    **_placement(dep),
                    "published_tokens_per_s_per_gpu": figure,
                    "published_band_tokens_per_s_per_gpu": list(band) if band else None,
                    "published_tokens_per_s_per_gpu_served": (
                        float(figure) * total / used if isinstance(figure, float) and 0 < used < total else None
                    ),
                }
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {"hash": self.recipe.hash(), "serving": self.serving(), **self.recipe.model_dump(mode="json")}

    def __rich__(self) -> Text:
        body = yaml.safe_dump(self.recipe.model_dump(mode="json"), sort_keys=False, width=120)
        lines = [f"# {self.recipe.title} (hash {self.recipe.hash()})"]
        if self.recipe.trtllm is not None:
            lines.append("# serving, per scenario:")
            for row in self.serving():
                lines.append(f"#   {row['scenario']}: {row['layout']}")
                lines.append(f"#     {_figure_words(row)}")
                if row["shape"] == "one-system":
                    lines.append(
                        f"#     every node, server and srun step: `repro run {row['scenario'].lower()} --recipe "
                        f"{self.recipe.name} --launcher slurm --dry-run`"
                    )
        return Text("\n".join(lines) + f"\n{body}")


def _placement(dep: Any) -> dict[str, Any]:
    """Where a system's scenario runs, as the launcher places it on the system's nodes: nodes, instances by role,
    ranks, front ends and the LoadGen host (one VM: its servers on it, LoadGen beside them)."""
    from repro.run.launchers.layout import Allocation, place_system, serving_layout
    from repro.run.servers import ServerOptions

    lay = serving_layout(dep)
    if lay.shape != "one-system" or lay.nodes is None:
        return {"shape": lay.shape, "nodes": 1, "instances": {"server": lay.groups[0].count}, "loadgen_node": None}
    plan = place_system(dep, None, lay, Allocation.planned(lay.nodes, lay.gpus_per_node), ServerOptions())
    roles: dict[str, int] = {}
    for inst in plan.instances:
        roles[inst.role] = roles.get(inst.role, 0) + 1
    serving_nodes = {n for i in plan.instances if i.role != "router" for n in i.nodes}
    return {
        "shape": plan.shape,
        "nodes": len(plan.nodes),
        "nodes_serving": len(serving_nodes),
        "instances": roles,
        "ranks": plan.ranks,
        "front_ends": roles.get("router", 0),
        "loadgen_node": plan.nodes[plan.loadgen[0].node].name,
        "loadgen_targets": len(plan.loadgen[0].targets),
    }


def _figure_words(row: dict[str, Any]) -> str:
    """'published 9,182.5 tokens/s per GPU (band 8,723.4-9,641.7)', and over how many GPUs where it served from
    fewer than the system has."""
    figure, served, band = (
        row["published_tokens_per_s_per_gpu"],
        row["published_tokens_per_s_per_gpu_served"],
        row["published_band_tokens_per_s_per_gpu"],
    )
    if not isinstance(figure, float):
        return "no published result"
    text = f"published {fmt_rate(figure)} tokens/s per GPU"
    if band:
        text += f" (band {fmt_rate(band[0])}-{fmt_rate(band[1])})"
    if served is not None:
        text += (
            f", over the system's {row['system_gpus']} GPUs as MLPerf counts them; {fmt_rate(served)} over the "
            f"{row['gpus_served']} it served from"
        )
    return text


@dataclass
class ValidationReport:
    rows: list[tuple[str, str | None]] = field(default_factory=list)

    @classmethod
    def check(cls, paths: list[Path]) -> ValidationReport:
        from repro.run.request_rules import request_rule_violations

        rows: list[tuple[str, str | None]] = []
        for path in paths:
            try:
                recipe = load_recipe_file(path)
            except RecipeError as exc:
                rows.append((str(path), exc.message))
                continue
            broken = request_rule_violations(recipe)
            rows.append((str(path), f"{path}: breaks an MLPerf rule: {broken[0].message()}" if broken else None))
        return cls(rows)

    @property
    def ok(self) -> bool:
        return all(err is None for _, err in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "recipes": [{"path": p, "valid": e is None, "error": e} for p, e in self.rows]}

    def __rich__(self) -> Table:
        t = Table(title="Recipe validation")
        t.add_column("recipe")
        t.add_column("result")
        for p, e in self.rows:
            t.add_row(p, Text("valid", "green") if e is None else Text(e, "red"))
        return t
