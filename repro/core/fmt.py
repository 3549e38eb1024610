"""Number formatting shared by verdict sentences, reports and tables, so a figure reads the same everywhere."""

from __future__ import annotations

from typing import Any


def fmt_num(value: Any, digits: int = 1) -> str:
    if value is None or value == "unknown":
        return "unknown"
    return f"{float(value):,.{digits}f}"
