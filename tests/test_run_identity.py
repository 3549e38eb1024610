"""One run counts once however it is named (issue #44 item 3): a copy, a hard link, a symlink or `a/../a` of a real
published run is that run again in `verify A B`, `aggregate`, `report` and a rack's `attest`; duplicates are named
and dropped, never extra samples. And the count of further runs that would decide is found by a bounded search."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest
from helpers import add_accuracy, cli, copy_bundle, edit, edit_detail

RACK = "azure-nd-gb300-v6-rack"
VM1, VM4, VM16 = "ND_GB300_v6_1", "ND_GB300_v6_4", "ND_GB300_v6_16"


def _rack(fixtures: Path, tmp: Path) -> Path:
    """Azure's three published GB300 VM runs, each given the real accuracy.txt a PASS needs (helpers.add_accuracy)."""
    rack = copy_bundle(fixtures, RACK, tmp / "rack")
    for vm in (VM1, VM4, VM16):
        add_accuracy(fixtures, rack / vm / "llama2-70b-99/Offline")
    return rack


def _hardlinked(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, copy_function=os.link)
    return dst


def _duplicate(kind: str, src: Path, where: Path) -> Path:
    """Another name for the run in `src`: a copy, a tree of hard links, a symlink, or the same path through `..`."""
    if kind == "copy":
        shutil.copytree(src, where)
        return where
    if kind == "hardlink":
        return _hardlinked(src, where)
    if kind == "symlink":
        where.symlink_to(src, target_is_directory=True)
        return where
    if kind == "dotdot":
        return src / ".." / src.name
    if kind == "summary edited":  # one byte of the summary's prose changed: the detail log is the same run's
        shutil.copytree(src, where)
        summary = next(where.rglob("mlperf_log_summary.txt"))
        edit(summary, "MLPerf Results Summary", "MLPerf Results  Summary")
        return where
    assert kind == "stamps"  # both logs re-saved with other bytes, LoadGen's own stamps unchanged
    shutil.copytree(src, where)
    for log in where.rglob("mlperf_log_*.txt"):
        log.write_text(log.read_text() + "\n")
    return where


KINDS = ["copy", "hardlink", "symlink", "dotdot", "summary edited", "stamps"]


def _series(*paths: Path) -> dict:
    res = cli("verify", *map(str, paths), "--json")
    assert res.exit_code in (0, 1), res.output[-800:]
    return json.loads(res.stdout)


@pytest.mark.parametrize("copies", [1, 2, 5])
@pytest.mark.parametrize("kind", KINDS)
def test_copies_of_a_run_never_decide_a_series(fixtures: Path, tmp_path: Path, kind: str, copies: int) -> None:
    """Two real VMs of Azure's GB300 rack are undecided together; any number of other names for one of them leaves
    the same two runs, the same statistics and the same decision (five copies used to make it a PASS)."""
    rack = _rack(fixtures, tmp_path)
    pair = _series(rack / VM1, rack / VM4)
    assert pair["runs"] == 2 and pair["status"] == "UNDECIDED"
    names = [_duplicate(kind, rack / VM1, rack / f"{VM1}_dup{i}") for i in range(copies if kind != "dotdot" else 1)]
    order = [rack / VM1, *names, rack / VM4]
    random.Random(copies).shuffle(order[1:])
    doc = _series(*order)
    assert doc["runs"] == 2 and doc["status"] == "UNDECIDED", doc["notes"]
    assert doc["mean"] == pair["mean"] and doc["ci"] == pair["ci"] and doc["decision"] == pair["decision"]
    assert len(doc["notes"]) == len(names)
    for name in names:
        assert any(n.startswith(f"{name} is the run ") and n.endswith(": counted once") for n in doc["notes"]), doc


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_named_twice_counts_once_in_aggregate_report_and_attest(fixtures: Path, tmp_path: Path, kind: str):
    rack = _rack(fixtures, tmp_path)
    plain = json.loads(cli("aggregate", str(rack / VM1), str(rack / VM4), "--json").stdout)
    again = tmp_path / "again"  # the VM's folder under its own name elsewhere, its system JSON beside it
    again.mkdir()
    shutil.copy(rack / "ND_GB300_v6.json", again)
    dup = _duplicate(kind, rack / VM4, again / VM4)
    for order in ([rack / VM1, rack / VM4, dup], [dup, rack / VM1, rack / VM4]):
        doc = json.loads(cli("aggregate", *map(str, order), "--json").stdout)
        assert doc["stats"]["vms"] == 2 and doc["stats"]["total"] == plain["stats"]["total"], doc["notes"]
        assert any("is the run" in n and n.endswith("counted once") for n in doc["notes"])
    rep = json.loads(cli("report", str(rack / VM1), str(rack / VM4), str(dup), "--json").stdout)
    assert rep["measured"]["vms"] == 2 and rep["measured"]["tokens_per_s_total"] == plain["stats"]["total"]
    if kind in ("copy", "hardlink", "summary edited", "stamps"):  # a folder of VM folders: one of them twice
        shutil.move(str(dup), rack / f"{VM4}_again")
        res = cli("attest", str(rack), "--json")
        assert res.exit_code == 0, res.output
        att = json.loads(res.stdout)
        assert att["kind"] == "rack" and len(att["vms"]) == 3  # VM 1, 4 and 16: the copy is no fourth VM


def test_different_runs_are_not_merged(fixtures: Path, tmp_path: Path) -> None:
    """The fingerprints tell runs apart: three real VMs stay three; a copy with its figures changed (both logs,
    consistently) is no longer the same run's content, so it is another run (and judged as one)."""
    from repro.results.combine import fingerprints, unique_runs
    from repro.results.logs import find_runs

    rack = _rack(fixtures, tmp_path)
    runs = [r for vm in (VM1, VM4, VM16) for r in find_runs(rack / vm)]
    kept, dropped, _ = unique_runs(runs, lambda r: r, lambda r: str(r.folder))
    assert len(kept) == 3 and not dropped
    assert all(not (fingerprints(a) & fingerprints(b)) for a in runs for b in runs if a is not b)
    other = copy_bundle(fixtures, f"{RACK}/{VM4}", tmp_path / "other")
    offline = other / "llama2-70b-99/Offline"
    edit(offline / "mlperf_log_summary.txt", "Tokens per second: 59043.8", "Tokens per second: 59043.9")
    edit_detail(offline / "mlperf_log_detail.txt", "result_tokens_per_second", 59043.9)
    kept, dropped, _ = unique_runs([*runs, *find_runs(other)], lambda r: r, lambda r: str(r.folder))
    assert len(kept) == 4 and not dropped


# ---------------------------------------------------------------- the runs that would decide: a bounded search


def test_the_fewest_runs_is_found_by_a_bounded_search() -> None:
    """The binary search gives the linear scan's answer on generated spreads and distances, and a series a hair
    from a band edge costs a bounded number of quantiles (it scanned up to 10,000 before: 68.8 s)."""
    from repro.results import series

    rng = random.Random(44)
    for _ in range(40):
        sd, distance, start = rng.uniform(1, 400), rng.uniform(1, 300), rng.randint(3, 12)
        linear = next((m for m in range(start, 400) if series._half_width(sd, m)[1] < distance), None)
        if linear is not None:
            assert series._fewest_runs(sd, distance, start) == linear, (sd, distance, start)
    calls = {"n": 0}
    real = series.t_quantile

    def counted(p: float, df: int) -> float:
        calls["n"] += 1
        return real(p, df)

    series.t_quantile = counted
    try:
        assert series._fewest_runs(0.00707, 0.000001, 3) is None  # needs ~190 million runs: more than MAX_RUNS
        assert calls["n"] == 1
        calls["n"] = 0
        m, searched = series._fewest_runs(0.00707, 0.001, 3), calls["n"]
    finally:
        series.t_quantile = real
    assert searched <= 16 and m == next(k for k in range(150, 250) if series._half_width(0.00707, k)[1] < 0.001)


def test_two_runs_a_hair_from_the_band_edge(fixtures: Path, tmp_path: Path) -> None:
    """Two real GB300 VM logs edited to sit either side of the band ceiling by a few thousandths: the verdict and
    its arithmetic print every figure with the digits it needs (the half-width below the distance)."""
    rack = _rack(fixtures, tmp_path)
    ceiling = 15200.0 * 1.05 * 4  # nd-gb300-v6: 15,200 per GPU, 4 GPUs, ±5%
    for vm, tps in ((VM1, ceiling - 0.012), (VM4, ceiling + 0.02)):
        offline = rack / vm / "llama2-70b-99/Offline"
        old = next(ln for ln in (offline / "mlperf_log_summary.txt").read_text().splitlines() if "Tokens per" in ln)
        edit(offline / "mlperf_log_summary.txt", old, f"Tokens per second: {tps:.3f}")
        edit_detail(offline / "mlperf_log_detail.txt", "result_tokens_per_second", round(tps, 3))
    doc = _series(rack / VM1, rack / VM4)
    assert doc["status"] == "UNDECIDED" and doc["more_runs"] and doc["more_runs"] > 100, doc["arithmetic"]
    assert " × 0.0 / " not in doc["arithmetic"] and "= 0.0 <" not in doc["arithmetic"], doc["arithmetic"]
