"""Prose for a terminal: wrapped between words, never inside one.

Rich folds a word longer than the line (a run folder, a URL) into pieces, and a terminal left to wrap soft
lines cuts words anywhere. Here a line breaks only at spaces, and a word longer than the terminal gets a line
of its own that runs past the edge whole, so copying it gives the whole path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rich.console import Console, ConsoleOptions
from rich.text import Text


class Prose:
    def __init__(self, text: Text | str, style: str = ""):
        self.text = text if isinstance(text, Text) else Text(text, style=style)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        width = max(1, options.max_width)
        for para in self.text.split("\n", allow_blank=True):
            yield from _lines(para, width)


def _lines(para: Text, width: int) -> Iterator[Text]:
    words = list(re.finditer(r"\S+", para.plain))
    if not words:
        yield Text("")
        return
    start = end = words[0].start()
    for word in words:
        if word.end() - start > width and end > start:
            yield _whole(para[start:end])
            start = word.start()
        end = word.end()
    yield _whole(para[start:end])


def _whole(line: Text) -> Text:
    line.no_wrap, line.overflow = True, "ignore"
    return line
