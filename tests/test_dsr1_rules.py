"""DeepSeek-R1's scoring data (tests/fixtures/dsr1/scoring-block.yaml, the scoring parts of its benchmark file):
it validates as a benchmark file's blocks, gives the checker's floor and band, says where the rules text disagrees,
gives the sandbox and timeouts the scorer uses, and TEST06 judges a real DeepSeek-R1 TEST06 entry with its EOS id."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from repro.core.benchmarks import SHIPPED, load_benchmark_file
from repro.results.accuracy import check_targets
from repro.results.compliance import check_entries
from repro.results.dsr1_score import rules_from

FIXTURES = Path(__file__).parent / "fixtures" / "dsr1"
BLOCK = yaml.safe_load((FIXTURES / "scoring-block.yaml").read_text(encoding="utf-8"))


def _bench(tmp_path, block=BLOCK, name="dsr1-scoring"):
    """A benchmark file: llama3.1-405b's model/dataset/scenarios (not what is tested) with the DeepSeek-R1 scoring
    block in place of its accuracy block, EOS id and the sources they cite."""
    data = yaml.safe_load((SHIPPED / "llama3.1-405b.yaml").read_text(encoding="utf-8"))
    data["name"] = name
    data["accuracy"] = copy.deepcopy(block["accuracy"])
    data["model"]["eos_token_id"] = block["model"]["eos_token_id"]
    data["model"]["sources"] = [*data["model"]["sources"], *block["model"]["sources"]]
    data["sources"] = {**data["sources"], **block["sources"]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return load_benchmark_file(path)


def test_the_checker_floor_and_band(tmp_path):
    acc = _bench(tmp_path).accuracy
    (metric,) = acc.targets()
    assert metric.name == "exact_match" and round(acc.floor(metric), 4) == 80.5446
    assert round(acc.tokens_per_sample.low, 2) == 3497.60 and round(acc.tokens_per_sample.high, 2) == 4274.85
    assert acc.samples == 4388


def test_the_rules_text_figure_is_recorded_and_not_applied(tmp_path):
    acc = _bench(tmp_path).accuracy
    (other,) = acc.metrics[0].stated_elsewhere
    assert other.value == 81.9132 and other.source == "rules"
    assert acc.metrics[0].reference == 81.3582  # the checker's
    assert "80.5446" in other.note


def test_exact_match_against_the_floor(tmp_path):
    bench = _bench(tmp_path)
    azure = {"exact_match": 81.47219690063811, "tokens_per_sample": 3779.8644029170464}  # GB300 Offline, published
    assert check_targets(azure, bench) == []
    assert check_targets({**azure, "exact_match": 80.81}, bench) == []  # GB300 Interactive's margin
    low = check_targets({**azure, "exact_match": 80.5445}, bench)
    assert low and "exact_match 80.5445 is below" in low[0]
    long = check_targets({**azure, "tokens_per_sample": 4275.0}, bench)
    assert long and "tokens_per_sample 4275" in long[0]


def test_subsets_and_sandbox_are_data(tmp_path):
    bench = _bench(tmp_path)
    assert set(bench.accuracy.subsets) == {"gpqa", "mmlu_pro", "math500", "aime", "livecodebench"}
    rules = rules_from(bench, workers=3)
    assert rules.lcb_timeout_s == 60  # eval_accuracy.py's mock_args.timeout
    assert rules.limits.memory_bytes == 4 << 30 and rules.limits.nproc == 64
    assert rules.math_timeout_s == 30 and rules.workers == 3 and rules.problem_count == 400
    spec = bench.accuracy.code_execution
    assert (spec.problems, spec.version, spec.file, spec.problem_count) == (
        "livecodebench/code_generation_lite",
        "release_v1",
        "test.jsonl",
        400,
    )


def test_an_unknown_subset_is_refused(tmp_path):
    bad = copy.deepcopy(BLOCK)
    bad["accuracy"]["subsets"]["humaneval"] = {"how": "x"}
    with pytest.raises(Exception, match="subsets"):
        _bench(tmp_path, bad, name="dsr1-bad")


def test_test06_judges_a_real_deepseek_r1_entry_with_eos_1(tmp_path):
    eos = _bench(tmp_path).model.eos_token_id
    assert eos == 1
    entries = json.loads((FIXTURES / "test06_entry.json").read_text(encoding="utf-8"))
    passed = check_entries(entries, "Offline", eos_id=eos)
    assert passed.check("eos").status == "True" and passed.check("sample_length").status == "True"
    planted = [dict(entries[0], data=entries[0]["data"] + "01000000" * 2, token_count=314)]
    failed = check_entries(planted, "Offline", eos_id=eos)
    assert failed.check("eos").status == "False"
    assert "2 EOS tokens (id 1)" in (failed.check("eos").example or "")
    one = [dict(entries[0], data=entries[0]["data"] + "01000000", token_count=313)]
    assert check_entries(one, "Offline", eos_id=eos).check("eos").status == "True"  # one trailing EOS is allowed


def test_the_shipped_benchmark_file_carries_this_block():
    """Once repro/data/benchmarks/deepseek-r1.yaml exists (dsr1data's), its scoring parts are exactly these."""
    path = SHIPPED / "deepseek-r1.yaml"
    if not path.exists():
        pytest.skip("deepseek-r1.yaml is not shipped yet")
    shipped = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert shipped["accuracy"] == BLOCK["accuracy"]
    assert shipped["model"]["eos_token_id"] == BLOCK["model"]["eos_token_id"]
    for key, source in BLOCK["sources"].items():
        assert shipped["sources"].get(key) == source, key


def test_azures_published_accuracy_txt_is_read_and_judged(tmp_path):
    """The evaluator's whole log (800 progress lines, then Results with 'num-samples', then the hash) is read; the
    published figures pass the checker's rules, a copy below the floor fails naming exact_match."""
    from repro.results.logfiles import read_accuracy_txt

    path = FIXTURES / "azure_gb300_offline_accuracy.txt"
    scores, hashes = read_accuracy_txt(path)
    assert scores == {"exact_match": 81.47219690063811, "tokens_per_sample": 3779.8644029170464, "num-samples": 4388}
    assert hashes == ["5ff1d1e7a4ff12e18f609601267bfb636c45e1785dd300cc6e2dfad34fd9d91b"]
    bench = _bench(tmp_path)
    assert check_targets(scores, bench) == []
    low = tmp_path / "accuracy.txt"
    low.write_text(path.read_text(encoding="utf-8").replace("81.47219690063811", "80.47219690063811"), encoding="utf-8")
    failures = check_targets(read_accuracy_txt(low)[0], bench)
    assert len(failures) == 1 and failures[0].startswith("exact_match 80.4722 is below the 99% target 80.5446")


def test_repros_accuracy_txt_reads_back(tmp_path):
    from repro.results.dsr1_score import Dsr1Scores, SubsetScore, format_accuracy_txt
    from repro.results.logfiles import read_accuracy_txt

    scores = Dsr1Scores(
        [SubsetScore("gpqa", "gpqa", samples=3, evaluated=3, correct=2, tokens=3000)], [True, True, False]
    )
    path = tmp_path / "accuracy.txt"
    path.write_text(format_accuracy_txt(scores, "ab" * 32), encoding="utf-8")
    got, hashes = read_accuracy_txt(path)
    assert got == {"exact_match": 100 * 2 / 3, "tokens_per_sample": 1000.0, "num-samples": 3} and hashes == ["ab" * 32]


def test_a_repro_server_run_under_a_neutral_folder_is_server_not_interactive(tmp_path) -> None:
    """DeepSeek-R1's Server limits (TTFT 2,000 ms, TPOT 80 ms) lie inside Llama-3.1-405B's Interactive ones (4,500 /
    80): a folder that names no benchmark (a system run's RACK/system/) read as Interactive. repro's own run.json
    names the benchmark, and the limits are that benchmark's: Azure's GB300 Server logs are Server there."""
    import shutil

    from repro.results.logs import parse_run

    src = Path(__file__).parent / "fixtures/published/v6.1_Azure_deepseek-r1/closed/Azure/results"
    run = tmp_path / "system" / "performance" / "run_1"
    shutil.copytree(src / "Azure-GB300-NVL72_288GBx72/deepseek-r1/Server/performance/run_1", run)
    assert parse_run(run).benchmark_scenario == "Interactive"  # no benchmark named anywhere: every file's limits
    (run / "run.json").write_text(json.dumps({"benchmark": "deepseek-r1"}))
    assert parse_run(run).benchmark_scenario == "Server"
    (run / "run.json").write_text(json.dumps({"benchmark": "../llama3.1-405b"}))  # a name, never a path
    assert parse_run(run).benchmark_scenario == "Interactive"
