"""Issue 45 Done-when 4: DeepSeek-R1 bundles of other submitters, whose files nobody here had shown repro, verify as
themselves (tests/fixtures/published/v6.1_deepseek-r1_others, read file by file from the stored copy
intel-ai-tce/inference_results_v6.1 @ 5174fca8; README there): Cisco's B300 x8 (TensorRT-LLM, one node) Offline and
Server, NVIDIA's GB300 NVL72 x72 Interactive (one system over 18 nodes), and Crusoe's 512 MI355X over 64 nodes
(SGLang on ROCm, no user.conf published, a mean latency LoadGen's sum overflowed below its minimum). MLCommons'
checker accepted all four (they are rows of v6.1's summary.csv, which its final report writes): verify says PASS
at +0.0% and reads the result and accuracy the checker's table prints. Two VMs' copies of Cisco's one-node result
aggregate as a two-node rack."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from helpers import as_another_run, cli

from repro.results.verify import verify_dir

HERE = Path(__file__).parent
OTHERS = HERE / "fixtures" / "published" / "v6.1_deepseek-r1_others" / "closed"
TABLE = HERE / "fixtures" / "stored" / "v6.1" / "summary-table-deepseek-r1.csv"  # summary.csv @ 7bf15fd8's rows
CISCO = "C880A_M8_B300_270GBx8_TRT"
BUNDLES = {  # (submitter, system, scenario): (accelerators, per accelerator as the published tokens/s over them)
    ("Cisco", CISCO, "Offline"): (8, "8,790.7"),  # 70,325.4 / 8
    ("Cisco", CISCO, "Server"): (8, "8,271.4"),  # 66,171.6 / 8
    ("Crusoe", "512xMI355X_Crusoe_DS", "Offline"): (512, "5,667.9"),  # 2,901,950 / 512
    ("NVIDIA", "GB300-NVL72_GB300-288GB_aarch64x72_TRT", "Interactive"): (72, "3,520.9"),  # 253,506.3 / 72
}
LATENCY = {  # p99 TTFT and TPOT as verify states them against the scenario's limits (the summaries' own p99s)
    "Server": ("944.7 ms ≤ 2,000 ms (Server)", "74.2 ms ≤ 80 ms (Server)"),
    "Interactive": ("779.2 ms ≤ 1,500 ms (Interactive)", "14.7 ms ≤ 15 ms (Interactive)"),
}


def _checker_row(submitter: str, system: str, scenario: str) -> dict[str, str]:
    with TABLE.open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if (r["Organization"], r["Platform"], r["Scenario"]) == (
            submitter, system, scenario)]  # fmt: skip
    assert len(rows) == 1
    return rows[0]


@pytest.mark.parametrize(("submitter", "system", "scenario"), sorted(BUNDLES))
def test_another_submitters_bundle_verifies_as_itself(submitter: str, system: str, scenario: str) -> None:
    v = verify_dir(OTHERS / submitter / "results" / system / "deepseek-r1" / scenario)
    assert v.status == "PASS" and v.deviation_pct == 0.0, v.reasons
    assert v.record is not None and v.record.row.key == f"v6.1/closed/{submitter}/{system}/deepseek-r1/{scenario}"
    gpus, per_gpu = BUNDLES[(submitter, system, scenario)]
    assert v.gpus == gpus and f"{v.per_gpu:,.1f}" == per_gpu
    # what MLCommons' checker accepted and printed: the result, and the accuracy it read from accuracy.txt
    row = _checker_row(submitter, system, scenario)
    # the checker's Result is the detail log's figure, which LoadGen prints to 6 significant digits (%g)
    assert f"{v.run.tokens_per_s:.6g}" == f"{float(row['Result']):.6g}" and int(row["total_accelerators"]) == gpus
    exact, tokens = (float(x) for x in row["Accuracy"].replace("exact_match: ", "").split("  TOKENS_PER_SAMPLE: "))
    assert v.run.accuracy is not None
    assert (v.run.accuracy["exact_match"], v.run.accuracy["tokens_per_sample"]) == (exact, tokens)
    checks = {c.name: c for c in v.checks}
    assert all(checks[n].ok is True for n in ("LoadGen validity", "min duration", "accuracy exact_match"))
    assert checks["accuracy tokens_per_sample"].ok is True and checks["accuracy samples"].ok is True
    if scenario in LATENCY:
        ttft, tpot = LATENCY[scenario]
        assert ttft in checks["TTFT p99"].detail and checks["TTFT p99"].ok is True
        assert tpot in checks["TPOT p99"].detail and checks["TPOT p99"].ok is True


def test_crusoes_overflowed_mean_latency_is_the_published_log_as_the_checker_took_it() -> None:
    """LoadGen's sum of latencies wrapped at 2^64 ns (4,449,432 samples of ~5,800 s): the mean it printed,
    1,672 s, is below its minimum, 5,473 s; (1,672,379,464,860 x 4,449,432 + 2^64) / 4,449,432 = 5,818 s is
    between the minimum and the maximum. The checker does not judge an Offline run's latency and accepted the
    result; so does verify."""
    folder = OTHERS / "Crusoe" / "results" / "512xMI355X_Crusoe_DS" / "deepseek-r1" / "Offline"
    summary = (folder / "performance" / "run_1" / "mlperf_log_summary.txt").read_text()
    assert "Min latency (ns)                : 5473423755612" in summary
    assert "Mean latency (ns)               : 1672379464860" in summary
    assert not (folder / "user.conf").exists()  # as the stored copy holds it
    res = cli("verify", str(folder), "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["status"] == "PASS", res.output


def test_two_vms_copies_of_a_one_node_result_aggregate_as_two_nodes(tmp_path: Path) -> None:
    runs = []
    for i in range(2):
        root = tmp_path / f"vm{i}" / "closed" / "Cisco"
        shutil.copytree(OTHERS / "Cisco" / "results" / CISCO, root / "results" / CISCO)
        shutil.copytree(OTHERS / "Cisco" / "systems", root / "systems")
        if i:
            as_another_run(root / "results", i)
        runs.append(str(root / "results" / CISCO / "deepseek-r1" / "Offline"))
    res = cli("aggregate", *runs, "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 0, res.output
    assert [vm["vm"] for vm in doc["vms"]] == ["vm0", "vm1"]  # not both 'Offline'
    assert all(vm["verdict"] == "PASS" and vm["counted"] is True for vm in doc["vms"])
    assert round(doc["stats"]["total"], 1) == 140650.8 and doc["stats"]["gpus"] == 16


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        (
            "'tokens_per_sample': 3782.986326344576",
            "'tokens_per_sample': 4300.0",
            "accuracy tokens_per_sample: 4300.0 outside 3497.605–4274.850 (90–110% of 3886.2274)",
        ),
        (
            "'num-samples': 4388",
            "'num-samples': 4000",
            "accuracy samples: 4,000 samples, not the full 4,388: a short run, not an accuracy result",
        ),
    ],
    ids=["tokens-per-sample-over-110pct", "short-accuracy-run"],
)
def test_a_copy_the_checker_would_reject_fails_naming_why(tmp_path: Path, old: str, new: str, reason: str) -> None:
    """The checker's other accuracy rules for deepseek-r1 (constants.py: tokens per sample at most 1.1 x 3886.2274,
    the dataset's 4,388 samples) on a copy of Cisco's Offline folder."""
    root = tmp_path / "closed" / "Cisco"
    shutil.copytree(OTHERS / "Cisco", root)
    acc = root / "results" / CISCO / "deepseek-r1" / "Offline" / "accuracy" / "accuracy.txt"
    acc.write_text(acc.read_text().replace(old, new))
    res = cli("verify", str(acc.parent.parent), "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["status"] == "FAIL" and doc["reasons"] == [reason]
