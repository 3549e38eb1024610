"""Repeated runs of one configuration: mean, coefficient of variation and a 95% confidence interval of tokens/s
per GPU, and a three-way verdict against the published band.

One run is one sample: on shared clusters run-to-run spread of several percent is normal. With n runs the 95%
interval is mean ± t(0.975, n-1) · s / √n (Student t, s the sample standard deviation). Entirely inside the band:
"in band with 95% confidence"; entirely outside: "out of band"; across an edge: "undecided: run again", with the
number of further runs that would decide if the mean and spread held (the smallest m with t(0.975, m-1) · s / √m
below the distance from the mean to the nearest band edge).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repro.core.errors import InputError
from repro.core.fmt import fmt_compared
from repro.core.recipes import Recipe
from repro.results.audit import AuditLine
from repro.results.combine import Kind, differences, unique_runs
from repro.results.verify import Verdict, verify_dir

Decision = Literal["in band with 95% confidence", "out of band", "undecided: run again"]
CONFIDENCE = 0.95
MAX_RUNS = 10_000


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with df degrees of freedom."""
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t >= 0 else tail


def t_quantile(p: float, df: int) -> float:
    """The t with P(T <= t) = p (p > 0.5), by bisection on the CDF to 1e-12 (about 45 CDF evaluations, where 200
    fixed steps cost 60 ms at large df): t(0.975, 1) = 12.706, t(0.975, 9) = 2.262."""
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2
    while high - low > 1e-12 * max(1.0, high):
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf(mid, df) < p else (low, mid)
    return (low + high) / 2


def _half_width(sd: float, n: int) -> tuple[float, float]:
    t = t_quantile(0.5 + CONFIDENCE / 2, n - 1)
    return t, t * sd / math.sqrt(n)


@dataclass
class Series:
    """Several runs of one configuration and what they say together."""

    verdicts: list[Verdict]
    per_gpu: list[float]
    band: tuple[float, float] | None
    centre: float | None
    mean: float
    sd: float | None
    t: float | None = None
    half: float | None = None
    decision: Decision = "undecided: run again"
    more_runs: int | None = None
    arithmetic: str = ""
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Runs named more than once (a copy, a link, another path to one run): each named, counted once."""

    @property
    def n(self) -> int:
        return len(self.per_gpu)

    @property
    def cv_pct(self) -> float | None:
        return None if self.sd is None or not self.mean else self.sd / self.mean * 100

    @property
    def ci(self) -> tuple[float, float] | None:
        return None if self.half is None else (self.mean - self.half, self.mean + self.half)

    @property
    def status(self) -> str:
        """FAIL or NOT A REPRODUCTION when a run is one on its own (a failed check other than the band); else the
        decision: PASS in band with 95% confidence, FAIL out of band, UNDECIDED otherwise."""
        if any(v.status == "NOT A REPRODUCTION" or v.status == "NO REFERENCE" for v in self.verdicts):
            return "NOT A REPRODUCTION"
        if any(c.fails and c.ok is False and c.name != "inside band" for v in self.verdicts for c in v.checks):
            return "FAIL"
        return {"in band with 95% confidence": "PASS", "out of band": "FAIL"}.get(self.decision, "UNDECIDED")

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "PASS" else 1

    @property
    def audit(self) -> AuditLine | None:
        """The mean against the published figure by MLPerf's 2% audit threshold."""
        return None if self.centre is None else AuditLine((self.mean / self.centre - 1) * 100, self.centre)

    @property
    def spread_text(self) -> str:
        """One line: n, mean, CV and the 95% interval of tokens/s per GPU, and the decision."""
        ci = self.ci
        cv = f"CV {self.cv_pct:.2f}%" if self.cv_pct is not None else "CV unknown"
        interval = f"95% CI {ci[0]:,.1f}–{ci[1]:,.1f}" if ci else "no interval from one run"
        return f"{self.n} runs: mean {self.mean:,.1f} tokens/s per GPU, {cv}, {interval}: {self.decision}"

    def to_json(self) -> dict[str, Any]:
        ci = self.ci
        return {
            "status": self.status,
            "reproduction": self.status == "PASS",
            "decision": self.decision,
            "runs": self.n,
            "tokens_per_s_per_gpu": [round(x, 3) for x in self.per_gpu],
            "mean": round(self.mean, 3),
            "sd": None if self.sd is None else round(self.sd, 3),
            "cv_pct": None if self.cv_pct is None else round(self.cv_pct, 3),
            "confidence": CONFIDENCE,
            "t": None if self.t is None else round(self.t, 4),
            "ci": None if ci is None else [round(ci[0], 3), round(ci[1], 3)],
            "band_per_gpu": None if self.band is None else [round(self.band[0], 3), round(self.band[1], 3)],
            "published_per_gpu": self.centre,
            "audit_2pct": self.audit.to_json() if self.audit else None,
            "more_runs": self.more_runs,
            "arithmetic": self.arithmetic,
            "reasons": self.reasons,
            "notes": self.notes,
            "verdicts": [v.to_json() for v in self.verdicts],
        }


def _configuration(v: Verdict) -> dict[str, Any]:
    """What repeated runs share beyond the kind of result (results/combine.py): the reference and the count."""
    return {"reference": v.reference, "accelerators": v.gpus}


def _same_configuration(paths: list[Path], verdicts: list[Verdict]) -> None:
    """One kind of result (benchmark, scenario, round, division, accelerator, submitter, system: the rule aggregate
    excludes by) and one reference and count: every other mix is refused naming the difference."""
    first, kind = _configuration(verdicts[0]), Kind.of(verdicts[0].identity) if verdicts[0].identity else None
    for path, v in zip(paths[1:], verdicts[1:], strict=True):
        other = _configuration(v)
        differ = [str(d) for d in differences(kind, Kind.of(v.identity))] if kind and v.identity else []
        differ += [f"{k} {other[k]} vs {first[k]}" for k in first if other[k] != first[k]]
        if differ:
            raise InputError(
                f"{path} and {paths[0]} are different configurations ({'; '.join(differ)}): repeated runs must be "
                "of one configuration.",
                "`repro verify RUN [RUN ...]` with the runs of one recipe, scenario and system",
            )


def _decide(s: Series) -> None:
    """The three-way verdict and, when undecided, how many more runs would decide (stated as arithmetic)."""
    if s.band is None:
        s.arithmetic = "no published band to judge the runs against"
        return
    low, high = s.band
    if s.sd is None:
        s.more_runs = 1
        s.arithmetic = "one run is one sample: its spread is unknown until a second run"
        s.decision = "undecided: run again"
        return
    assert s.half is not None
    lo, hi = s.mean - s.half, s.mean + s.half
    if low <= lo and hi <= high:
        s.decision = "in band with 95% confidence"
    elif hi < low or lo > high:
        s.decision = "out of band"
    else:
        s.decision = "undecided: run again"
    inside = low <= s.mean <= high
    edge = min((low, high), key=lambda e: abs(s.mean - e))
    distance = abs(s.mean - edge)
    now = (
        f"{s.n} runs: mean {s.mean:,.1f}, s {_num(s.sd)}, t(0.975, {s.n - 1}) = {s.t:.3f}, "
        f"half-width {s.t:.3f} × {_num(s.sd)} / √{s.n} = {_num(s.half)}; the mean is {_num(distance)} from the band "
        f"edge {edge:,.1f}"
    )
    if s.decision != "undecided: run again":
        s.arithmetic = now
        return
    if distance == 0:
        s.arithmetic = now + ": on the edge, no number of runs decides"
        return
    m = _fewest_runs(s.sd, distance, s.n + 1)
    if m is None:
        s.arithmetic = now + f": more than {MAX_RUNS:,} runs would be needed"
        return
    t, half = _half_width(s.sd, m)
    s.more_runs = m - s.n
    side = "inside" if inside else "outside"
    shown, limit = fmt_compared(half, distance, 1, comma=True)
    s.arithmetic = (
        f"{now}; with {m} runs t(0.975, {m - 1}) = {t:.3f} and {t:.3f} × {_num(s.sd)} / √{m} = {shown} "
        f"< {limit}: {s.more_runs} more run(s) would put the interval {side} the band, if the mean and spread hold"
    )


def _fewest_runs(sd: float, distance: float, start: int) -> int | None:
    """The fewest runs m ≥ start whose 95% half-width t(0.975, m-1) · sd / √m is below `distance`, or None past
    MAX_RUNS. The half-width falls as m grows, so this is a binary search (about 14 quantiles): scanning m one by
    one took 68.8 s for two runs a hair from a band edge (#44 item 3)."""
    if _half_width(sd, MAX_RUNS)[1] >= distance:
        return None
    low, high = start, MAX_RUNS  # the answer is in [low, high]; half(high) < distance holds
    while low < high:
        mid = (low + high) // 2
        if _half_width(sd, mid)[1] < distance:
            high = mid
        else:
            low = mid + 1
    return low


def _num(x: float) -> str:
    """A figure of the arithmetic with the digits it needs: 0.00707, not 0.0."""
    return f"{x:,.1f}" if abs(x) >= 10 or x == 0 else f"{x:.3g}"


def verify_series(
    paths: list[Path], recipe: str | Recipe | None = None, gpus: int | None = None, scenario: str | None = None
) -> Series:
    """Each run verified on its own (every check), then the runs together: refused unless one configuration. A run
    named twice (the same path, a copy, a link) is named in the notes and counted once (results/combine.py)."""
    judged = [(Path(p), verify_dir(Path(p), recipe=recipe, gpus=gpus, scenario=scenario)) for p in paths]
    judged, _, notes = unique_runs(judged, lambda pv: pv[1].run, lambda pv: str(pv[0]))
    _same_configuration([p for p, _ in judged], [v for _, v in judged])
    series = combine([v for _, v in judged], [str(p) for p, _ in judged])
    series.notes = notes
    return series


def combine(verdicts: list[Verdict], names: list[str]) -> Series:
    """The runs' verdicts together: the statistics, the decision, and each run that fails on its own."""
    per_gpu = [float(v.per_gpu) for v in verdicts if v.per_gpu is not None]
    if len(per_gpu) != len(verdicts):
        raise InputError("a run has no tokens/s per GPU to combine.", "`repro verify RUN` on each run first")
    mean = statistics.fmean(per_gpu)
    sd = statistics.stdev(per_gpu) if len(per_gpu) > 1 else None
    pub = verdicts[0].published
    centre = float(pub.tokens_per_s_per_gpu) if pub is not None and pub.band() is not None else None
    s = Series(verdicts, per_gpu, verdicts[0].band, centre, mean, sd)
    if sd is not None:
        s.t, s.half = _half_width(sd, len(per_gpu))
    _decide(s)
    for name, v in zip(names, verdicts, strict=True):
        failed = [c for c in v.checks if c.fails and c.ok is False and c.name != "inside band"]
        if failed or v.status in ("NOT A REPRODUCTION", "NO REFERENCE"):
            s.reasons.append(f"{name}: {v.status}: {(v.reasons or ['see its verdict'])[0]}")
    return s
