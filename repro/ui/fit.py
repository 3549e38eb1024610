"""Tables fitted to the terminal: whole columns are dropped (and named) before a number or a name is broken.

Works on `repro.report.tables.Table` (plain data with a keep-priority per column), so any view can use it.
"""

from __future__ import annotations

from typing import Any

from rich.console import ConsoleOptions
from rich.table import Table as RichTable
from rich.text import Text

from repro.core.textsafe import one_line
from repro.report.tables import ALWAYS, Table

_STATUS_STYLE = {"PASS": "green", "FAIL": "bold red", "yes": "green", "no": "red"}


def _rich_table(t: Table) -> RichTable:
    rt = RichTable(title=t.caption, title_justify="left")
    for c in t.columns:
        rt.add_column(c.name, justify="right" if c.numeric else "left", no_wrap=not c.prose, overflow="fold")
    for i, row in enumerate(t.rows):
        own = i < len(t.row_class) and t.row_class[i] == "own"
        cells = [
            _cell(
                t.columns[j].prose, Text(("* " if own and j == 0 else "") + one_line(v), style=_STATUS_STYLE.get(v, ""))
            )
            for j, v in enumerate(row)
        ]
        rt.add_row(*cells, style="bold" if own else None)
    return rt


def _cell(prose: bool, text: Text) -> Any:
    """Prose wraps between words and never between a number and its unit; everything else stays whole."""
    from repro.ui.wrap import Words

    return Words(text) if prose else text


def min_width(t: Table) -> int:
    """Columns at their widest cell (names and numbers never wrap), prose at its longest word, plus the box."""
    total = 1
    for i, c in enumerate(t.columns):
        cells = [c.name] + [
            ("* " if j < len(t.row_class) and t.row_class[j] == "own" and i == 0 else "") + row[i]
            for j, row in enumerate(t.rows)
        ]
        if c.prose:
            from repro.ui.wrap import atoms

            widest = max([len(m.group()) for cell in cells for m in atoms(cell)] or [0])
        else:
            widest = max(len(cell) for cell in cells)
        total += widest + 3
    return total


def _fit_one(t: Table, width: int) -> tuple[Table, list[str]]:
    dropped: list[str] = []
    current = t
    while min_width(current) > width:
        droppable = [c for c in current.columns if c.keep < ALWAYS]
        if not droppable:
            break
        least = min(droppable, key=lambda c: c.keep)
        dropped.append(least.name)
        current = current.without({least.name})
    return current, dropped


def fitted(t: Table, options: ConsoleOptions, more: str = "--json") -> list[Any]:
    """The table as it fits `options.max_width`: columns that do not fit move, whole, to a second table keyed
    by the first column (and a third...); only a column too wide for any table is left out, and named."""
    out: list[Any] = []
    remaining = t
    for _ in range(4):
        shown, dropped = _fit_one(remaining, options.max_width)
        out.append(_rich_table(shown))
        if shown.footnotes and any(c.name in ("source", "summary", "from") for c in shown.columns):
            from repro.ui.wrap import Prose

            # wrapped between words (a path longer than the line gets its own, whole): a no-wrap `[1] repo path`
            # was cut by the terminal inside a word (`SXM-8`/`0GBx8`)
            out += [Prose(f"  [{n}] {one_line(f)}", style="dim") for n, f in enumerate(shown.footnotes, 1)]
        if not dropped:
            return out
        key = t.columns[0]
        rest = [c for c in t.columns if c.name in dropped]
        nxt = Table(
            [key, *rest],
            [[row[0]] + [row[t.columns.index(c)] for c in rest] for row in t.rows],
            None,
            t.row_class,
            t.footnotes,
        )
        if [c.name for c in nxt.columns] == [c.name for c in remaining.columns]:
            break  # nothing more fits: say what is left out
        remaining = nxt
    out.append(Text(f"(too narrow for: {', '.join(dropped)}; all columns in {more})"))
    return out
