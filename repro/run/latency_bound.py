"""How sure a short run's p99 is: LoadGen's early-stopping rule, read as an upper confidence bound.

LoadGen (mlcommons/inference@51a4a7ea569dc1addab5feb75893dd0e7d56aab8, loadgen/early_stopping.cc) passes a Server
run with t over-limit queries among h + t when odds(h, t, p) = P[Binomial(h + t, 1 - p) <= t] < 1 - c
(p = 0.99, c = 0.99): were the true p99 at the limit, so few over-limit queries would be that unlikely. The same
binomial arithmetic on the order statistics of n measured latencies gives an upper bound of the p99: the
(t + 1)-th largest value, with t the most over-limit queries n queries allow, is at or above the true p99 with
confidence c. A rate whose bound is within the limit is one LoadGen's rule would pass at that query count, and the
bound says how far from the limit the run stands. With fewer than ceil(log(1 - c) / log(p)) = 459 queries no value
reaches confidence c; the largest then holds with confidence 1 - p^n (91% at 240 queries), and that is what is said.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

PERCENTILE = 0.99
CONFIDENCE = 0.99


def _binomial_cdf(h: int, t: int, p: float) -> float:
    """P[at most t over-limit queries among h + t] when each is under the limit with probability p."""
    n = h + t
    lp, lq = math.log(p), math.log1p(-p)
    total = 0.0
    for x in range(t + 1):
        total += math.exp(math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1) + x * lq + (n - x) * lp)
    return total


@lru_cache(maxsize=4096)
def early_stopping_min_passing(over: int, percentile: float = PERCENTILE, confidence: float = CONFIDENCE) -> int:
    """LoadGen's MinPassingQueriesFinder: the fewest under-limit queries for `over` over-limit ones (0 -> 459)."""
    hi = max(16, int(math.ceil(math.log(1 - confidence) / math.log(percentile))))
    while _binomial_cdf(hi, over, percentile) >= 1 - confidence:
        hi *= 2
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if _binomial_cdf(mid, over, percentile) < 1 - confidence:
            hi = mid
        else:
            lo = mid + 1
    return lo


def early_stopping_met(queries: int, over: int) -> bool:
    """LoadGen's Server rule (results.cc): queries_issued >= h + t."""
    return queries >= early_stopping_min_passing(over) + over


def early_stopping_queries(over: int = 3) -> int:
    """The fewest queries with which a run that has `over` over-limit queries can still satisfy early stopping."""
    return early_stopping_min_passing(over) + over


def allowed_over(queries: int) -> int | None:
    """The most over-limit queries `queries` queries allow under LoadGen's rule; None below 459."""
    if not early_stopping_met(queries, 0):
        return None
    lo, hi = 0, max(1, queries // 50)
    while early_stopping_met(queries, hi):
        hi *= 2
    while lo < hi - 1:  # early_stopping_met(queries, lo) holds, (queries, hi) does not
        mid = (lo + hi) // 2
        if early_stopping_met(queries, mid):
            lo = mid
        else:
            hi = mid
    return lo


def poisson_cdf(k: int, mean: float) -> float:
    """P[Poisson(mean) <= k]: the chance a run with `mean` over-limit queries expected has at most k."""
    if mean <= 0:
        return 1.0
    term = total = math.exp(-mean)
    for i in range(1, k + 1):
        term *= mean / i
        total += term
    return min(1.0, total)


@dataclass(frozen=True)
class Bound:
    """An upper confidence bound of a percentile: `value` is the `rank`-th largest of `n` values."""

    value: float
    rank: int
    n: int
    confidence: float

    def describe(self, unit: str = "ms") -> str:
        which = "the largest" if self.rank == 1 else f"the {_ordinal(self.rank)} largest"
        return f"{self.value:,.1f} {unit} ({which} of {self.n:,}, {self.confidence:.1%} confidence)"


def upper_bound(values: list[float], percentile: float = PERCENTILE, confidence: float = CONFIDENCE) -> Bound | None:
    """The p99's upper bound at `confidence` from n values (order statistic, LoadGen's binomial arithmetic)."""
    n = len(values)
    if n == 0:
        return None
    ordered = sorted(values)
    if percentile == PERCENTILE and confidence == CONFIDENCE:
        t = allowed_over(n)
    else:
        t = next(
            (k for k in range(n - 1, -1, -1) if n >= early_stopping_min_passing(k, percentile, confidence) + k), None
        )
    if t is None:
        return Bound(ordered[-1], 1, n, 1 - percentile**n)
    return Bound(ordered[n - 1 - t], t + 1, n, confidence)


def queries_for(confidence: float = CONFIDENCE, percentile: float = PERCENTILE) -> int:
    """The fewest queries whose largest latency bounds the percentile with `confidence` (459 for p99 at 99%)."""
    return int(math.ceil(math.log(1 - confidence) / math.log(percentile)))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
