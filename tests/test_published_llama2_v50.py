"""The Llama-2-70B results of MLPerf Inference v5.0 in the published index. No snapshot of a v5.0 results repository
can be fetched here: the round is enumerated by MLCommons' own results export (mlcommons/cm4mlperf-results, its v5.0
llama2-70b entries transcribed in tests/fixtures/stored/v5.0-llama2/results-table-llama2.json); a sample of results
was read file by file from the stored mirror ntuhpc/mlperf_inference_results_v5.0 (kept verbatim in that folder, with
SOURCE.json), every other result is a row read from its export entry alone. These tests rebuild the rows, count them,
cross-check the file rows against the export and verify each file row as itself, with no network."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from repro.core.published import INDEX_CSV, SOURCES_JSON, PublishedResult, load_index, rule_reference
from repro.results.verify import verify_dir

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "build_published_index.py"
STORED = REPO / "tests" / "fixtures" / "stored" / "v5.0-llama2"
TABLE = STORED / "results-table-llama2.json"
MIRROR = ("ntuhpc/mlperf_inference_results_v5.0", "cf354115915ea369f05db424b051da8c5bf957dc")
CM4MLPERF = ("mlcommons/cm4mlperf-results", "9f4870796f1b79d071ef63061ade15e4d285b938")
FILE_ROWS = {
    "v5.0/closed/AMD/8xMI325X_2xEPYC_9575F/99.9/Offline",
    "v5.0/closed/Lenovo/H200-SXM-141GBx8_TRT/llama2-70b-interactive-99/Interactive",
    "v5.0/open/Krai/xd670_h200_x8_sglang/llama3_1-70b-interactive-fp8_pre/Interactive",
}


def _v50() -> list[PublishedResult]:
    return [r for r in load_index().rows if r.round == "v5.0" and r.benchmark_name.startswith("llama2-70b-")]


def _table() -> list[dict[str, object]]:
    return list(json.loads(TABLE.read_text()))


def _rebuild() -> bytes:
    args = [sys.executable, str(SCRIPT), str(STORED), "--round", "v5.0", "--repo", MIRROR[0], "--commit", MIRROR[1]]
    args += [
        "--kind",
        "stored-file-index",
        "--table",
        str(TABLE),
        "--table-only-rows",
        "--table-repo",
        "@".join(CM4MLPERF),
    ]
    return subprocess.run(args, check=True, capture_output=True, timeout=120).stdout


def test_the_v50_rows_are_rebuilt_byte_for_byte_from_the_saved_files_and_the_export() -> None:
    """The build script on the saved files and the transcribed export writes exactly the v5.0 rows the 70B index ships
    (between the v4.1 and v5.1 rows, in the order of their results folder)."""
    shipped = INDEX_CSV.read_bytes().splitlines(keepends=True)
    v50 = [line for line in shipped if line.startswith(b"v5.0,")]
    assert _rebuild() == b"".join(v50)
    rounds = [line.split(b",", 1)[0] for line in shipped[1:]]
    assert rounds.index(b"v5.0") == rounds.index(b"v5.1") - len(v50) and rounds[rounds.index(b"v5.0") - 1] == b"v4.1"


def test_every_result_of_the_export_is_a_row_and_the_counts_are_the_rounds() -> None:
    """The export lists 291 v5.0 llama2-70b results with a tokens/s figure; each is exactly one row, keyed by its
    results folder. v5.0's separate llama2-70b-interactive benchmark is the Interactive scenario of llama2-70b-99
    and -99.9 for its Server runs (as v5.1 writes Interactive rows: scenario Interactive, log scenario Server) and an
    Offline row for its Offline runs; its folder name is in the key."""
    rows, table = _v50(), _table()
    assert len(table) == 291 and len({e["Location"] for e in table}) == 291
    by_loc = {str(Path(r.source_path).parents[2]) if not r.table_only else r.source_path: r for r in rows}
    assert set(by_loc) == {e["Location"] for e in table}
    assert Counter((r.division, r.benchmark, r.scenario) for r in rows) == {
        ("closed", "99", "Offline"): 67,
        ("closed", "99.9", "Offline"): 63,
        ("closed", "99", "Server"): 47,
        ("closed", "99.9", "Server"): 44,
        ("closed", "99", "Interactive"): 20,
        ("closed", "99.9", "Interactive"): 19,
        ("open", "99", "Offline"): 3,
        ("open", "99", "Server"): 4,
        ("open", "99.9", "Offline"): 14,
        ("open", "99.9", "Server"): 8,
        ("open", "99.9", "Interactive"): 2,
    }
    interactive = [r for r in rows if r.scenario == "Interactive"]
    assert all("interactive" in r.model_folder and r.scenario_folder.lower() == "server" for r in interactive)
    assert {r.log_scenario for r in interactive if not r.table_only} == {"Server"}
    # the interactive benchmark's Offline runs are Offline rows of their own, not the llama2-70b-99 Offline result
    h200 = {r.key: r.tokens_per_second for r in rows if r.system_key == "v5.0/closed/NVIDIA/H200-SXM-141GBx8_TRT"}
    assert h200["v5.0/closed/NVIDIA/H200-SXM-141GBx8_TRT/99/Offline"] == 34988.2
    assert h200["v5.0/closed/NVIDIA/H200-SXM-141GBx8_TRT/llama2-70b-interactive-99/Offline"] == 34989.2
    assert h200["v5.0/closed/NVIDIA/H200-SXM-141GBx8_TRT/llama2-70b-interactive-99/Interactive"] == 19424.2
    assert {r.result_validity for r in rows} == {"VALID"} and not any(r.result_id for r in rows)
    # Fujitsu's power submission is listed only in the export's closed-power files
    assert {r.scenario for r in rows if r.submitter == "Fujitsu"} == {"Offline", "Server", "Interactive"}
    mango = next(r for r in rows if r.system_folder == "32xMI300X_2xEPYC_9534" and r.scenario == "Offline")
    assert (mango.accelerators_per_node, mango.number_of_nodes, mango.total_accelerators) == (8, 4, 32)


def test_the_file_rows_agree_with_their_export_entry_and_their_files() -> None:
    """The rows read from files are `ok` against the export (tokens/s within the export's rounding, accelerators,
    nodes) and every figure is the one the saved summary log and accuracy.txt state (plain string matching)."""
    table = {e["Location"]: e for e in _table()}
    files = [r for r in _v50() if not r.table_only]
    assert {r.key for r in files} == FILE_ROWS
    for r in files:
        assert (r.source_repo, r.source_commit, r.source_kind) == (*MIRROR, "stored-file-index")
        assert r.summary_crosscheck == "ok"
        folder = STORED / Path(r.source_path).parents[2]
        e = table[str(Path(r.source_path).parents[2])]
        assert abs(r.tokens_per_second - float(str(e["Result"]))) <= max(0.02, 1e-4 * r.tokens_per_second)
        summary = (folder / "performance/run_1/mlperf_log_summary.txt").read_text()
        key = "Tokens per second:" if r.scenario == "Offline" else "Completed tokens per second:"
        (line,) = [x for x in io.StringIO(summary) if x.startswith(key)]
        assert float(line.split(":")[1]) == r.tokens_per_second
        accuracy = (folder / "accuracy/accuracy.txt").read_text()
        for name in ("rouge1", "rouge2", "rougeL"):
            stated = float(accuracy.split(f"'{name}': ")[1].split(",")[0])
            assert r.metrics[name] == stated and f"{name.upper()}: {stated:g}" in str(e["Accuracy"])
        assert r.gen_num == 24576 and r.samples_per_second is not None and r.framework


def test_the_table_only_rows_are_their_export_entry() -> None:
    """Every other row is its export entry and says so: the export's repository and commit, its results folder as
    the path, source_kind results-table-only, crosscheck table_only, the summary-log fields empty."""
    table = {e["Location"]: e for e in _table()}
    only = [r for r in _v50() if r.table_only]
    assert len(only) == 288
    for r in only:
        e = table[r.source_path]
        assert (r.source_repo, r.source_commit, r.summary_crosscheck) == (*CM4MLPERF, "table_only")
        assert r.tokens_per_second == float(str(e["Result"])) and e["errors"] == 0
        assert (r.accelerators_per_node, r.number_of_nodes) == (e["accelerators_per_node"], e["number_of_nodes"])
        assert (r.system_name, r.accelerator_model_name) == (e["SystemName"], e["accelerator_model_name"])
        assert f"ROUGEL: {r.metrics['rougeL']:g} " in f"{e['Accuracy']} "
        assert (r.log_scenario, r.samples_per_second, r.gen_num, r.loadgen_version) == ("", None, None, None)


def _as_published(row: PublishedResult, into: Path) -> Path:
    """The row's result folder laid out as its repository has it, from the saved files."""
    folder = Path(row.source_path).parents[2]
    base = into / row.key.replace("/", "_") / "inference_results_v5.0"
    sysrel = Path(row.division, row.submitter, "systems", f"{row.system_folder}.json")
    for rel in (
        folder / "performance/run_1/mlperf_log_summary.txt",
        folder / "accuracy/accuracy.txt",
        sysrel,
    ):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STORED / rel, base / rel)
    return base / folder


def test_every_row_read_from_files_verifies_as_itself(tmp_path: Path) -> None:
    """Each file row, laid out as the repository has it, is recognised as its own record with the index's per-GPU
    figure at +0.0%, every check passing; only the summary is kept, so the one reason it is no reproduction is the
    missing detail log. The 288 table-only rows have no log to lay out (their export entries say the same figures)."""
    rows = [r for r in _v50() if not r.table_only]
    assert len(rows) == 3
    for r in rows:
        v = verify_dir(_as_published(r, tmp_path))
        assert v.record is not None and v.record.row.key == r.key, r.key
        assert v.per_gpu == r.per_accelerator and v.deviation_pct == 0.0, r.key
        assert not [c.name for c in v.checks if c.fails and c.ok is False], r.key
        assert v.status == "NOT A REPRODUCTION" and len(v.reasons) == 1, (r.key, v.reasons)
        assert "no mlperf_log_detail.txt beside mlperf_log_summary.txt" in v.reasons[0]


def test_a_table_only_row_is_never_a_recipes_rule_reference() -> None:
    """The Hopper rule picks the newest round's NVIDIA result; v5.0's DGX H100 Offline result (31,306.8 tokens/s) is a
    table-only row, so the rule still picks the v4.1 one the nd-h100-v5 recipe cites (its log read)."""
    dgx = [r for r in _v50() if r.system_folder == "DGX-H100_H100-SXM-80GBx8_TRT" and r.benchmark == "99"]
    assert {(r.scenario, r.tokens_per_second, r.table_only) for r in dgx} == {
        ("Offline", 31306.8, True),
        ("Server", 31106.3, True),
    }
    chosen = rule_reference("NVIDIA H100-SXM-80GB", 8, "99")
    assert chosen is not None and chosen.round == "v4.1" and not chosen.table_only


def test_the_fixture_is_small_and_its_sources_are_declared() -> None:
    doc = json.loads((STORED / "SOURCE.json").read_text())
    assert (doc["repository"], doc["commit"]) == MIRROR
    assert (doc["results_table"]["repository"], doc["results_table"]["commit"]) == CM4MLPERF
    kept = sorted(str(p.relative_to(STORED)) for p in STORED.rglob("*") if p.is_file())
    assert kept == sorted([*doc["files"], "SOURCE.json", TABLE.name])
    assert all(p.stat().st_size < 1_000_000 for p in STORED.rglob("*"))
    # every entry names the export file it was transcribed from, and that file is one SOURCE.json lists
    listed = {f.split(" ")[0] for f in doc["results_table"]["files"]}
    assert {str(e["file"]) for e in _table()} == listed
    sources = json.loads(SOURCES_JSON.read_text())["sources"]
    (v50,) = [s for s in sources if s["round"] == "v5.0" and s["file"] == "published-llama2-70b.csv"]
    assert (v50["repository"].split(" ")[0], v50["commit"], v50["results"], v50["table"]["results"]) == (
        *MIRROR,
        3,
        288,
    )


def test_the_shipped_csv_keeps_the_columns_of_the_file() -> None:
    with INDEX_CSV.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = [r for r in reader if r["round"] == "v5.0"]
    assert len(rows) == 291 and all(r["source_commit"] in (MIRROR[1], CM4MLPERF[1]) for r in rows)
