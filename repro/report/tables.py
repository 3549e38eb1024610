"""The report as data: sections of paragraphs, tables and chart slots that the terminal, Markdown and HTML views
all render, so the three never drift apart. No Rich, no plotting here.

A column says how important it is (`keep`): at a narrow width the terminal drops the least important columns
whole instead of breaking a number or a name across lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

ChartKind = Literal["comparison", "standing", "rack", "roofline"]
ALWAYS = 9  # a column with this `keep` is never dropped


@dataclass(frozen=True)
class Column:
    name: str
    numeric: bool = False
    keep: int = ALWAYS
    prose: bool = False  # may wrap between words; every other cell stays on one line


@dataclass
class Table:
    columns: list[Column]
    rows: list[list[str]]
    caption: str | None = None
    row_class: list[str] = field(default_factory=list)  # "own" rows are emphasised
    footnotes: list[str] = field(default_factory=list)  # full paths behind the [n] references in the cells

    def without(self, names: set[str]) -> Table:
        idx = [i for i, c in enumerate(self.columns) if c.name not in names]
        return Table(
            [self.columns[i] for i in idx],
            [[row[i] for i in idx] for row in self.rows],
            self.caption,
            self.row_class,
            self.footnotes,
        )


@dataclass(frozen=True)
class Paragraph:
    text: str
    code: bool = False


@dataclass(frozen=True)
class Chart:
    kind: ChartKind
    alt: str


Block = Paragraph | Table | Chart


@dataclass
class Section:
    heading: str
    blocks: list[Block] = field(default_factory=list)


def natural_key(name: str) -> list[int | str]:
    """VM_2 before VM_10: digits compare as numbers."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name)]


def footnote_ref(footnotes: list[str], text: str) -> str:
    """`[n]` for a source, numbered once per table."""
    if text not in footnotes:
        footnotes.append(text)
    return f"[{footnotes.index(text) + 1}]"
