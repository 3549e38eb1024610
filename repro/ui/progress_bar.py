"""The terminal view of a run's progress; repro.run.progress decides what the numbers are."""

from __future__ import annotations

from typing import Any

from rich.progress import BarColumn, Progress, TextColumn


class RunBar:
    """Total: LoadGen's own count ('?' until it has issued it); ETA: from the rate measured so far."""

    def __init__(self, what: str) -> None:
        from repro.ui.output import err_console

        self._progress = Progress(
            TextColumn(f"[bold]{what}"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[eta]}"),
            console=err_console,
            transient=False,
        )
        self._task: Any = None

    def start(self) -> RunBar:
        self._progress.start()
        self._task = self._progress.add_task("run", total=None, count="waiting for LoadGen", rate="", eta="")
        return self

    def show(self, snap: Any) -> None:
        from repro.run.progress import fmt_duration

        total = f"{snap.total:,}" if snap.total is not None else "?"
        rate = f"{snap.tokens_per_s:,.0f} tok/s" if snap.tokens_per_s else ""
        eta = "interrupted" if snap.interrupted else f"ETA {fmt_duration(snap.eta_s)}"
        if snap.projection is not None and not snap.interrupted:
            eta += f"  {snap.projection.text}"
        self._progress.update(
            self._task, completed=snap.done, total=snap.total, count=f"{snap.done:,}/{total}", rate=rate, eta=eta
        )

    def stop(self) -> None:
        self._progress.stop()
