"""One time scale for a run: every clock repro keeps (LoadGen's durations and latency limits, the HTTP client's stall
and readiness deadlines, the heartbeat, `repro tune`'s probes and budget, the server twin's own clock) is shrunk by
the same factor, so a rehearsal at 1/400 of the published run's pace fails where the real run fails, at 1/400 of
the time.

Resolved once (`repro rehearse --time-scale`, else real time) and passed on as one `TimeScale`: no consumer scales a
number of its own, and every message that names a deadline names it in the run's own seconds and, when scaled,
in the published run's seconds too ("600 s of the published pace, 1.5 s here").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MIN_FACTOR = 1e-4
"""10,000x faster than real time is far past anything a CPU can drive; a smaller factor is a typo."""
MAX_FACTOR = 10.0
"""Slower than real time: a rehearsal's latency-bound run whose published TTFT margin is under this host's own
delay even at real time (a 70B Interactive run's 450 ms limit) runs stretched, so that delay fits the margin."""


@dataclass(frozen=True)
class TimeScale:
    """`factor` seconds here for each second of the real machine (1/400: 2,400 s -> 6 s; 1: real time)."""

    factor: float = 1.0
    source: str = "real time"
    """Where the factor came from (--time-scale, the rehearsal's default, a test)."""

    def __post_init__(self) -> None:
        f = self.factor
        number = not isinstance(f, bool) and isinstance(f, (int, float)) and math.isfinite(f)
        if not number or not MIN_FACTOR <= f <= MAX_FACTOR:
            raise ValueError(f"a time scale is a factor in [{MIN_FACTOR:g}, {MAX_FACTOR:g}] (got {f!r})")

    @property
    def scaled(self) -> bool:
        return self.factor != 1.0

    def s(self, real_s: float) -> float:
        """Seconds here for `real_s` seconds of the real machine (a deadline, an interval, a duration)."""
        return float(real_s) * self.factor

    def deadline(self, real_s: float, *, floor_s: float = 0.0) -> float:
        """A scaled deadline never below `floor_s` (what this host needs that no scale models); real time as is."""
        return max(self.s(real_s), floor_s) if self.scaled else float(real_s)

    def ms(self, real_ms: float) -> float:
        return float(real_ms) * self.factor

    def real(self, here_s: float) -> float:
        """The real machine's seconds for `here_s` seconds measured here (a latency read back from a log)."""
        return float(here_s) / self.factor

    def rate(self, real_per_s: float) -> float:
        """A rate here for a real rate: 1/400 of the time means 400 x the queries per second."""
        return float(real_per_s) / self.factor

    def describe(self, here_s: float) -> str:
        """A deadline as a message names it: its seconds here and, when scaled, the published pace's."""
        if not self.scaled:
            return f"{here_s:,.0f} s"
        return f"{fmt_s(here_s)} here ({fmt_s(self.real(here_s))} at the real machine's pace, time x {self.text})"

    @property
    def text(self) -> str:
        """The factor as people write it: 1/400 rather than 0.0025, 1/2.9 rather than 0.344828."""
        inv = 1 / self.factor
        if not self.scaled:
            return "1"
        if abs(inv - round(inv)) < 1e-6:
            return f"1/{inv:.0f}"
        return f"1/{inv:.1f}" if inv > 1 and abs(inv * 10 - round(inv * 10)) < 1e-6 else f"{self.factor:g}"

    def to_json(self) -> dict[str, Any]:
        return {"factor": self.factor, "text": self.text, "source": self.source}

    @classmethod
    def from_json(cls, doc: Any) -> TimeScale:
        if isinstance(doc, TimeScale):
            return doc
        if isinstance(doc, (int, float)) and not isinstance(doc, bool):
            return cls(float(doc), "a number")
        if isinstance(doc, dict):
            return cls(float(doc.get("factor", 1.0)), str(doc.get("source") or "recorded"))
        return REAL_TIME


def fmt_s(seconds: float) -> str:
    """Seconds with the digits that matter at any scale: 1.5 s, 0.031 s, 3,303 s."""
    a = abs(seconds)
    if a >= 100:
        return f"{seconds:,.0f} s"
    if a >= 1:
        return f"{seconds:.3g} s"
    return f"{seconds * 1000:.3g} ms"


REAL_TIME = TimeScale()
