"""A result folder is read once (issue #33 item 5): `identify` builds one ResultIdentity per run, and verify,
--against and aggregate judge from it; what each field says and where it came from, on real published bundles."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import cli, copy_bundle

from repro.results import identity as identity_module
from repro.results import index_match
from repro.results.compare import pick_perf_run
from repro.results.identity import identify
from repro.results.logs import benchmark_of_path
from repro.results.verify import NoRecipeFor, verify_dir

GB200 = "azure-nd-gb200-v6-v5.1"
CISCO32 = "v5.1_Cisco_HGX-H100_H100-SXM-80GBx32_TRT_llama2-70b-99_Offline"
OPEN_H200 = "v4.1_open_NVIDIA_H200-SXM-141GBx1_TRT_DepthPruned_llama2-70b-99_Offline"


def test_identity_of_a_published_bundle_says_where_each_fact_came_from(fixtures: Path) -> None:
    ident = identify(pick_perf_run(fixtures / GB200))
    assert (ident.benchmark, ident.benchmark_source) == ("llama2-70b-99", "llama2-70b-99 in the path")
    assert (ident.scenario, ident.division, ident.division_source) == ("Offline", "closed", "system JSON")
    assert ident.accelerator == "NVIDIA GB200" and ident.accelerator_source == "system JSON ND_GB200_v6.json"
    assert ident.count is not None and ident.count.total == 4
    assert ident.record is not None and ident.record.row.ref == "5.1-0008/99/Offline"
    cisco = pick_perf_run(fixtures / CISCO32)
    assert identify(cisco).count.total == 32  # type: ignore[union-attr]
    assert identify(pick_perf_run(fixtures / OPEN_H200)).division == "open"


def test_verify_reads_the_folder_once(fixtures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One identify and one index match per verify (the real functions, counted)."""
    calls = {"identify": 0, "match_run": 0}
    real_identify, real_match = identity_module.identify, index_match.match_run

    def counted_identify(*a: object, **k: object) -> object:
        calls["identify"] += 1
        return real_identify(*a, **k)  # type: ignore[arg-type]

    def counted_match(*a: object, **k: object) -> object:
        calls["match_run"] += 1
        return real_match(*a, **k)  # type: ignore[arg-type]

    import repro.results.verify as verify_module

    monkeypatch.setattr(verify_module, "identify", counted_identify)
    monkeypatch.setattr(identity_module, "match_run", counted_match)
    v = verify_dir(fixtures / GB200)
    assert v.status == "PASS" and calls == {"identify": 1, "match_run": 1}
    assert v.identity is not None and v.to_json()["identity"]["published_record"] == "5.1-0008/99/Offline"


def test_json_carries_the_identity(fixtures: Path) -> None:
    doc = json.loads(cli("verify", str(fixtures / GB200), "--json").output)
    ident = doc["identity"]
    assert ident["accelerators"] == 4 and ident["accelerators_source"].startswith("system JSON")
    assert ident["benchmark"] == "llama2-70b-99" and ident["submitter"] == "Azure"


@pytest.mark.parametrize(
    "name,expected",
    [
        ("llama2-70b-99.9", "llama2-70b-99.9"),
        ("llama2-70b-interactive-99", "llama2-70b-99"),
        ("v5.1_NVIDIA_B200_llama2-70b-99_Interactive", "llama2-70b-99"),
        ("llama3.1-405b", "llama3.1-405b"),
        ("ND_GB200_v6", None),
    ],
)
def test_benchmark_from_the_path(tmp_path: Path, name: str, expected: str | None) -> None:
    assert benchmark_of_path(tmp_path / name / "Offline") == expected


def test_a_run_of_another_benchmark_is_refused_against_a_recipe(fixtures: Path, tmp_path: Path) -> None:
    b = copy_bundle(fixtures, GB200, tmp_path / "b")
    shutil.move(b / "llama2-70b-99", b / "llama3.1-405b")
    shutil.rmtree(b / "llama3.1-405b" / "Offline" / "accuracy")  # Llama-2 scores in a 405B folder: an input error
    res = cli("verify", str(b), "--recipe", "nd-gb200-v6", "--json")
    doc = json.loads(res.output)
    assert res.exit_code == 1 and doc["status"] == "NOT A REPRODUCTION"
    assert any(
        "a llama3.1-405b run (llama3.1-405b in the path) against recipe nd-gb200-v6's llama2-70b-99 result" in r
        for r in doc["reasons"]
    ), doc["reasons"]


# --- the folder-name accelerator note (issue #35 item 4) ------------------------------------------------------------


@pytest.mark.parametrize(
    "name,count",
    [
        ("Foo_H200x8_MI350Xx8", 16),  # not 208
        ("32xMI355X", 32),  # not 64
        ("16xH100_8xH100", 24),  # a 16+8 cluster, not 16
        ("16xMI325X_8xMI300X_2xEPYC_9575F", 24),
        ("GB300-NVL72_GB300-288GB_aarch64x72_TRT", 72),
        ("C885A_M8_H200_SXM_141GBx16_TRT", 16),
        ("SR680a_V3_B200SXMx8_TRT", 8),
        ("1-node-4x-BMG-B60", 4),
        ("AS-8125GS-TNMR2 (8x MI300X)", 8),
        ("ND_GB200_v6", None),
        ("aarch64x4", None),  # a count with no chip before it says nothing
    ],
)
def test_a_system_name_is_read_as_the_system_json_counts(name: str, count: int | None) -> None:
    from repro.results.hardware import name_count

    found = name_count(name)
    assert (found[0] if found else None) == count


def test_the_name_note_gives_the_names_count_or_nothing(fixtures: Path, tmp_path: Path) -> None:
    b = copy_bundle(fixtures, CISCO32, tmp_path / "b")
    (system,) = (b / "systems").glob("*.json")
    doc = json.loads(system.read_text())
    doc["system_name"] = "HGX H100x8_MI350Xx8"
    system.write_text(json.dumps(doc))
    notes = " ".join(verify_dir(b).notes)
    assert "says 16 accelerators" in notes and "208" not in notes
    doc["system_name"] = "32xMI355X"  # names another chip than the JSON's H100: nothing to say
    system.write_text(json.dumps(doc))
    assert "accelerators but" not in " ".join(verify_dir(b).notes)


@pytest.mark.parametrize(
    "bundle,tree,says",
    [
        (
            GB200,
            "inference_results_v3.1/closed/Azure/results/ND_GB200_v6",
            "round v3.1 is outside the shipped index for llama2-70b-99",  # the index starts at v4.0
        ),
        (
            "nvidia-dgx-h100-v4.1",
            "inference_results_v4.0/closed/NVIDIA/results/DGX-H100_H100-SXM-80GBx8_TRT",
            "the shipped index holds round v4.0 results of Azure only, not NVIDIA's",
        ),
    ],
)
def test_rounds_outside_the_index_are_named(fixtures: Path, tmp_path: Path, bundle: str, tree: str, says: str) -> None:
    b = copy_bundle(fixtures, bundle, tmp_path / tree)
    try:
        v = verify_dir(b, scenario="Offline")
    except NoRecipeFor as exc:  # nothing to compare with: the error says why the index has no record
        assert says in exc.message, exc.message
        return
    assert any(says in n for n in v.notes), v.notes


# --- the benchmark: decided once, by one precedence rule (results/identity.py) -------------------------------------


def _unnamed_copy(fixtures: Path, tmp_path: Path) -> Path:
    """Azure's GB200 Offline run in a folder that names no benchmark (the system JSON beside it)."""
    run = tmp_path / "ND_GB200_v6" / "run"
    shutil.copytree(fixtures / GB200 / "llama2-70b-99" / "Offline" / "performance" / "run_1", run)
    shutil.copy(fixtures / GB200 / "ND_GB200_v6.json", run.parent)
    return run


def test_the_benchmark_precedence_what_the_result_states_outranks_what_it_is_judged_by(
    fixtures: Path, tmp_path: Path
) -> None:
    """1 the path, 2 run.json, 3 the published record the log is, 4 only then the recipe it is judged against."""
    from repro.core.recipes import get_recipe

    named = copy_bundle(fixtures, GB200, tmp_path / "named") / "llama2-70b-99" / "Offline" / "performance" / "run_1"
    (named / "run.json").write_text(json.dumps({"benchmark": "llama3.1-405b"}))
    ident = identify(pick_perf_run(named))
    assert (ident.benchmark, ident.benchmark_source) == ("llama2-70b-99", "llama2-70b-99 in the path")

    run = _unnamed_copy(fixtures, tmp_path)
    ident = identify(pick_perf_run(run))  # the log is Azure's published 5.1-0008: the record says what it ran
    assert (ident.benchmark, ident.benchmark_source) == (
        "llama2-70b-99",
        "the published record 5.1-0008/99/Offline this log is",
    )
    assert ident.bench is not None and ident.bench.name == "llama2-70b-99"
    (run / "run.json").write_text(json.dumps({"benchmark": "llama3.1-405b"}))
    ident = identify(pick_perf_run(run))
    assert (ident.benchmark, ident.benchmark_source) == ("llama3.1-405b", "run.json")
    (run / "run.json").write_text(json.dumps({"recipe": "nd-gb200-v6-405b"}))  # an older run.json: its recipe's
    ident = identify(pick_perf_run(run))
    assert (ident.benchmark, ident.benchmark_source) == ("llama3.1-405b", "run.json (recipe nd-gb200-v6-405b)")

    (run / "run.json").unlink()
    summary = run / "mlperf_log_summary.txt"
    summary.write_text(summary.read_text().replace("52061.6", "52000.1"))  # no published record is this log
    ident = identify(pick_perf_run(run))
    assert (ident.benchmark, ident.benchmark_source, ident.bench) == (None, None, None)
    judged = ident.judged_by(get_recipe("nd-gb200-v6-405b"))
    assert (judged.benchmark, judged.benchmark_source) == ("llama3.1-405b", "recipe nd-gb200-v6-405b")
    assert judged.bench is not None and judged.bench.name == "llama3.1-405b"
    stated = identify(pick_perf_run(named))
    assert stated.judged_by(get_recipe("nd-gb200-v6-405b")) is stated  # never overrides what the result states


def test_a_deepseek_folder_is_its_benchmark_and_never_judged_by_a_llama_recipe(fixtures: Path, tmp_path: Path) -> None:
    """A v6.1-shaped folder (results/<system>/deepseek-r1/Offline) of an Azure ND GB300 v6 system, whose VM size has
    a Llama-2-70B recipe (nd-gb300-v6) and a DeepSeek-R1 one (nd-gb300-v6-dsr1): the path names the shipped
    deepseek-r1 benchmark, the DeepSeek-R1 recipe is the one detected, never the Llama one, and a Llama recipe named
    on the command line is refused as another benchmark, naming both."""
    vm = fixtures / "azure-nd-gb300-v6-rack"
    run = tmp_path / "results" / "ND_GB300_v6" / "deepseek-r1" / "Offline"
    shutil.copytree(vm / "ND_GB300_v6_1" / "llama2-70b-99" / "Offline", run)
    shutil.copy(vm / "ND_GB300_v6.json", run.parent.parent)
    ident = identify(pick_perf_run(run))
    assert (ident.benchmark, ident.benchmark_source) == ("deepseek-r1", "deepseek-r1 in the path")
    assert ident.bench is not None and ident.bench.mlperf_model == "deepseek-r1"
    detected = verify_dir(run).recipe
    assert detected is not None and (detected.name, detected.benchmark) == ("nd-gb300-v6-dsr1", "deepseek-r1")
    res = cli("verify", str(run), "--recipe", "nd-gb300-v6", "--json")
    doc = json.loads(res.output)
    assert res.exit_code == 1 and doc["status"] == "NOT A REPRODUCTION"
    assert doc["identity"]["benchmark"] == "deepseek-r1"
    assert any(
        "a deepseek-r1 run (deepseek-r1 in the path) against recipe nd-gb300-v6's llama2-70b-99 result" in r
        for r in doc["reasons"]
    ), doc["reasons"]
