"""What a long run shows while it runs: a bar in a terminal, heartbeat lines everywhere else.

Under nohup, Slurm or `2>log` stderr is not a terminal, so a bar would either vanish or fill the log
with carriage returns; instead one plain line is written every `interval_s` seconds (samples done,
tokens/s so far, elapsed, ETA). The numbers are honest in both views: the total is LoadGen's own
count once it has issued the query (never a guess that jumps later), the ETA is remaining samples
at the rate measured so far ("estimating" before the first completion), and after Ctrl-C the
count stays where the run stopped instead of showing the placeholders that end LoadGen as done.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, Literal, Protocol

from repro.run.projection import Projection, Projector

Mode = Literal["bar", "heartbeat", "off"]
DEFAULT_INTERVAL_S = 60.0
MAX_INTERVAL_S = 86400.0
HEARTBEAT_FLOOR_S = 1.0
"""A scaled run's heartbeat (a rehearsal at 1/400: 60 s -> 0.15 s) is never more often than once a second."""


class Counts(Protocol):
    """What the harness's LoadGenSUT exposes; read without its lock (a heartbeat may be one batch behind)."""

    issued: int
    samples_done: int
    tokens_done: int
    t0: float | None


def for_terminal(stream: Any, line: str) -> str:
    """`line` as written to `stream`: on a terminal, broken at spaces to its width (COLUMNS first, as Rich reads
    it), never inside a word or between a number and its unit; a terminal left to wrap it cut `conn`/`ection`
    and `521 tokens/s so f`/`ar` at column 80. Anywhere else (a log, a pipe) it stays one line."""
    try:
        if not stream.isatty():
            return line
        raw = os.environ.get("COLUMNS", "")
        width = int(raw) if raw.isdigit() and int(raw) > 0 else os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return line
    from repro.core.fmt import wrap_words

    return "\n".join(wrap_words(line, max(20, width)))


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "estimating"
    s = int(round(max(0.0, seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass
class Snapshot:
    """One honest reading of the run: every field a view needs, computed once."""

    done: int
    total: int | None
    tokens: int
    elapsed_s: float
    interrupted: bool = False
    projection: Projection | None = None

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens / self.elapsed_s if self.elapsed_s > 0 and self.tokens else None

    @property
    def eta_s(self) -> float | None:
        if self.interrupted or self.total is None or self.done <= 0 or self.elapsed_s <= 0:
            return None
        return max(0, self.total - self.done) / (self.done / self.elapsed_s)

    def line(self, what: str) -> str:
        total = f"{self.total:,}" if self.total is not None else "?"
        pct = f" ({100 * self.done / self.total:.1f}%)" if self.total else ""
        rate = f"{self.tokens_per_s:,.0f} tokens/s so far" if self.tokens_per_s else "no tokens yet"
        tail = "interrupted" if self.interrupted else f"ETA {fmt_duration(self.eta_s)}"
        ahead = f"; {self.projection.text}" if self.projection is not None and not self.interrupted else ""
        count = f"{self.done:,}/{total} issued samples done{pct}"
        return f"{what}: {count}, {rate}, elapsed {fmt_duration(self.elapsed_s)}, {tail}{ahead}"


def choose_mode(progress: bool | None, stream: IO[str] | None = None) -> Mode:
    """None: a bar in a terminal, heartbeat lines otherwise; True forces the bar, False silences both."""
    if progress is False:
        return "off"
    if progress is True:
        return "bar"
    stream = stream or sys.stderr
    try:
        return "bar" if stream.isatty() else "heartbeat"
    except (AttributeError, ValueError):
        return "heartbeat"


def heartbeat_interval() -> float:
    """REPRO_HEARTBEAT_S overrides the default minute (a Slurm log with one line a minute stays readable)."""
    import math

    from repro.core.errors import InputError

    raw = os.environ.get("REPRO_HEARTBEAT_S")
    if raw is None or not raw.strip():
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0.5 <= value <= MAX_INTERVAL_S:
        raise InputError(
            f"REPRO_HEARTBEAT_S={raw[:40]!r} must be seconds between 0.5 and {MAX_INTERVAL_S:.0f}.",
            "`unset REPRO_HEARTBEAT_S`",
        )
    return value


class RunProgress:
    """Fed by the harness's wait loop; owns the total, the ETA and what the user sees."""

    def __init__(
        self,
        mode: Mode,
        what: str,
        total_hint: int,
        *,
        fixed_total: bool,
        interval_s: float | None = None,
        stream: IO[str] | None = None,
        clock: Any = time.monotonic,
        bar_factory: Callable[[str], Any] | None = None,
        projector: Projector | None = None,
    ) -> None:
        """bar_factory makes the terminal bar (the CLI passes repro.ui.progress_bar.RunBar); without one a
        terminal gets heartbeat lines too. projector adds the projected final tokens/s against the band."""
        self.mode = mode
        self.what = what
        self.total_hint = max(1, total_hint)
        # Offline issues one query holding every sample: its size is the exact total. Server issues over time.
        self.fixed_total = fixed_total
        self.interval_s = heartbeat_interval() if interval_s is None else interval_s
        self.stream = stream
        self.clock = clock
        self.frozen: Snapshot | None = None
        self._last_beat: float | None = None
        self._bar: Any = None
        self.bar_factory = bar_factory
        self.lines: list[str] = []
        self.projector = projector
        self.projection: Projection | None = None

    def __enter__(self) -> RunProgress:
        if self.mode == "bar" and self.bar_factory is not None:
            self._bar = self.bar_factory(self.what).start()
        elif self.mode in ("bar", "heartbeat"):
            self.mode = "heartbeat"
            every = fmt_duration(self.interval_s)
            self._write(f"{self.what}: started; a progress line every {every} (REPRO_HEARTBEAT_S)")
        return self

    def snapshot(self, counts: Counts) -> Snapshot:
        if self.frozen is not None:
            return self.frozen
        elapsed = self.clock() - counts.t0 if counts.t0 is not None else 0.0
        total = (counts.issued or None) if self.fixed_total else max(self.total_hint, counts.issued)
        projection = None
        if self.projector is not None and counts.t0 is not None:
            self.projector.total = total
            self.projector.feed(elapsed, counts.tokens_done, counts.samples_done)
            projection = self.projection = self.projector.project()
        return Snapshot(counts.samples_done, total, counts.tokens_done, elapsed, projection=projection)

    def update(self, counts: Counts) -> None:
        snap = self.snapshot(counts)
        if self._bar is not None:
            self._bar.show(snap)
        elif self.mode == "heartbeat":
            now = self.clock()
            if self._last_beat is None:
                self._last_beat = now
            elif now - self._last_beat >= self.interval_s:
                self._last_beat = now
                self._write(snap.line(self.what))

    def interrupted(self, counts: Counts) -> None:
        """Freeze the count before the harness answers the outstanding samples with placeholders."""
        if self.frozen is None:
            snap = self.snapshot(counts)
            snap.interrupted = True
            self.frozen = snap
            if self._bar is not None:
                self._bar.show(snap)

    def finish(self, counts: Counts) -> None:
        snap = self.snapshot(counts)
        if self._bar is not None:
            self._bar.show(snap)
        elif self.mode == "heartbeat":
            snap.projection = None  # the run is over: its figure is measured, not projected
            line = snap.line(self.what)
            self._write(line if snap.interrupted else line.replace(", ETA 0:00:00", ", done"))

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.stop()

    def _write(self, line: str) -> None:
        self.lines.append(line)
        stream = self.stream or sys.stderr
        try:
            stream.write(for_terminal(stream, f"[repro] {line}") + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass


class ReadyWait:
    """A readiness wait said at once and then every `every_s`: which server, why it is not ready, the time left
    and how to stop. `--endpoint` where nothing listens waited silently for the whole --ready-timeout (30 min)."""

    WHY = {
        "refused": "nothing is listening there yet (connection refused)",
        "reset": "it reset the connection",
        "timeout": "it does not answer yet",
        "not-ready": "it answers but is not ready yet (still loading?)",
    }

    def __init__(self, stream: Any = None, every_s: float = 30.0) -> None:
        self.stream, self.every_s = stream, every_s
        self._said: dict[str, float] = {}

    def __call__(self, url: str, kind: str, left_s: float) -> None:
        now = time.monotonic()
        last = self._said.get(url)
        if last is not None and now - last < self.every_s:
            return
        self._said[url] = now
        why = self.WHY.get(kind, kind)
        line = f"[repro] waiting for {url}: {why}; {fmt_duration(left_s)} left (--ready-timeout), Ctrl-C stops the run"
        from repro.core.secrets import redact

        stream = self.stream or sys.stderr
        # a URL's password (http://user:pass@host) never reaches the terminal
        stream.write(for_terminal(stream, redact(line)) + "\n")
        stream.flush()


def say(line: str, stream: Any = None) -> None:
    """One plain `[repro]` line on stderr (broken at spaces on a terminal), for a step between the readiness wait
    and LoadGen's progress (the warm-up)."""
    from repro.core.secrets import redact

    out = stream or sys.stderr
    out.write(for_terminal(out, redact(f"[repro] {line}")) + "\n")
    out.flush()
