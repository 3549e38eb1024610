"""A rehearsal run's server of a calibrated twin (twin.py): one server of the published system with its own seed,
a thin one taking a share of its load beside a crowd standing for the rest, and that crowd: the whole server's
steady state at the published schedule. The pace plan (pace.py) and the whole-run judgement (twin_judge.py) ask
for these; the calibration itself never does, so they live apart from it (and from its fit key).
"""

from __future__ import annotations

import math
import random

from repro.rehearse.standin.trtllm_twin import Engine, TwinParams
from repro.rehearse.twin import Target, published_arrivals


def one_server(params: TwinParams, seed: int) -> TwinParams:
    """One server of a (possibly wide) twin with its own seed: what a simulation of the published schedule runs."""
    return TwinParams.from_json({**params.to_json(), "seed": seed, "replicas": 1})


def thin(params: TwinParams, width: float, crowd: list[float]) -> TwinParams:
    """The server taking `width` of its load beside a crowd standing for the rest (trtllm_twin.py's thin server);
    `crowd` is its steady state at the published schedule (steady_state)."""
    if width >= 1:
        return params
    return TwinParams.from_json({**params.to_json(), "width": width, "crowd": [float(x) for x in crowd]})


def thin_for(params: TwinParams, width: float, crowd: list[float]) -> TwinParams:
    """A rehearsal run's thin twin: the crowd fixed at the published schedule's steady state (one that followed the
    thin server's own counts / width at a width of 0.01 amplified their noise into a queue: p99 TTFT 9 s where the
    whole server's is 0.4 s)."""
    out = thin(params, width, crowd)
    if width < 1:
        out.crowd_fixed = True
    return out


def steady_state(
    t: Target,
    params: TwinParams,
    max_tokens: int,
    *,
    seconds: float | None = None,
    window: tuple[float, float] = (0.25, 0.75),
) -> list[float]:
    """The whole server's mean running requests, decoders, KV tokens and prefill tokens a step over `window` of
    its published schedule (the fit's length, or `seconds` of it): the crowd a thin twin shares the server with.
    A server that falls behind is measured at the end of the real run's schedule (pace.plan_pace), not its middle."""
    rng = random.Random(5)
    if t.scenario == "Offline":
        arrivals = published_arrivals(t, rng, burst=t.fit_burst)
    else:
        arrivals = published_arrivals(t, rng, seconds=seconds or t.fit_s)
    eng = Engine(params, random.Random(params.seed or 1))
    for at, isl, osl in arrivals:
        eng.submit(eng.job(isl, osl, max_tokens, at))
    end = arrivals[-1][0] if t.scenario != "Offline" else math.inf
    sums, n = [0.0] * 4, 0
    eng.advance(arrivals[0][0])
    while eng.now < end:
        if eng.step_end is None:
            if not eng.pending:
                break
            eng.advance(eng.pending[0][0])
            continue
        if (window[0] * end <= eng.now <= window[1] * end) if end < math.inf else bool(eng.queue):
            vals = (eng.running, eng.decoders, eng.kv, sum(take for _, take in eng.chunks))
            sums = [a + b for a, b in zip(sums, vals, strict=True)]
            n += 1
        eng.advance(eng.step_end)
    return [x / max(n, 1) for x in sums]
