"""Issue 13: verdicts that hold on every published result. Each case runs on a real published log, or on a copy
of one edited for the case in tmp_path (the fixtures themselves are never modified)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from golden_util import check_golden
from helpers import add_accuracy, copy_bundle, drop_detail, edit, edit_detail, edit_json
from typer.testing import CliRunner

from repro.cli import app
from repro.core.errors import InputError
from repro.core.recipes import get_recipe
from repro.report.model import build_report
from repro.results.aggregate import aggregate
from repro.results.logs import parse_run
from repro.results.verify import verify_dir

runner = CliRunner()
GB200 = "azure-nd-gb200-v6-v5.1"
GB200_RUN = f"{GB200}/llama2-70b-99/Offline/performance/run_1"
RACK = "azure-nd-gb300-v6-rack"
DGX = "nvidia-dgx-h100-v4.1"
DSR1 = "v6.1_Azure_deepseek-r1"
DSR1_OTHERS = "v6.1_deepseek-r1_others"  # Cisco B300 x8 O/S, Crusoe MI355X x512 O, NVIDIA GB300 x72 Interactive
AZURE_V40 = "v4.0_Azure_NC_H100_v5_TRT_llama2-70b-99.9"  # Offline and Server in the submission's own layout
CISCO = "v5.1_Cisco_HGX-H100_H100-SXM-80GBx32_TRT_llama2-70b-99_Offline"
INTEL = "v6.0_Intel_1-node-4x-BMG-B60_llama2-70b-99_Offline"
NEURALMAGIC = "v4.1_NeuralMagic_vLLM_8xL40S-reference-cpu-pytorch-v2.3.1-default_config_llama2-70b-99_offline"
AMD = "v4.1_AMD_8xMI300X_2xEPYC-9374F_llama2-70b-99_Offline"
LENOVO = "v5.1_Lenovo_SR680a_V3_B200SXMx8_TRT_llama2-70b-99.9_Server_ranging"
INTERACTIVE = "v5.1_NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Interactive"


# --- 1. accelerator totals ---------------------------------------------------------------------------------------


def test_multi_node_total_is_per_node_times_nodes(fixtures: Path) -> None:
    v = verify_dir(fixtures / CISCO, recipe="dgx-h100")
    assert v.gpus == 32 and round(v.per_gpu, 1) == 3902.5
    assert v.gpus_source == "system JSON HGX-H100_H100-SXM-80GBx32_TRT.json: 8 per node x 4 nodes"


def test_counts_written_as_strings(fixtures: Path) -> None:
    intel = verify_dir(fixtures / INTEL, recipe="dgx-h100")
    assert intel.gpus == 4 and round(intel.per_gpu, 1) == 424.4
    nm = verify_dir(fixtures / NEURALMAGIC, recipe="dgx-h100")
    assert nm.gpus == 8 and round(nm.per_gpu, 1) == 118.5


@pytest.mark.parametrize("per_node,nodes,total", [("4", "18", 72), (4, 18, 72), ("8", 1, 8), (1, 1, 1), (8, "11", 88)])
def test_rack_scale_counts(fixtures: Path, tmp_path: Path, per_node: object, nodes: object, total: int) -> None:
    bundle = copy_bundle(fixtures, CISCO, tmp_path / "b")
    edit_json(
        bundle / "systems/HGX-H100_H100-SXM-80GBx32_TRT.json", accelerators_per_node=per_node, number_of_nodes=nodes
    )
    v = verify_dir(bundle, recipe="dgx-h100")
    assert v.gpus == total and v.per_gpu == pytest.approx(124879 / total)
    assert any("says 32 accelerators" in n for n in v.notes) == (total != 32)


def test_name_count_mismatch_is_shown_and_gpus_overrides(fixtures: Path, tmp_path: Path) -> None:
    bundle = copy_bundle(fixtures, CISCO, tmp_path / "b")
    edit_json(
        bundle / "systems/HGX-H100_H100-SXM-80GBx32_TRT.json", system_name="HPF HGX System (30xH100-SXM-80GB, TensorRT)"
    )
    v = verify_dir(bundle, recipe="dgx-h100")
    assert v.gpus == 32
    assert (
        "the system name 'HPF HGX System (30xH100-SXM-80GB, TensorRT)' says 30 accelerators but system JSON "
        "HGX-H100_H100-SXM-80GBx32_TRT.json gives 8 per node x 4 nodes = 32" in v.notes[0]
    )
    forced = verify_dir(bundle, recipe="dgx-h100", gpus=30)
    assert forced.gpus == 30 and forced.gpus_source == "--gpus" and forced.per_gpu == pytest.approx(124879 / 30)
    assert forced.notes[0].startswith("--gpus 30 overrides the count (system JSON")


def test_unusable_count_falls_back_with_a_note(fixtures: Path, tmp_path: Path) -> None:
    bundle = copy_bundle(fixtures, CISCO, tmp_path / "b")
    edit_json(bundle / "systems/HGX-H100_H100-SXM-80GBx32_TRT.json", accelerators_per_node="eight")
    v = verify_dir(bundle, recipe="dgx-h100")
    # the log is the published Cisco record, so its count comes from there rather than the recipe's 8
    assert v.gpus == 32 and v.gpus_source.startswith("the published record 5.1-0016")
    assert any("unusable accelerator count (accelerators_per_node 'eight'" in n for n in v.notes)


def test_scientific_notation_tokens(fixtures: Path, tmp_path: Path) -> None:
    bundle = copy_bundle(fixtures, CISCO, tmp_path / "b")
    edit(
        bundle / "performance/run_1/mlperf_log_summary.txt",
        "Tokens per second: 124879",
        "Tokens per second: 1.24879e+05",
    )
    assert verify_dir(bundle, recipe="dgx-h100").per_gpu == pytest.approx(3902.47, abs=0.01)


def test_one_vm_of_a_multi_node_rack_counts_its_own_node(fixtures: Path) -> None:
    v = verify_dir(fixtures / RACK / "ND_GB300_v6_1")
    assert v.gpus == 4 and "folder ND_GB300_v6_1 is one node of 18" in v.gpus_source


# --- 2. hardware identity ------------------------------------------------------------------------------------------


def test_amd_inside_the_h100_band_is_still_not_a_reproduction(fixtures: Path) -> None:
    v = verify_dir(fixtures / AMD, recipe="dgx-h100")
    band = next(c for c in v.checks if c.name == "inside band")
    assert band.ok is True, "the per-GPU figure alone would pass"
    assert v.status == "NOT A REPRODUCTION" and v.exit_code == 1 and v.to_json()["reproduction"] is False
    assert v.reasons == [
        "AMD Instinct MI300X-NPS1-SPX-192GB-750W (system JSON 8xMI300X_2xEPYC-9374F.json) is not the "
        "recipe's accelerator: MI300X is not the recipe's H100; a different accelerator is never a "
        "reproduction",
        "a llama2-70b-99 run (llama2-70b-99 in the path) against recipe dgx-h100's llama2-70b-99.9 result: "
        "another benchmark is never a reproduction",
    ]


def test_system_json_with_other_hardware_than_the_recipe(fixtures: Path, tmp_path: Path) -> None:
    bundle = copy_bundle(fixtures, GB200, tmp_path / "b")
    edit_json(bundle / "ND_GB200_v6.json", accelerator_model_name="NVIDIA B200-SXM-180GB")
    v = verify_dir(bundle)
    assert v.recipe.name == "nd-gb200-v6" and v.status == "NOT A REPRODUCTION"
    assert "B200 is not the recipe's GB200" in v.reasons[0]


@pytest.mark.parametrize(
    "names,same",
    [
        (["NVIDIA H100 80GB HBM3"] * 8, True),
        (["NVIDIA H100 NVL"] * 8, False),
        (["NVIDIA H100 PCIe"] * 8, False),
        (["NVIDIA H200"] * 8, False),
        (["NVIDIA H100 80GB HBM3"] * 4 + ["NVIDIA H100 NVL"] * 4, False),
    ],
)
def test_own_run_provenance_is_compared(fixtures: Path, tmp_path: Path, names: list[str], same: bool) -> None:
    run_dir = copy_bundle(fixtures, f"{DGX}/llama2-70b-99.9/Offline/performance/run_1", tmp_path / "run")
    (run_dir / "run.json").write_text(json.dumps({"recipe": "nd-h100-v5", "gpus": {"count": 8, "names": names}}))
    add_accuracy(fixtures, run_dir)  # the accelerator alone decides here
    v = verify_dir(run_dir)
    assert v.hardware is not None and v.hardware.same is same and v.hardware.where == "run.json (NVML)"
    assert (v.status == "NOT A REPRODUCTION") is not same


@pytest.mark.parametrize("tokens,status", [("4500.0", "FAIL"), ("3900.0", "PASS")])
def test_nc_h100_v5_above_its_v4_0_band_fails_and_names_the_newer_software(
    fixtures: Path, tmp_path: Path, tokens: str, status: str
) -> None:
    """nc-h100-v5 runs TensorRT-LLM 1.1 against Azure's TensorRT 9.3 result: above the band is plausible, and it is
    FAIL with the software named, never a silent reproduction; inside the band no such note is added."""
    run_dir = copy_bundle(fixtures, f"{DGX}/llama2-70b-99.9/Offline/performance/run_1", tmp_path / "run")
    (run_dir / "run.json").write_text(
        json.dumps({"recipe": "nc-h100-v5", "gpus": {"count": 2, "names": ["NVIDIA H100 NVL"] * 2}})
    )
    edit(run_dir / "mlperf_log_summary.txt", "Tokens per second: 24524.9", f"Tokens per second: {tokens}")
    edit_detail(run_dir / "mlperf_log_detail.txt", "result_tokens_per_second", float(tokens))
    add_accuracy(fixtures, run_dir)
    v = verify_dir(run_dir)
    assert v.recipe.name == "nc-h100-v5" and v.hardware.same is True and v.status == status
    software = [n for n in v.notes if "TensorRT-LLM 1.1.0" in n and "TensorRT 9.3.0" in n]
    if status == "FAIL":
        assert v.reasons == [
            "15.4% above the published 1,950.2 per GPU (9.9% over the band ceiling 2,047.7); check the GPU count"
        ]
        assert software and "not a reproduction" in software[0] and v.to_json()["reproduction"] is False
    else:
        assert not software


# --- 3. scenarios --------------------------------------------------------------------------------------------------


def test_interactive_is_told_apart_from_server(fixtures: Path) -> None:
    run = parse_run(fixtures / INTERACTIVE / "performance/run_1")
    assert run.scenario == "Server" and run.benchmark_scenario == "Interactive"
    assert run.scenario_source == "TTFT/TPOT limits 450/40 ms"
    assert parse_run(fixtures / LENOVO / "performance/ranging").benchmark_scenario == "Server"


def test_interactive_checked_by_its_own_limits(fixtures: Path, tmp_path: Path) -> None:
    bundle = copy_bundle(fixtures, INTERACTIVE, tmp_path / "b")
    # a GB200 VM's system (4 GPUs): an 8-GPU system is not the recipe's, never a reproduction of it (#44 item 6)
    system = bundle / "systems/B200-SXM-180GBx8_TRT.json"
    edit_json(system, accelerator_model_name="NVIDIA GB200", accelerators_per_node=4)
    v = verify_dir(bundle, recipe="nd-gb200-v6")
    assert v.scenario == "Interactive" and v.status == "NO REFERENCE" and v.exit_code == 1
    assert "recipe nd-gb200-v6 has no published Interactive result (it has Offline, Server)" in v.reasons
    checks = {c.name: c for c in v.checks}
    assert checks["TTFT p99"].ok and checks["TTFT p99"].detail == "140.4 ms ≤ 450 ms (Interactive)"
    assert checks["TPOT p99"].ok and checks["TPOT p99"].detail == "38.1 ms ≤ 40 ms (Interactive)"


def test_limits_decide_over_the_folder_name(fixtures: Path, tmp_path: Path) -> None:
    bundle = copy_bundle(fixtures, INTERACTIVE, tmp_path / "Interactive")
    summary = bundle / "performance/run_1/mlperf_log_summary.txt"
    edit(summary, "ttft_latency (ns): 450000000", "ttft_latency (ns): 2000000000")
    edit(summary, "tpot_latency (ns): 40000000", "tpot_latency (ns): 200000000")
    run = parse_run(bundle / "performance/run_1")
    assert run.benchmark_scenario == "Server"
    assert run.scenario_source == "TTFT/TPOT limits 2,000/200 ms (the folder name says otherwise)"


def test_server_with_a_looser_limit_than_mlperf_fails(fixtures: Path, tmp_path: Path) -> None:
    run_dir = copy_bundle(fixtures, f"{DGX}/llama2-70b-99.9/Server/performance/run_1", tmp_path / "Server")
    edit(run_dir / "mlperf_log_summary.txt", "ttft_latency (ns): 2000000000", "ttft_latency (ns): 3000000000")
    v = verify_dir(run_dir, recipe="nd-gb200-v6", gpus=8)
    assert v.status == "NOT A REPRODUCTION"  # an H100 log (the published DGX record) against a GB200 recipe
    assert "TTFT limit: LoadGen enforced 3,000 ms; MLPerf's Server limit is 2,000 ms" in v.reasons


def test_invalid_server_run_says_why(fixtures: Path) -> None:
    v = verify_dir(fixtures / LENOVO, recipe="dgx-h100")
    assert v.scenario == "Server" and v.status == "NOT A REPRODUCTION"
    invalid = next(c for c in v.checks if c.name == "LoadGen validity")
    assert invalid.ok is False and "TTFT constrain not met" in invalid.detail
    assert "TTFT Early Stopping Result: Run unsuccessful. Processed 884736 queries." in invalid.detail


def test_server_run_is_judged_against_the_published_server_figure(fixtures: Path, tmp_path: Path) -> None:
    """`repro run server` ends with the run's outcome: verify_dir never raises for the scenario."""
    run_dir = copy_bundle(fixtures, f"{DGX}/llama2-70b-99.9/Server/performance/run_1", tmp_path / "run")
    gpus = {"count": 4, "names": ["NVIDIA GB200"] * 4}
    (run_dir / "run.json").write_text(json.dumps({"recipe": "nd-gb200-v6", "gpus": gpus}))
    add_accuracy(fixtures, run_dir)
    slow = verify_dir(run_dir, recipe="nd-gb200-v6")
    assert slow.status == "FAIL" and slow.exit_code == 1 and slow.published.scenario == "Server"
    assert slow.per_gpu == pytest.approx(21605.79 / 4)
    edit(
        run_dir / "mlperf_log_summary.txt",
        "Completed tokens per second: 21605.79",
        "Completed tokens per second: 46016.49",
    )
    edit_detail(run_dir / "mlperf_log_detail.txt", "result_completed_tokens_per_second", 46016.5)
    ok = verify_dir(run_dir, recipe=get_recipe("nd-gb200-v6"))
    assert ok.status == "PASS" and ok.exit_code == 0 and round(ok.per_gpu, 1) == 11504.1
    assert ok.band == pytest.approx((11504.1 * 0.95, 11504.1 * 1.05))


# --- 4. accuracy ---------------------------------------------------------------------------------------------------


def test_neuralmagic_99_run_passes_its_own_target_under_a_999_recipe(fixtures: Path) -> None:
    v = verify_dir(fixtures / NEURALMAGIC, recipe="dgx-h100")
    assert get_recipe("dgx-h100").benchmark == "llama2-70b-99.9"
    rouge1 = next(c for c in v.checks if c.name == "accuracy rouge1")
    assert rouge1.ok and rouge1.detail == "44.3329 ≥ 43.9869 (99% target, llama2-70b-99 in the path)"


def test_999_run_fails_its_own_target_under_a_99_recipe(fixtures: Path, tmp_path: Path) -> None:
    run = tmp_path / "llama2-70b-99.9" / "Offline"
    shutil.copytree(fixtures / GB200 / "llama2-70b-99/Offline", run)
    shutil.copy(fixtures / GB200 / "ND_GB200_v6.json", tmp_path)
    edit(run / "accuracy/accuracy.txt", "'rouge1': 44.7494", "'rouge1': 44.3329")
    v = verify_dir(run)
    assert v.recipe.benchmark == "llama2-70b-99" and v.status == "FAIL"
    assert "accuracy rouge1: 44.3329 < 44.3868 (99.9% target, llama2-70b-99.9 in the path)" in v.reasons


@pytest.mark.parametrize(
    "old,new,needle",
    [
        (
            "'tokens_per_sample': 273.4",
            "'tokens_per_sample': 340.0",
            "accuracy tokens_per_sample: 340.0 outside 265.005–323.895 (90–110% of 294.45)",
        ),
        (
            "'tokens_per_sample': 273.4",
            "'tokens_per_sample': 250.1",
            "accuracy tokens_per_sample: 250.1 outside 265.005–323.895 (90–110% of 294.45)",
        ),
        (
            "'gen_num': 24576",
            "'gen_num': 100",
            "accuracy samples: 100 samples, not the full 24,576: a short run, not an accuracy result",
        ),
        ("'rouge2': 22.3586, ", "", "accuracy rouge2: missing from"),
    ],
)
def test_accuracy_rules(fixtures: Path, tmp_path: Path, old: str, new: str, needle: str) -> None:
    bundle = copy_bundle(fixtures, GB200, tmp_path / "b")
    edit(bundle / "llama2-70b-99/Offline/accuracy/accuracy.txt", old, new)
    v = verify_dir(bundle)
    assert v.status == "FAIL" and v.exit_code == 1
    assert any(needle in r for r in v.reasons), v.reasons


def test_every_accuracy_txt_form(fixtures: Path, tmp_path: Path) -> None:
    """numpy reprs, quoted values, progress and nltk lines, two hash lines, no rougeLsum: all the same scores."""
    bundle = copy_bundle(fixtures, GB200, tmp_path / "b")
    acc = bundle / "llama2-70b-99/Offline/accuracy/accuracy.txt"
    acc.write_text(
        "\rDownloading builder script: 0.00B [00:00, ?B/s]\rDownloading builder script: 6.14kB\n"
        "[nltk_data] Downloading package punkt to /root/nltk_data...\n\nResults\n\n"
        "{'rouge1': np.float64(44.7494), 'rouge2': '22.3586', 'rougeL': np.float64(29.1373), "
        "'gen_len': np.int64(26551226), 'gen_num': np.int64(24576), 'gen_tok_len': 6718594, "
        "'tokens_per_sample': 273.4}\n"
        "hash=ff76eec60562082e7d042390d53fd4a58969102cdb4ce8b256030b6314e009ca\n"
        "hash=ff76eec60562082e7d042390d53fd4a58969102cdb4ce8b256030b6314e009ca\n"
    )
    v = verify_dir(bundle)
    assert v.status == "PASS"
    assert v.run.accuracy == {
        "rouge1": 44.7494,
        "rouge2": 22.3586,
        "rougeL": 29.1373,
        "gen_len": 26551226.0,
        "gen_num": 24576.0,
        "gen_tok_len": 6718594.0,
        "tokens_per_sample": 273.4,
    }
    assert len(v.run.accuracy_hashes) == 2


def test_intel_quoted_scores_are_read(fixtures: Path) -> None:
    run = parse_run(fixtures / INTEL / "performance/run_1")
    assert run.accuracy is not None and run.accuracy["rouge1"] == 44.8085 and run.accuracy["rougeL"] == 29.0232


def test_accuracy_txt_without_scores_is_an_input_error(fixtures: Path, tmp_path: Path) -> None:
    bundle = copy_bundle(fixtures, GB200, tmp_path / "b")
    (bundle / "llama2-70b-99/Offline/accuracy/accuracy.txt").write_text("\nResults\n\n{'rouge1': 44.7")
    res = runner.invoke(app, ["verify", str(bundle)])
    assert res.exit_code == 2 and "accuracy.txt: no scores line" in res.output and "repro run offline" not in res.output


# --- 5. evidence before PASS ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-52061.6", "NaN"])
def test_non_finite_or_negative_throughput_is_unreadable(fixtures: Path, tmp_path: Path, value: str) -> None:
    run_dir = copy_bundle(fixtures, GB200_RUN, tmp_path / "run")
    edit(run_dir / "mlperf_log_summary.txt", "Tokens per second: 52061.6", f"Tokens per second: {value}")
    res = runner.invoke(app, ["verify", str(run_dir), "--recipe", "nd-gb200-v6", "--json"])
    assert res.exit_code == 2 and "not a finite number ≥ 0" in res.output
    assert "Infinity" not in res.stdout and "NaN" not in res.stdout


def test_zero_throughput_fails_and_aggregate_and_report_survive(fixtures: Path, tmp_path: Path) -> None:
    run_dir = copy_bundle(fixtures, GB200_RUN, tmp_path / "run")
    edit(run_dir / "mlperf_log_summary.txt", "Tokens per second: 52061.6", "Tokens per second: 0")
    res = runner.invoke(app, ["verify", str(run_dir), "--recipe", "nd-gb200-v6", "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["status"] == "FAIL" and doc["tokens_per_s_per_gpu"] == 0.0
    assert "0 tokens/s: the SUT reported no token counts (QuerySampleResponse without n_tokens)" in doc["reasons"]
    rack = aggregate([run_dir], recipe="nd-gb200-v6")
    assert rack.stats["total"] == 0 and "spread_pct" not in rack.stats
    assert build_report([run_dir], recipe="nd-gb200-v6").per_gpu == 0


def test_summary_cut_after_nine_lines_is_an_input_error(fixtures: Path, tmp_path: Path) -> None:
    run_dir = copy_bundle(fixtures, GB200_RUN, tmp_path / "run")
    summary = run_dir / "mlperf_log_summary.txt"
    summary.write_text("".join(summary.read_text().splitlines(True)[:9]))
    res = runner.invoke(app, ["verify", str(run_dir), "--recipe", "nd-gb200-v6"])
    assert res.exit_code == 2
    assert (
        "mlperf_log_summary.txt: truncated; missing 'Min duration satisfied', the 'Test Parameters Used' section, "
        "the closing 'errors encountered' line." in " ".join(res.output.split())
    )


def test_no_pass_without_evidence_of_run_length(fixtures: Path, tmp_path: Path) -> None:
    run_dir = copy_bundle(fixtures, GB200_RUN, tmp_path / "run")
    summary = run_dir / "mlperf_log_summary.txt"
    edit(summary, "  Min duration satisfied : Yes\n", "")
    edit(summary, "min_duration (ms): 2400000\n", "")
    drop_detail(run_dir / "mlperf_log_detail.txt", "effective_min_duration_ms", "result_min_duration_met")
    v = verify_dir(run_dir, recipe="nd-gb200-v6")
    inside = next(c for c in v.checks if c.name == "inside band")
    assert inside.ok and v.status == "NOT A REPRODUCTION" and v.exit_code == 1
    assert any(
        r.startswith("no evidence the run was long enough: the logs lack the min_duration setting") for r in v.reasons
    )


# --- 7. aggregate --------------------------------------------------------------------------------------------------


def test_same_folder_twice_or_through_a_symlink_counts_once(fixtures: Path, tmp_path: Path) -> None:
    vm = fixtures / RACK / "ND_GB300_v6_1"
    (tmp_path / "link").symlink_to(vm, target_is_directory=True)
    report = aggregate([vm, vm, tmp_path / "link"])
    assert report.stats["vms"] == 1 and report.stats["total"] == 62690.8
    assert sum("counted once" in n for n in report.notes) == 2


def test_same_log_under_another_name_counts_once(fixtures: Path, tmp_path: Path) -> None:
    rack = copy_bundle(fixtures, RACK, tmp_path / "rack")
    shutil.copytree(rack / "ND_GB300_v6_4", rack / "ND_GB300_v6_4_copy")
    report = aggregate([rack])
    assert report.stats["vms"] == 3
    assert [r.name for r in report.rows] == ["ND_GB300_v6_1", "ND_GB300_v6_4", "ND_GB300_v6_16"]
    assert any(
        n.startswith(f"{rack / 'ND_GB300_v6_4_copy'}") and "is the run" in n and "again" in n for n in report.notes
    )


def test_different_systems_are_never_summed(fixtures: Path) -> None:
    res = runner.invoke(app, ["aggregate", str(fixtures / RACK / "ND_GB300_v6_1"), str(fixtures / GB200)])
    assert res.exit_code == 2
    assert "different references" in res.output and "nd-gb300-v6" in res.output and "nd-gb200-v6" in res.output
    # issue 24: one recipe judging them all still never sums a GB200 box into a GB300 rack
    with pytest.raises(InputError, match="different accelerators, never summed: .*GB300.*GB200"):
        aggregate([fixtures / RACK / "ND_GB300_v6_1", fixtures / GB200], recipe="nd-gb300-v6")


def test_unreadable_vm_folder_is_an_error(fixtures: Path, tmp_path: Path) -> None:
    rack = copy_bundle(fixtures, RACK, tmp_path / "rack")
    (rack / "ND_GB300_v6_16/llama2-70b-99/Offline/mlperf_log_summary.txt").write_bytes(b"\x00\x01binary" * 100)
    res = runner.invoke(app, ["aggregate", str(rack), "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and doc["stats"]["vms"] == 2
    assert doc["errors"] and "is binary" in doc["errors"][0]["problem"]


def test_published_rack_layout_root(fixtures: Path, tmp_path: Path) -> None:
    """The upstream layout: <root>/results/ND_GB300_v6_N/llama2-70b-99/Offline and <root>/systems/ND_GB300_v6.json."""
    root = tmp_path / "1M_ND_GB300_v6_Inference"
    for vm in ("ND_GB300_v6_1", "ND_GB300_v6_4", "ND_GB300_v6_16"):
        shutil.copytree(fixtures / RACK / vm, root / "results" / vm)
    (root / "systems").mkdir()
    shutil.copy(fixtures / RACK / "ND_GB300_v6.json", root / "systems")
    report = aggregate([root])
    assert [r.name for r in report.rows] == ["ND_GB300_v6_1", "ND_GB300_v6_4", "ND_GB300_v6_16"]
    assert report.stats["gpus"] == 12 and round(report.stats["total"], 1) == 179333.7


def test_vm_names_come_from_the_part_that_differs(fixtures: Path, tmp_path: Path) -> None:
    for i, vm in enumerate(("ND_GB300_v6_1", "ND_GB300_v6_4")):
        shutil.copytree(fixtures / RACK / vm / "llama2-70b-99/Offline", tmp_path / f"node{i}" / "Offline")
    report = aggregate([tmp_path / "node0", tmp_path / "node1"], recipe="nd-gb300-v6", gpus=4)
    assert [r.name for r in report.rows] == ["node0", "node1"]


def test_all_eighteen_published_vms_show_the_median_claim_disagrees(fixtures: Path, tmp_path: Path) -> None:
    """All 18 VM logs: VM 1's real log with its Tokens per second line edited to each VM's published value."""
    rack = get_recipe("nd-gb300-v6").published.rack
    assert rack is not None and len(rack.vm_tokens_per_s) == 18
    root = tmp_path / "rack"
    src = fixtures / RACK / "ND_GB300_v6_1/llama2-70b-99/Offline/mlperf_log_summary.txt"
    for vm, tokens in rack.vm_tokens_per_s.items():
        dst = root / vm / "llama2-70b-99/Offline"
        dst.mkdir(parents=True)
        dst.joinpath("mlperf_log_summary.txt").write_text(
            re.sub(r"Tokens per second: [\d.]+", f"Tokens per second: {tokens}", src.read_text())
        )
        shutil.copy(src.with_name("mlperf_log_detail.txt"), dst)  # no detail log, no PASS
        edit_detail(dst / "mlperf_log_detail.txt", "result_tokens_per_second", float(tokens))
    shutil.copy(fixtures / RACK / "ND_GB300_v6.json", root)
    report = aggregate([root])
    s = report.stats
    assert s["vms"] == 18 and s["gpus"] == 72 and round(s["total"], 1) == 1100948.3
    assert round(s["median"], 1) == 62111.7 and round(s["mean"], 1) == 61163.8
    assert "all 18 published VM logs are here and equal to their published values" in report.notes
    claim = "the published median 61,759.1 tokens/s disagrees with its own 18 per-VM logs, which give 62,111.7"
    assert claim in report.notes


# --- golden: every bundle ------------------------------------------------------------------------------------------


def _targets(fixtures: Path) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for bundle in sorted(p for p in fixtures.iterdir() if p.is_dir()):
        if bundle.name == RACK:
            out += [(f"{RACK}/{vm.name}", []) for vm in sorted(bundle.iterdir()) if vm.is_dir()]
        elif bundle.name == DGX:
            out += [(DGX, ["--scenario", s]) for s in ("Offline", "Server")]
        elif bundle.name in (DSR1, DSR1_OTHERS, AZURE_V40):  # results in the submission's own layout: each
            out += [(str(r.relative_to(fixtures)), []) for r in sorted(bundle.glob("closed/*/results/*/*/*"))]
        else:
            out.append((bundle.name, []))
    return out


def test_every_published_bundle_golden(fixtures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-GPU figure, verdict, accuracy verdict, TEST06 state and exit code of `repro verify --json` for every
    bundle, without a recipe (the recipe detected, else the bundle's own published record) and against two recipes
    (the H100 reference and GB200): one verdict path, the same checks each time."""
    monkeypatch.chdir(fixtures)
    rows = []
    for target, extra in _targets(fixtures):
        for recipe in (None, "dgx-h100", "nd-gb200-v6"):
            args = ["verify", target, *extra, "--json"] + (["--recipe", recipe] if recipe else [])
            res = runner.invoke(app, args)
            row: dict[str, object] = {
                "bundle": " ".join([target, *extra]),
                "recipe": recipe or "(detected)",
                "exit_code": res.exit_code,
            }
            if res.exit_code in (0, 1):
                doc = json.loads(res.stdout)
                row.update(
                    status=doc["status"],
                    division=doc["division"],
                    reference=doc["reference"],
                    scenario=doc["scenario"],
                    gpus=doc["gpus"],
                    gpus_source=doc["gpus_source"],
                    tokens_per_s=doc["tokens_per_s"],
                    per_gpu=doc["tokens_per_s_per_gpu"],
                    deviation_pct=doc["deviation_pct"],
                    accuracy=doc["accuracy_verdict"],
                    test06=doc["test06"],
                    min_duration=doc["min_duration"],
                    accelerator=next(c["ok"] for c in doc["checks"] if c["name"] == "accelerator"),
                    reasons=doc["reasons"],
                    published_record=(doc["published_record"] or {}).get("ref"),
                )
            else:
                row["error"] = " ".join(res.stderr.split())
            rows.append(row)
    check_golden("verdicts_published.json", json.dumps(rows, indent=1, ensure_ascii=False) + "\n")


def test_no_published_bundle_passes_with_a_failed_check(fixtures: Path) -> None:
    """Issue 24 'Done when': with or without a recipe, PASS only with accuracy and TEST06 not failed, the
    accelerator known and the reference's, and an open result's division named."""
    rows = json.loads((Path(__file__).parent / "golden" / "verdicts_published.json").read_text())
    passed = [r for r in rows if str(r.get("status")).startswith("PASS")]
    assert passed
    for r in passed:
        assert r["accuracy"] != "FAIL" and r["test06"] != "FAIL" and r["min_duration"] == "PASS", r["bundle"]
        assert r["accuracy"].startswith("PASS"), r["bundle"]  # no evidence, no PASS: the accuracy run is shown
        assert r["accelerator"] is True, r["bundle"]  # known, and the reference's
        assert r["exit_code"] == 0
    assert all(r["status"] == "PASS (open division)" for r in passed if r["division"] == "open")
    assert {r["bundle"] for r in passed if r["division"] == "open"} == {
        "v4.1_open_NVIDIA_H200-SXM-141GBx1_TRT_DepthPruned_llama2-70b-99_Offline",
        "v4.1_open_NeuralMagic_GO_2xRTX4090_llama2-70b-99.9_offline",
    }


def test_input_error_carries_no_traceback(fixtures: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such folder"):
        parse_run(tmp_path / "missing")
