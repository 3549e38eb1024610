"""The one clock: UTC timestamps for records, local stamps for folder names, and unique stamped folders."""

from __future__ import annotations

import re
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


def new_stamped_dir(base: Path, also_taken: Callable[[Path], bool] | None = None) -> Path:
    """Create and return a new `base/<stamp>` folder (then `-2`, `-3`, …), skipping names `also_taken` reserves. The
    mkdir itself is the claim, so two processes starting in the same second (rack nodes on one shared workspace,
    two shells) never share a folder."""
    base.mkdir(parents=True, exist_ok=True)

    def taken(path: Path) -> bool:
        if also_taken is not None and also_taken(path):
            return True
        try:
            path.mkdir()
        except FileExistsError:
            return True
        return False

    return stamped_path(base, taken)


_STAMPED = re.compile(r"(\d{8}-\d{6})(?:-(\d+))?")


def stamp_order(path: Path) -> tuple[int, str, int]:
    """Sort key: the order stamped folders were made in (`…-9` before `…-10`, which a plain sort inverts); a folder
    not named by stamp() sorts before all of them, never as the newest run."""
    m = _STAMPED.fullmatch(path.name)
    return (1, m[1], int(m[2] or 1)) if m else (0, path.name, 0)
