"""Know early: the final tokens/s a run is heading for, with an interval, and where it lands against the band.

Fed by the progress loop with (elapsed s, tokens done, samples done). The rate is measured per window of equal
length; the projection is the run's tokens at the end over its time at the end, with the remaining samples at the
mean window rate. The interval comes from the spread of the window rates: the mean of the windows seen so far
and the mean of the windows still to come are both uncertain, so the half-width is

    z x sd(window rates) / rate x sqrt(1/k + 1/k_left) x (time left / time at the end)

(k windows seen, k_left to come), at least FLOOR_PCT of the time left for what the windows cannot show (the
drain at the end).
The first window (ramp-up) is left out once there are others. `should_stop` answers only when the whole
interval at STOP_Z (99.5% one-sided) lies below the band floor and MIN_FRACTION of the run is done.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from repro.core.recipes import Recipe

Z = 1.96  # the interval shown: 95%
STOP_Z = 2.576  # stopping needs the 99% two-sided (99.5% one-sided) interval below the floor
FLOOR_PCT = 1.0
MIN_FRACTION = 0.10
MIN_WINDOWS = 4


@dataclass(frozen=True)
class Projection:
    tokens_per_s: float
    half_width_pct: float
    fraction_done: float
    band: tuple[float, float] | None
    confidence: float = 0.95

    @property
    def low(self) -> float:
        return self.tokens_per_s * (1 - self.half_width_pct / 100)

    @property
    def high(self) -> float:
        return self.tokens_per_s * (1 + self.half_width_pct / 100)

    @property
    def standing(self) -> str:
        if self.band is None:
            return "projected"
        if self.high < self.band[0]:
            return "below band"
        if self.low > self.band[1]:
            return "above band"
        if self.band[0] <= self.low and self.high <= self.band[1]:
            return "on track"
        return "at the edge"

    @property
    def text(self) -> str:
        band = f", band {self.band[0]:,.0f}–{self.band[1]:,.0f} tokens/s" if self.band else ""
        return f"{self.standing}: {self.tokens_per_s:,.0f} tokens/s ±{self.half_width_pct:.1f}%{band}"

    def to_json(self) -> dict[str, object]:
        return {
            "projected_tokens_per_s": self.tokens_per_s,
            "half_width_pct": self.half_width_pct,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "fraction_done": self.fraction_done,
            "band": list(self.band) if self.band else None,
            "standing": self.standing,
        }


class Projector:
    """Accumulates (elapsed, tokens, samples) readings into equal windows and projects the final figure."""

    def __init__(self, total_samples: int | None, band: tuple[float, float] | None = None, window_s: float = 1.0):
        self.total = total_samples
        self.band = band
        self.window_s = window_s
        self._rates: list[float] = []
        self._mark: tuple[float, int] = (0.0, 0)
        self._last: tuple[float, int, int] = (0.0, 0, 0)

    def feed(self, elapsed_s: float, tokens: int, samples: int) -> None:
        t0, tok0 = self._mark
        if elapsed_s - t0 >= self.window_s:
            self._rates.append((tokens - tok0) / (elapsed_s - t0))
            self._mark = (elapsed_s, tokens)
        self._last = (elapsed_s, tokens, samples)

    @property
    def windows(self) -> list[float]:
        """Window rates, without the ramp-up window once there are enough others."""
        return self._rates[1:] if len(self._rates) > MIN_WINDOWS else list(self._rates)

    def project(self, z: float = Z) -> Projection | None:
        elapsed, tokens, samples = self._last
        rates = self.windows
        if not self.total or samples <= 0 or tokens <= 0 or elapsed <= 0 or len(rates) < 2:
            return None
        fraction = min(1.0, samples / self.total)
        rate = statistics.fmean(rates)
        if rate <= 0:
            return None
        tokens_final = tokens / samples * self.total
        time_final = elapsed + max(0.0, tokens_final - tokens) / rate
        projected = tokens_final / time_final
        k = len(rates)
        k_left = max(1.0, (time_final - elapsed) / self.window_s)
        spread = statistics.stdev(rates) / rate
        remaining_share = 1 - elapsed / time_final
        half = z * spread * math.sqrt(1 / k + 1 / k_left) * remaining_share * 100
        half = max(half, FLOOR_PCT * max(remaining_share, 0.25))
        confidence = 0.99 if z >= STOP_Z else 0.95
        return Projection(projected, half, fraction, self.band, confidence)

    def should_stop(self) -> Projection | None:
        """The projection that proves the band floor out of reach, or None while it may still be reached."""
        if self.band is None:
            return None
        sure = self.project(STOP_Z)
        if sure is None or sure.fraction_done < MIN_FRACTION or len(self.windows) < MIN_WINDOWS:
            return None
        return sure if sure.high < self.band[0] else None


def band_for(recipe: Recipe, scenario: str, gpus: int | None) -> tuple[float, float] | None:
    """The published band for this run as a whole: per-GPU band x the GPUs it runs on (the recipe's VM size
    when none are detected, as in a sim or --endpoint run); None when the recipe publishes no figure."""
    pub = recipe.published_for(scenario)
    band = pub.band() if pub is not None else None
    if band is None:
        return None
    n = gpus or recipe.system.gpus_per_vm
    return band[0] * n, band[1] * n


class RunWatch:
    """What a run needs for "know early": the projector its progress view shows, the decision to stop, the harness
    CPU clock, and what run.json records of them. The harness calls start(), check() on each update, finish()."""

    def __init__(self, band: tuple[float, float] | None, stop_if_below_band: bool = False) -> None:
        from repro.run.cpu import CpuClock

        self.projector = Projector(None, band)
        self.stop_if_below_band = stop_if_below_band
        self.stopped: Projection | None = None
        self.at_quarter: Projection | None = None
        self.last: Projection | None = None
        self.clock = CpuClock()

    @classmethod
    def for_run(cls, recipe: Recipe, scenario: str, gpus: int | None, stop_if_below_band: bool) -> RunWatch:
        return cls(band_for(recipe, scenario, gpus), stop_if_below_band)

    def start(self) -> None:
        self.clock.start()

    def check(self, projection: Projection | None) -> bool:
        """Note the projection the view just showed; True once the run should stop (band out of reach)."""
        self.clock.sample()
        if projection is not None:
            self.last = projection
            if self.at_quarter is None and projection.fraction_done >= 0.25:
                self.at_quarter = projection
        if not self.stop_if_below_band or self.stopped is not None:
            return False
        self.stopped = self.projector.should_stop()
        return self.stopped is not None

    def finish(self) -> None:
        self.clock.stop()

    @property
    def stop_message(self) -> str:
        p = self.stopped
        assert p is not None and p.band is not None
        return (
            f"stopped at {p.fraction_done * 100:.0f}% of the run (--stop-if-below-band): projected "
            f"{p.tokens_per_s:,.0f} tokens/s, at most {p.high:,.0f} with 99% confidence, below the band "
            f"{p.band[0]:,.0f}–{p.band[1]:,.0f}"
        )

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "projection": {
                "band": list(self.projector.band) if self.projector.band else None,
                "at_quarter": self.at_quarter.to_json() if self.at_quarter else None,
                "last": self.last.to_json() if self.last else None,
            }
        }
        if self.clock.result is not None:
            out["harness_cpu"] = self.clock.result
        if self.stopped is not None:
            out["stopped_below_band"] = self.stopped.to_json()
        return out
