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

    def to_json(self) -> dict[str, Any]:
        return {"hash": self.recipe.hash(), **self.recipe.model_dump(mode="json")}

    def __rich__(self) -> Text:
        body = yaml.safe_dump(self.recipe.model_dump(mode="json"), sort_keys=False, width=120)
        return Text(f"# {self.recipe.title} (hash {self.recipe.hash()})\n{body}")


@dataclass
class ValidationReport:
    rows: list[tuple[str, str | None]] = field(default_factory=list)

    @classmethod
    def check(cls, paths: list[Path]) -> ValidationReport:
        rows: list[tuple[str, str | None]] = []
        for path in paths:
            try:
                load_recipe_file(path)
                rows.append((str(path), None))
            except RecipeError as exc:
                rows.append((str(path), exc.message))
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
