"""The one clock: UTC timestamps for records, local stamps for folder names, and unique stamped folders."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path


def now_iso() -> str:
    """UTC, second resolution: what every ledger entry, run.json and rack.json records."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def stamp() -> str:
    """Local time as a folder name people can sort and read: 20261123-142501."""
    return datetime.now().strftime("%Y%m%d-%H%M%S")


def stamped_path(base: Path, taken: Callable[[Path], bool] | None = None) -> Path:
    """A new `base/<stamp>` path (then `-2`, `-3`, …) that `taken` says is free; nothing is created."""
    is_taken = taken or (lambda p: p.exists())
    first = stamp()
    path, n = base / first, 2
    while is_taken(path):
        path, n = base / f"{first}-{n}", n + 1
    return path
