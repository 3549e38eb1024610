"""`repro explain` on real published logs: the Azure GB300 rack, Azure GB200 against NVIDIA's, two H200 submitters."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from conftest import REPO
from typer.testing import CliRunner

from repro.cli import app
from repro.report.explain import explain
from repro.results.audit import published_settings
from repro.run.power import GPU_CSV, PowerSampler, read_gpu_samples

PUB = REPO / "tests" / "fixtures" / "published"
RACK = PUB / "azure-nd-gb300-v6-rack"
GB200 = PUB / "azure-nd-gb200-v6-v5.1"
HPE_H200 = PUB / "v5.1_HPE_Cray_XD670_H200_SXM_141GBx8_TRT_llama2-70b-99_Offline"


def test_rack_names_vm16_the_straggler_and_the_server_as_the_cause() -> None:
    e = explain(RACK)
    assert e.straggler == "ND_GB300_v6_16"
    assert e.run.name == "ND_GB300_v6_16" and e.reference.name == "ND_GB300_v6_1"
    assert e.deviation_pct == pytest.approx((57_599.1 / 62_690.8 - 1) * 100)
    top = e.causes[0]
    assert top.area == "server" and top.effect == "moves"
    assert any("each sample took longer, the answers did not change" in x for x in top.evidence)
    # VM 16 ran a larger query (target QPS 395 vs 390): listed, but it cannot explain a lower figure.
    keys = {d.key: (d.yours, d.reference) for d in e.diffs}
    assert keys["target_qps"] == (395, 390)
    assert not any(c.area == "settings" for c in e.causes)
    assert [r.name for r in e.rack] == ["ND_GB300_v6_1", "ND_GB300_v6_16", "ND_GB300_v6_4"]


def test_vm16_against_vm1_folder_equals_the_rack_view() -> None:
    e = explain(RACK / "ND_GB300_v6_16", against=str(RACK / "ND_GB300_v6_1"))
    assert e.causes[0].area == "server" and e.causes[0].impact_pct == pytest.approx(e.deviation_pct)


def test_vm16_against_the_published_figure_uses_the_recipe_and_both_roofline_bounds() -> None:
    e = explain(RACK / "ND_GB300_v6_16")
    assert e.reference.name == "nd-gb300-v6 published figure"
    assert e.deviation_pct == pytest.approx((57_599.1 / 4 / 15_200 - 1) * 100)
    assert e.causes[0].area == "server"
    out = next(c for c in e.causes if c.area == "tokens")
    # No published output length for the rack: compared with MLPerf's 294.45, so only "may move".
    assert out.effect == "may move" and "294.4" in out.evidence[0]
    roof = e.roofline
    assert roof is not None and roof.limiter == "compute"
    assert roof.compute_tokens_per_s < roof.hbm_tokens_per_s
    assert "GB300 NVL72 datasheet" in roof.peak_source
    assert roof.output_tokens == pytest.approx(57_599.1 / 211.193)
    assert roof.fraction == pytest.approx(57_599.1 / 4 / roof.compute_tokens_per_s)
    assert roof.input_tokens == 222.33  # the published set's mean prompt (the benchmark file)


def test_azure_gb200_against_nvidia_gb200_names_the_real_differences() -> None:
    e = explain(GB200, against="5.1-0070")
    assert e.reference.name.startswith("5.1-0070/99/Offline")
    diffs = {d.key: (d.yours, d.reference, d.effect) for d in e.diffs}
    assert diffs["target_qps"][:2] == (230, 376)
    assert diffs["LoadGen"][:2] == ("5.1.0", "5.0.25") and diffs["LoadGen"][2] == "none"
    assert e.deviation_pct == pytest.approx((52_061.6 / 51_736.9 - 1) * 100)
    # Azure is 0.6% above with a smaller query: nothing that moves the figure.
    assert not [c for c in e.causes if c.effect == "moves"]


def test_h200_hpe_against_dell_names_stack_and_settings(tmp_path: Path) -> None:
    e = explain(HPE_H200, against="5.1-0026")
    diffs = {d.key: (d.yours, d.reference) for d in e.diffs}
    assert diffs["target_qps"] == (112, 150)
    assert diffs["CUDA"] == ("12.9", "12.8")
    assert diffs["driver"] == ("570.86.15", "570.133")
    # the settings are its own detail log's; without it, the shipped copy of the published log stands in
    assert not any("shipped copy" in n for n in e.notes)
    bare = tmp_path / "hpe"
    shutil.copytree(HPE_H200, bare)
    (bare / "performance/run_1/mlperf_log_detail.txt").unlink()
    e = explain(bare, against="5.1-0026")
    assert {d.key: (d.yours, d.reference) for d in e.diffs}["target_qps"] == (112, 150)
    assert any("published log of 5.1-0049" in n for n in e.notes)


def test_shipped_settings_cover_the_recipe_references() -> None:
    shipped = published_settings()
    for key in (
        "v5.1/closed/Azure/ND_GB200_v6/99/Offline",
        "v5.1/closed/NVIDIA/GB200-NVL72_GB200-186GB_aarch64x4_TRT/99/Offline",
        "v5.1/closed/HPE/HPE_Cray_XD670_H200_SXM_141GBx8_TRT/99/Offline",
        "v5.1/closed/Dell/XE9680_H200_SXM_141GBx8_TRT/99/Offline",
        "v4.1/closed/NVIDIA/DGX-H100_H100-SXM-80GBx8_TRT/99/Offline",
    ):
        entry = shipped[key]
        assert entry["detail"]["effective_scenario"] in ("Offline", "Server")
        assert len(entry["source"]["commit"]) == 40


def test_cli_json_and_text() -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["explain", str(RACK), "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["straggler"] == "ND_GB300_v6_16" and doc["causes"][0]["area"] == "server"
    assert doc["roofline"]["limiter"] == "compute"
    text = runner.invoke(app, ["explain", str(RACK)], env={"COLUMNS": "200"})
    assert text.exit_code == 0 and "Causes, most likely first" in text.stdout and "ND_GB300_v6_16" in text.stdout


def test_unknown_reference_is_one_error_line() -> None:
    done = CliRunner().invoke(app, ["explain", str(GB200), "--against", "9.9-9999"])
    assert done.exit_code != 0 and "Traceback" not in done.output and "9.9-9999" in done.output


def test_nvml_throttling_sampled_during_a_run_is_named(tmp_path: Path) -> None:
    """A run whose sampler saw a power cap (NVML clocks-event reason 0x4) on every sample: the cause is the GPU."""
    run = tmp_path / "ND_GB300_v6_16"
    shutil.copytree(RACK / "ND_GB300_v6_16", run)
    folder = run / "llama2-70b-99" / "Offline"
    states = [(1500.0, 3996.0, 83.0, 0x4)] * 4
    with PowerSampler(folder, 0.01, reader=lambda: [1300.0] * 4, state_reader=lambda: states):
        time.sleep(0.05)
    summary = read_gpu_samples(folder)
    assert summary is not None and summary["throttle_share"] == 1.0 and summary["throttle_reasons"] == "SW power cap"
    e = explain(run, against=str(RACK / "ND_GB300_v6_1"))
    assert e.causes[0].title == "GPU throttling during the run"
    assert "SW power cap" in e.causes[0].evidence[0]
    # Without the samples the same run says only that the server or GPUs were slower.
    (folder / GPU_CSV).unlink()
    assert explain(run, against=str(RACK / "ND_GB300_v6_1")).causes[0].area == "server"


def test_report_carries_the_explanation_in_every_view() -> None:
    from repro.report.html import render_html
    from repro.report.markdown import render_markdown
    from repro.report.model import build_report

    rep = build_report([RACK])
    assert rep.explanation is not None and rep.explanation.run.name == "ND_GB300_v6_16"
    doc = rep.to_json()
    assert doc["explain"]["causes"][0]["area"] == "server"
    assert doc["roofline"]["limiter"] == "compute" and doc["roofline"]["compute_bound_tokens_per_s_per_gpu"]
    md, html = render_markdown(rep), render_html(rep)
    for text in (md, html):
        assert "6. Why your number is where it is" in text and "the server or its GPUs are slower (8.1%)" in text
        assert "Tensor cores: compute bound" in text


def test_every_recipe_reference_has_shipped_settings() -> None:
    """Each recipe's published result (Offline and its other scenarios) carries its effective LoadGen settings."""
    from repro.core.published import load_index
    from repro.core.recipes import all_recipes

    shipped, idx = published_settings(), load_index()
    for recipe in all_recipes():
        for pub in [recipe.published, *recipe.published_scenarios]:
            if not pub.result_id:
                continue
            rows = [
                r
                for r in idx.resolve(pub.result_id)
                if r.scenario == pub.scenario and r.benchmark_name == recipe.benchmark
            ]
            assert rows and rows[0].key in shipped, (recipe.name, pub.scenario)
            assert shipped[rows[0].key]["detail"]["effective_scenario"] in ("Offline", "Server")


def test_across_accelerators_the_gap_is_said_to_measure_the_chips() -> None:
    e = explain(HPE_H200, against="v4.0/closed/Azure/NC_H100_v5_TRT/99.9/Offline")
    assert any("different accelerators" in n for n in e.notes)
    assert {d.key: d.yours for d in e.diffs}["TensorRT"] == "10.11"


def test_server_first_token_latency_is_compared(tmp_path: Path) -> None:
    """Two real Server logs: NVIDIA's DGX-H100 v4.1 run against a copy whose first tokens came 50% later."""
    src = PUB / "nvidia-dgx-h100-v4.1" / "llama2-70b-99.9" / "Server"
    slow = tmp_path / "slow" / "llama2-70b-99.9" / "Server"
    shutil.copytree(src, slow)
    summary = slow / "performance" / "run_1" / "mlperf_log_summary.txt"
    lines = []
    for line in summary.read_text().splitlines():
        if line.startswith("99.00 percentile first token latency (ns)"):
            key, _, value = line.partition(":")
            line = f"{key}: {int(int(value) * 1.5)}"
        lines.append(line)
    summary.write_text("\n".join(lines) + "\n")
    e = explain(slow, against=str(src))
    ttft = next(c for c in e.causes if c.title == "first tokens wait longer")
    assert "+50%" in ttft.evidence[0] and "the limit is 2,000 ms" in ttft.evidence[0]
    assert e.tokens.ttft_ns["p99"] == pytest.approx(461_278_089 * 1.5, rel=1e-6)


def test_rack_rows_name_what_the_machine_did_on_the_straggler(tmp_path: Path) -> None:
    """Three published VM logs side by side; VM 16's own NVML samples (a power cap) appear in its row."""
    rack = tmp_path / "rack"
    shutil.copytree(RACK, rack)
    folder = rack / "ND_GB300_v6_16" / "llama2-70b-99" / "Offline"
    with PowerSampler(
        folder, 0.01, reader=lambda: [1300.0] * 4, state_reader=lambda: [(1500.0, 3996.0, 83.0, 0x4)] * 4
    ):
        time.sleep(0.05)
    e = explain(rack)
    row = next(r for r in e.rack if r.name == "ND_GB300_v6_16")
    assert any("SW power cap" in d for d in row.differs)
    assert e.causes[0].title == "GPU throttling during the run"


def test_report_measures_prompts_in_the_workspace_the_run_was_made_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`repro report RUN` started from elsewhere (another REPRO_HOME, another folder) reads the run's own dataset;
    an older run.json without dataset_path falls back to the workspace whose runs/ holds it; a copy outside any
    workspace, or a dataset since removed, is said to be unmeasured, with why."""
    from helpers import write_prepared

    from repro.core.recipes import get_recipe
    from repro.core.workspace import Workspace
    from repro.report.model import build_report
    from repro.run.harness import run_benchmark
    from repro.run.options import RunOptions

    made = Workspace.open(tmp_path / "made-here").ensure()
    data = write_prepared(made.preprocessed / get_recipe("nd-h100-v5").dataset.name, 48, name="mlperf-openorca")
    out = run_benchmark(RunOptions.build("nd-h100-v5", made, backend="sim", samples=48, detect=False))
    run = Path(out.details["log_dir"])
    monkeypatch.setenv("REPRO_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.chdir(tmp_path)

    def source(folder: Path) -> str:
        explanation = build_report([folder]).explanation
        assert explanation is not None
        return explanation.tokens.input_source

    assert source(run) == f"measured: mean of 48 prompts in {data}"
    doc = json.loads((run / "run.json").read_text())
    assert doc["dataset_path"] == str(data)
    del doc["dataset_path"]
    (run / "run.json").write_text(json.dumps(doc))
    assert source(run) == f"measured: mean of 48 prompts in {data}"
    copy = shutil.copytree(run, tmp_path / "copied" / "run_1")
    assert source(copy) == (
        f"not measured: {copy} names no dataset (run.json dataset_path) and is in no repro workspace's runs/ folder"
    )
    shutil.rmtree(data)
    assert source(run) == f"not measured: the run's dataset is gone: no prepared dataset at {data}"
