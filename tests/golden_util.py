"""Golden-file comparison: REPRO_UPDATE_GOLDEN=1 rewrites the files, otherwise they must match exactly.

Terminal output is pinned by its content, not by Rich's drawing: `content(obj)` renders wide enough that no cell
wraps, then keeps each table row as `| cell | cell |` and every other line stripped, so a Rich release that
changes borders, padding or wrapping leaves the goldens alone while any changed word, number or row fails them."""

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


# Lines drawn only of these (table and panel borders) carry no content.
_BORDER = set("━─═┏┓┗┛┳┻┣┫╋┡┩╇┢┪╈┌┐└┘┬┴├┤┼╭╮╰╯╞╡╪ ")
_CELL_EDGES = "│┃║"


def content(obj: Any) -> str:
    """What a user reads in the terminal rendering of `obj`: its text lines and its tables' cells, row by row."""
    out = []
    for line in render(obj, width=1000).splitlines():
        text = line.strip()
        if text and set(text) <= _BORDER:
            continue
        if text[:1] in _CELL_EDGES:
            for edge in _CELL_EDGES[1:]:
                text = text.replace(edge, _CELL_EDGES[0])
            cells = [c.strip() for c in text.strip(_CELL_EDGES[0]).split(_CELL_EDGES[0])]
            text = "| " + " | ".join(cells) + " |"
        out.append(text)
    return "\n".join(out).strip("\n") + "\n"


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
