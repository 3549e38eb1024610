"""Golden tests on Azure's own v4.0 NC H100 v5 bundle (issue #44 item 6), the `nc-h100-v5` recipe's reference, read
from mlcommons/inference_results_v4.0 @ 3c4a1cf196b70175cfe7c59e067cd1d923aa4f3f into
tests/fixtures/published/v4.0_Azure_NC_H100_v5_TRT_llama2-70b-99.9 (its README says what was kept and why).

v4.0 submissions published accuracy/ with the accuracy run's mlperf_log_detail.txt (AccuracyOnly) and no summary;
the bundle once exited 2 as an "unfinished performance run". Every figure asserted here is read from the real files
(summaries, accuracy.txt, system JSON) or from the shipped index and recipe, never typed in."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from helpers import cli

from repro.core.recipes import get_recipe
from repro.results.logs import find_runs

BUNDLE = "v4.0_Azure_NC_H100_v5_TRT_llama2-70b-99.9"
AZURE = Path("closed/Azure")
RESULTS = AZURE / "results/NC_H100_v5_TRT/llama2-70b-99.9"
RECORD = "v4.0/closed/Azure/NC_H100_v5_TRT/99.9/{}"
SCENARIOS = ("Offline", "Server")
# the line LoadGen prints the result on: Offline "Tokens per second: X", Server "Completed tokens per second : X"
_TOKENS = re.compile(r"^(?:Completed tokens|Tokens) per second\s*:\s*(\S+)$", re.M)


def _summary_tokens(bundle: Path, scenario: str) -> float:
    text = (bundle / RESULTS / scenario / "performance/run_1/mlperf_log_summary.txt").read_text()
    (printed,) = _TOKENS.findall(text)
    return float(printed)


def _accuracy_txt(bundle: Path, scenario: str) -> dict[str, float]:
    text = (bundle / RESULTS / scenario / "accuracy/accuracy.txt").read_text()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("{")]
    return {k: float(v) for k, v in ast.literal_eval(line).items()}


def _system_gpus(bundle: Path) -> int:
    system = json.loads((bundle / AZURE / "systems/NC_H100_v5_TRT.json").read_text())
    return int(system["accelerators_per_node"]) * int(system["number_of_nodes"])


def _verify(bundle: Path, *args: str) -> tuple[int, dict]:
    res = cli("verify", str(bundle), *args, "--json")
    return res.exit_code, json.loads(res.stdout)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_verify_reads_each_scenario_of_the_real_bundle_as_itself(fixtures: Path, scenario: str) -> None:
    """Offline and Server: the summary's tokens/s, per GPU over the system JSON's 2 H100 NVL, the accuracy rows of
    that scenario's accuracy.txt, its own published record at +0.0%, PASS and exit 0 (the index row says VALID)."""
    bundle = fixtures / BUNDLE
    code, doc = _verify(bundle, "--scenario", scenario)
    assert code == 0 and doc["status"] == "PASS", (code, doc.get("reasons"), doc.get("error"))
    assert doc["scenario"] == doc["log_scenario"] == scenario
    assert Path(doc["folder"]) == bundle / RESULTS / scenario / "performance/run_1"
    tokens, gpus = _summary_tokens(bundle, scenario), _system_gpus(bundle)
    assert doc["tokens_per_s"] == tokens and doc["gpus"] == gpus == 2
    assert doc["gpus_source"] == "system JSON NC_H100_v5_TRT.json: 2 per node"
    assert doc["tokens_per_s_per_gpu"] == round(tokens / gpus, 1)
    acc = _accuracy_txt(bundle, scenario)
    assert {k: doc["accuracy"][k] for k in acc} == acc and doc["accuracy_verdict"] == "PASS"
    names = {c["name"]: c for c in doc["checks"]}
    assert all(names[f"accuracy {m}"]["ok"] for m in ("rouge1", "rouge2", "rougeL", "tokens_per_sample", "samples"))
    # the accuracy log was left out of the fixture (published cut to 8,199 bytes): said, never passed
    assert names["accuracy.txt hash"]["ok"] is None
    assert names["accuracy.txt hash"]["detail"].startswith("no mlperf_log_accuracy.json beside accuracy.txt")
    # the published index row for this result: the same figures, matched exactly
    assert doc["published_record"]["ref"] == RECORD.format(scenario) and doc["published_record"]["exact"]
    shown = cli("published", "show", RECORD.format(scenario), "--json")
    (row,) = json.loads(shown.stdout)["results"]
    assert row["result_validity"] == "VALID" and row["tokens_per_second"] == tokens
    assert row["tokens_per_second_per_accelerator"] == doc["published"]["tokens_per_s_per_gpu"] == tokens / gpus
    assert row["metrics"] == {m: acc[m] for m in ("rouge1", "rouge2", "rougeL")}
    assert row["tokens_per_sample"] == acc["tokens_per_sample"] and row["gen_num"] == acc["gen_num"]
    assert doc["deviation_pct"] == 0.0


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_its_own_recipe_compares_it_at_zero(fixtures: Path, scenario: str) -> None:
    """`repro verify --recipe nc-h100-v5`: the recipe's published figure for that scenario is Azure's own, so the
    bundle sits at +0.0% of it and passes."""
    recipe = get_recipe("nc-h100-v5")
    figure = {"Offline": recipe.published.tokens_per_s_per_gpu} | {
        s.scenario: s.tokens_per_s_per_gpu for s in recipe.published_scenarios
    }
    code, doc = _verify(fixtures / BUNDLE, "--recipe", "nc-h100-v5", "--scenario", scenario)
    assert code == 0 and doc["status"] == "PASS", (code, doc.get("reasons"), doc.get("error"))
    assert doc["reference"] == "recipe nc-h100-v5" and doc["scenario"] == scenario
    assert doc["published"]["tokens_per_s_per_gpu"] == figure[scenario]
    assert figure[scenario] == _summary_tokens(fixtures / BUNDLE, scenario) / 2
    assert doc["deviation_pct"] == 0.0
    inside = next(c for c in doc["checks"] if c["name"] == "inside band")
    assert inside["ok"] and inside["detail"].startswith("+0.0% vs the published")


def test_the_accuracy_folder_is_the_accuracy_run_not_an_unfinished_one(fixtures: Path) -> None:
    """accuracy/ holds only the accuracy run's detail log (LoadGen's own AccuracyOnly mode, no summary): it is read
    as that run; verify pointed at it alone refuses it as an accuracy run (exit 2), never 'did not finish'."""
    bundle = fixtures / BUNDLE
    runs = {(r.folder.relative_to(bundle / RESULTS).as_posix()): r for r in find_runs(bundle)}
    assert sorted(runs) == [f"{s}/{k}" for s in SCENARIOS for k in ("accuracy", "performance/run_1")]
    for scenario in SCENARIOS:
        acc, perf = runs[f"{scenario}/accuracy"], runs[f"{scenario}/performance/run_1"]
        assert acc.summary_path is None and acc.detail_path is not None
        assert (acc.mode, acc.scenario, acc.incomplete) == ("AccuracyOnly", scenario, False)
        assert (perf.mode, perf.validity, perf.incomplete) == ("PerformanceOnly", "VALID", False)
        res = cli("verify", str(bundle / RESULTS / scenario / "accuracy"))
        assert res.exit_code == 2, res.output
        assert "only AccuracyOnly logs here" in res.output and "did not finish" not in res.output


# read_file's total_chars for each file at 3c4a1cf1 (the fixture README's table); the detail logs lack only their
# loaded_qsl_set line, 136,627 characters in each (24,576 indices, their order aside, and the line's own stamps)
PUBLISHED_CHARS = {
    "systems/NC_H100_v5_TRT.json": 1896,
    "results/NC_H100_v5_TRT/llama2-70b-99.9/Offline/performance/run_1/mlperf_log_summary.txt": 1676,
    "results/NC_H100_v5_TRT/llama2-70b-99.9/Offline/performance/run_1/mlperf_log_detail.txt": 167842,
    "results/NC_H100_v5_TRT/llama2-70b-99.9/Offline/accuracy/accuracy.txt": 249,
    "results/NC_H100_v5_TRT/llama2-70b-99.9/Offline/accuracy/mlperf_log_detail.txt": 161963,
    "results/NC_H100_v5_TRT/llama2-70b-99.9/Server/performance/run_1/mlperf_log_summary.txt": 2887,
    "results/NC_H100_v5_TRT/llama2-70b-99.9/Server/performance/run_1/mlperf_log_detail.txt": 177476,
    "results/NC_H100_v5_TRT/llama2-70b-99.9/Server/accuracy/accuracy.txt": 251,
    "results/NC_H100_v5_TRT/llama2-70b-99.9/Server/accuracy/mlperf_log_detail.txt": 164859,
    "measurements/NC_H100_v5_TRT/llama2-70b-99.9/Offline/user.conf": 80,
    "measurements/NC_H100_v5_TRT/llama2-70b-99.9/Offline/README.md": 485,
    "measurements/NC_H100_v5_TRT/llama2-70b-99.9/Server/user.conf": 76,
    "measurements/NC_H100_v5_TRT/llama2-70b-99.9/Server/README.md": 482,
}
QSL_LINE_CHARS = len(",".join(map(str, range(24576)))) + len(
    ':::MLLOG {"key": "loaded_qsl_set", "value": [], "time_ms": 0.313813, "namespace": "mlperf::logging", '
    '"event_type": "POINT_IN_TIME", "metadata": {"is_error": false, "is_warning": false, '
    '"file": "/work/build/inference/loadgen/loadgen.cc", "line_no": 613, "pid": 17742, "tid": 17742}}\n'
)


def test_the_fixture_is_the_published_files(fixtures: Path) -> None:
    """No file was edited after it was read: each has its published length (a detail log, less its one bulk line),
    and no file of the bundle is unaccounted for."""
    root = fixtures / BUNDLE / AZURE
    assert QSL_LINE_CHARS == 136627
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == sorted(PUBLISHED_CHARS)
    for rel, chars in PUBLISHED_CHARS.items():
        text = (root / rel).read_text(encoding="utf-8")
        if rel.endswith("mlperf_log_detail.txt"):
            assert '"loaded_qsl_set"' not in text and all(ln.startswith(":::MLLOG {") for ln in text.splitlines())
            chars -= QSL_LINE_CHARS
        assert len(text) == chars, rel
