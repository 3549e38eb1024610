"""Issue 45 item 2: every command that judges a result takes a DeepSeek-R1 folder, walked through the real CLI on
Azure's published v6.1 logs (tests/fixtures/published/v6.1_Azure_deepseek-r1, read from
intel-ai-tce/inference_results_v6.1 @ 5174fca8): verify --against other GB300 x72 results of the round, repeated
runs' statistics, aggregate, explain, report (with Azure's DeepSeek-R1 rack recipe, recipes/nd-gb300-v6-dsr1.yaml)
and attest with its verify (the benchmark file judged by is hashed into the statement)."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path

from helpers import as_another_run, cli, edit

from repro.core.benchmarks import SHIPPED

AZURE = Path(__file__).parent / "fixtures" / "published" / "v6.1_Azure_deepseek-r1" / "closed" / "Azure"
GB300 = "Azure-GB300-NVL72_288GBx72"
NVIDIA = "v6.1/closed/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x72_TRT"  # 679,740 tokens/s Offline (index)
NEBIUS = "v6.1/closed/Nebius/GB300-NVL72_GB300-288GB_aarch64x72_TRT"  # 689,961


def _copy(dst: Path, i: int = 0) -> Path:
    """A writable copy of Azure's GB300 x72 system folder with its system JSON, in the submission layout; `i` > 0
    makes its runs another run of the same configuration (helpers.as_another_run)."""
    root = dst / "closed" / "Azure"
    shutil.copytree(AZURE / "results" / GB300, root / "results" / GB300)
    shutil.copytree(AZURE / "systems", root / "systems")
    if i:
        as_another_run(root / "results" / GB300, i)
    return root / "results" / GB300 / "deepseek-r1"


def test_verify_against_the_rounds_other_gb300_racks_ranks_it() -> None:
    res = cli(
        "verify", str(AZURE / "results" / GB300 / "deepseek-r1" / "Offline"), "--against", NVIDIA, "--against", NEBIUS,
        "--json",
    )  # fmt: skip
    doc = json.loads(res.stdout)
    assert res.exit_code == 0, res.output
    rows = {r["key"]: r for r in doc["against"]}
    assert set(rows) == {f"{NVIDIA}/deepseek-r1/Offline", f"{NEBIUS}/deepseek-r1/Offline"}
    assert all(r["benchmark"] == "deepseek-r1" and r["accelerators"] == 72 for r in rows.values())
    # 9,182.5 per GPU against 679,740 / 72 = 9,440.8 and 689,961 / 72 = 9,582.8: in the band, not within 2%
    nvidia, nebius = rows[f"{NVIDIA}/deepseek-r1/Offline"], rows[f"{NEBIUS}/deepseek-r1/Offline"]
    assert (nvidia["deviation_pct"], nebius["deviation_pct"]) == (-2.736, -4.177)
    assert all(r["in_band"] is True and r["audit_2pct"]["within"] is False for r in rows.values())


def test_repeated_runs_give_the_statistics(tmp_path: Path) -> None:
    runs = [str(_copy(tmp_path / f"r{i}", i) / "Server") for i in range(3)]
    res = cli("verify", *runs, "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 0, res.output
    assert doc["runs"] == 3 and doc["status"] == "PASS" and doc["decision"] == "in band with 95% confidence"
    assert [round(x, 1) for x in doc["tokens_per_s_per_gpu"]] == [8186.0] * 3 and round(doc["mean"], 1) == 8186.0
    assert doc["t"] == 4.3027 and [v["status"] for v in doc["verdicts"]] == ["PASS"] * 3


def test_aggregate_names_a_whole_system_result_and_sums_nothing(tmp_path: Path) -> None:
    """Each folder is the whole 72-GPU system's result, not one VM's: aggregate excludes it, saying so."""
    runs = [str(_copy(tmp_path / f"r{i}", i) / "Offline") for i in range(2)]
    res = cli("aggregate", *runs, "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["stats"] == {} and len(doc["vms"]) == 2
    for vm in doc["vms"]:
        assert vm["excluded"].startswith("a system of 18 nodes and 72 accelerators") and vm["counted"] is False
        assert vm["verdict"] == "PASS" and vm["tokens_per_s_per_gpu"] == 9182.5


def test_explain_ranks_the_gap_to_nvidias_gb300_rack() -> None:
    res = cli("explain", str(AZURE / "results" / GB300 / "deepseek-r1" / "Offline"), "--against", NVIDIA, "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 0, res.output
    assert doc["reference"]["name"] == f"{NVIDIA}/deepseek-r1/Offline" and doc["deviation_pct"] == -2.736
    assert [c["area"] for c in doc["causes"]] == ["server"]
    # the benchmark's own figures: MLPerf's reference 3,886.2274 output tokens per sample, at most 20,000
    tokens = doc["tokens"]
    assert (tokens["reference_output_tokens_per_sample"], tokens["max_tokens"]) == (3886.2274, 20000)
    same = json.loads(cli("explain", str(AZURE / "results" / GB300 / "deepseek-r1" / "Interactive"), "--json").stdout)
    assert same["reference"]["name"] == f"v6.1/closed/Azure/{GB300}/deepseek-r1/Interactive"
    assert same["deviation_pct"] == 0.0 and same["causes"] == []


def test_attest_records_the_benchmark_and_a_lowered_exact_match_fails_its_verify(tmp_path: Path) -> None:
    run = _copy(tmp_path / "a") / "Interactive"
    made = cli("attest", str(run))
    assert made.exit_code == 0, made.output
    statement = run / "attestation.intoto.json"
    payload = json.loads(base64.b64decode(json.loads(statement.read_text())["payload"]))
    files = payload["predicate"]["files"]
    shipped = SHIPPED / "deepseek-r1.yaml"
    assert files["benchmark"] == {
        "name": "deepseek-r1",
        "path": "deepseek-r1.yaml",
        "sha256": hashlib.sha256(shipped.read_bytes()).hexdigest(),
        "shipped": True,
    }
    assert payload["predicate"]["verdict"]["status"] == "PASS"
    ok = cli("attest", "verify", str(statement), "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["verified"] is True, ok.output
    edit(run / "accuracy" / "accuracy.txt", "80.81130355515042", "80.5445")
    bad = cli("attest", "verify", str(statement), "--json")
    doc = json.loads(bad.stdout)
    assert bad.exit_code == 1 and doc["verdict_now"] == "FAIL" and doc["attested_verdict"] == "PASS"
    assert "verdict.accuracy.exact_match: attested 80.81130355515042, now 80.5445" in doc["differences"]


def test_report_places_the_rack_result_among_the_published_with_its_recipe(tmp_path: Path) -> None:
    run = str(AZURE / "results" / GB300 / "deepseek-r1" / "Offline")
    res = cli("report", run, "--recipe", "nd-gb300-v6-dsr1", "--markdown", str(tmp_path / "r.md"), "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 0, res.output
    assert doc["reproduction"] is True and doc["measured"]["gpus"] == 72
    own = next(c for c in doc["comparisons"] if c["own"])
    assert (own["recipe"], own["deviation_pct"], own["in_band"]) == ("nd-gb300-v6-dsr1", 0.0, True)
    standing = doc["published_standing"]
    assert (standing["benchmark"], standing["scenario"], standing["rank"], standing["of"]) == (
        "deepseek-r1", "Offline", 11, 16)  # fmt: skip
    assert "KV = 61 x 576 (latent)" in doc["roofline"]["explanation"]  # MLA's latent from the benchmark file
    # a whole system's result, valid: not summed as a VM, never called INVALID
    assert doc["notes"] == [
        "1 run(s) not summed as VMs: a system of 18 nodes and 72 accelerators (system JSON "
        "Azure-GB300-NVL72_288GBx72.json: 4 per node x 18 nodes), not one VM: its figure is already a whole "
        "system's; the figures below are its own"
    ]
    assert "deepseek-r1" in (tmp_path / "r.md").read_text()
    bare = cli("report", run)
    assert bare.exit_code == 2 and "--recipe NAME" in bare.output


def test_report_and_explain_refuse_a_llama_recipe_naming_both() -> None:
    """A DeepSeek-R1 folder is never judged by a Llama recipe: verify says it is another benchmark
    (tests/test_deepseek_r1.py); report and explain, which would compare its figure with the recipe's, refuse."""
    run = str(AZURE / "results" / GB300 / "deepseek-r1" / "Offline")
    for command in ("report", "explain"):
        res = cli(command, run, "--recipe", "nd-gb300-v6")
        assert res.exit_code == 2, res.output
        out = " ".join(res.output.split())
        assert "a deepseek-r1 run (deepseek-r1 in the path), and recipe nd-gb300-v6 runs llama2-70b-99" in out
        assert f"repro {command} RESULT_DIR --recipe NAME with a recipe of deepseek-r1" in out


def test_against_an_id_without_a_deepseek_r1_result_is_refused_as_another_benchmark() -> None:
    """Azure's 5.1-0008 holds Llama-2-70B (99, 99.9) and Llama-3.1-405B results only: verify refuses the comparison
    as another benchmark (it used to ask the run to choose between 99 and 99.9), explain refuses to explain."""
    run = str(AZURE / "results" / GB300 / "deepseek-r1" / "Offline")
    res = cli("verify", run, "--against", "5.1-0008", "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and doc["status"] == "REFUSED"
    assert [a["refused"] for a in doc["against"]] == [
        "another benchmark: the run is deepseek-r1, 5.1-0008/99/Offline is llama2-70b-99; tokens/s of another "
        "model say nothing about this run"
    ]
    why = cli("explain", run, "--against", "5.1-0008")
    assert why.exit_code == 2
    assert "5.1-0008: no deepseek-r1 result (llama2-70b-99, llama3.1-405b only)" in " ".join(why.output.split())
