"""The rate `repro tune` chose, saved per recipe and scenario where `repro run server|interactive` picks it up.

The file holds the whole search (run/tune.py's TuneResult), so the run that uses the rate records where it came
from in run.json, and the report can draw the search beside the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repro.core.fsutil import atomic_write_json
from repro.core.recipes import Recipe
from repro.core.workspace import Workspace


def tuned_path(ws: Workspace, recipe: str, scenario: str) -> Path:
    return ws.tuned / recipe / f"{scenario.lower()}.json"


def write_tuned(ws: Workspace, recipe: Recipe, scenario: str, doc: dict[str, Any]) -> Path:
    path = tuned_path(ws, recipe.name, scenario)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {**doc, "recipe": recipe.name, "recipe_hash": recipe.hash(), "scenario": scenario})
    return path


def load_tuned(ws: Workspace, recipe: str, scenario: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(tuned_path(ws, recipe, scenario).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def read_tuned(ws: Workspace, recipe: Recipe, scenario: str) -> dict[str, Any] | None:
    """The saved rate as a run records its source; None when there is none or the recipe changed since the search."""
    doc = load_tuned(ws, recipe.name, scenario)
    if doc is None or doc.get("recipe_hash") != recipe.hash():
        return None
    rate = doc.get("chosen_qps")
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not rate > 0:
        return None
    return {
        "from": "repro tune",
        "target_qps": float(rate),
        "file": str(tuned_path(ws, recipe.name, scenario)),
        "tuned_at": doc.get("finished"),
        "highest_passing_qps": doc.get("highest_passing_qps"),
        "lowest_failing_qps": doc.get("lowest_failing_qps"),
        "margin": doc.get("margin"),
        "choice": doc.get("choice") if isinstance(doc.get("choice"), str) else None,
        "confirmed": doc.get("confirmed") if isinstance(doc.get("confirmed"), bool) else None,
        "endpoints": doc.get("endpoints"),
        "limits_ms": doc.get("limits_ms"),
        "search": [
            {
                k: p.get(k)
                for k in (
                    "target_qps",
                    "ttft_p99_ms",
                    "tpot_p99_ms",
                    "ttft_p99_bound_ms",
                    "tpot_p99_bound_ms",
                    "bound_confidence",
                    "queries",
                    "kind",
                    "passed",
                    "reason",
                )
            }
            for p in doc.get("probes") or []
            if isinstance(p, dict)
        ],
    }
