"""Key-by-key merge: a scenario's (or a serving role's) options over the recipe's, nested mappings merged, any
other value replaced. One rule for the recipe, the MLPerf-rule check and the launcher, so the three agree."""

from __future__ import annotations

from typing import Any


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
