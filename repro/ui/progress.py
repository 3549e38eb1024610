"""Live progress for people: download bars for `repro setup`, build-log views for `repro build-engine`.

Core steps take these as plain factories, so they run silently under --json, in tests and in the guided flow.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from repro.engine.container import STEP_RE
from repro.ui.output import err_console


@contextmanager
def download_progress() -> Iterator[Progress]:
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
    ) as progress:
        yield progress


class BuildView:
    """A spinner, the Dockerfile step count and the latest line of a build or step log."""

    def __init__(self, title: str, console: Any = None):
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.fields[title]}"),
            BarColumn(bar_width=20),
            TextColumn("{task.completed:.0f}/{task.total:.0f}"),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console or err_console,
            transient=True,
        )
        self.task = self.progress.add_task("", total=1, title=title)

    def __enter__(self) -> BuildView:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def line(self, text: str) -> None:
        m = STEP_RE.match(text)
        if m:
            self.progress.update(self.task, total=int(m.group(2)), completed=int(m.group(1)) - 1)
        short = text if len(text) <= 70 else text[:67] + "..."
        self.progress.update(self.task, description=short.replace("[", "\\["))
