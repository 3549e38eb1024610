"""LoadGen's settings for one run: the user.conf keys from the recipe, shortened by smoke options, and the count
of samples LoadGen will issue (for the progress bar and the plan).

A run's settings are written to its own user.conf, which LoadGen reads with `TestSettings.FromConfig`; nothing
else changes them, so the file is the record of what LoadGen was told.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from repro.core.benchmarks import Benchmark
from repro.core.errors import InputError
from repro.core.recipes import Recipe
from repro.core.scenarios import NAMES, scenario_spec

SCENARIOS = NAMES
# LoadGen's early stopping (loadgen/early_stopping.cc, p99 at 99% confidence) needs 459 queries with none over a
# TTFT/TPOT limit and 662 with one: the demo's 64 could never be VALID in Server or Interactive.
DEMO_LATENCY_QUERIES = 662


def loadgen_scenario(scenario: str) -> str:
    """LoadGen's scenario for a repro scenario (Interactive is LoadGen's Server): core/scenarios.py decides it."""
    return scenario_spec(scenario).loadgen


def model_key(bench: Benchmark, scenario: str) -> str:
    """The model name LoadGen's config is keyed by (mlperf.conf: `llama2-70b-interactive.Server.ttft_latency`,
    `llama3_1-405b.Offline.min_query_count`): the benchmark file's mlperf_model for that scenario."""
    return bench.loadgen_model(scenario)


def recipe_target_qps(recipe: Recipe, scenario: str) -> float | None:
    """The recipe's own arrival rate for Server or Interactive (None: it carries none)."""
    target = {"Server": recipe.loadgen.server, "Interactive": recipe.loadgen.interactive}.get(scenario)
    return float(target.target_qps) if target is not None else None


def loadgen_settings(
    recipe: Recipe,
    scenario: str,
    *,
    duration_s: float | None = None,
    samples: int | None = None,
    dataset_size: int | None = None,
    accuracy: bool = False,
    official_min_duration: bool = False,
) -> dict[str, Any]:
    """The user.conf keys for this run; smoke options shorten the run, nothing else changes.

    `official_min_duration`: MLPerf's own 600 s (mlperf.conf) instead of the recipe's 2,400 s (Azure's choice):
    still a valid run, about a quarter of the samples and the time."""
    lg = recipe.loadgen
    size = dataset_size or lg.performance_sample_count
    qps, min_duration = lg.offline_expected_qps, lg.min_duration_ms
    if scenario != "Offline":
        # Interactive without its own published rate starts from Server's; `repro tune interactive` finds its own.
        target = (lg.interactive if scenario == "Interactive" else None) or lg.server
        if target is not None:
            qps, min_duration = target.target_qps, target.min_duration_ms or min_duration
        elif not recipe.demo:  # the demo measures its Server rate before the run (run/demo.py)
            raise InputError(
                f"Recipe '{recipe.name}' has no Server target_qps (loadgen.server): the Offline rate would schedule "
                "more than the system sustains and the run would be INVALID.",
                "repro recipes validate",
            )
    if official_min_duration:
        min_duration = recipe.bench.rules(scenario).min_duration_ms
    s: dict[str, Any] = {
        "target_qps": qps,
        "min_duration": min_duration,
        "min_query_count": min_query_count(recipe, scenario),
        "performance_sample_count_override": min(lg.performance_sample_count, size),
        "use_token_latencies": 1,
    }
    if scenario != "Offline":
        s.update(server_latency_keys(recipe, scenario))
        if recipe.demo:
            s["min_query_count"] = max(int(s["min_query_count"]), DEMO_LATENCY_QUERIES)
    if duration_s is not None:
        s.update(min_duration=int(duration_s * 1000), max_duration=int(duration_s * 1000), min_query_count=1)
    if samples is not None:
        s.update(min_query_count=samples, max_query_count=samples, performance_sample_count_override=min(samples, size))
        if duration_s is None:
            s["min_duration"] = 0
    return s


def min_query_count(recipe: Recipe, scenario: str) -> int:
    """The query count user.conf asks for: Offline's is the recipe's (by default the benchmark's, mlperf.conf's
    `<model>.Offline.min_query_count`, the whole set: one query of that many samples); Server and Interactive take the
    benchmark's own for that scenario (mlperf.conf sets none, so LoadGen's default 100: every published Server and
    Interactive detail log reads `requested_min_query_count` 100). Giving Server the Offline count asked a 405B
    Server run at 0.89 queries/s for its whole set's count of queries, 2.6 hours where min_duration asks 10 minutes."""
    if scenario == "Offline":
        return int(recipe.loadgen.min_query_count)
    return int(recipe.bench.rules(scenario).min_query_count)


def server_latency_keys(recipe: Recipe, scenario: str = "Server") -> dict[str, int]:
    """The benchmark file's TTFT/TPOT limits for Server or Interactive, in milliseconds, the unit LoadGen reads.

    LoadGen scales these keys itself (`test_settings_internal.cc`: `lookupkv(model, "Server", "ttft_latency",
    &server_ttft_latency, nullptr, 1000 * 1000)`, as `mlperf.conf` writes `llama2-70b.Server.ttft_latency = 2000`),
    so multiplying here would make the limits 10^6 too loose.
    """
    limits = recipe.bench.rules(scenario)
    return {"ttft_latency": int(limits.ttft_ms or 0), "tpot_latency": int(limits.tpot_ms or 0)}


def sim_pace(recipe: Recipe, settings: dict[str, Any], output_lens: np.ndarray) -> tuple[float | None, str]:
    """An unpaced sim answers LoadGen's whole Offline query at once, before min_duration: INVALID every time, and a
    rehearsal that cannot be VALID teaches nothing. Pace it at the published tokens/s per VM where that outlasts
    min_duration, else so the run lasts 1.5 x min_duration."""
    min_s = int(settings.get("min_duration", 0)) / 1000
    if min_s <= 0 or len(output_lens) == 0:
        return None, "unpaced: no minimum duration to outlast"
    per_sample = float(np.minimum(output_lens, recipe.loadgen.max_tokens).mean())
    tokens = per_sample * expected_samples(settings, "Offline")
    published = recipe.published.tokens_per_s_per_vm
    if isinstance(published, (int, float)) and tokens / published >= 1.2 * min_s:
        return float(published), f"the published {published:,.1f} tokens/s per VM"
    return tokens / (1.5 * min_s), "paced to last 1.5 x min_duration"


def user_conf_text(settings: dict[str, Any], scenario: str, bench: Benchmark) -> str:
    key = model_key(bench, scenario)
    lines = [
        "# Generated by repro for this run; LoadGen reads it with TestSettings.FromConfig(path, "
        f"'{key}', '{loadgen_scenario(scenario)}')."
    ]
    lines += [f"{key}.{loadgen_scenario(scenario)}.{k} = {v}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"


def expected_samples(settings: dict[str, Any], scenario: str) -> int:
    """LoadGen's own count: Offline issues max(min_query_count, 1.1 x qps x min_duration) in one query."""
    mq = int(settings.get("min_query_count", 1))
    by_time = (
        int(1.1 * float(settings["target_qps"]) * int(settings.get("min_duration", 0)) / 1000)
        if scenario == "Offline"
        else int(float(settings["target_qps"]) * int(settings.get("min_duration", 0)) / 1000)
    )
    n = max(mq, by_time)
    if "max_query_count" in settings:
        n = (
            min(n, int(settings["max_query_count"]))
            if scenario != "Offline"
            else max(int(settings["max_query_count"]), 1)
        )
    return max(n, 1)
