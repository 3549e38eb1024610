"""A Rich Console that never sends a control character from data to the terminal.

Folder names, task reasons and log lines come from result folders and shared storage; an escape sequence in
one could clear the screen or overwrite a verdict. Rich keeps ESC in plain text, so every text segment is
passed through `terminal_safe` after rendering; Rich's own styling (applied later, from Style objects) and
control segments (cursor moves of a Live view) are untouched. URL credentials and tokens are redacted there too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from repro.core.secrets import redact
from repro.core.textsafe import terminal_safe


class SafeConsole(Console):
    """Made with markup=False: a string from data (a host name, a ledger field) is never read as Rich markup.

    Styling comes from Text objects; only a print(..., markup=True) of a string we built parses markup.
    """

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for seg in super().render(renderable, options):
            if seg.control is None and seg.text:
                yield Segment(terminal_safe(redact(seg.text)), seg.style, None)
            else:
                yield seg

    def on_broken_pipe(self) -> None:
        """`repro status | head -1`: the reader left; stop quietly (never a bug report) with the pipe's exit code."""
        closed_pipe()


CLOSED_PIPE_EXIT = 141
"""128 + SIGPIPE: what a shell reports for a command that wrote to a pipe nobody reads any more."""


def closed_pipe() -> None:
    """Send what is left of stdout to /dev/null (so the interpreter's final flush stays quiet) and exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    raise SystemExit(CLOSED_PIPE_EXIT)
