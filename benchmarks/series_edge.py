"""Two runs a hair from a band edge: how many more runs would decide, repro against the scan it replaced (#44 item 3).

`repro verify A B` says how many further runs would put the 95% interval on one side of the band (the fewest m
with t(0.975, m-1) · s / √m below the mean's distance to the edge). The reference is the search repro used before
issue #44: m = n+1, n+2, ... one by one up to 10,000, each t quantile by 200 fixed bisection steps (68.8 s for two
runs near an edge). repro now bisects on m (the half-width falls as m grows) and stops each quantile at 1e-12.
Both sides get the same spreads and distances (tokens/s per GPU of Azure's GB300 VMs, a few thousandths from the
ceiling of the nd-gb300-v6 band), run alternately in this process, and must give the same m.

    python benchmarks/series_edge.py [--pairs 3] [--smoke]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from repro.results import series  # noqa: E402

MAX_RUNS = series.MAX_RUNS


def _quantile_200(p: float, df: int) -> float:
    """The quantile as the reference computed it: bisection with 200 fixed steps."""
    low, high = 0.0, 1.0
    while series.t_cdf(high, df) < p:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if series.t_cdf(mid, df) < p else (low, mid)
    return (low + high) / 2


def reference(sd: float, distance: float, start: int, budget_s: float) -> tuple[int | None, float, bool]:
    """(m, seconds, finished): the linear scan, stopped after `budget_s` (it may take minutes)."""
    t0 = time.perf_counter()
    for m in range(start, MAX_RUNS):
        if _quantile_200(0.975, m - 1) * sd / math.sqrt(m) < distance:
            return m, time.perf_counter() - t0, True
        if time.perf_counter() - t0 > budget_s:
            return None, time.perf_counter() - t0, False
    return None, time.perf_counter() - t0, True


def repro_side(sd: float, distance: float, start: int) -> tuple[int | None, float]:
    t0 = time.perf_counter()
    m = series._fewest_runs(sd, distance, start)
    return m, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--budget", type=float, default=120.0, help="seconds the reference may take per case")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    # per-GPU spreads of two GB300 VMs a few thousandths either side of the band ceiling 15,960 (4 GPUs each)
    cases = [(0.008, 0.001), (0.004, 0.0002), (0.02, 0.0005)]
    if args.smoke:
        cases, args.pairs, args.budget = [(5.0, 2.0)], 1, 10.0
    ratios = []
    for sd, distance in cases:
        for _ in range(args.pairs):
            ref_m, ref_s, done = reference(sd, distance, 3, args.budget)
            got_m, got_s = repro_side(sd, distance, 3)
            same = ref_m == got_m if done else "reference stopped at the budget"
            ratios.append(ref_s / got_s)
            print(
                f"s {sd:g}, distance {distance:g}: repro m={got_m} in {got_s:.3f} s; linear scan m={ref_m} in "
                f"{ref_s:.2f} s{'' if done else ' (stopped)'}; same answer: {same}"
            )
    worst = min(ratios)
    print(f"series near the band edge: repro is {worst:,.0f}x faster than the linear scan (slowest case)")


if __name__ == "__main__":
    main()
