"""The terminal view of a run's progress; repro.run.progress decides what the numbers are."""

from __future__ import annotations

import sys
from typing import Any

from rich.progress import BarColumn, Progress, TextColumn
from rich.text import Text

BAR_CELLS = 22
"""The bar's own width: with the count, rate and ETA beside it the line fits 80 columns, and the bar keeps >= 20."""


class _TwoLineProgress(Progress):
    """The bar line, then the projection on a line of its own: beside the bar it squeezed the bar to 1-2 cells."""

    def get_renderables(self) -> Any:
        yield self.make_tasks_table(self.tasks)
        for task in self.tasks:
            if task.fields.get("projection"):
                yield Text(f"  {task.fields['projection']}")


class RunBar:
    """Total: LoadGen's own count ('?' until it has issued it); ETA: from the rate measured so far."""

    def __init__(self, what: str) -> None:
        from repro.ui.output import err_console

        self._progress = _TwoLineProgress(
            TextColumn(f"[bold]{what}"),
            BarColumn(bar_width=BAR_CELLS),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[eta]}"),
            console=err_console,
            transient=False,
        )
        self._task: Any = None
        self._tty: tuple[int, list[Any]] | None = None

    def start(self) -> RunBar:
        self._tty = _quiet_echo()
        self._progress.start()
        self._task = self._progress.add_task(
            "run", total=None, count="waiting for LoadGen", rate="", eta="", projection=""
        )
        return self

    def show(self, snap: Any) -> None:
        from repro.run.progress import fmt_duration

        total = f"{snap.total:,}" if snap.total is not None else "?"
        rate = f"{snap.tokens_per_s:,.0f} tok/s" if snap.tokens_per_s else ""
        eta = "interrupted" if snap.interrupted else f"ETA {fmt_duration(snap.eta_s)}"
        projection = snap.projection.text if snap.projection is not None and not snap.interrupted else ""
        self._progress.update(
            self._task,
            completed=snap.done,
            total=snap.total,
            count=f"{snap.done:,}/{total}",
            rate=rate,
            eta=eta,
            projection=projection,
        )

    def stop(self) -> None:
        self._progress.stop()
        if self._tty is not None:
            _restore_echo(*self._tty)
            self._tty = None


def _quiet_echo() -> tuple[int, list[Any]] | None:
    """Stop the terminal echoing keys while the bar is live. Ctrl-C makes the tty print `^C` behind Rich's back;
    on a bar that fills the line it wraps the cursor onto a new line, so the final frame landed below the last live
    one and both stayed on screen. Returns the settings to restore, or None when stdin is not a terminal."""
    try:
        import termios

        fd = sys.stdin.fileno()
        if not sys.stdin.isatty():
            return None
        saved = termios.tcgetattr(fd)
        quiet = list(saved)
        quiet[3] &= ~(termios.ECHO | termios.ECHOCTL)
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
        return fd, saved
    except (ImportError, AttributeError, OSError, ValueError):
        return None


def _restore_echo(fd: int, saved: list[Any]) -> None:
    try:
        import termios

        termios.tcsetattr(fd, termios.TCSANOW, saved)
    except (ImportError, OSError, ValueError):
        pass
