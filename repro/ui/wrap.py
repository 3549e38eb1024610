"""Prose for a terminal: wrapped between words, never inside one, and never between a number and its unit.

Rich folds a word longer than the line (a run folder, a URL) into pieces, and a terminal left to wrap soft
lines cuts words anywhere. Here a line breaks only at spaces, and a word longer than the terminal gets a line
of its own that runs past the edge whole, so copying it gives the whole path. A number and its unit (`600 s`,
`2,400 s)`, `1.5 GB`) and an option with its value (`--recipe demo`) are one word: `600` / `s` never happens.
`Words` does the same inside a table cell, where Rich would otherwise wrap (or fold) the text itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.measure import Measurement
from rich.text import Text

from repro.core.fmt import ATOM, UNITS

__all__ = ["ATOM", "UNITS", "Prose", "Words", "atoms"]


def atoms(text: str) -> list[re.Match[str]]:
    return list(ATOM.finditer(text))


class Prose:
    def __init__(self, text: Text | str, style: str = ""):
        self.text = text if isinstance(text, Text) else Text(text, style=style)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        width = max(1, options.max_width)
        for para in self.text.split("\n", allow_blank=True):
            yield from _lines(para, width)


class Words(Prose):
    """A table cell that wraps like Prose: its narrowest width is its longest unbreakable piece, so Rich sizes
    the column to keep every number with its unit; a piece wider than the column still folds rather than vanish."""

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        plain = self.text.plain
        longest = max((cell_len(m.group()) for m in atoms(plain)), default=1)
        widest = max((cell_len(line) for line in plain.split("\n")), default=1)
        return Measurement(min(longest, options.max_width), min(widest, options.max_width))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        width = max(1, options.max_width)
        for para in self.text.split("\n", allow_blank=True):
            for line in _lines(para, width):
                if cell_len(line.plain) <= width:
                    yield line
                else:
                    yield from line.divide(range(width, len(line.plain), width))


def _lines(para: Text, width: int) -> Iterator[Text]:
    words = atoms(para.plain)
    if not words:
        yield Text("")
        return
    start, end = 0, words[0].start()  # a line's indent ("  - reason") is kept
    for word in words:
        if word.end() - start > width and end > start:
            yield _whole(para[start:end])
            start = word.start()
        end = word.end()
    yield _whole(para[start:end])


def _whole(line: Text) -> Text:
    line.no_wrap, line.overflow = True, "ignore"
    return line
