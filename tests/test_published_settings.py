"""The user.conf repro writes for every GPU recipe and scenario against the settings LoadGen logged for the published
run the recipe follows: its query count, its minimum duration, its rate.

Sources: the published summaries the server twin is calibrated from (repro/data/twin/logs, verbatim; their
"min_query_count", "min_duration (ms)" and "target_qps" lines are LoadGen's effective settings) and, where the tests
hold the published detail log, its `requested_*` keys (what user.conf and mlperf.conf asked for). A scenario whose log
is another system's (an analog) is not the recipe's published run and is left out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO

from repro.core.recipes import get_recipe
from repro.rehearse import twin as T
from repro.run.settings import loadgen_settings, user_conf_text

PUBLISHED = REPO / "tests/fixtures/published"
DETAIL = {  # recipe, scenario -> the published detail log of the run the recipe follows
    ("nd-gb200-v6-405b", "Offline"): "azure-nd-gb200-v6-v5.1-llama3.1-405b/llama3.1-405b/Offline/performance/run_1",
    ("nd-gb200-v6-405b", "Server"): "azure-nd-gb200-v6-v5.1-llama3.1-405b/llama3.1-405b/Server/performance/run_1",
    ("nd-gb200-v6", "Offline"): "azure-nd-gb200-v6-v5.1/llama2-70b-99/Offline/performance/run_1",
    ("nd-gb300-v6", "Offline"): "azure-nd-gb300-v6-rack/ND_GB300_v6_1/llama2-70b-99/Offline",
    ("nd-h100-v5", "Offline"): "nvidia-dgx-h100-v4.1/llama2-70b-99.9/Offline/performance/run_1",
    ("nd-h100-v5", "Server"): "nvidia-dgx-h100-v4.1/llama2-70b-99.9/Server/performance/run_1",
    ("nd-h200-v5", "Offline"): "v5.1_HPE_Cray_XD670_H200_SXM_141GBx8_TRT_llama2-70b-99_Offline/performance/run_1",
}


def _requested(folder: str) -> dict[str, float]:
    """The detail log's requested_* settings (one MLLOG JSON record a line)."""
    out = {}
    for line in (PUBLISHED / folder / "mlperf_log_detail.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith(":::MLLOG"):
            doc = json.loads(line.removeprefix(":::MLLOG"))
            if str(doc.get("key", "")).startswith("requested_"):
                out[doc["key"]] = doc["value"]
    return out


def _own_scenarios() -> list[tuple[str, str, str]]:
    rec = T.load_record()
    return [
        (name, scenario, sref.log)
        for name, ref in sorted(rec.recipes.items())
        for scenario, sref in ref.scenarios.items()
        if not sref.analog
    ]


@pytest.mark.parametrize(("name", "scenario", "log"), _own_scenarios())
def test_user_conf_asks_what_the_published_run_asked(name: str, scenario: str, log: str) -> None:
    recipe = get_recipe(name)
    s = loadgen_settings(recipe, scenario)
    conf = user_conf_text(s, scenario, recipe.bench)
    f = T.read_log(log)
    assert int(s["min_duration"]) == f["min_duration_ms"].value, (f["min_duration_ms"].source, conf)
    if scenario == "Offline":
        assert f["min_query_count"].value == 1  # LoadGen's Offline is one query: the count is its samples
    else:  # mlperf.conf sets no Server count: LoadGen's default 100, in every published Server/Interactive log
        assert int(s["min_query_count"]) == f["min_query_count"].value == 100, (f["min_query_count"].source, conf)
        # the rate: the published run's own target_qps, or (no user.conf published) what it completed, a bit under
        assert 0.98 * f["target_qps"].value <= float(s["target_qps"]) <= f["target_qps"].value, f["target_qps"].source
    folder = DETAIL.get((name, scenario))
    if folder is not None:
        asked = _requested(folder)
        assert int(s["min_query_count"]) == asked["requested_min_query_count"], (folder, conf)
        assert int(s["min_duration"]) == asked["requested_min_duration_ms"], folder
        assert int(s["performance_sample_count_override"]) == recipe.bench.rules(scenario).performance_sample_count
    if scenario == "Offline":
        assert f"{recipe.bench.loadgen_model(scenario)}.Offline.min_query_count = " in conf


def test_a_405b_server_run_asks_for_100_queries_not_the_offline_8313(tmp_path: Path) -> None:
    """At 0.89 queries/s, 8,313 queries would hold a Server run 2.6 hours where its 600 s min_duration asks 10
    minutes: user.conf asks for LoadGen's 100, as the published run's did (its detail log)."""
    recipe = get_recipe("nd-gb200-v6-405b")
    for scenario, key in (("Server", "llama3_1-405b.Server"), ("Interactive", "llama3_1-405b-interactive.Server")):
        conf = user_conf_text(loadgen_settings(recipe, scenario), scenario, recipe.bench)
        assert f"{key}.min_query_count = 100\n" in conf, conf
    off = user_conf_text(loadgen_settings(recipe, "Offline"), "Offline", recipe.bench)
    assert "llama3_1-405b.Offline.min_query_count = 8313\n" in off
