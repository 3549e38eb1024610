"""`repro rehearse --pace published`: each run of the rehearsal against the recipe's server twin, at the published
run's pace seen through one time scale (core/timescale.py) and, where this machine cannot drive the published rate,
a thin twin (rehearse/twin.py `thin`); where the published rate is too slow to give LoadGen's early stopping its
queries here, a wide one (copies of the published server behind each endpoint).

Per run, `k` (seconds here per second of the real machine) and `w` (the share of the published load sent):
- Offline: k = --time-scale (default 1/400), slower where w would fall under MIN_WIDTH; w so the harness drives
  at most OFFLINE_QPS answers a second; the query is cut to OFFLINE_RUN_S here (never under three waves of the
  client's requests in flight: how long one waits, and so a stall, does not depend on the query's length);
- Server and Interactive: k the fastest that keeps the expected p99 TTFT's margin under its limit at least
  TTFT_OVERHEAD_S here (this host's own delay, measured; no scale shrinks it; k > 1, slower than real, where real
  time cannot; expected: the twin's own on the recipe's engine, or the published log's where that one is over the
  limit) and lets w >= MIN_WIDTH at STREAM_QPS; w = STREAM_QPS x min(k, 1) / the published rate: under 1 a
  thin twin, 2 or more that many copies of the whole published server; the run issues the queries LoadGen's early
  stopping needs (or the published count x min(w, 1), if more)
  and its min_duration is the time they take at the run's rate (at most its scaled min_duration and LATENCY_RUN_S);
  the twin pre-rolls PREROLL_LATENCIES mean published latencies of the published schedule once the warm-up is
  done, so the run's first query meets the published run's steady state, not an empty server.
The twin is the published server's (its step costs fitted to the published logs) with the recipe's own engine
limits (token budget, batch, KV pool): what the recipe will run, on the published machine. A latency run's twin is
also judged through the real run's whole schedule (twin_judge.whole_run: its real count, minutes to hours), which no
short run here can show; where that fails (a KV pool or batch that cannot hold the published rate), the note says
so and the twin pre-rolls to the schedule's end, its crowd the end's, so this run fails as the real one would.
Everything else follows: LoadGen's durations x k, its latency limits x k, rates x w / k, query counts x w; the
twin's clock x k; the client's requests in flight x w and its stall deadline x k (the real machine's deadline,
seconds of it); the heartbeat and readiness wait x k.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from repro.core.recipes import Recipe
from repro.core.timescale import MAX_FACTOR, TimeScale
from repro.rehearse.standin.trtllm_twin import TwinParams
from repro.rehearse.twin_judge import WHOLE_RUN_SEED, WholeRun, early_stopping_odds, whole_run

OFFLINE_QPS = 60.0
"""Unstreamed answers a second this 2-core machine's harness (LoadGen, the HTTP client, re-tokenizing) drives."""
STREAM_QPS = 30.0
"""Streamed requests a second it drives (the fixed-pace rehearsal's Server rate, result.py SERVER_QPS)."""
MIN_WIDTH = 0.01
"""The thinnest twin a run gets: thinner, its server holds under one request of its own and runs 9% (at 0.003) to
70% (at 0.0008, a live 70B Offline run) faster than the whole server's share, and its tails are its own noise."""
MAX_REPLICAS = 16
OFFLINE_RUN_S = 12.0
TTFT_OVERHEAD_S = 0.3
"""What this host adds to a TTFT that no scale shrinks, at its worst over a run's few hundred queries (LoadGen's
early stopping at 460 queries lets none over the limit): on this 2-core machine at a load of 7 the twin's event
loop delivered first tokens 42-49 ms late at p99, and Server runs through LoadGen read their p99 TTFT 90 ms (load
7, 405B at 1/14) to 130 ms (load 11, 405B at 1/8) above the twin's; at 150 ms, a 405B Server run at 1/5 (load 5.5)
had 6 of 640 queries over, a GB300 Server run at 1/11 (load 10) one of 460, and a GB300 Interactive run at real
time read its p99 TTFT 590 ms where the twin's is 258 ms. A scaled run keeps the published p99 TTFT at least
this far under its scaled limit, stretched beyond real time where even real time cannot (MAX_FACTOR)."""
LATENCY_RUN_S = 30.0
EARLY_STOPPING_QUERIES = 460
TAIL_CONFIDENCE = 0.95
"""The share of the twin's simulated runs early stopping passes, below which the rehearsal says an INVALID may be
the short run's statistics, not the server. Azure's 405B Server log has p99 TTFT 5.12 s and p99.9 7.30 s against
6 s (about 0.39% of its queries over it); at 460 queries early stopping lets none over. A Poisson count of that
share promised 95% at ~3,100 queries; the twin's runs (its over-limit queries clumped by bursts of arrivals) pass
58% of windows of 460, 78% of 3,000 and 96% of the real run's count (Target.real_queries), so the note says
the twin's odds at both counts (session 13: 12 simulated runs of 60,000 queries cut into windows)."""
TAIL_POINTS = (50.0, 90.0, 95.0, 97.0, 99.0, 99.9)
END_WINDOW = (0.9, 1.0)
"""The share of the real schedule a failing whole run's thin crowd is measured over: its last tenth."""
TWIN_P99_SEEDS = (5, 6, 7)
PREROLL_LATENCIES = 3.0
"""Mean published latencies of its schedule a latency-bound twin runs through before the first query (in flight
then: Little's law's rate x mean latency; a request's whole life is at most a few mean latencies)."""


@dataclass
class RunPace:
    """One run of a published-pace rehearsal: its time scale, width, LoadGen settings, twin and client."""

    scenario: str
    time_scale: TimeScale
    width: float
    """The share of the published load sent: under 1 a thin twin; 2 or more, that many copies of the server."""
    settings: dict[str, Any]
    twin: TwinParams
    client_concurrency: int
    stall_timeout_s: float
    notes: list[str] = field(default_factory=list)
    expected_ttft_p99_s: float | None = None
    """The p99 TTFT (real seconds) its scale was chosen for (expected_ttft_p99); None for Offline."""
    whole_run: dict[str, Any] | None = None
    """The twin's whole published run, judged (twin_judge.WholeRun.to_json); None for Offline."""

    def standin_env(self) -> dict[str, str]:
        """A stand-in serving this run's twin alone (a test's server, started for one run)."""
        return {"STANDIN_TWIN": json.dumps(self.twin.to_json(), separators=(",", ":"))}

    def to_json(self) -> dict[str, Any]:
        twin = self.twin.to_json()
        for key in ("isl_table", "osl_table"):
            xs = twin[key]
            twin[key] = f"{len(xs)} lengths, mean {sum(xs) / len(xs):,.1f} (min {min(xs)}, max {max(xs)})"
        return {
            "scenario": self.scenario,
            "time_scale": self.time_scale.to_json(),
            "width": self.width,
            "replicas": self.twin.replicas,
            "loadgen_settings": self.settings,
            "client_concurrency_per_server": self.client_concurrency,
            "stall_timeout_s": {"real": self.stall_timeout_s, "here": self.time_scale.s(self.stall_timeout_s)},
            "host_ttft_overhead_s": TTFT_OVERHEAD_S if self.scenario != "Offline" else None,
            "twin_per_server": twin,
            "expected_ttft_p99_s": self.expected_ttft_p99_s,
            "whole_run": self.whole_run,
            "notes": self.notes,
        }


def twin_env(paces: dict[str, RunPace]) -> dict[str, str]:
    """The stand-ins' environment for every run of one rehearsal: each scenario's twin, so the servers the runs
    keep between them serve each run's own (its run picks it: POST /twin/scenario, rehearse/twin_control.py)."""
    doc = {"scenarios": {s: p.twin.to_json() for s, p in paces.items()}, "active": next(iter(paces))}
    return {"STANDIN_TWIN": json.dumps(doc, separators=(",", ":"))}


def round_pace(need: float) -> float:
    """The scale a run takes for the slowest it needs: 1/n or n with n in tenths, never faster than `need` (a whole
    1/n or n, as before session 12, lost up to half the run: 405B Server needs 1/2.9 and ran at 1/2)."""
    if need <= 1:
        return 1 / max(1.0, math.floor(10 / need + 1e-9) / 10)
    return min(MAX_FACTOR, math.ceil(need * 10 - 1e-9) / 10)


def expected_ttft_p99(t: Any, params: TwinParams, max_tokens: int, limit_s: float) -> tuple[float, str]:
    """The p99 TTFT the run's twin should give, and whose it is: the twin's own on the recipe's engine (the fit's
    length of the published schedule, the highest of TWIN_P99_SEEDS) where it is under the limit; otherwise the
    published log's (such a run fails at any pace, and the published margin sets how long it takes to say so).
    The recipe's engine can be far from the published one: nd-h200-v5's Interactive engine takes 1,536 tokens a
    step where the published one took 256, and its twin's p99 TTFT is 74 ms where the published log's is 291 ms."""
    from repro.rehearse.twin import measure
    from repro.rehearse.twin_crowd import one_server

    published = t.figures["ttft_p99"].value
    own = max(measure(t, one_server(params, seed), max_tokens).pct("ttft", 0.99) for seed in TWIN_P99_SEEDS)
    if math.isfinite(own) and own < limit_s:
        return own, f"the twin's p99 TTFT on the recipe's engine {own:.3g} s (the published log's {published:.3g} s)"
    return published, f"the published p99 TTFT {published:.3g} s"


def scale_for(limit_s: float, fastest: float, p99: tuple[float, str], rate_vm: float) -> tuple[float, str]:
    """The fastest scale for a latency-bound run under a TTFT limit of `limit_s`, and why it is that one (`p99`:
    expected_ttft_p99's)."""
    p99_ttft_s, whose = p99
    margin = limit_s - p99_ttft_s
    by_margin = TTFT_OVERHEAD_S / margin if margin > 0 else 1.0
    by_rate = MIN_WIDTH * rate_vm / STREAM_QPS
    need = min(MAX_FACTOR, max(fastest, by_margin, by_rate))
    k = round_pace(need)
    why = (
        f"{whose} leaves {margin:.3g} s to the {limit_s * 1000:g} ms limit, "
        f"{margin * k * 1000:.3g} ms here against this host's {TTFT_OVERHEAD_S * 1000:g} ms"
        + (" (slower than the real machine: no faster pace leaves this host's delay room)" if k > 1 else "")
        if need == by_margin
        else f"a twin of width >= {MIN_WIDTH:g} at {STREAM_QPS:g} streamed requests/s"
        if need == by_rate
        else f"--time-scale {TimeScale(fastest).text}"
    )
    return k, why


def _cut_offline(settings: dict[str, Any], width: float, in_flight: int, notes: list[str], k: float) -> None:
    """Cut the Offline query to OFFLINE_RUN_S here, keeping three waves of the client's requests in flight."""
    rate = float(settings["target_qps"])
    issued = max(int(settings["min_query_count"]), int(1.1 * rate * settings["min_duration"] / 1000))
    keep = max(int(rate * OFFLINE_RUN_S), 3 * math.ceil(in_flight * width))
    if issued <= keep:
        return
    settings["min_query_count"] = keep
    settings["min_duration"] = min(int(settings["min_duration"]), int(OFFLINE_RUN_S * 1000))
    notes.append(
        f"the query is {keep:,} samples here, not {issued:,}: {OFFLINE_RUN_S:g} s ({OFFLINE_RUN_S / k:,.0f} s of "
        "the published run), at least three waves of the client's requests in flight"
    )


def over_share(figures: dict[str, Any], kind: str, limit_s: float) -> tuple[float, str]:
    """The share of the published run's queries over a limit (kind: ttft or tpot), read off its log's percentiles:
    log-linear between the two that bracket the limit; 0 when its p99.9 is within it. With the lines read."""
    points = [(1 - q / 100, figures[f"{kind}_p{q:g}"]) for q in TAIL_POINTS if f"{kind}_p{q:g}" in figures]
    for i, (share, fig) in enumerate(points):
        if fig.value <= limit_s:
            continue
        if i == 0:
            return share, fig.source
        (s0, f0), (s1, f1) = points[i - 1], points[i]
        at = (limit_s - f0.value) / (fig.value - f0.value)
        return math.exp(math.log(s0) + at * (math.log(s1) - math.log(s0))), f"{f0.source}; {f1.source}"
    return 0.0, ""


def _latency_settings(
    s: dict[str, Any],
    min_queries: int,
    width: float,
    k: float,
    notes: list[str],
    tail: tuple[float, str],
    odds: Callable[[int], float],
    real_queries: int,
) -> None:
    """A Server or Interactive run's count, duration and limits here (`s`: the recipe's user.conf, scaled). A wide
    twin's copies give early stopping its queries sooner, not more of them: user.conf's count x min(w, 1); where
    the twin's simulated runs of that count (`odds`: twin_judge.early_stopping_odds) pass under TAIL_CONFIDENCE of
    the time, a note says so, with their odds at a server's share of the real run's count (`real_queries`) and the
    published run's own share over a limit (`tail`) where it has one."""
    rate = float(s["target_qps"])
    share, lines = tail
    queries = max(math.ceil(min_queries * min(width, 1.0)), EARLY_STOPPING_QUERIES)
    if (short := odds(queries)) < TAIL_CONFIDENCE:
        published = (
            f"the published run had about {share:.2%} of its queries over a limit ({lines})"
            if share > 0
            else "the published log's percentiles put none of its queries over a limit"
        )
        notes.append(
            f"{published}; the twin of the recipe's engine passed early stopping in {short:.0%} of its simulated "
            f"runs of {queries:,} queries and {odds(real_queries):.0%} of {real_queries:,} (a server's share of the "
            "real run's count; over-limit queries come in clumps: a stall or a burst delays many at once), so an "
            "INVALID here may be the short run's statistics"
        )
    scaled_ms, took_ms = int(s["min_duration"]), math.ceil(1000 * queries / rate)
    s["min_query_count"] = queries
    s["min_duration"] = max(1000, min(scaled_ms, int(LATENCY_RUN_S * 1000), took_ms))
    if s["min_duration"] < scaled_ms:
        lasts = max(s["min_duration"] / 1000, queries / rate)
        notes.append(
            f"the run issues {queries:,} queries over {lasts:.3g} s here "
            f"({lasts / k:,.0f} s of the published run's {scaled_ms / 1000 / k:,.0f} s): what "
            "LoadGen's early stopping needs at the run's rate"
        )


def _recipe_engine(recipe: Recipe, scenario: str, params: TwinParams, notes: list[str]) -> dict[str, Any]:
    """The recipe's own engine limits for this scenario (its deployment), said where they are not the published
    server's the twin was fitted on."""
    from repro.rehearse.twin_record import engine_facts

    mine = engine_facts(recipe, None, recipe.deployment(scenario))
    reserve = "output" if mine.policy == "max_util" else "max_tokens"
    out = {
        "max_num_tokens": mine.max_num_tokens,
        "max_batch": mine.max_batch_size,
        "kv_tokens": mine.kv_tokens,
        "max_seq_len": mine.max_seq_len,
        "reserve": reserve,
    }
    differ = [
        f"{k} {v:,} (published {getattr(params, k):,})"
        for k, v in out.items()
        if k != "reserve" and v != getattr(params, k)
    ]
    if reserve != params.reserve:
        differ.append(f"capacity policy {mine.policy} (published {params.reserve})")
    if differ:
        notes.append(f"the recipe's engine ({mine.source}): " + ", ".join(differ))
    out["isl_table"] = [max(1, min(x, mine.max_seq_len - 1)) for x in params.isl_table]
    return out


@dataclass
class _Latency:
    """A latency-bound run's plan before its LoadGen settings: what plan_pace resolves once and passes on."""

    k: float
    why: str
    width: float
    replicas: int
    expected_ttft_p99_s: float
    twin: TwinParams
    """The published server with the recipe's engine limits (unthinned, one replica)."""
    limits_s: tuple[float, float]
    whole: WholeRun
    rate_vm: float

    @property
    def end_s(self) -> float | None:
        """Where the twin's whole run fails, the real schedule's length: this run meets its end (the pre-roll runs
        up to it, a thin twin's crowd is measured over END_WINDOW of it); None where it passes."""
        return None if self.whole.passes else self.whole.seconds


def _latency_pace(
    recipe: Recipe, scenario: str, t: Any, twin: TwinParams, time_scale: float, servers: int, notes: list[str]
) -> _Latency:
    """A Server or Interactive run's scale, width and copies, and the twin's whole published run (a failing one
    is said in the notes)."""
    rules = recipe.bench.rules(scenario)
    limits = (float(rules.ttft_ms or 0) / 1000, float(rules.tpot_ms or 0) / 1000)
    rate_vm = t.per_server_qps * servers  # the published VM's rate (_latency_twin: lat.rate_vm)
    p99 = expected_ttft_p99(t, twin, recipe.loadgen.max_tokens, limits[0])
    k, why = scale_for(limits[0], time_scale, p99, rate_vm)
    # stretched (k > 1), the run sends STREAM_QPS / k: as many streams in flight as at real time (rate x
    # latency here), each as costly to this host's 2 cores; a GB300 Interactive run at x 2 sent 30/s and
    # held twice the streams, and its TTFTs waited on the host (max 1.43 s here against a 0.9 s limit)
    width, replicas = STREAM_QPS * min(k, 1.0) / rate_vm, 1
    if width >= 2:
        replicas = min(MAX_REPLICAS, math.floor(width))
        notes.append(
            f"{replicas} copies of the published server behind each endpoint, each request to one at random: "
            f"one server's {t.per_server_qps:.4g} samples/s x {servers} at time x {TimeScale(k).text} would "
            f"give LoadGen's early stopping its {EARLY_STOPPING_QUERIES} queries only after "
            f"{EARLY_STOPPING_QUERIES / (rate_vm / k):,.0f} s here"
        )
    whole = whole_run(t, twin, recipe.loadgen.max_tokens, limits)
    if not whole.passes:
        notes.append(
            f"{whole.say()}: the real run would be INVALID; the twin pre-rolls that schedule up to this run's "
            "share of its end, so this run meets the state the real run ends in"
        )
    width = float(replicas) if replicas > 1 else min(1.0, width)
    return _Latency(k, why, width, replicas, p99[0], twin, limits, whole, rate_vm)


def _latency_twin(
    recipe: Recipe, t: Any, lat: _Latency, settings: dict[str, Any], s: dict[str, Any], notes: list[str]
) -> dict[str, Any]:
    """A latency-bound run's LoadGen count and limits here, and its twin's copies and pre-roll (to the end of the
    real run's schedule where the twin's whole run fails: the crowd then is the end's, steady_state's window)."""
    tail = max(over_share(t.figures, "ttft", lat.limits_s[0]), over_share(t.figures, "tpot", lat.limits_s[1]))
    odds = partial(early_stopping_odds, t, lat.twin, recipe.loadgen.max_tokens, limits_s=lat.limits_s)
    _latency_settings(settings, int(s["min_query_count"]), lat.width, lat.k, notes, tail, odds, t.real_queries)
    # LoadGen reads user.conf's limits as whole ms; the harness applies these ns keys (run/harness.py)
    settings["ttft_latency_ns"] = round(int(s["ttft_latency"]) * 1e6 * lat.k)
    settings["tpot_latency_ns"] = round(int(s["tpot_latency"]) * 1e6 * lat.k)
    preroll_s = PREROLL_LATENCIES * t.figures["latency_mean"].value
    if lat.end_s is not None:  # the run's queries come last: they span queries / (rate x width) real seconds
        span = settings["min_query_count"] / (lat.rate_vm * lat.width)
        preroll_s = max(preroll_s, lat.end_s - span)
    return {
        "replicas": lat.replicas,
        "preroll_qps": t.per_server_qps * min(lat.width, 1.0),
        "preroll_s": preroll_s,
        "preroll_max_tokens": recipe.loadgen.max_tokens,
    }


def plan_pace(recipe: Recipe, time_scale: float, cache_dir: Path | None = None) -> dict[str, RunPace]:
    """Every run of the recipe's published-pace rehearsal (the scenarios its twin record has)."""
    from repro.rehearse.result import PROMPTS
    from repro.rehearse.twin import calibrate
    from repro.rehearse.twin_crowd import one_server, steady_state, thin_for
    from repro.run.backends.trtllm import client_concurrency, stall_timeout_s
    from repro.run.settings import loadgen_settings

    cal = calibrate(recipe.name, cache_dir)
    assert recipe.trtllm is not None
    out: dict[str, RunPace] = {}
    for scenario, sc in cal.scenarios.items():
        if scenario == "Interactive" and recipe.loadgen.interactive is None:
            continue
        t = sc.target
        servers = recipe.deployment(scenario).trtllm.servers_per_vm  # type: ignore[union-attr]
        rate_vm = t.per_server_qps * servers
        notes: list[str] = []
        engine = _recipe_engine(recipe, scenario, sc.params, notes)
        lat: _Latency | None = None
        if scenario == "Offline":
            need = max(time_scale, MIN_WIDTH * rate_vm / OFFLINE_QPS)
            k = round_pace(min(need, 1.0))
            why = (
                f"--time-scale {TimeScale(k).text}"
                if need == time_scale
                else f"a twin of width >= {MIN_WIDTH:g} at {OFFLINE_QPS:g} answers/s"
            )
            width = min(1.0, OFFLINE_QPS * k / rate_vm)
        else:
            mine = TwinParams.from_json({**sc.params.to_json(), **engine})
            lat = _latency_pace(recipe, scenario, t, mine, time_scale, servers, notes)
            k, why, width = lat.k, lat.why, lat.width
        notes.insert(0, f"time x {TimeScale(k).text}: {why}")
        notes.append(
            f"width {width:.3g}: {rate_vm:,.4g} samples/s published x {width:.3g} / {k:.4g} = "
            f"{rate_vm * width / k:,.4g} sent a second here"
        )
        s = loadgen_settings(recipe, scenario, dataset_size=PROMPTS)
        settings: dict[str, Any] = {
            "min_duration": max(1, int(int(s["min_duration"]) * k)),
            "min_query_count": max(1, math.ceil(int(s["min_query_count"]) * width)),
            "target_qps": float(s["target_qps"]) * width / k,
            "performance_sample_count_override": PROMPTS,
        }
        twin = {**sc.params.to_json(), **engine, "time_scale": k}
        crowd_at: dict[str, Any] = {}
        if lat is None:
            _cut_offline(settings, width, client_concurrency(recipe) * servers, notes, k)
        else:
            twin.update(_latency_twin(recipe, t, lat, settings, s, notes))
            if lat.end_s is not None:
                crowd_at = {"seconds": lat.end_s, "window": END_WINDOW}
        base = TwinParams.from_json(twin)
        crowd = steady_state(t, one_server(base, WHOLE_RUN_SEED), recipe.loadgen.max_tokens, **crowd_at)
        out[scenario] = RunPace(
            scenario,
            TimeScale(k, f"--pace published ({why})"),
            width,
            settings,
            thin_for(base, width, crowd),
            max(1, math.ceil(client_concurrency(recipe) * width)),
            stall_timeout_s(recipe),
            notes,
            lat.expected_ttft_p99_s if lat else None,
            lat.whole.to_json() if lat else None,
        )
    return out
