"""Golden-file comparison: REPRO_UPDATE_GOLDEN=1 rewrites the files, otherwise they must match exactly."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console

from repro.ui.render import renderable

GOLDEN = Path(__file__).resolve().parent / "golden"


def render(obj: Any, width: int = 140) -> str:
    with open(os.devnull, "w") as sink:
        console = Console(width=width, record=True, color_system=None, force_terminal=False, file=sink)
        console.print(renderable(obj))
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("REPRO_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"golden file {path} missing; run with REPRO_UPDATE_GOLDEN=1 once and review it"
    assert text == path.read_text(), f"output differs from {path}"


def stable_json(obj: Any, fixtures: Path) -> str:
    """JSON with the machine-specific fixtures path replaced, so goldens hold on every checkout."""
    return json.dumps(obj, indent=2, sort_keys=True, default=str).replace(str(fixtures), "<fixtures>") + "\n"
