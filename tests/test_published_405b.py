"""Issue 33: the published index's Llama-3.1-405B results (published-llama3.1-405b.csv) and the 405B bundles of other
submitters and accelerators (tests/fixtures/published/*405b*, sources in its README)."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import cli, read_csv_rows, write_csv_rows

from repro.core.benchmarks import load_benchmark
from repro.core.errors import InputError
from repro.core.published import (
    INDEX_405B_CSV,
    SOURCES_JSON,
    Filters,
    load_index,
    load_index_file,
)
from repro.results.compare import verify_against
from repro.results.logs import find_runs
from repro.results.verify import verify_dir

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "build_published_index.py"
# bundle -> (round, division/submitter, results folder, benchmark folder, scenario, tokens/s, accelerators)
BUNDLES = {
    "v5.1_Dell_XE9685L_B200_SXM_180GBx8_TRT_llama3.1-405b_Offline": (
        "v5.1",
        "closed/Dell",
        "XE9685L_B200_SXM_180GBx8_TRT",
        "llama3.1-405b",
        "Offline",
        1660.71,
        8,
    ),
    "v5.1_Cisco_C885A_M8_H200_SXM_141GBx16_TRT_llama3_1-405b_Offline": (
        "v5.1",
        "closed/Cisco",
        "C885A_M8_H200_SXM_141GBx16_TRT",
        "llama3_1-405b",
        "Offline",
        1086.01,
        16,
    ),
    "v6.0_NVIDIA_GB300-NVL72_x72_llama3.1-405b_Offline_rack": (
        "v6.0",
        "closed/NVIDIA",
        "GB300-NVL72_GB300-288GB_aarch64x72_TRT",
        "llama3.1-405b",
        "Offline",
        19511.7,
        72,
    ),
    "v6.0_GigaComputing_G894-SD3-AAX7_B300-SXM-270GBx8_TRT_llama3.1-405b_Interactive": (
        "v6.0",
        "closed/GigaComputing",
        "G894-SD3-AAX7_B300-SXM-270GBx8_TRT",
        "llama3.1-405b",
        "Interactive",
        764.66,
        8,
    ),
}


def _l405() -> list:  # type: ignore[type-arg]
    return [r for r in load_index().rows if r.benchmark_name == "llama3.1-405b"]


def test_every_405b_result_of_v51_and_v60_is_indexed_with_its_own_metrics() -> None:
    rows = [r for r in _l405() if r.round != "v5.0"]  # v5.0: tests/test_published_405b_v50.py
    counts = Counter((r.round, r.division, r.scenario) for r in rows)
    assert counts == {
        ("v5.1", "closed", "Offline"): 23,
        ("v5.1", "closed", "Server"): 23,
        ("v5.1", "closed", "Interactive"): 12,
        ("v5.1", "open", "Offline"): 2,
        ("v5.1", "open", "Interactive"): 1,
        ("v6.0", "closed", "Offline"): 7,
        ("v6.0", "closed", "Server"): 7,
        ("v6.0", "closed", "Interactive"): 3,
        ("v6.0", "open", "Offline"): 2,
        ("v6.0", "open", "Interactive"): 1,
    }
    assert {r.result_validity for r in rows} == {"VALID"} and all(r.result_id for r in rows)
    # every row joined to its round's summary_results.json (the a# of rack and multi-node systems is per node)
    assert all(r.summary_crosscheck == "ok" or r.summary_crosscheck.startswith("table a#=") for r in rows)
    assert {frozenset(r.metrics) for r in rows} == {frozenset({"exact_match", "rougeL"})}
    assert all(r.rouge1 is None and r.gen_num == 8313 and r.tokens_per_sample for r in rows)
    # the key is unique even where one system has two open variants of the benchmark (folder names in the key)
    amd = [r for r in rows if r.round == "v5.1" and r.submitter == "AMD"]
    assert sorted(r.key.split("/")[4] for r in amd) == ["llama3_1-405b_finetuned", "llama3_1-405b_pruned"]
    assert {r.benchmark for r in amd} == {"llama3.1-405b"}


def test_azure_405b_rows_are_the_issue_figures() -> None:
    idx = load_index()
    (off,) = idx.resolve("5.1-0008/llama3.1-405b/Offline")
    (srv,) = idx.resolve("v5.1/closed/Azure/ND_GB200_v6/llama3.1-405b/Server")
    assert (off.tokens_per_second, off.total_accelerators, round(off.per_accelerator, 2)) == (847.233, 4, 211.81)
    assert (srv.tokens_per_second, round(srv.per_accelerator, 1)) == (584.01, 146.0)
    assert off.metrics == {"exact_match": 90.119146, "rougeL": 21.953721} and off.tokens_per_sample == 654.1
    with pytest.raises(InputError, match="unknown benchmark '70b'"):
        idx.resolve("5.1-0008/70b")


def test_benchmark_filter_words() -> None:
    idx = load_index()
    assert len(idx.select(Filters(benchmark="llama3.1-405b"))) == 117
    assert len(idx.select(Filters(benchmark="LLAMA3_1-405B"))) == 117
    assert len(idx.select(Filters(benchmark="405b"))) == 117
    assert len(idx.select(Filters(benchmark="llama2-70b"))) == 957
    assert len(idx.select(Filters(benchmark="deepseek-r1"))) == len(idx.select(Filters(benchmark="r1"))) == 133
    assert {r.benchmark for r in idx.select(Filters(benchmark="llama2-70b-99.9"))} == {"99.9"}
    with pytest.raises(InputError, match="unknown benchmark 'llama3.1-8b'.*llama3.1-405b"):
        idx.select(Filters(benchmark="llama3.1-8b"))


def test_cli_published_filters_and_shows_405b() -> None:
    res = cli("published", "--benchmark", "llama3.1-405b", "--round", "v6.0", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["count"] == 20 and {r["benchmark_name"] for r in doc["results"]} == {"llama3.1-405b"}
    best = doc["results"][0]  # sorted by tokens/s per accelerator
    assert (best["result_id"], best["scenario"], round(best["tokens_per_second_per_accelerator"], 1)) == (
        "6.0-0078",
        "Offline",
        271.0,
    )
    assert set(best["metrics"]) == {"exact_match", "rougeL"}
    text = cli("published", "--benchmark", "405b", "--accelerator", "GB300", "--scenario", "Offline").output
    assert "llama3.1-405b" in text and "19,511.70" in text and "llama2-70b" not in text.split("Index:")[0]
    show = cli("published", "show", "5.1-0008/llama3.1-405b/Offline")
    assert show.exit_code == 0 and "847.233" in show.output and "211.81" in show.output
    assert "exact_match 90.119146, rougeL 21.953721, tokens/sample 654.1" in show.output
    variant = cli("published", "show", "v5.1/open/AMD/8xMI355X_2xEPYC_9575F/llama3_1-405b_pruned/Offline", "--json")
    assert variant.exit_code == 0 and json.loads(variant.stdout)["results"][0]["result_id"] == "5.1-0101"
    bad = cli("published", "--benchmark", "gpt-j")
    assert bad.exit_code == 2 and "unknown benchmark 'gpt-j'" in bad.output


def test_a_405b_row_with_another_benchmark_or_llama2_columns_is_refused(tmp_path: Path) -> None:
    rows, fields = read_csv_rows(INDEX_405B_CSV)
    rows[3]["benchmark"] = "99"
    bad = write_csv_rows(tmp_path / INDEX_405B_CSV.name, fields, rows)
    with pytest.raises(InputError, match=r"line 5, field 'benchmark': '99' is not one of \['llama3.1-405b'\]"):
        load_index_file(bad, SOURCES_JSON)
    rows[3]["benchmark"] = "llama3.1-405b"
    fields[fields.index("exact_match")] = "rouge1"
    renamed = write_csv_rows(tmp_path / "copy.csv", fields, rows, extrasaction="ignore")
    with pytest.raises(InputError, match="copy.csv: .*no file of that name or with its columns"):
        load_index_file(renamed, SOURCES_JSON)


def _build(tree: Path, round_: str, *extra: str) -> list[dict[str, str]]:
    out = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(tree),
            "--benchmark",
            "llama3.1-405b",
            "--round",
            round_,
            "--header",
            "--repo",
            "test/fixtures",
            "--commit",
            "0" * 40,
            *extra,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    return list(csv.DictReader(out.splitlines()))


@pytest.mark.parametrize("bundle", sorted(BUNDLES))
def test_each_405b_fixture_is_its_indexed_result(fixtures: Path, tmp_path: Path, bundle: str) -> None:
    """The verbatim bundle, laid out as in its results repository, reads (with the index's own builder) as the row
    the index holds for it: tokens/s, accelerators from the system JSON, the per-accelerator figure, accuracy."""
    round_, sub, system, folder, scenario, tokens, gpus = BUNDLES[bundle]
    src = fixtures / bundle
    dest = tmp_path / sub / "results" / system / folder / scenario
    shutil.copytree(src / "performance", dest / "performance")
    shutil.copytree(src / "accuracy", dest / "accuracy")
    (tmp_path / sub / "systems").mkdir(parents=True)
    shutil.copy(src / "systems" / f"{system}.json", tmp_path / sub / "systems" / f"{system}.json")
    (built,) = _build(tmp_path, round_)
    (row,) = [r for r in _l405() if r.round == round_ and r.system_folder == system and r.scenario == scenario]
    assert (float(built["tokens_per_second"]), int(built["total_accelerators"])) == (tokens, gpus)
    assert row.tokens_per_second == tokens and row.total_accelerators == gpus
    assert row.per_accelerator == pytest.approx(tokens / gpus, abs=1e-9)
    assert float(built["tokens_per_second_per_accelerator"]) == pytest.approx(row.per_accelerator, abs=5e-6)
    assert {k: float(built[k]) for k in row.metrics} == row.metrics
    assert built["loadgen_version"] == row.loadgen_version and built["model_folder"] == row.model_folder
    assert (src / "TEST06" / "verify_accuracy.txt").is_file()
    assert not list(src.rglob("mlperf_log_accuracy.json"))  # the large accuracy logs are left out, as elsewhere
    assert all(p.stat().st_size < 1_000_000 for p in src.rglob("*") if p.is_file())


def test_build_script_is_importable_for_its_parsers() -> None:
    spec = importlib.util.spec_from_file_location("build_published_index", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    acc = mod.parse_accuracy("{'exact_match': 90.1, 'rougeL': np.float64(21.9), 'gen_num': 8313}", "exact_match")
    assert acc == {"exact_match": 90.1, "rougeL": 21.9, "gen_num": 8313}
    assert mod.parse_accuracy("{'rouge1': 44.1}", "exact_match") == {}
    assert mod.columns("llama3.1-405b")[23:27] == ["exact_match", "rougeL", "tokens_per_sample", "gen_num"]


@pytest.mark.parametrize("bundle", sorted(BUNDLES))
def test_each_405b_bundle_verifies_as_itself(fixtures: Path, bundle: str) -> None:
    """Issue 33 Done-when: other submitters' 405B bundles verify as their own published record, +0.0%, with the
    per-accelerator figure of the system JSON's counts (B200 x8, H200 x16 on two nodes, GB300 NVL72 x72, B300
    Interactive), and their accuracy judged by the 405B metrics."""
    round_, _sub, system, _folder, scenario, tokens, gpus = BUNDLES[bundle]
    v = verify_dir(fixtures / bundle)
    assert v.record is not None, bundle
    row = v.record.row
    assert (row.round, row.benchmark_name, row.system_folder, row.scenario) == (
        round_,
        "llama3.1-405b",
        system,
        scenario,
    )
    assert v.gpus == gpus and v.per_gpu == pytest.approx(tokens / gpus, abs=1e-9) and v.per_gpu == row.per_accelerator
    assert v.deviation_pct == 0.0 and v.status == "PASS", v.reasons
    assert {"accuracy exact_match", "accuracy rougeL"} <= {c.name for c in v.checks}


def test_a_405b_interactive_log_is_interactive_by_its_own_limits(fixtures: Path) -> None:
    """Interactive logs say `Scenario : Server`; Llama-3.1-405B's Interactive limits are 4,500/80 ms (its Server
    6,000/175), not Llama-2-70B's 450/40: the benchmark's file decides, also where the folder name does not say."""
    bundle = next(b for b in BUNDLES if b.endswith("_Interactive"))
    (run,) = [r for r in find_runs(fixtures / bundle) if r.mode == "PerformanceOnly"]
    assert (run.scenario, run.benchmark_scenario) == ("Server", "Interactive")
    assert "4,500/80 ms" in run.scenario_source


def test_the_benchmark_files_name_every_round_and_scenario_the_index_has() -> None:
    """The benchmark files (repro/data/benchmarks) and the published index are read from the same rounds: every
    (benchmark, round, scenario) with a published result is one the benchmark's file says exists (v5.1 had
    Llama-3.1-405B Interactive; v6.1 Llama-2-70B-99.9 Interactive)."""
    missing = []
    for r in load_index().rows:
        bench = load_benchmark(r.benchmark_name)
        rules = bench.scenarios.get(r.scenario)  # type: ignore[call-overload]
        if r.round not in bench.rounds or rules is None or (rules.rounds and r.round not in rules.rounds):
            missing.append(f"{r.benchmark_name} {r.round} {r.scenario}")
    assert not sorted(set(missing))


@pytest.mark.parametrize("with_accuracy", [True, False])
def test_against_an_id_of_both_models_compares_with_the_runs_model(
    fixtures: Path, tmp_path: Path, with_accuracy: bool
) -> None:
    """5.1-0028 (Dell XE9685L) covers Llama-2-70B and Llama-3.1-405B results. A 405B run whose path names no
    benchmark is compared with the 405B row: its accuracy.txt scores exact_match, or without one, its tokens/s per GPU
    is the 405B figure's (the models differ fifty-fold)."""
    src = fixtures / "v5.1_Dell_XE9685L_B200_SXM_180GBx8_TRT_llama3.1-405b_Offline"
    run = tmp_path / "run"
    shutil.copytree(src / "performance", run / "performance")
    if with_accuracy:
        shutil.copytree(src / "accuracy", run / "accuracy")
    cmp = verify_against(run / "performance" / "run_1", ["5.1-0028"], gpus=8)
    (entry,) = cmp.entries
    assert entry.row.key == "v5.1/closed/Dell/XE9685L_B200_SXM_180GBx8_TRT/llama3.1-405b/Offline"
    assert entry.deviation_pct == 0.0 and cmp.facts.per_accelerator == entry.row.per_accelerator
