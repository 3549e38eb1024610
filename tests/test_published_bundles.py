"""Issue 24: no false PASS on any published bundle. One verdict path, with or without a recipe, on real published
bundles (tests/fixtures/published, sources in its README) or copies edited for the case in tmp_path."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from golden_util import render
from helpers import copy_bundle, edit
from typer.testing import CliRunner

from repro.cli import app
from repro.core.benchmarks import load_benchmark
from repro.core.errors import InputError
from repro.core.published import load_index
from repro.core.recipes import all_recipes, get_recipe
from repro.results.aggregate import aggregate
from repro.results.compare import verify_against
from repro.results.compliance import read_test06
from repro.results.index_match import match_run
from repro.results.logs import find_runs
from repro.results.verify import verify_dir

EOS = load_benchmark("llama2-70b-99").model.eos_token_id
"""Llama-2's EOS id, from its benchmark file: the fixtures here are Llama-2-70B runs."""

runner = CliRunner()
CISCO32 = "v5.1_Cisco_HGX-H100_H100-SXM-80GBx32_TRT_llama2-70b-99_Offline"
CISCO16 = "v5.1_Cisco_C885A_M8_H200_SXM_141GBx16_TRT_llama2-70b-99_Offline_truncated_test06"
OPEN_H200 = "v4.1_open_NVIDIA_H200-SXM-141GBx1_TRT_DepthPruned_llama2-70b-99_Offline"
OPEN_4090 = "v4.1_open_NeuralMagic_GO_2xRTX4090_llama2-70b-99.9_offline"
POWER = "v5.1_Lenovo_SR680a_V3_B200SXMx8_TRT_llama2-70b-99.9_Server_power"
INT64 = "v5.1_Intel_1-node-4x-BMG-Pro-B60-Dual_llama2-70b-99_Offline_int64"
MIXED = "v5.1_Supermicro_MangoBoost_16xMI325X_8xMI300X_llama2-70b-99_Offline_mixed"
NVL72 = "v5.1_NVIDIA_GB200-NVL72_llama2-70b-99.9_Offline_rack"
AMD = "v4.1_AMD_8xMI300X_2xEPYC-9374F_llama2-70b-99_Offline"
GB200 = "azure-nd-gb200-v6-v5.1"
DGX = "nvidia-dgx-h100-v4.1"


def _verify(*args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    res = runner.invoke(app, ["verify", *args, "--json"])
    return res.exit_code, json.loads(res.stdout)


# --- 1. accuracy and TEST06 on every path --------------------------------------------------------------------------


def test_failed_accuracy_fails_without_a_recipe(fixtures: Path, tmp_path: Path) -> None:
    bundle = copy_bundle(fixtures, CISCO32, tmp_path / "b")
    edit(bundle / "accuracy/accuracy.txt", "'rouge1': 44.5291", "'rouge1': 43.0")
    code, doc = _verify(str(bundle))
    assert doc["recipe"] is None and doc["reference"] == "published record 5.1-0016/99/Offline"
    assert code == 1 and doc["status"] == "FAIL" and doc["accuracy_verdict"] == "FAIL"
    assert (
        "accuracy rouge1: 43.0000 < 43.9869 (99% target, llama2-70b-99, "
        "the published record 5.1-0016/99/Offline this log is)" in doc["reasons"]
    )
    assert doc["deviation_pct"] == 0.0 and doc["min_duration"] == "PASS" and doc["test06"] == "not shown"
    text = runner.invoke(app, ["verify", str(bundle)]).output
    assert "accuracy rouge1" in text and "min duration" in text and "Verdict: FAIL" in text


def test_open_result_is_judged_by_its_own_accuracy_and_named(fixtures: Path, tmp_path: Path) -> None:
    code, doc = _verify(str(fixtures / OPEN_H200))
    assert code == 0 and doc["status"] == "PASS (open division)" and doc["division"] == "open"
    assert doc["reproduction"] is False and doc["accuracy_closed_target"] == "missed"
    assert doc["accuracy_verdict"] != "PASS" and "closed-division target missed" in doc["accuracy_verdict"]
    checks = {c["name"]: c for c in doc["checks"]}
    assert (
        checks["accuracy rouge1"]["ok"] is None
        and "open division: for information" in checks["accuracy rouge1"]["detail"]
    )
    assert checks["accuracy rouge1"]["detail"].startswith("42.9783 < 43.9869")
    assert checks["accuracy rouge1 (open)"]["ok"] is True
    assert doc["notes"][0].startswith("open division: MLPerf sets no accuracy target there")
    assert "Verdict: PASS (open division)" in runner.invoke(app, ["verify", str(fixtures / OPEN_H200)]).output
    worse = copy_bundle(fixtures, OPEN_H200, tmp_path / "b")
    edit(worse / "accuracy/accuracy.txt", "'rouge1': 42.9783", "'rouge1': 40.0")
    code, doc = _verify(str(worse))
    assert code == 1 and doc["status"] == "FAIL (open division)"
    assert any(
        r.startswith("accuracy rouge1 (open): 40.0000 < 42.5485 (99% of its published 42.9783") for r in doc["reasons"]
    )


def test_an_open_result_is_never_a_reproduction_of_a_closed_recipe(fixtures: Path, tmp_path: Path) -> None:
    bundle = copy_bundle(fixtures, OPEN_4090, tmp_path / "b")
    system = bundle / "systems" / "GO_2xRTX4090-reference-cpu-pytorch-v2.2.1-default_config.json"
    doc = json.loads(system.read_text())
    doc.update(accelerator_model_name="NVIDIA H100-SXM-80GB", accelerators_per_node="8")
    system.write_text(json.dumps(doc))
    v = verify_dir(bundle, recipe="dgx-h100", gpus=8)
    assert v.division == "open" and v.status == "NOT A REPRODUCTION"
    assert "open-division result is never a reproduction of recipe dgx-h100" in v.reasons[0]


# --- 2. power submissions -------------------------------------------------------------------------------------------


def test_power_submission_is_its_run_1(fixtures: Path) -> None:
    bundle = fixtures / POWER
    for where in (bundle, bundle / "performance" / "run_1"):
        code, doc = _verify(str(where))
        assert code == 0 and doc["status"] == "PASS", doc["reasons"]
        assert (
            doc["folder"].endswith("performance/run_1") and doc["reference"] == "published record 5.1-0061/99.9/Server"
        )
        assert doc["deviation_pct"] == 0.0 and doc["published_record"]["exact"]
    cmp = verify_against(bundle, ["5.1-0061"])
    assert cmp.facts.folder.name == "run_1" and cmp.entries[0].deviation_pct == 0.0


# --- 3. submitter and round -----------------------------------------------------------------------------------------


def _dgx_tree(fixtures: Path, root: Path, submitter: str, tokens: str) -> Path:
    run = root / "closed" / submitter / "results" / "DGX-H100_H100-SXM-80GBx8_TRT" / "llama2-70b-99.9" / "Offline"
    shutil.copytree(fixtures / DGX / "llama2-70b-99.9/Offline/performance", run / "performance")
    edit(run / "performance/run_1/mlperf_log_summary.txt", "Tokens per second: 24524.9", f"Tokens per second: {tokens}")
    (root / "closed" / submitter / "systems").mkdir(parents=True)
    system = {
        "submitter": submitter,
        "division": "closed",
        "system_name": "NVIDIA DGX H100 (8x H100-SXM-80GB, TensorRT)",
        "accelerator_model_name": "NVIDIA H100-SXM-80GB",
        "accelerators_per_node": 8,
        "number_of_nodes": 1,
    }
    (root / "closed" / submitter / "systems" / "DGX-H100_H100-SXM-80GBx8_TRT.json").write_text(json.dumps(system))
    return run


def test_a_match_agrees_on_submitter_and_round(fixtures: Path, tmp_path: Path) -> None:
    # NVIDIA's v5.0 DGX-H100 (not in the index) is neither Google's nor NVIDIA's own v4.1 record
    later = _dgx_tree(fixtures, tmp_path / "a", "NVIDIA", "31806.2")
    (run,) = find_runs(later)
    assert match_run(run) is None
    v = verify_dir(later, recipe="dgx-h100")
    assert v.record is None
    assert any(
        "submitter NVIDIA, system DGX-H100_H100-SXM-80GBx8_TRT: no published result in the index" in n for n in v.notes
    )
    # the round in the path decides; the submitter is always the run's own
    google = _dgx_tree(fixtures, tmp_path / "inference_results_v4.1", "Google", "24000.0")
    (run,) = find_runs(google)
    m = match_run(run)
    assert m is not None and m.row.submitter == "Google" and m.row.round == "v4.1" and not m.exact
    nvidia = _dgx_tree(fixtures, tmp_path / "n", "NVIDIA", "24524.9")
    (run,) = find_runs(nvidia)
    m = match_run(run)
    assert m is not None and m.exact and m.row.submitter == "NVIDIA"


# --- 4. and 5. TEST06 -----------------------------------------------------------------------------------------------


def test_test06_token_width_is_detected_and_recorded(fixtures: Path) -> None:
    result = read_test06(fixtures / INT64 / "TEST06", "Offline", eos_id=EOS)
    assert result.passed and result.dtype == "int64" and "token ids int64" in result.detail
    assert result.to_json()["dtype"] == "int64"
    code, doc = _verify(str(fixtures / INT64))
    assert code == 0 and doc["test06"] == "PASS"
    own32 = read_test06(fixtures / POWER / "TEST06", "Server", eos_id=EOS)
    # the power bundle keeps only its verify_accuracy.txt: a statement, not a re-check (#44 item 6)
    assert own32.state == "cannot be re-checked" and not own32.passed and own32.dtype is None


def test_truncated_or_empty_published_test06_cannot_be_rechecked(fixtures: Path, tmp_path: Path) -> None:
    code, doc = _verify(str(fixtures / CISCO16))
    test06 = next(c for c in doc["checks"] if c["name"] == "TEST06")
    assert test06["ok"] is None and test06["detail"].startswith(
        "cannot be re-checked: accuracy/mlperf_log_accuracy.json is cut short (8,199 bytes"
    )
    assert doc["test06"] == "cannot be re-checked" and code == 0 and doc["status"] == "PASS"
    empty = copy_bundle(fixtures, INT64, tmp_path / "b")
    (empty / "TEST06/accuracy/mlperf_log_accuracy.json").write_text("[]\n")
    result = read_test06(empty / "TEST06", "Offline", eos_id=EOS)
    assert result.state == "cannot be re-checked" and not result.passed and "holds no samples" in result.detail
    code, doc = _verify(str(empty))
    assert doc["test06"] == "cannot be re-checked" and doc["status"] == "PASS"
    # a verify text that says it failed is a failure, log or no log
    edit(empty / "TEST06/verify_accuracy.txt", "TEST06 verification complete", "TEST06 verification failed")
    assert read_test06(empty / "TEST06", "Offline", eos_id=EOS).state == "failed"
    assert _verify(str(empty))[1]["status"] == "FAIL"


# --- 6. recipes judge every figure they show ------------------------------------------------------------------------


def test_every_figure_the_readme_table_shows_is_one_the_recipe_can_judge() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    checked = 0
    for line in readme.splitlines():
        name = re.search(r"\(`([a-z0-9-]+)`", line)
        if not line.startswith("| ") or name is None:
            continue
        recipe = get_recipe(name.group(1))
        shown = line.split("|")[4]
        system = recipe.trtllm.system if recipe.trtllm is not None else None
        nodes = system.nodes if system is not None else 1  # one system over many nodes: the README shows its total
        for scenario, figure in re.findall(r"(Offline|Server|Interactive) ([\d,]+\.\d+)", shown):
            pub = recipe.published_for(scenario)
            assert pub is not None and pub.tokens_per_s_per_vm * nodes == pytest.approx(
                float(figure.replace(",", "")), rel=1e-12
            ), (recipe.name, scenario)
            checked += 1
    assert checked >= 4
    server = get_recipe("nc-h100-v5").published_for("Server")
    assert server is not None and float(server.tokens_per_s_per_gpu) == pytest.approx(1729.48)


# --- 7. aggregate ----------------------------------------------------------------------------------------------------


def test_aggregate_refuses_mixed_accelerators_with_a_recipe(fixtures: Path) -> None:
    with pytest.raises(InputError, match="different accelerators, never summed"):
        aggregate([fixtures / CISCO16, fixtures / AMD], recipe="nd-h200-v5")
    res = runner.invoke(app, ["aggregate", str(fixtures / MIXED), str(fixtures / CISCO16), "--recipe", "nd-h200-v5"])
    assert res.exit_code == 2 and "different accelerators" in res.output


def test_aggregate_uses_the_index_like_verify(fixtures: Path) -> None:
    rack = aggregate([fixtures / CISCO16, fixtures / OPEN_H200])
    assert rack.recipe is None and len(rack.counted) == 1  # a 2-node system is never one VM of a rack (#35)
    cisco = next(r for r in rack.rows if r.name == CISCO16)
    assert cisco.excluded is not None and cisco.excluded.startswith("a system of 2 nodes and 16 accelerators")
    refs = {r.name: r.verdict.reference for r in rack.rows if r.verdict}
    assert refs == {
        CISCO16: "published record 5.1-0013/99/Offline",
        OPEN_H200: "published record v4.1/open/NVIDIA/H200-SXM-141GBx1_TRT_DepthPruned/99/Offline",
    }
    assert rack.stats["gpus"] == 1 and rack.exit_code == 0


# --- 8. no system JSON ----------------------------------------------------------------------------------------------


def test_without_system_json_the_folder_name_is_evidence(fixtures: Path, tmp_path: Path) -> None:
    src = fixtures / "v5.1_NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Interactive"
    run = tmp_path / "results" / "B200-SXM-180GBx8_TRT" / "llama2-70b-99" / "Offline"
    shutil.copytree(fixtures / GB200 / "llama2-70b-99/Offline", run)
    edit(run / "performance/run_1/mlperf_log_summary.txt", "Tokens per second: 52061.6", "Tokens per second: 52061.7")
    assert src.is_dir()
    v = verify_dir(run, recipe="nd-gb200-v6")
    assert v.gpus == 8 and v.gpus_source == "folder B200-SXM-180GBx8_TRT"
    assert v.hardware is not None and v.hardware.run_name == "B200-SXM-180GBx8_TRT" and v.hardware.same is False
    assert v.status == "NOT A REPRODUCTION"
    assert verify_dir(run, recipe="nd-gb200-v6", gpus=8).status == "NOT A REPRODUCTION"


def test_an_accelerator_nothing_states_is_unknown_and_never_a_reproduction(fixtures: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(fixtures / GB200 / "llama2-70b-99/Offline/performance/run_1", run)
    edit(run / "mlperf_log_summary.txt", "Tokens per second: 52061.6", "Tokens per second: 52061.7")
    v = verify_dir(run, recipe="nd-gb200-v6")
    assert v.status == "NOT A REPRODUCTION" and v.hardware is not None and v.hardware.same is None
    assert v.reasons[0].startswith("accelerator unknown: nothing states the run's accelerator")
    assert next(c for c in v.checks if c.name == "inside band").ok is True


# --- 9. smaller defects ---------------------------------------------------------------------------------------------


def test_mixed_accelerator_counts_add_up(fixtures: Path) -> None:
    v = verify_dir(fixtures / MIXED)
    assert v.gpus == 24 and not any("--gpus 16" in n for n in v.notes), v.notes
    assert v.status == "PASS" and v.hardware is not None and "same mixed system" in v.hardware.why
    mixed = verify_dir(fixtures / MIXED, recipe="nd-h200-v5")
    assert mixed.status == "NOT A REPRODUCTION" and "a mixed system (MI325X + MI300X)" in mixed.reasons[0]


def test_a_999_rack_result_is_not_judged_by_a_99_recipe(fixtures: Path) -> None:
    v = verify_dir(fixtures / NVL72, recipe="nd-gb200-v6")
    assert next(c for c in v.checks if c.name == "inside band").ok is True
    assert v.status == "NOT A REPRODUCTION"
    assert (
        "a llama2-70b-99.9 run (llama2-70b-99.9 in the path) against recipe nd-gb200-v6's llama2-70b-99 result"
        in v.reasons[-1]
    )


def test_recipe_ids_resolve_in_the_index() -> None:
    idx = load_index()
    for recipe in all_recipes():
        for pub in (recipe.published, *recipe.published_scenarios):
            for ref in (pub.mlperf_id, pub.result_id):
                if ref and ref != "unknown":
                    assert idx.resolve(ref), f"{recipe.name}: {ref}"


def test_the_record_is_named_with_a_recipe_too(fixtures: Path) -> None:
    code, doc = _verify(str(fixtures / GB200), "--recipe", "nd-gb200-v6")
    assert code == 0 and doc["published_record"]["ref"] == "5.1-0008/99/Offline" and doc["published_record"]["exact"]


def test_fingerprint_when_the_path_names_a_system_folder(fixtures: Path, tmp_path: Path) -> None:
    run = tmp_path / "results" / "my-box" / "llama2-70b-99" / "Offline" / "performance" / "run_1"
    shutil.copytree(fixtures / CISCO32 / "performance/run_1", run)
    (found,) = find_runs(run)
    m = match_run(found)
    assert m is not None and m.exact and m.row.result_id == "5.1-0016"


def test_refused_comparison_json_says_not_ok(fixtures: Path) -> None:
    inter = fixtures / "v5.1_NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Interactive"
    res = runner.invoke(app, ["verify", str(inter), "--against", "5.1-0008", "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and doc["status"] == "REFUSED" and doc["ok"] is False
    assert doc["error"].startswith("refused: 5.1-0008/99/Offline is a Offline result")


def test_a_demo_verdict_counts_cpus(fixtures: Path) -> None:
    v = verify_dir(fixtures / GB200, recipe="demo")
    text = render(v)
    assert "tokens/s per CPU" in text and "tokens/s per GPU" not in text


# --- against MLCommons' own tools ------------------------------------------------------------------------------------


def test_repro_agrees_with_the_official_checkers(fixtures: Path) -> None:
    """tests/golden/official_verdicts.json (scripts/official_verdicts.py, mlcommons/inference at the commit it names):
    validity, the checker's accuracy rule and run_verification.py at the detected token width, wherever both apply."""
    golden = json.loads((Path(__file__).parent / "golden" / "official_verdicts.json").read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", golden["commit"])
    compared = {"validity": 0, "accuracy": 0, "test06": 0}
    for rel, official in golden["bundles"].items():
        try:
            v = verify_dir(fixtures / rel)
        except InputError:
            v = verify_dir(fixtures / rel, recipe="dgx-h100")  # the checks do not depend on the reference
        assert v.run.valid == (official["validity"] == "VALID"), rel
        compared["validity"] += 1
        if "accuracy" in official:
            acc = official["accuracy"]
            closed = [
                c
                for c in v.checks
                if c.name.startswith("accuracy ")
                and c.name.split()[1] in ("rouge1", "rouge2", "rougeL", "tokens_per_sample")
                and "(open)" not in c.name
            ]
            meets_closed = all("<" not in c.detail and "outside" not in c.detail for c in closed)
            assert meets_closed == acc["closed_rule"], rel
            if acc["division"] == "closed":
                assert (v.to_json()["accuracy_verdict"] == "PASS") == acc["accepted"], rel
            else:
                assert v.division == "open" and acc["accepted"]
            compared["accuracy"] += 1
        if "test06" in official:
            t06 = v.to_json()["test06"]
            if t06 == "cannot be re-checked":
                # where the checker cannot re-check either: a cut log is its JSON error; an empty one passes vacuously
                results = set(official["test06"].values())
                assert all(r.startswith("error") for r in results) or results == {"pass"}, rel
            else:
                from repro.results.compliance import read_test06

                width = read_test06(fixtures / rel / "../../TEST06", v.scenario, eos_id=EOS).dtype
                assert (t06 == "PASS") == (official["test06"][width] == "pass"), rel
            compared["test06"] += 1
    assert compared["validity"] >= 15 and compared["accuracy"] >= 12 and compared["test06"] >= 2


def test_a_multi_node_result_is_not_labelled_a_vm(fixtures: Path) -> None:
    text = render(verify_dir(fixtures / CISCO32, recipe="nd-h100-v5"))
    assert "tokens/s (VM)" not in text and "32 GPUs" in text
    one_vm = render(verify_dir(fixtures / GB200))
    assert "tokens/s (VM)" in one_vm


def test_a_72_gpu_rack_result_is_judged_as_a_rack_and_by_its_benchmark(fixtures: Path) -> None:
    rack = fixtures / "v6.0_NVIDIA_GB300-NVL72_x72_llama2-70b-99.9_Offline_rack"
    own = verify_dir(rack)
    assert own.status == "PASS" and own.gpus == 72 and own.reference == "published record 6.0-0078/99.9/Offline"
    v = verify_dir(rack, recipe="nd-gb300-v6")
    text = render(v)
    assert "tokens/s (VM)" not in text and "72 GPUs" in text
    assert v.status == "NOT A REPRODUCTION" and "llama2-70b-99.9 run" in v.reasons[-1]


def test_the_published_empty_test06_log_cannot_be_rechecked(fixtures: Path) -> None:
    code, doc = _verify(str(fixtures / "v6.0_Intel_1-node-4x-BMG-B70_llama2-70b-99.9_Offline_empty_test06"))
    assert code == 0 and doc["status"] == "PASS" and doc["test06"] == "cannot be re-checked"
    test06 = next(c for c in doc["checks"] if c["name"] == "TEST06")
    assert test06["ok"] is None and "holds no samples" in test06["detail"]
