"""The server twin's calibration: from a recipe's published LoadGen logs and its memory arithmetic to the parameters
of the stand-in trtllm-serve's twin mode (repro/rehearse/standin/trtllm_twin.py), each with the log line or the
arithmetic it came from. Pure: the same record gives the same parameters, here and in the tests.

Per scenario and per server of the published system (a VM's rates / its servers):
- K, the KV pool in tokens: core/feasibility.memory_fit on the published engine's layout (GPU memory, weights,
  KV bytes per token, free_gpu_memory_fraction);
- the output lengths: mean = the log's tokens/s / samples/s; shape = the recipe's Server log's latency
  percentiles less its median TTFT, over its median TPOT (a request's latency is its TTFT plus (osl - 1) TPOTs);
- the input lengths: the published dataset's own (the record's quantiles of its tok_input_length), with how much of
  the KV pool the published Server and Interactive runs' requests in flight then hold (Little's law; `kv_held`);
- (a, b, c): fitted so the simulated published schedules (the Offline burst of the whole query; Server and
  Interactive Poisson arrivals at the log's scheduled rate) give the log's Offline samples/s and the Server and
  Interactive median TPOT and TTFT; an engine with only an Offline log keeps the step-cost ratios of the recipe's
  other engine and fits their scale to its samples/s;
- the jitter sigma: the smallest that brings the simulated p99 TPOT to the log's.
`check()` simulates each published schedule with the fitted twin and sets its figures beside the log's.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from repro.core.recipes import Recipe
from repro.rehearse.standin.trtllm_twin import Job, TwinParams, simulate
from repro.rehearse.twin_record import (  # noqa: F401 - the record's names, where tests and pace read them
    SUMMARY_KEYS,
    TABLE,
    TWIN_DIR,
    EngineFacts,
    EngineRef,
    Figure,
    Lengths,
    LogRef,
    RecipeRef,
    ScenarioRef,
    TwinRecord,
    engine_facts,
    isl_table,
    load_record,
    osl_table,
    read_log,
)

FIT_SERVER_S = 120.0
"""Seconds of a Server schedule simulated per evaluation of the fit (the check runs the published duration)."""
FIT_QUERIES = 1500
"""...and at least this many of its arrivals (a Server at 0.89 queries/s runs its whole 600 s)."""
FIT_OFFLINE_SLOTS = 8
"""The fit's Offline burst: this many times the server's slots (its steady state), at most the published query."""
CHECK_OFFLINE_QUERIES = 60_000
"""A "whole" Offline query simulated is at most this many samples per server (GB300's 257,400 would take a minute);
the mean latency is compared only when the query was whole."""


# ------------------------------------------------------------------ the fit
@dataclass
class Target:
    """One scenario's published schedule, per server, and the figures the fit aims at."""

    scenario: str
    log: str
    figures: dict[str, Figure]
    servers_published: int
    engine: EngineFacts
    osl: list[int]
    isl: list[int]

    @property
    def per_server_qps(self) -> float:
        f = self.figures
        rate = f.get("scheduled_qps") or f["samples_per_s"]
        return rate.value / self.servers_published

    @property
    def duration_s(self) -> float:
        f = self.figures
        if self.scenario == "Offline":
            return f["latency_max"].value
        return max(f["min_duration_ms"].value / 1000, 1.0)

    @property
    def queries(self) -> int:
        """Per server: the Offline query's samples (samples/s x the run's length), or the Server arrivals."""
        return max(1, round(self.per_server_qps * self.duration_s))

    @property
    def fit_s(self) -> float:
        """Seconds of the published Server schedule the fit and its steady state simulate (FIT_SERVER_S, at least
        FIT_QUERIES of its arrivals, at most the whole run)."""
        return min(self.duration_s, max(FIT_SERVER_S, FIT_QUERIES / self.per_server_qps))

    @property
    def fit_burst(self) -> int:
        """Per server: the Offline queries the fit and its steady state simulate, FIT_OFFLINE_SLOTS waves of the
        engine's slots (its batch size, or the KV cache over the mean input length), at most the whole query."""
        slots = min(self.engine.max_batch_size, self.engine.kv_tokens // max(1, sum(self.isl) // len(self.isl)))
        return min(self.queries, FIT_OFFLINE_SLOTS * slots)

    @property
    def real_queries(self) -> int:
        """Per server: the queries a latency-bound published run issued. LoadGen schedules min_duration's worth at
        target_qps (at least min_query_count) and, with sample_concatenate_permutation (every LLM run), rounds up to
        whole permutations of the performance sample count (LoadGen 6.0.17, measured: 190 queries due -> 192 at 64
        samples, 300 at 150): Azure's 405B Server run issued one whole permutation of its sample count over ~2.6
        hours, not the 534 queries of its 600 s."""
        f = self.figures
        due = max(f["min_query_count"].value, math.ceil(f["target_qps"].value * f["min_duration_ms"].value / 1000))
        whole = math.ceil(due / f["performance_sample_count"].value) * f["performance_sample_count"].value
        return max(1, math.ceil(whole / self.servers_published))


def published_arrivals(
    t: Target, rng: random.Random, *, seconds: float | None = None, burst: int | None = None
) -> list[Any]:
    """One server's share of the published schedule as (arrival s, input tokens, output tokens): Offline all at 0
    (`burst` of them, or the whole query), Server and Interactive Poisson at the log's rate for `seconds`."""
    if t.scenario == "Offline":
        n = burst or t.queries
        return [(0.0, rng.choice(t.isl), rng.choice(t.osl)) for _ in range(n)]
    out: list[tuple[float, int, int]] = []
    now, end = 0.0, seconds or t.duration_s
    rate = t.per_server_qps
    while True:
        now += rng.expovariate(rate)
        if now > end:
            return out
        out.append((now, rng.choice(t.isl), rng.choice(t.osl)))


def _params(
    t: Target,
    abc: tuple[float, ...],
    stall: tuple[float, float] = (0.0, 0.0),
    first_delay: float = 0.0,
    first_stall: tuple[float, float] = (0.0, 0.0),
) -> TwinParams:
    e = t.engine
    return TwinParams(
        a=abc[0],
        b=abc[1],
        c=abc[2],
        stall_p=stall[0],
        stall_s=stall[1],
        first_delay=first_delay,
        first_stall_p=first_stall[0],
        first_stall_s=first_stall[1],
        max_batch=e.max_batch_size,
        max_num_tokens=e.max_num_tokens,
        kv_tokens=e.kv_tokens,
        max_seq_len=e.max_seq_len,
        isl_table=t.isl,
        osl_table=t.osl,
        reserve="output" if e.policy == "max_util" else "max_tokens",
        seed=7,
    )


def params_of_fit(t: Target, fit: tuple[float, ...]) -> TwinParams:
    """A scenario's twin from its fit: (a, b, c) and, for a latency scenario, (stall_p, stall_s, first_delay,
    first_stall_p, first_stall_s) after them (a shorter fit has none of those it leaves out)."""
    more = (*fit[3:], 0.0, 0.0, 0.0, 0.0, 0.0)
    return _params(t, fit[:3], (more[0], more[1]), more[2], (more[3], more[4]))


@dataclass
class Measured:
    samples_per_s: float
    tokens_per_s: float
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)
    latency: list[float] = field(default_factory=list)

    def pct(self, what: str, q: float) -> float:
        xs = sorted(getattr(self, what))
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else math.nan

    def mean(self, what: str) -> float:
        xs = getattr(self, what)
        return sum(xs) / len(xs) if xs else math.nan


def measure(
    t: Target, p: TwinParams, max_tokens: int, *, full: bool = False, seed: int = 11, queries: int = 0
) -> Measured:
    """One server through the published schedule (the fit's shorter one unless `full`; a Server one at least
    `queries` long), measured as LoadGen would."""
    rng = random.Random(seed)
    if t.scenario == "Offline":
        burst = min(t.queries, CHECK_OFFLINE_QUERIES) if full else t.fit_burst
        jobs, _ = simulate(p, published_arrivals(t, rng, burst=burst), max_tokens)
    else:
        seconds = None if full else t.fit_s
        if queries:
            seconds = max(seconds or t.duration_s, queries / t.per_server_qps)
        jobs, _ = simulate(p, published_arrivals(t, rng, seconds=seconds), max_tokens)
    return _measured(t, jobs, full)


def _measured(t: Target, jobs: list[Job], full: bool) -> Measured:
    done = [j for j in jobs if j.t_done is not None]
    if t.scenario == "Offline":
        ends = sorted(j.t_done for j in done if j.t_done is not None)
        if full:
            span, count = ends[-1], len(ends)
        else:  # the steady middle of the burst: its first and last completions skew the rate
            lo, hi = ends[len(ends) // 5], ends[(4 * len(ends)) // 5]
            span, count = max(hi - lo, 1e-9), (4 * len(ends)) // 5 - len(ends) // 5
        tokens = sum(j.osl for j in done) * count / len(done)
        return Measured(count / span, tokens / span, latency=[j.t_done - j.t_arr for j in done if j.t_done])
    m = Measured(0.0, 0.0)
    for j in done:
        assert j.t_first is not None and j.t_done is not None
        m.ttft.append(j.t_first - j.t_arr)
        m.latency.append(j.t_done - j.t_arr)
        if j.osl > 1:
            m.tpot.append((j.t_done - j.t_first) / (j.osl - 1))
    span = max(j.t_done or 0 for j in done) - min(j.t_arr for j in done)
    m.samples_per_s = len(done) / max(span, 1e-9)
    m.tokens_per_s = sum(j.osl for j in done) / max(span, 1e-9)
    return m


def targets(recipe: Recipe) -> list[Target]:
    """The recipe's published scenarios, each as one server's schedule with its engine and length tables."""
    rec = load_record()
    ref = rec.recipes.get(recipe.name)
    if ref is None:
        raise KeyError(recipe.name)
    shape = read_log(ref.osl_shape)
    out = []
    for scenario, sref in ref.scenarios.items():
        figures = read_log(sref.log)
        eng = engine_facts(recipe, rec.engines[sref.engine] if sref.engine else None)
        servers = max(1, rec.logs[sref.log].accelerators // (eng.tp * eng.pp))
        tok = figures.get("tokens_per_s")
        mean = tok.value / figures["samples_per_s"].value if tok else recipe.bench.accuracy.tokens_per_sample.reference
        osl, _ = osl_table(shape, float(mean), recipe.loadgen.max_tokens)
        out.append(Target(scenario, sref.log, figures, servers, eng, osl, []))
    lengths = rec.family(recipe.benchmark)
    for t in out:
        t.isl = isl_table(lengths, t.engine.max_seq_len)
        if ref.scenarios[t.scenario].engine is None:
            _budget_for(t)
    return out


BUDGET_USE = 0.8
"""A step's token budget the published run used at most (the rest absorbs its fluctuations)."""


def _budget_for(t: Target) -> None:
    """An engine the record does not give (the published config is not in the copies read) keeps the recipe's
    max_num_tokens only if it can hold the published run: a step takes one token per decoder, r (osl - 1) T of
    them, and r isl T prefill tokens (Little's law at the scheduled rate r and median TPOT T); a budget under
    that would starve prefill, so the twin takes what the log shows was there."""
    if t.scenario == "Offline" or "tpot_p50" not in t.figures:
        return
    e, f = t.engine, t.figures
    rate, tpot = t.per_server_qps, f["tpot_p50"].value
    osl, isl = sum(t.osl) / len(t.osl), sum(t.isl) / len(t.isl)
    need = rate * (osl - 1) * tpot + rate * isl * tpot
    if need <= BUDGET_USE * e.max_num_tokens:
        return
    budget = 64 * math.ceil(need / BUDGET_USE / 64)
    e.source += (
        f"; max_num_tokens {budget:,}, not the recipe's {e.max_num_tokens:,}: the published {t.scenario} run held "
        f"{rate * (osl - 1) * tpot:,.0f} decoders and {rate * isl * tpot:,.0f} prefill tokens a step (Little's law, "
        f"{f['tpot_p50'].source}), over {BUDGET_USE:g} of {e.max_num_tokens:,}"
    )
    e.max_num_tokens = budget


def kv_held(t: Target) -> float | None:
    """The share of the KV pool the published latency-bound run's requests in flight held: Little's law puts
    L = rate x mean latency requests in the server, each holding its input and, on average, E[osl^2] / (2 E[osl])
    generated tokens (None for Offline, or a log without a mean latency). Above 1 the record's lengths, engine and
    rate cannot all be what the published run had."""
    if t.scenario == "Offline" or "latency_mean" not in t.figures:
        return None
    in_flight = t.per_server_qps * t.figures["latency_mean"].value
    osl = sum(t.osl) / len(t.osl)
    generated = sum(x * x for x in t.osl) / len(t.osl) / (2 * osl)
    return in_flight * (sum(t.isl) / len(t.isl) + generated) / t.engine.kv_tokens


def _residuals(group: list[Target], abc: tuple[float, float, float], max_tokens: int) -> list[float]:
    out = []
    for t in group:
        m = measure(t, _params(t, abc), max_tokens)
        f = t.figures
        if t.scenario == "Offline":
            out.append(math.log(m.samples_per_s / (f["samples_per_s"].value / t.servers_published)))
        else:
            out.append(math.log(m.pct("tpot", 0.5) / f["tpot_p50"].value))
            out.append(math.log(m.pct("ttft", 0.5) / f["ttft_p50"].value))
    return out


def _initial(group: list[Target]) -> tuple[float, float, float]:
    """server-twin.md's start: a near the Server minimum TPOT, the rest of the median TPOT split between the
    decoders (Little's law: rate x (osl - 1) x TPOT) and the prefill tokens (rate x input x TPOT) of a step."""
    srv = next((t for t in group if t.scenario != "Offline"), None)
    if srv is None:
        t = group[0]
        return 0.01, 0.5 / (t.per_server_qps * sum(t.osl) / len(t.osl)) / 1000, 1e-5
    f = srv.figures
    tpot = f["tpot_p50"].value
    a = 0.5 * min(max(f["tpot_min"].value if "tpot_min" in f else 0.0, 0.3 * tpot), 0.8 * tpot)
    rate, osl, isl = srv.per_server_qps, sum(srv.osl) / len(srv.osl), sum(srv.isl) / len(srv.isl)
    n_d, n_p = rate * (osl - 1) * tpot, rate * isl * tpot
    return a, 0.6 * (tpot - a) / max(n_d, 1.0), 0.4 * (tpot - a) / max(n_p, 1.0)


def _solve(r_of: Any, theta: list[float], free: list[int], tol: float = 0.01, rounds: int = 8) -> list[float]:
    """Levenberg-Marquardt on log-parameters: finite-difference Jacobian, a damped step, kept only if it helps."""
    r = r_of(theta)
    lam = 1e-2
    for _ in range(rounds):
        if max(abs(x) for x in r) < tol:
            break
        cols = []
        for i in free:
            th = list(theta)
            th[i] += 0.05
            cols.append([(x - y) / 0.05 for x, y in zip(r_of(th), r, strict=True)])
        n = len(free)
        jtj = [[sum(cols[i][k] * cols[j][k] for k in range(len(r))) for j in range(n)] for i in range(n)]
        jtr = [sum(cols[i][k] * r[k] for k in range(len(r))) for i in range(n)]
        for _try in range(4):
            a = [[jtj[i][j] + (lam * (jtj[i][i] or 1.0) if i == j else 0.0) for j in range(n)] for i in range(n)]
            step = _linsolve(a, [-x for x in jtr])
            step = [max(-1.5, min(1.5, s)) for s in step]
            th = list(theta)
            for i, s in zip(free, step, strict=True):
                th[i] += s
            r_new = r_of(th)
            if sum(x * x for x in r_new) < sum(x * x for x in r):
                theta, r, lam = th, r_new, lam / 3
                break
            lam *= 10
        else:
            break
    return theta


def _linsolve(a: list[list[float]], b: list[float]) -> list[float]:
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[piv] = m[piv], m[c]
        if abs(m[c][c]) < 1e-12:
            return [0.0] * n
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit_scenarios(recipe: Recipe, ts: list[Target]) -> dict[str, tuple[float, ...]]:
    """(a, b, c) per scenario, each on its own published engine and log.

    Server and Interactive: at the scheduled rate r the mean step is the median TPOT T = a + r T (b (osl - 1) +
    c isl) (Little's law: r (osl - 1) T decoders and r isl T prefill tokens a step), so with a = s T the load-dependent
    costs are fixed up to their split u between decode and prefill: b = u (1 - s) / (r (osl - 1)), c = (1 - u)
    (1 - s) / (r isl). The fixed share s sets how much a request's TPOT moves with the load it meets (fitted to
    the log's p99/p50 TPOT), the split u how long a prompt's prefill takes (fitted to its median TTFT), each by
    bisection on the simulated schedule. Offline keeps the Server fit's costs and fits their common scale to its own
    samples/s (one figure cannot fix three costs)."""
    mt = recipe.loadgen.max_tokens
    offline = next((t for t in ts if t.scenario == "Offline"), None)
    fitted: dict[str, tuple[float, ...]] = {}
    for t in ts:
        if t.scenario != "Offline":
            fitted[t.scenario] = _fit_latency(t, mt)
    if offline is not None:
        other = fitted.get("Server") or next(iter(fitted.values()), None)
        base = [math.log(x) for x in (other[:3] if other else _initial([offline]))]
        theta = _solve(lambda th: _residuals([offline], _scaled(base, th[0]), mt), [0.0], [0])
        # the fit's short burst measures the steady rate; LoadGen's is the whole query's (its ramp and drain
        # included): one run of the whole query, and every cost scales X exactly (X ~ 1 / scale)
        whole = measure(offline, _params(offline, _scaled(base, theta[0])), mt, full=True).samples_per_s
        published = offline.figures["samples_per_s"].value / offline.servers_published
        fitted["Offline"] = _scaled(base, theta[0] + math.log(whole / published))
    return fitted


def _fit_latency(t: Target, max_tokens: int) -> tuple[float, ...]:
    f = t.figures
    tpot, rate = f["tpot_p50"].value, t.per_server_qps
    osl, isl = sum(t.osl) / len(t.osl), sum(t.isl) / len(t.isl)
    spread = f["tpot_p99"].value / tpot

    def costs(s: float, u: float) -> tuple[float, float, float]:
        return s * tpot, u * (1 - s) / (rate * max(osl - 1, 1.0)), (1 - u) * (1 - s) / (rate * isl)

    def fit_u(s: float) -> float:
        lo, hi = 0.02, 0.98  # TTFT falls as the decode share u rises
        for _ in range(6):
            mid = (lo + hi) / 2
            ttft = measure(t, _params(t, costs(s, mid)), max_tokens).pct("ttft", 0.5)
            lo, hi = (mid, hi) if ttft > f["ttft_p50"].value else (lo, mid)
        return (lo + hi) / 2

    s, u = 0.5, fit_u(0.5)
    for _ in range(2):
        lo, hi = 0.05, S_MAX  # the TPOT spread falls as the fixed share rises
        for _ in range(5):
            mid = (lo + hi) / 2
            m = measure(t, _params(t, costs(mid, u)), max_tokens)
            lo, hi = (mid, hi) if m.pct("tpot", 0.99) / m.pct("tpot", 0.5) > spread else (lo, mid)
        s = (lo + hi) / 2
        u = fit_u(s)
    abc = costs(s, u)
    delay = _fit_first_delay(t, abc, max_tokens)
    step, first = _fit_stalls(t, abc, max_tokens, delay)
    return (*abc, *step, delay, *first)


FIRST_DELAY_GAP = 0.1
"""A first-token delay is fitted only when the scheduler's median TTFT is this far (relative) under the log's."""


def _fit_first_delay(t: Target, abc: tuple[float, float, float], max_tokens: int) -> float:
    """What the published median TTFT has above the scheduler's at the fitted costs (a response path the twin does
    not model: the first token one step behind, the harness): a delay every first token takes, which moves the
    TTFT percentiles by as much and leaves TPOT as it is. None where the scheduler reaches the median itself."""
    got = measure(t, _params(t, abc), max_tokens).pct("ttft", 0.5)
    want = t.figures["ttft_p50"].value
    return want - got if got < (1 - FIRST_DELAY_GAP) * want else 0.0


def _fit_stalls(
    t: Target, abc: tuple[float, float, float], max_tokens: int, delay: float = 0.0
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Rare stalls (test_tune_noisy's noise) as long as the log's TTFT tail (p99 - p50), as often as brings the
    simulated p99 TTFT to the log's; none when the model's own tail already reaches it (never a kinder tail).
    Returns (step stalls, first-token stalls): a stall of a whole step by default; a stall of one request's first
    token instead where a step's would put the twin's p99.9 TPOT more than TAIL_GAP over the log's and the first
    token's keeps it nearer (the TTFT tail is then the response path's, not the engine's: every running request
    would have felt an engine stall in its TPOT)."""
    f = t.figures
    want, stall_s = f["ttft_p99"].value, max(f["ttft_p99"].value - f["ttft_p50"].value, 0.0)
    none = (0.0, 0.0)

    def run(step: tuple[float, float], first: tuple[float, float]) -> Measured:
        # the twin's own p99, not one short run's handful of requests
        return measure(t, _params(t, abc, step, delay, first), max_tokens, queries=STALL_QUERIES)

    def fit(place: Any) -> tuple[float, float]:
        lo, hi = math.log(1e-5), math.log(0.05)
        for _ in range(6):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if run(*place((math.exp(mid), stall_s))).pct("ttft", 0.99) < want else (lo, mid)
        return math.exp(hi), stall_s

    if stall_s <= 0 or run(none, none).pct("ttft", 0.99) >= want:
        return none, none
    step = fit(lambda x: (x, none))
    tail = f.get("tpot_p99.9")
    if tail is None:
        return step, none
    off_step = run(step, none).pct("tpot", 0.999) / tail.value - 1
    if off_step <= TAIL_GAP:
        return step, none
    first = fit(lambda x: (none, x))
    off_first = run(none, first).pct("tpot", 0.999) / tail.value - 1
    return (none, first) if abs(off_first) < abs(off_step) else (step, none)


TAIL_GAP = 0.10
"""How far over the log's p99.9 TPOT a step stall may put the twin's before the first token's is tried instead:
on nd-gb200-v6 step stalls put it 21% (Interactive) and 27% (Server) over, elsewhere 9% or less."""


STALL_QUERIES = 10000
"""The stall fit's schedule is at least this many arrivals: its p99 TTFT is the twin's, where one published-length
405B Server run (534 queries) has its 6th-worst request for a p99, 3.6 to 6.6 s over seeds of the same twin."""


S_MAX = 0.95
"""A step's fixed cost is at most this share of the median TPOT."""


def _scaled(base: list[float], log_f: float) -> tuple[float, float, float]:
    return (math.exp(base[0] + log_f), math.exp(base[1] + log_f), math.exp(base[2] + log_f))


# ------------------------------------------------------------------ the result
@dataclass
class Source:
    """One parameter of a scenario's twin, its value and how it was derived (the log lines and arithmetic)."""

    name: str
    value: Any
    how: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "how": self.how}


@dataclass
class ScenarioTwin:
    """One scenario's twin: the parameters of one server (the real machine's seconds), their sources, and the
    published schedule it was fitted to."""

    scenario: str
    params: TwinParams
    servers_published: int
    log: str
    log_ref: LogRef
    figures: dict[str, Figure]
    sources: list[Source]
    target: Target

    def to_json(self) -> dict[str, Any]:
        p = self.params.to_json()
        for key in ("isl_table", "osl_table"):
            p[key] = (
                f"{len(p[key])} lengths, mean {sum(p[key]) / len(p[key]):,.1f} (min {min(p[key])}, max {max(p[key])})"
            )
        return {
            "scenario": self.scenario,
            "params": p,
            "log": f"{self.log_ref.repo} @ {self.log_ref.commit[:12]}: {self.log_ref.path}",
            "system": self.log_ref.system,
            "servers_published": self.servers_published,
            "sources": [s.to_json() for s in self.sources],
        }


@dataclass
class TwinCalibration:
    recipe: str
    scenarios: dict[str, ScenarioTwin]

    def to_json(self) -> dict[str, Any]:
        return {"recipe": self.recipe, "scenarios": {k: v.to_json() for k, v in self.scenarios.items()}}


def has_twin(recipe_name: str) -> bool:
    return recipe_name in load_record().recipes


def fit_key(recipe: Recipe) -> str:
    """What a fit depends on: the record, its logs, the twin's scheduler, this module and the recipe."""
    import hashlib

    h = hashlib.sha256(recipe.hash().encode())
    for path in [TWIN_DIR / "twins.yaml", *sorted((TWIN_DIR / "logs").glob("*.txt"))]:
        h.update(path.name.encode() + path.read_bytes())
    for path in (Path(__file__), Path(__file__).parent / "standin" / "trtllm_twin.py"):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


_FITTED: dict[str, dict[str, tuple[float, ...]]] = {}
"""This process's fits by recipe and fit_key: a rehearsal's plan, a dry run and the tests fit a recipe once."""

SHIPPED_FITS = TWIN_DIR / "fits.json"
"""Each recipe's fit at the fit_key it was made under (`python scripts/fit_twins.py` writes it): a fresh workspace
and every test process start from it instead of fitting again (2-10 s a recipe); a stale key is refitted."""


def _fit_from_json(doc: Any) -> dict[str, tuple[float, ...]]:
    return {str(k): tuple(float(x) for x in v) for k, v in doc.items()}


def shipped_fit(recipe: Recipe) -> dict[str, tuple[float, ...]] | None:
    """The shipped fit of `recipe` if it was made under this recipe, record and code (its key), else None."""
    import json

    try:
        entry = json.loads(SHIPPED_FITS.read_text(encoding="utf-8")).get(recipe.name)
        if isinstance(entry, dict) and entry.get("key") == fit_key(recipe):
            return _fit_from_json(entry["fit"])
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        pass
    return None


def cached_fit(recipe: Recipe, ts: list[Target], cache_dir: Path | None) -> dict[str, tuple[float, ...]]:
    """fit_scenarios under the key of what it depends on: the shipped fit, else this process's, else the one kept in
    `cache_dir` (the rehearsal's workspace, where its step processes read it), else a new fit kept there."""
    import json

    from repro.core.fsutil import atomic_write_text

    shipped = shipped_fit(recipe)
    if shipped is not None:
        return shipped
    key = f"{recipe.name}-{fit_key(recipe)}"
    path = cache_dir / f"twin-fit-{key}.json" if cache_dir is not None else None
    fitted = _FITTED.get(key)
    if fitted is None and path is not None and path.is_file():
        try:
            fitted = _fit_from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, AttributeError):
            fitted = None
    fitted = fitted or fit_scenarios(recipe, ts)
    _FITTED[key] = fitted
    if path is not None and not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({k: list(v) for k, v in fitted.items()}))
    return fitted


@lru_cache(maxsize=16)
def calibrate(recipe_name: str, cache_dir: Path | None = None) -> TwinCalibration:
    """The twin of each published scenario of a recipe, per server of the published system, with its sources."""
    from repro.core.recipes import get_recipe

    recipe = get_recipe(recipe_name)
    rec = load_record()
    ref = rec.recipes[recipe.name]
    ts = targets(recipe)
    fitted = cached_fit(recipe, ts, cache_dir)
    lengths = rec.family(recipe.benchmark)
    shape = read_log(ref.osl_shape)
    out: dict[str, ScenarioTwin] = {}
    for t in ts:
        fit = fitted[t.scenario]
        params = params_of_fit(t, fit)
        params.seed = None
        f = t.figures
        _, osl_how = osl_table(shape, sum(t.osl) / len(t.osl), recipe.loadgen.max_tokens)
        sources = [
            Source("kv_tokens", t.engine.kv_tokens, t.engine.kv_source),
            Source(
                "max_num_tokens, max_batch, max_seq_len",
                [t.engine.max_num_tokens, t.engine.max_batch_size, t.engine.max_seq_len],
                t.engine.source,
            ),
            Source("reserve", params.reserve, f"capacity policy {t.engine.policy} ({t.engine.source})"),
            Source(
                "osl_table",
                f"mean {sum(t.osl) / len(t.osl):,.1f}",
                f"{osl_how}; {f['samples_per_s'].source}"
                + (f"; {f['tokens_per_s'].source}" if "tokens_per_s" in f else ""),
            ),
            Source(
                "isl_table",
                f"mean {sum(t.isl) / len(t.isl):,.1f}",
                f"{lengths.isl_source}"
                + (
                    f"; the published run's requests in flight held {held:.0%} of the KV pool (L = "
                    f"{t.per_server_qps:.4g}/s per server x mean latency, {f['latency_mean'].source})"
                    if (held := kv_held(t)) is not None
                    else ""
                ),
            ),
            Source(
                "servers_published",
                t.servers_published,
                f"{rec.logs[t.log].accelerators} accelerators "
                f"({rec.logs[t.log].system}) / (tp {t.engine.tp} x pp {t.engine.pp})",
            ),
        ]
        sources += _cost_sources(t, params, fitted)
        out[t.scenario] = ScenarioTwin(t.scenario, params, t.servers_published, t.log, rec.logs[t.log], f, sources, t)
    return TwinCalibration(recipe.name, out)


def _cost_sources(t: Target, p: TwinParams, fitted: dict[str, Any]) -> list[Source]:
    """Where each fitted value of `p` (the scenario's twin, read from its fit) comes from."""
    f = t.figures
    a, b, c = p.a, p.b, p.c
    if t.scenario == "Offline":
        base = "Server" if "Server" in fitted else "the recipe's other scenario"
        how = (
            f"the {base} fit's step costs x one scale so one server's simulated Offline burst completes the log's "
            f"samples/s / {t.servers_published} ({f['samples_per_s'].source})"
        )
        return [Source(n, v, how) for n, v in (("a", a), ("b", b), ("c", c))]
    rate = f.get("scheduled_qps") or f["samples_per_s"]
    return [
        Source(
            "a",
            a,
            f"fixed share of the median TPOT ({f['tpot_p50'].source}) fitted to its p99/p50 spread "
            f"({f['tpot_p99'].source})",
        ),
        Source(
            "b",
            b,
            f"decode share of the load-dependent step cost, fitted with c to the median TTFT "
            f"({f['ttft_p50'].source}) at the scheduled rate / {t.servers_published} ({rate.source})",
        ),
        Source(
            "c",
            c,
            f"prefill share of the load-dependent step cost, fitted with b to the median TTFT ({f['ttft_p50'].source})",
        ),
        Source(
            "stall_p, stall_s",
            [p.stall_p, p.stall_s],
            f"rare stalls as long as the TTFT tail p99 - p50, as often as brings the simulated p99 TTFT to the "
            f"log's ({f['ttft_p99'].source}); none if the model's own tail reaches it",
        ),
        Source(
            "first_stall_p, first_stall_s",
            [p.first_stall_p, p.first_stall_s],
            f"instead of stall_p, stall_s where those put the simulated p99.9 TPOT over {TAIL_GAP:.0%} above the "
            f"log's ({f['tpot_p99.9'].source if 'tpot_p99.9' in f else 'not in the log'}) and these keep it nearer: "
            "the same length, as often as brings the p99 TTFT to the log's, on one request's first token alone",
        ),
        Source(
            "first_delay",
            p.first_delay,
            f"what the log's median TTFT ({f['ttft_p50'].source}) has above the scheduler's at these costs, when "
            f"that is over {FIRST_DELAY_GAP:.0%} of it; else none",
        ),
    ]


TOLERANCE = {
    "samples_per_s": 0.03,
    "tpot_p50": 0.10,
    "ttft_p50": 0.30,
    "tpot_p99": 0.15,
    "ttft_p99": 0.50,
    "latency_mean": 0.15,
}
"""How near each simulated figure of the published schedule must come to the log's (relative): throughput and
median TPOT are fitted, the tails and the mean latency only follow from the model."""


def check(cal: ScenarioTwin, max_tokens: int, *, seed: int = 23) -> dict[str, dict[str, float]]:
    """The published schedule in full through the fitted twin (one server), each figure beside the log's."""
    t = cal.target
    params = TwinParams.from_json({**cal.params.to_json(), "seed": seed})
    m = measure(t, params, max_tokens, full=True, seed=seed)
    f = t.figures
    sim: dict[str, float] = {}
    if t.scenario == "Offline":
        sim["samples_per_s"] = m.samples_per_s * t.servers_published
        if t.queries <= CHECK_OFFLINE_QUERIES:
            sim["latency_mean"] = m.mean("latency")
    else:
        sim.update(
            tpot_p50=m.pct("tpot", 0.5),
            tpot_p99=m.pct("tpot", 0.99),
            ttft_p50=m.pct("ttft", 0.5),
            ttft_p99=m.pct("ttft", 0.99),
            latency_mean=m.mean("latency"),
        )
    return {
        k: {"published": f[k].value, "twin": v, "error": v / f[k].value - 1, "tolerance": TOLERANCE[k]}
        for k, v in sim.items()
    }
