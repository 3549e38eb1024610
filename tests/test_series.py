"""Repeated runs (issue #35 item 6): `repro verify A B C` gives mean, CV and a 95% Student-t interval of tokens/s per
GPU and a three-way verdict; runs are copies of Azure's published GB200 run with their tokens/s edited."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from helpers import as_another_run, cli, copy_bundle, edit, edit_detail

from repro.results.series import t_quantile

GB200 = "azure-nd-gb200-v6-v5.1"
SUMMARY = "llama2-70b-99/Offline/performance/run_1/mlperf_log_summary.txt"
DETAIL = "llama2-70b-99/Offline/performance/run_1/mlperf_log_detail.txt"
BAND = (13015.4 * 0.95, 13015.4 * 1.05)


def _runs(fixtures: Path, tmp: Path, tokens: list[str]) -> list[str]:
    out = []
    for i, value in enumerate(tokens):
        b = as_another_run(copy_bundle(fixtures, GB200, tmp / f"r{i}"), i)  # a copy is the same run (#44 item 3)
        if value != "52061.6":
            edit(b / SUMMARY, "Tokens per second: 52061.6", f"Tokens per second: {value}")
            edit_detail(b / DETAIL, "result_tokens_per_second", float(value))
        out.append(str(b))
    return out


def _series(*args: str) -> tuple[int, dict]:
    res = cli("verify", *args, "--json")
    return res.exit_code, json.loads(res.output)


@pytest.mark.parametrize("df,t", [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (29, 2.045)])
def test_student_t_quantiles_match_the_table(df: int, t: float) -> None:
    assert round(t_quantile(0.975, df), 3) == t


def test_identical_runs_give_cv_zero_and_pass(fixtures: Path, tmp_path: Path) -> None:
    code, doc = _series(*_runs(fixtures, tmp_path, ["52061.6"] * 3))
    assert code == 0 and doc["status"] == "PASS" and doc["decision"] == "in band with 95% confidence"
    assert doc["cv_pct"] == 0 and doc["sd"] == 0 and doc["ci"] == [13015.4, 13015.4] and doc["runs"] == 3


def test_spread_across_the_band_edge_is_undecided_with_the_runs_that_would_decide(
    fixtures: Path, tmp_path: Path
) -> None:
    tokens = ["52061.6", "54000", "50200"]
    code, doc = _series(*_runs(fixtures, tmp_path, tokens))
    per_gpu = [float(x) / 4 for x in tokens]
    mean, sd = statistics.fmean(per_gpu), statistics.stdev(per_gpu)
    half = 4.303 * sd / math.sqrt(3)
    assert code == 1 and doc["status"] == "UNDECIDED" and doc["decision"] == "undecided: run again"
    assert doc["mean"] == pytest.approx(mean, abs=1e-3) and doc["cv_pct"] == pytest.approx(sd / mean * 100, abs=1e-3)
    assert doc["ci"][0] == pytest.approx(mean - half, abs=0.5) and doc["ci"][1] == pytest.approx(mean + half, abs=0.5)
    assert doc["ci"][0] < BAND[0] < doc["ci"][1]
    # the smallest m with t(0.975, m-1) * s / sqrt(m) below the distance from the mean to the nearer band edge
    distance = min(mean - BAND[0], BAND[1] - mean)
    m = next(m for m in range(4, 1000) if t_quantile(0.975, m - 1) * sd / math.sqrt(m) < distance)
    assert doc["more_runs"] == m - 3 and f"{m - 3} more run(s)" in doc["arithmetic"]
    text = " ".join(cli("verify", *_runs(fixtures, tmp_path / "again", tokens)).output.split())
    assert "Verdict: UNDECIDED (undecided: run again)" in text and "CV" in text


def test_runs_all_below_the_band_are_out_of_band(fixtures: Path, tmp_path: Path) -> None:
    code, doc = _series(*_runs(fixtures, tmp_path, ["44000", "44100", "43900"]))
    assert code == 1 and doc["status"] == "FAIL" and doc["decision"] == "out of band"


def test_one_failing_run_fails_the_series(fixtures: Path, tmp_path: Path) -> None:
    runs = _runs(fixtures, tmp_path, ["52061.6"] * 3)
    edit(Path(runs[1]) / "llama2-70b-99/Offline/accuracy/accuracy.txt", "'rouge1': 44.7494", "'rouge1': 40.0")
    code, doc = _series(*runs)
    assert code == 1 and doc["status"] == "FAIL" and any("accuracy rouge1" in r for r in doc["reasons"])


def test_runs_of_different_configurations_are_refused_naming_the_difference(fixtures: Path, tmp_path: Path) -> None:
    res = cli("verify", str(fixtures / GB200), str(fixtures / "nvidia-dgx-h100-v4.1"), "--scenario", "Offline")
    assert res.exit_code == 2
    out = " ".join(res.output.split())
    assert "are different configurations" in out and "accelerator NVIDIA H100-SXM-80GB vs NVIDIA GB200" in out


def test_the_same_run_twice_is_counted_once(fixtures: Path) -> None:
    """Named twice, it is one run (#44 item 3): named in a note, counted once, and one run decides nothing."""
    res = cli("verify", str(fixtures / GB200), str(fixtures / GB200), "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["runs"] == 1 and doc["status"] == "UNDECIDED", doc
    assert doc["notes"] == [
        f"{fixtures / GB200} is the run {fixtures / GB200} again (the same mlperf_log_detail.txt): counted once"
    ]


def test_run_repeat_runs_each_in_its_own_process_and_verifies_them_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`repro run offline --repeat 3` through the real LoadGen (sim backend): three run folders, one series."""
    from helpers import cli_process, write_prepared

    from repro.core.recipes import get_recipe
    from repro.core.workspace import Workspace

    home = tmp_path / "home"
    monkeypatch.setenv("REPRO_HOME", str(home))
    ws = Workspace.open().ensure()
    write_prepared(ws.preprocessed / get_recipe("nd-h100-v5").dataset.name, 64, name="mlperf-openorca", seed=3)
    args = ("run", "offline", "--recipe", "nd-h100-v5", "--backend", "sim", "--samples", "64", "--sim-rate", "20000")
    proc = cli_process(*args, "--repeat", "3", "--json", env={"REPRO_HOME": str(home)}, timeout=300)
    assert proc.stdout.strip().startswith("{"), (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    doc = json.loads(proc.stdout)
    folders = {v["folder"] for v in doc["verdicts"]}
    assert doc["runs"] == 3 and len(folders) == 3 and all(Path(f).is_dir() for f in folders)
    # a simulated run is never a reproduction; the statistics are computed all the same
    assert doc["status"] == "NOT A REPRODUCTION" and doc["cv_pct"] is not None and doc["ci"] is not None
    # each run is its process's first LoadGen run: no 'Multiple conf files' error in any of them
    assert not any("Multiple conf files" in " ".join(v["reasons"]) for v in doc["verdicts"])
    # the report of the three shows their spread; aggregate never sums them as VMs of a rack
    report = cli_process("report", *sorted(folders), env={"REPRO_HOME": str(home)})
    assert report.returncode in (0, 1), (report.stdout[-2000:], report.stderr[-2000:])
    assert "repeated runs of one configuration: 3 runs" in report.stdout, report.stdout[-3000:]
    rack = json.loads(cli_process("aggregate", *sorted(folders), "--json", env={"REPRO_HOME": str(home)}).stdout)
    assert rack["stats"]["vms"] == 1 and sum(1 for vm in rack["vms"] if vm["excluded"]) == 2
    bad = cli_process(*args, "--repeat", "2", "--accuracy", env={"REPRO_HOME": str(home)})
    assert bad.returncode == 2 and "--repeat repeats performance runs" in bad.stderr


def test_the_series_reads_at_80_columns(fixtures: Path, tmp_path: Path) -> None:
    """In a terminal 80 columns wide: no line wider, no run path cut short."""
    import os

    from helpers import CLI, run_in_pty

    runs = _runs(fixtures, tmp_path, ["52061.6", "52000", "52100"])
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    out = run_in_pty([*CLI, "verify", *runs], {**env, "TERM": "xterm"}, size=(50, 80))
    assert "Verdict: PASS (in band with 95% confidence)" in out
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out, [
        line for line in out.splitlines() if len(line) > 80
    ]
