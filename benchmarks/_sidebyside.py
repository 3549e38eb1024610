"""Alternate two callables in one process and report the ratio of their medians with its spread.

Every performance claim in docs/BENCHMARKS.md comes from a script that uses this: repro and a reference run
back to back, in alternating order, on the same input, so machine load hits both alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Pair:
    name: str
    repro_s: list[float]
    reference_s: list[float]

    @property
    def ratio(self) -> float:
        """reference time / repro time: above 1 means repro is faster."""
        return statistics.median(self.reference_s) / statistics.median(self.repro_s)

    @property
    def spread(self) -> tuple[float, float]:
        ratios = sorted(r / p for p, r in zip(self.repro_s, self.reference_s, strict=True))
        k = max(0, len(ratios) // 10)
        return ratios[k], ratios[-1 - k]

    def line(self, unit: str = "s") -> str:
        lo, hi = self.spread
        return (
            f"{self.name}: repro {statistics.median(self.repro_s):.3f} {unit}, reference "
            f"{statistics.median(self.reference_s):.3f} {unit}, ratio {self.ratio:.2f}x "
            f"(spread {lo:.2f}-{hi:.2f}, {len(self.repro_s)} pairs)"
        )


def alternate(name: str, repro: Callable[[], object], reference: Callable[[], object], pairs: int) -> Pair:
    """Time `pairs` runs of each, alternating which goes first."""
    ours: list[float] = []
    theirs: list[float] = []
    for i in range(pairs):
        order = [(repro, ours), (reference, theirs)]
        if i % 2:
            order.reverse()
        for fn, sink in order:
            t0 = time.perf_counter()
            fn()
            sink.append(time.perf_counter() - t0)
    return Pair(name, ours, theirs)
