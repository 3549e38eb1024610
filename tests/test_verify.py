"""verify and aggregate on the published logs: figures, verdicts, reasons, exit codes and rendered tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from golden_util import check_golden, content, stable_json
from helpers import edit_detail
from typer.testing import CliRunner

from repro.cli import app
from repro.results.aggregate import aggregate
from repro.results.verify import verify_dir
from repro.ui.results import render_rack, render_verdict

runner = CliRunner()
GB200 = "azure-nd-gb200-v6-v5.1"
DGX = "nvidia-dgx-h100-v4.1"
RACK = "azure-nd-gb300-v6-rack"


def test_gb200_passes_with_published_figures(fixtures: Path) -> None:
    v = verify_dir(fixtures / GB200)
    assert v.status == "PASS" and v.exit_code == 0
    assert v.recipe.name == "nd-gb200-v6" and v.gpus == 4 and v.gpus_source.startswith("system JSON")
    assert round(v.run.tokens_per_s, 1) == 52061.6 and round(v.per_gpu, 1) == 13015.4
    assert [c.ok for c in v.checks if c.name.startswith("accuracy ")] == [True] * 5
    check_golden("verify_gb200.txt", content(render_verdict(v)))
    check_golden("verify_gb200.json", stable_json(v.to_json(), fixtures))


def test_dgx_h100_reference(fixtures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(fixtures)
    v = verify_dir(Path(DGX), recipe="dgx-h100")
    assert v.notes[0] == f"{DGX} also holds Server runs: `repro verify {DGX} --scenario Server`"
    # the fixture holds the performance run only: inside the band, and still no PASS without its accuracy run
    assert v.status == "NOT A REPRODUCTION" and v.gpus == 8 and round(v.per_gpu, 1) == 3065.6
    assert v.reasons == [
        f"no accuracy run: {DGX}/llama2-70b-99.9/Offline/accuracy/accuracy.txt is missing (MLPerf's submission "
        "checker rejects a result without one); copy the result's accuracy.txt and mlperf_log_accuracy.json there, "
        f"then `repro verify {DGX}/llama2-70b-99.9/Offline/performance/run_1`"
    ]
    check_golden("verify_dgx_h100.txt", content(render_verdict(v)))


def test_slowest_gb300_vm_is_just_below_the_band(fixtures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(fixtures)  # the golden names the folder as the user typed it
    v = verify_dir(Path(RACK) / "ND_GB300_v6_16")
    assert v.status == "FAIL" and v.exit_code == 1
    assert round(v.per_gpu, 1) == 14399.8 and round(v.deviation_pct, 1) == -5.3
    assert v.reasons[0] == "5.3% below the published 15,200.0 per GPU (0.3% under the band floor 14,440.0)"
    assert v.reasons[1].startswith("no accuracy run: ") and len(v.reasons) == 2  # published without one
    check_golden("verify_gb300_vm16.txt", content(render_verdict(v)))


def test_rack_table(fixtures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(fixtures)  # the golden names the folders as the user typed them
    report = aggregate([Path(RACK)], expect=18)
    s = report.stats
    assert [r.name for r in report.rows] == ["ND_GB300_v6_1", "ND_GB300_v6_4", "ND_GB300_v6_16"]
    assert round(s["total"], 1) == 179333.7 and s["max"] == 62690.8 and s["min"] == 57599.1
    assert round(s["median"], 1) == 59043.8 and report.missing_count == 15 and report.exit_code == 1
    assert "compared 3 of the 18 published VM logs" in " ".join(report.notes)
    assert any(
        "published median 61,759.1 tokens/s disagrees with its own 18 per-VM logs, which give 62,111.7" in n
        for n in report.notes
    )
    # the GB300 VMs were published without accuracy results: summed, never a PASS
    assert [r.verdict.status for r in report.rows] == ["NOT A REPRODUCTION", "NOT A REPRODUCTION", "FAIL"]
    assert all(r.counted for r in report.rows) and report.exit_code == 1
    # the band is the brief's rule; Azure's own slowest VMs fall outside it, and the table says by how much
    assert any("ND_GB300_v6_16 57,599.1 (0.3% below it)" in n for n in report.notes)
    check_golden("aggregate_gb300.txt", content(render_rack(report)))
    check_golden("aggregate_gb300.md", report.to_markdown())


def test_invalid_vm_is_listed_not_summed(fixtures: Path, tmp_path: Path) -> None:
    rack = tmp_path / "rack"
    shutil.copytree(fixtures / RACK, rack)
    summary = rack / "ND_GB300_v6_4/llama2-70b-99/Offline/mlperf_log_summary.txt"
    summary.write_text(summary.read_text().replace("Result is : VALID", "Result is : INVALID"))
    (rack / "ND_GB300_v6_9").mkdir()
    report = aggregate([rack / "ND_GB300_v6_1", rack / "ND_GB300_v6_4", rack / "ND_GB300_v6_9"])
    by_name = {r.name: r for r in report.rows}
    assert report.stats["vms"] == 1 and report.stats["total"] == 62690.8
    assert not by_name["ND_GB300_v6_4"].counted and by_name["ND_GB300_v6_4"].verdict.status == "FAIL"
    assert by_name["ND_GB300_v6_9"].verdict is None and "no LoadGen logs" in by_name["ND_GB300_v6_9"].problem
    assert by_name["ND_GB300_v6_4"].status == "INVALID" and by_name["ND_GB300_v6_9"].status == "ERROR"
    assert report.exit_code == 2, "an unreadable VM folder is an input error"


def test_cli_verify_exit_codes_and_json(fixtures: Path, tmp_path: Path) -> None:
    ok = runner.invoke(app, ["verify", str(fixtures / GB200), "--json"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert doc["status"] == "PASS" and doc["tokens_per_s_per_gpu"] == 13015.4
    assert runner.invoke(app, ["verify", str(fixtures / RACK / "ND_GB300_v6_16")]).exit_code == 1
    bad = runner.invoke(app, ["verify", str(tmp_path)])
    assert bad.exit_code == 2 and "no LoadGen logs" in bad.output and "Traceback" not in bad.output


def test_cli_aggregate_writes_markdown(fixtures: Path, tmp_path: Path) -> None:
    md = tmp_path / "rack.md"
    res = runner.invoke(app, ["aggregate", str(fixtures / RACK), "--markdown", str(md)])
    assert res.exit_code == 1 and "179,333.7" in res.output
    assert md.read_text().startswith("# Rack result: Azure ND GB300 v6")


def test_gpus_flag_overrides_with_a_note(fixtures: Path) -> None:
    res = runner.invoke(app, ["verify", str(fixtures / GB200), "--gpus", "8", "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["gpus"] == 8 and doc["gpus_source"] == "--gpus"
    assert doc["tokens_per_s_per_gpu"] == 6507.7
    assert doc["notes"][0] == "--gpus 8 overrides the count (system JSON ND_GB200_v6.json: 4 per node gives 4)"


def test_other_accelerator_is_not_a_reproduction(fixtures: Path) -> None:
    res = runner.invoke(app, ["verify", str(fixtures / GB200), "--recipe", "nd-h100-v5", "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["status"] == "NOT A REPRODUCTION" and doc["reproduction"] is False
    assert doc["reasons"][0] == (
        "NVIDIA GB200 (system JSON ND_GB200_v6.json) is not the recipe's accelerator: "
        "GB200 is not the recipe's H100; a different accelerator is never a reproduction"
    )


def test_wrong_scenario(fixtures: Path, tmp_path: Path) -> None:
    shutil.copytree(fixtures / DGX / "llama2-70b-99.9/Server", tmp_path / "Server")
    res = runner.invoke(app, ["verify", str(tmp_path), "--recipe", "dgx-h100", "--scenario", "offline"])
    assert res.exit_code == 2 and "holds Server runs, not Offline" in res.output
    assert f"Next: repro verify {tmp_path} --scenario Server" in res.output
    ok = runner.invoke(app, ["verify", str(tmp_path), "--recipe", "dgx-h100", "--scenario", "Server"])
    assert ok.exit_code == 1 and "no published Server result" in ok.output


def test_unknown_system_asks_for_recipe(fixtures: Path, tmp_path: Path) -> None:
    """A published bundle is judged against its own record; the same log with other figures is no published result."""
    own = runner.invoke(app, ["verify", str(fixtures / DGX)])  # exit 1: the fixture has no accuracy run
    assert own.exit_code == 1 and "Compared with: published record v4.1/closed/NVIDIA" in own.output
    shutil.copytree(fixtures / DGX / "llama2-70b-99.9/Offline", tmp_path / "Offline")
    summary = tmp_path / "Offline/performance/run_1/mlperf_log_summary.txt"
    summary.write_text(summary.read_text().replace("Tokens per second: 24524.9", "Tokens per second: 24000.1"))
    res = runner.invoke(app, ["verify", str(tmp_path)])
    assert res.exit_code == 2 and "--recipe NAME" in res.output


@pytest.mark.parametrize("label", ["simulated", "smoke", "demo"])
def test_labelled_runs_are_never_a_reproduction(fixtures: Path, tmp_path: Path, label: str) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(fixtures / GB200 / "llama2-70b-99/Offline/performance/run_1", run_dir)
    (run_dir / "run.json").write_text(json.dumps({"recipe": "nd-gb200-v6", "label": label, "gpus": {"count": 4}}))
    v = verify_dir(run_dir)
    assert v.status == "NOT A REPRODUCTION" and v.exit_code == 1 and label in v.reasons[0]


def test_short_min_duration_is_not_a_reproduction(fixtures: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(fixtures / GB200 / "llama2-70b-99/Offline/performance/run_1", run_dir)
    s = run_dir / "mlperf_log_summary.txt"
    s.write_text(s.read_text().replace("min_duration (ms): 2400000", "min_duration (ms): 60000"))
    edit_detail(run_dir / "mlperf_log_detail.txt", "effective_min_duration_ms", 60000)
    v = verify_dir(run_dir, recipe="nd-gb200-v6")
    assert v.status == "FAIL" and any("below MLPerf's 600 s" in r for r in v.reasons)


def test_multiple_conf_files_error_still_fails(fixtures: Path, tmp_path: Path) -> None:
    """A run that logs LoadGen's "Multiple conf files" error skipped mlperf.conf (a second LoadGen run in one process:
    tests/test_harness.py), so its settings are not MLPerf's, and it must FAIL."""
    run_dir = tmp_path / "run"
    shutil.copytree(fixtures / GB200 / "llama2-70b-99/Offline/performance/run_1", run_dir)
    s = run_dir / "mlperf_log_summary.txt"
    s.write_text(s.read_text().replace("No errors encountered during test.", "1 ERROR encountered. See detailed log."))
    # the line LoadGen 6.0.17 wrote for a second FromConfig call in one process
    (run_dir / "mlperf_log_detail.txt").write_text(
        ':::MLLOG {"key": "error_invalid_config", "value": "Multiple conf files are used. This is not valid for '
        'official submission.", "time_ms": 18446744073708.634025, "namespace": "mlperf::logging", "event_type": '
        '"POINT_IN_TIME", "metadata": {"is_error": true, "is_warning": false, "file": "test_settings_internal.cc", '
        '"line_no": 562, "pid": 19135, "tid": 19135}}\n'
    )
    v = verify_dir(run_dir, recipe="nd-gb200-v6")
    errors = next(c for c in v.checks if c.name == "LoadGen errors")
    assert v.status == "FAIL" and v.exit_code == 1 and not errors.ok and "Multiple conf files" in errors.detail
