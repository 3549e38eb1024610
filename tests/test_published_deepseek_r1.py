"""Issue 45 item 4: every DeepSeek-R1 result of MLPerf Inference v5.1, v6.0 and v6.1 in the published index, and the
rest of v6.1's llama2-70b-99.9 (the two VibeHPC results). v6.1 cannot be fetched here: its rows are rebuilt, with no
network, from the files saved under tests/fixtures/stored/v6.1 (60 summary logs' index lines and MLCommons' own
summary.csv rows; SOURCE.json says what and from where) and Azure's seven whole result folders
(tests/fixtures/published/v6.1_Azure_deepseek-r1). The v5.1 and v6.0 rows rebuild from the fetched repositories
(tests/test_published_mirrors.py, slow)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from helpers import cli

from repro.core.published import INDEX_CSV, INDEX_DSR1_CSV, load_index

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "build_published_index.py"
STORED = REPO / "tests" / "fixtures" / "stored" / "v6.1"
AZURE = REPO / "tests" / "fixtures" / "published" / "v6.1_Azure_deepseek-r1"
V61 = ("intel-ai-tce/inference_results_v6.1", "5174fca85775b97127da8e3ff07f1bb776880fc4")
TABLE = "mlcommons/inference_results_v6.1@7bf15fd8089655a71fb75c81a744d7ba5a632424"


def _rebuild(roots: list[Path], table: str, *extra: str) -> bytes:
    args = [sys.executable, str(SCRIPT), *map(str, roots), "--round", "v6.1", "--repo", V61[0], "--commit", V61[1]]
    args += ["--kind", "stored-file-index", "--table", str(STORED / table), "--table-only-rows", "--table-repo", TABLE]
    return subprocess.run([*args, *extra], check=True, capture_output=True, timeout=120).stdout


def _dsr1() -> list:
    return [r for r in load_index().rows if r.benchmark_name == "deepseek-r1"]


def test_the_v61_deepseek_r1_rows_rebuild_byte_for_byte_from_the_saved_files() -> None:
    """The builder on the saved summary lines and Azure's folders (two ROOTs of one repository and commit) plus
    summary.csv's rows writes exactly the v6.1 rows the index ships; without Azure's folder its seven rows would be
    table-only rows, so the second ROOT is what gives them their files."""
    shipped = INDEX_DSR1_CSV.read_bytes().splitlines(keepends=True)
    want = b"".join(line for line in shipped if line.startswith(b"v6.1,"))
    assert _rebuild([STORED, AZURE], "summary-table-deepseek-r1.csv", "--benchmark", "deepseek-r1") == want
    alone = _rebuild([STORED], "summary-table-deepseek-r1.csv", "--benchmark", "deepseek-r1").decode()
    assert alone.count("closed/Azure/results/") == 7 and alone.count("results-table-only") == 9 + 7


def test_the_two_vibehpc_llama2_rows_rebuild_from_their_table_rows() -> None:
    shipped = INDEX_CSV.read_bytes().splitlines(keepends=True)
    want = b"".join(line for line in shipped if line.startswith(b"v6.1,closed,VibeHPC,"))
    assert want.count(b"\n") == 2
    assert _rebuild([STORED], "summary-table-llama2-70b-vibehpc.csv") == want
    rows = [r for r in load_index().rows if r.round == "v6.1" and r.benchmark == "99.9"]
    assert len(rows) == 88 and sum(r.table_only for r in rows) == 2


def test_every_deepseek_r1_result_of_the_three_rounds_is_a_row() -> None:
    """17 + 40 + 76 rows, every one VALID, each v6.1 row named by summary.csv (and each of its results there)."""
    rows = _dsr1()
    assert Counter(r.round for r in rows) == {"v5.1": 17, "v6.0": 40, "v6.1": 76}
    assert all(r.result_validity == "VALID" and r.benchmark == "deepseek-r1" for r in rows)
    with (STORED / "summary-table-deepseek-r1.csv").open(newline="") as fh:
        table = {e["Location"].removeprefix("./").removesuffix("/performance/run_1") for e in csv.DictReader(fh)}
    v61 = {r.source_path if r.table_only else str(Path(r.source_path).parents[2]) for r in rows if r.round == "v6.1"}
    assert v61 == table
    kinds = Counter(r.source_kind for r in rows if r.round == "v6.1")
    assert kinds == {
        "stored-file-index": 7,
        "stored-file-index+summary-table(systems,accuracy)": 60,
        "results-table-only": 9,
    }
    assert all(r.summary_crosscheck in ("ok", "table_only") for r in rows if r.round == "v6.1")
    # accuracy.txt's num-samples is the gen_num column; every row with an accuracy figure clears the checker's floor
    assert {r.gen_num for r in rows if r.source_kind in ("git-snapshot", "stored-file-index")} == {4388}
    assert min(r.metrics["exact_match"] for r in rows) > 80.5446
    preview = [r for r in rows if r.system_folder in ("VR-NVL72_VR-288GB_aarch64x72_TRT", "VR200-NVL72_aarch64x36")]
    assert len(preview) == 5 and all(r.metrics["exact_match"] and r.tokens_per_sample is None for r in preview)


def test_azures_seven_rows_carry_their_published_per_gpu_figures() -> None:
    rows = {(r.system_folder, r.scenario): r for r in _dsr1() if r.submitter == "Azure"}
    per_gpu = {k: round(r.per_accelerator, 1) for k, r in rows.items()}
    assert per_gpu == {
        ("Azure-GB300-NVL72_288GBx72", "Offline"): 9182.5,
        ("Azure-GB300-NVL72_288GBx72", "Server"): 8186.0,
        ("Azure-GB300-NVL72_288GBx72", "Interactive"): 3612.5,
        ("Azure-GB200-NVL72_186GBx72", "Offline"): 7528.8,
        ("Azure-GB200-NVL72_186GBx72", "Server"): 5927.7,
        ("Azure-GB200-NVL72_186GBx288", "Offline"): 7261.1,
        ("Azure-GB200-NVL72_186GBx288", "Server"): 5550.4,
    }
    assert {r.total_accelerators for r in rows.values()} == {72, 288}
    gb300i = rows[("Azure-GB300-NVL72_288GBx72", "Interactive")]
    assert gb300i.log_scenario == "Server" and gb300i.metrics == {"exact_match": 80.811304}


def test_repro_published_lists_deepseek_r1() -> None:
    res = cli("published", "--benchmark", "deepseek-r1", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["count"] == 133 and {r["benchmark_name"] for r in doc["results"]} == {"deepseek-r1"}
    files = {f["file"]: f["rows"] for f in doc["index"]["index_files"]}
    assert files["published-deepseek-r1.csv"] == 133
    table = cli("published", "--benchmark", "DeepSeek-R1", "--submitter", "Azure", "--round", "6.1")
    assert table.exit_code == 0 and "7 of" in table.output and "9,182.5" in table.output
    show = cli("published", "show", "v6.1/closed/Azure/Azure-GB200-NVL72_186GBx288/deepseek-r1/Server")
    assert show.exit_code == 0 and "5,550.39" in show.output and "exact_match" in show.output


def test_published_show_leaves_out_what_the_results_table_does_not_give() -> None:
    """v6.1's summary.csv gives exact_match and tokens per sample, not the sample count: shown without a 'None'."""
    crusoe = " ".join(cli("published", "show", "v6.1/closed/Crusoe/512xMI355X_Crusoe_DS").output.split())
    assert "exact_match 80.697356, tokens/sample 3898.373747 │" in crusoe and "None" not in crusoe
    azure = " ".join(cli("published", "show", "v6.1/closed/Azure/Azure-GB300-NVL72_288GBx72").output.split())
    assert "exact_match 80.811304, tokens/sample 3720.64175, gen_num 4388" in azure  # read from its accuracy.txt
