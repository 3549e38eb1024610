"""The recipe's server twin through simulated runs, judged as LoadGen judges a latency-bound run (early stopping on
both limits, run/latency_bound.py): the real run's whole schedule, which no short run here can show (a queue that
grows for ten minutes behind an engine whose KV cache or batch cannot hold the published rate), and the odds of a
run of a given count (over-limit queries come in clumps: a Poisson count of the average share promises too much).
Pure: simulation only, no server, no LoadGen."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any

from repro.rehearse.standin.trtllm_twin import TwinParams, simulate
from repro.rehearse.twin import Target, measure, published_arrivals
from repro.rehearse.twin_crowd import one_server
from repro.run.latency_bound import allowed_over, early_stopping_met

WHOLE_RUN_SEED = 5
"""The seed of the whole run's schedule, and of the steady state a plan measures its crowd in (pace.plan_pace): the
end a failing run pre-rolls to is the one judged."""
_SEEN: dict[str, Any] = {}
"""What this process has simulated already (a plan is made several times a process in the tests; each is pure)."""


def _key(*parts: Any) -> str:
    return json.dumps([p.to_json() if isinstance(p, TwinParams) else p for p in parts], sort_keys=True)


@dataclass(frozen=True)
class WholeRun:
    """One server's twin through the published run's whole schedule (its real count, Target.real_queries)."""

    queries: int
    seconds: float
    ttft_p99_s: float
    tpot_p99_s: float
    over_ttft: int
    over_tpot: int
    limits_s: tuple[float, float]

    @property
    def passes(self) -> bool:
        """Early stopping on both limits at the run's count (LoadGen's verdict on a latency-bound run)."""
        return early_stopping_met(self.queries, self.over_ttft) and early_stopping_met(self.queries, self.over_tpot)

    def say(self) -> str:
        ttft, tpot = self.limits_s
        return (
            f"the twin of the recipe's engine through the published run's whole schedule ({self.queries:,} queries "
            f"per server, {self.seconds:,.0f} s): p99 TTFT {self.ttft_p99_s:.3g} s (limit {ttft:g} s), p99 TPOT "
            f"{self.tpot_p99_s * 1000:.3g} ms (limit {tpot * 1000:g} ms), {self.over_ttft:,} and {self.over_tpot:,} "
            f"over them: early stopping {'passes' if self.passes else 'fails'}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "queries_per_server": self.queries,
            "seconds": round(self.seconds, 1),
            "ttft_p99_s": round(self.ttft_p99_s, 4),
            "tpot_p99_s": round(self.tpot_p99_s, 5),
            "over_ttft": self.over_ttft,
            "over_tpot": self.over_tpot,
            "passes": self.passes,
        }


def whole_run(t: Target, params: TwinParams, max_tokens: int, limits_s: tuple[float, float]) -> WholeRun:
    """The published schedule at its real count through one server's twin (`params`: the recipe's engine), judged
    on that server's own count (a VM's servers pass or fail alike; one server's count is the stricter)."""
    key = _key("whole", t.log, t.scenario, params, max_tokens, list(limits_s))
    if key in _SEEN:
        return _SEEN[key]
    queries = t.real_queries
    m = measure(t, one_server(params, WHOLE_RUN_SEED), max_tokens, seed=WHOLE_RUN_SEED, queries=queries)
    ttft, tpot = limits_s
    _SEEN[key] = WholeRun(
        queries=len(m.ttft),
        seconds=queries / t.per_server_qps,
        ttft_p99_s=m.pct("ttft", 0.99),
        tpot_p99_s=m.pct("tpot", 0.99),
        over_ttft=sum(1 for x in m.ttft if x > ttft),
        over_tpot=sum(1 for x in m.tpot if x > tpot),
        limits_s=limits_s,
    )
    return _SEEN[key]


def early_stopping_odds(
    t: Target, params: TwinParams, max_tokens: int, queries: int, limits_s: tuple[float, float], runs: int = 8
) -> float:
    """The share of `runs` simulated runs of `queries` queries through one server's twin (the published schedule,
    each after three mean latencies of it, as the rehearsal's pre-roll) that LoadGen's early stopping passes on both
    limits (TTFT, TPOT)."""
    key = _key("odds", t.log, t.scenario, params, max_tokens, queries, list(limits_s), runs)
    if key in _SEEN:
        return float(_SEEN[key])
    allowed = allowed_over(queries) or 0
    ttft_s, tpot_s = limits_s
    skip = math.ceil(3 * t.figures["latency_mean"].value * t.per_server_qps)
    passed = 0
    for seed in range(runs):
        rng = random.Random(1000 + seed)
        arrivals = published_arrivals(t, rng, seconds=(skip + queries) / t.per_server_qps)
        jobs, _ = simulate(TwinParams.from_json({**params.to_json(), "seed": 1000 + seed}), arrivals, max_tokens)
        times = [(j.t_arr, j.t_first, j.t_done, j.osl) for j in jobs[skip:]]
        counted = [(a, f, d, n) for a, f, d, n in times if f is not None and d is not None][:queries]
        over_ttft = sum(1 for a, f, _, _ in counted if f - a > ttft_s)
        over_tpot = sum(1 for _, f, d, n in counted if n > 1 and (d - f) / (n - 1) > tpot_s)
        passed += int(over_ttft <= allowed and over_tpot <= allowed)
    _SEEN[key] = passed / runs
    return passed / runs
