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
from repro.results.identity import benchmark_of, identify
from repro.results.verify import verify_dir

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
        ("llama3_1-405b", "llama3.1-405b"),
        ("ND_GB200_v6", None),
    ],
)
def test_benchmark_from_the_path(tmp_path: Path, name: str, expected: str | None) -> None:
    assert benchmark_of(tmp_path / name / "Offline")[0] == expected


def test_a_run_of_another_benchmark_is_refused_against_a_recipe(fixtures: Path, tmp_path: Path) -> None:
    b = copy_bundle(fixtures, GB200, tmp_path / "b")
    shutil.move(b / "llama2-70b-99", b / "llama3.1-405b")
    res = cli("verify", str(b), "--recipe", "nd-gb200-v6", "--json")
    doc = json.loads(res.output)
    assert res.exit_code == 1 and doc["status"] == "NOT A REPRODUCTION"
    assert any(
        "a llama3.1-405b run (llama3.1-405b in the path) against recipe nd-gb200-v6's llama2-70b-99 result" in r
        for r in doc["reasons"]
    ), doc["reasons"]
