"""Every path that prints a verdict runs the same checks (issue #35): `verify --against` and plain `verify` on
copies of real published bundles, each edited in tmp to break one rule; the JSON carries the text's verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import cli, copy_bundle, edit, edit_detail

GB200 = "azure-nd-gb200-v6-v5.1"
INT64 = "v5.1_Intel_1-node-4x-BMG-Pro-B60-Dual_llama2-70b-99_Offline_int64"
CISCO16 = "v5.1_Cisco_C885A_M8_H200_SXM_141GBx16_TRT_llama2-70b-99_Offline_truncated_test06"
OPEN_H200 = "v4.1_open_NVIDIA_H200-SXM-141GBx1_TRT_DepthPruned_llama2-70b-99_Offline"


def _altered(fixtures: Path, tmp: Path, which: str) -> tuple[Path, str, str]:
    """(folder, its own published record, the check family that must FAIL)."""
    if which == "rouge1":
        b = copy_bundle(fixtures, GB200, tmp / "b")
        edit(b / "llama2-70b-99/Offline/accuracy/accuracy.txt", "'rouge1': 44.7494", "'rouge1': 40.1")
        return b, "5.1-0008/99/Offline", "accuracy"
    if which == "tokens_per_sample":
        b = copy_bundle(fixtures, GB200, tmp / "b")
        edit(
            b / "llama2-70b-99/Offline/accuracy/accuracy.txt", "'tokens_per_sample': 273.4", "'tokens_per_sample': 99.0"
        )
        return b, "5.1-0008/99/Offline", "accuracy"
    if which == "int64 token count":
        b = copy_bundle(fixtures, INT64, tmp / "b")
        edit(b / "TEST06/accuracy/mlperf_log_accuracy.json", '"token_count" : 29', '"token_count" : 31')
        return b, "5.1-0056/99/Offline", "TEST06"
    b = copy_bundle(fixtures, CISCO16, tmp / "b")
    edit(b / "TEST06/verify_accuracy.txt", "TEST06 verification complete", "TEST06 verification failed")
    return b, "5.1-0013/99/Offline", "TEST06"


@pytest.mark.parametrize("which", ["rouge1", "tokens_per_sample", "int64 token count", "truncated test06 says FAIL"])
def test_against_fails_what_plain_verify_fails(fixtures: Path, tmp_path: Path, which: str) -> None:
    folder, ref, family = _altered(fixtures, tmp_path, which)
    plain = cli("verify", str(folder), "--json")
    against = cli("verify", str(folder), "--against", ref, "--json")
    p, a = json.loads(plain.output), json.loads(against.output)
    assert plain.exit_code == 1 and p["status"] == "FAIL"
    assert against.exit_code == 1 and a["status"] == "FAIL", a["reasons"]
    key = "accuracy_verdict" if family == "accuracy" else "test06"
    assert p[key] == a[key] == "FAIL"
    # the same rows, from the same function
    assert [c["name"] for c in a["checks"]] == [
        c["name"]
        for c in p["checks"]
        if c["name"] not in ("accelerator", "inside band", "MLPerf 2% audit") and not c["name"].startswith("system")
    ]
    text = cli("verify", str(folder), "--against", ref).output
    assert "Verdict: FAIL" in text and family in text


def test_against_passes_the_unaltered_bundle_with_the_same_rows(fixtures: Path) -> None:
    res = cli("verify", str(fixtures / GB200), "--against", "5.1-0008", "--json")
    doc = json.loads(res.output)
    assert res.exit_code == 0 and doc["status"] == "PASS" and doc["accuracy_verdict"] == "PASS"
    assert any(c["name"] == "accuracy rouge1" and c["ok"] for c in doc["checks"])


def test_one_function_builds_the_checks() -> None:
    """A comparison cannot be built without the run's evidence: the parameter has no default."""
    import inspect

    from repro.results.compare import Comparison, compare

    assert inspect.signature(compare).parameters["evidence"].default is inspect.Parameter.empty
    assert "evidence" in inspect.signature(Comparison).parameters


def test_json_carries_the_texts_verdict_for_an_open_result(fixtures: Path) -> None:
    res = cli("verify", str(fixtures / OPEN_H200), "--json")
    doc = json.loads(res.output)
    text = cli("verify", str(fixtures / OPEN_H200)).output
    assert f"Verdict: {doc['status']}" in text and doc["status"] == "PASS (open division)"
    assert doc["reproduction"] is False
    # rouge1 42.9783 is below the closed 99% target 43.9869: never "accuracy_verdict": "PASS"
    assert doc["accuracy_closed_target"] == "missed" and doc["accuracy_verdict"] != "PASS"


# --- aggregate sums one rack's VMs only (issue #35 item 2) ----------------------------------------------------------

RACK = "azure-nd-gb300-v6-rack"
HPE = "v5.1_HPE_Cray_XD670_H200_SXM_141GBx8_TRT_llama2-70b-99_Offline"
NVL72 = "v6.0_NVIDIA_GB300-NVL72_x72_llama2-70b-99.9_Offline_rack"


def _aggregate(*args: str) -> tuple[int, dict]:
    res = cli("aggregate", *args, "--json")
    return res.exit_code, json.loads(res.output)


def test_aggregate_excludes_a_multi_node_system(fixtures: Path) -> None:
    code, doc = _aggregate(str(fixtures / HPE), str(fixtures / CISCO16), "--recipe", "nd-h200-v5")
    assert doc["stats"]["vms"] == 1 and doc["stats"]["gpus"] == 8
    why = doc["excluded_why"][CISCO16]
    assert why.startswith("a system of 2 nodes and 16 accelerators") and "not one VM" in why


def test_an_eighteen_node_rack_is_nodes_not_a_vm(fixtures: Path) -> None:
    res = cli("aggregate", str(fixtures / NVL72))
    doc = json.loads(cli("aggregate", str(fixtures / NVL72), "--json").output)
    assert doc["unit"] == "node" and "a system of 18 nodes and 72 accelerators" in doc["excluded_why"][NVL72]
    assert "nodes summed" in res.output and "VM" not in res.output.replace("VMs", "")


def _rack_copy(fixtures: Path, root: Path) -> Path:
    return copy_bundle(fixtures, RACK, root)


def test_aggregate_excludes_another_benchmark_and_round(fixtures: Path, tmp_path: Path) -> None:
    v60 = _rack_copy(fixtures, tmp_path / "inference_results_v6.0" / "rack")
    v51 = _rack_copy(fixtures, tmp_path / "inference_results_v5.1" / "rack")
    other = _rack_copy(fixtures, tmp_path / "other" / "rack")
    (other / "ND_GB300_v6_16" / "llama2-70b-99").rename(other / "ND_GB300_v6_16" / "llama2-70b-99.9")
    code, doc = _aggregate(
        str(v60 / "ND_GB300_v6_1"), str(v60 / "ND_GB300_v6_4"), str(v51 / "ND_GB300_v6_16"), "--recipe", "nd-gb300-v6"
    )
    assert doc["excluded_why"] == {"ND_GB300_v6_16": "another round: v5.1, the rest v6.0"}
    assert doc["stats"]["vms"] == 2 and code == 1
    code, doc = _aggregate(str(v60 / "ND_GB300_v6_1"), str(other / "ND_GB300_v6_16"), "--recipe", "nd-gb300-v6")
    assert doc["excluded_why"]["ND_GB300_v6_16"].startswith(
        "another benchmark: llama2-70b-99.9 (llama2-70b-99.9 in the path), the rack's is llama2-70b-99"
    )


def test_aggregate_excludes_a_row_that_is_not_a_reproduction(fixtures: Path, tmp_path: Path) -> None:
    rack = _rack_copy(fixtures, tmp_path / "rack")
    detail = rack / "ND_GB300_v6_4/llama2-70b-99/Offline/mlperf_log_detail.txt"
    detail.write_text(
        detail.read_text() + "".join(f':::MLLOG {{"key": "junk_{i}", "value": 1}}\n' for i in range(10_050))
    )
    code, doc = _aggregate(str(rack / "ND_GB300_v6_1"), str(rack / "ND_GB300_v6_4"))
    why = doc["excluded_why"]["ND_GB300_v6_4"]
    assert why.startswith("NOT A REPRODUCTION: not a reproduction, never summed") and "not read" in why
    assert doc["stats"]["vms"] == 1 and code == 1


# --- MLPerf's 2% audit line and the system compared item by item (issue #35 item 5) --------------------------------


def test_in_band_but_materially_different_is_said(fixtures: Path, tmp_path: Path) -> None:
    b = copy_bundle(fixtures, GB200, tmp_path / "b")
    run = b / "llama2-70b-99/Offline/performance/run_1"
    edit(run / "mlperf_log_summary.txt", "52061.6", "53623.4")  # +3.0%
    edit_detail(run / "mlperf_log_detail.txt", "result_tokens_per_second", 53623.4)
    doc = json.loads(cli("verify", str(b), "--json").output)
    assert doc["status"] == "PASS" and doc["audit_2pct"] == {
        "threshold_pct": 2.0,
        "deviation_pct": 3.0,
        "within": False,
        "verdict": "materially different",
    }
    text = " ".join(cli("verify", str(b)).output.split())
    assert "Verdict: PASS" in text and "+3.0% vs the published 13,015.4 per GPU: materially different" in text


def test_within_two_percent_is_said(fixtures: Path) -> None:
    doc = json.loads(cli("verify", str(fixtures / GB200), "--json").output)
    assert doc["audit_2pct"]["within"] is True and doc["audit_2pct"]["verdict"] == "within 2%"
    items = {i["item"]: i for i in doc["system_diff"]}
    assert all(items[k]["same"] for k in ("accelerator", "accelerators", "accelerator memory", "CPU", "CUDA"))
    assert items["CUDA"]["published"] == "12.9" and items["driver"]["published"] == "570.148"


def test_the_system_diff_names_what_differs(fixtures: Path, tmp_path: Path) -> None:
    b = copy_bundle(fixtures, GB200, tmp_path / "b")
    edit(b / "ND_GB200_v6.json", '"framework": "TensorRT 10.11, CUDA 12.9"', '"framework": "TensorRT 10.9, CUDA 12.8"')
    edit(
        b / "ND_GB200_v6.json",
        '"host_processor_model_name": "NVIDIA Grace CPU"',
        '"host_processor_model_name": "AMD EPYC"',
    )
    doc = json.loads(cli("verify", str(b), "--json").output)
    differs = {i["item"] for i in doc["system_diff"] if i["same"] is False}
    assert {"CPU", "TensorRT"} <= differs and "accelerator" not in differs
    text = " ".join(cli("verify", str(b)).output.split())
    assert "system: differs from the published system in CPU, TensorRT" in text


def test_against_rows_carry_the_audit_line(fixtures: Path) -> None:
    doc = json.loads(cli("verify", str(fixtures / GB200), "--against", "5.1-0008/99/Offline", "--json").output)
    assert doc["against"][0]["audit_2pct"]["within"] is True
    assert "MLPerf audit (5.1-0008/99/Offline)" in cli("verify", str(fixtures / GB200), "--against", "5.1-0008").output


def test_every_path_shows_the_audit_line_and_the_system_diff(fixtures: Path, tmp_path: Path) -> None:
    against = json.loads(cli("verify", str(fixtures / GB200), "--against", "5.1-0008/99/Offline", "--json").output)
    assert {i["item"] for i in against["system_diff"] if i["same"]} >= {"accelerator", "accelerators", "CPU"}
    assert (
        "system vs published: same accelerator" in cli("verify", str(fixtures / GB200), "--against", "5.1-0008").output
    )
    rack = json.loads(cli("aggregate", str(fixtures / HPE), "--json").output)
    assert rack["vms"][0]["audit_2pct"]["within"] is True


def test_against_json_carries_the_open_division_verdict_too(fixtures: Path) -> None:
    ref = "v4.1/open/NVIDIA/H200-SXM-141GBx1_TRT_DepthPruned/99/Offline"
    res = cli("verify", str(fixtures / OPEN_H200), "--against", ref, "--json")
    doc = json.loads(res.output)
    assert doc["status"] == "PASS (open division)" and doc["reproduction"] is False
    assert doc["accuracy_closed_target"] == "missed" and doc["accuracy_verdict"] != "PASS"
    assert "Verdict: PASS (open division)" in cli("verify", str(fixtures / OPEN_H200), "--against", ref).output
