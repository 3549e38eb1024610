"""Issue 33 item 3: the Llama-3.1-405B results of MLPerf Inference v5.0 in the published index. No snapshot of a v5.0
results repository can be fetched here; the rows are read file by file from the stored copy
ntuhpc/mlperf_inference_results_v5.0 and the files read are kept verbatim under
tests/fixtures/stored/v5.0 (summary logs, accuracy.txt, system JSONs; SOURCE.json says what and from where).
The round's enumeration is MLCommons' own results export (mlcommons/cm4mlperf-results, its v5.0 entries transcribed
in results-table-405b.json). These tests rebuild the rows from those files, check them against that table, and verify
each result as itself, with no network."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import cli, read_csv_rows, write_csv_rows

from repro.core.benchmarks import load_benchmark
from repro.core.errors import InputError
from repro.core.published import INDEX_405B_CSV, SOURCES_JSON, PublishedResult, load_index, load_index_file
from repro.results.verify import verify_dir

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "build_published_index.py"
STORED = REPO / "tests" / "fixtures" / "stored" / "v5.0"
MIRROR = ("ntuhpc/mlperf_inference_results_v5.0", "cf354115915ea369f05db424b051da8c5bf957dc")


def _v50() -> list[PublishedResult]:
    return [r for r in load_index().rows if r.round == "v5.0" and r.benchmark_name == "llama3.1-405b"]


def _v50_files() -> list[PublishedResult]:
    """The v5.0 rows read from stored files (all but the results-table-only ones)."""
    return [r for r in _v50() if not r.table_only]


def _rebuild(*extra: str) -> bytes:
    args = [sys.executable, str(SCRIPT), str(STORED), "--benchmark", "llama3.1-405b", "--round", "v5.0"]
    args += ["--repo", MIRROR[0], "--commit", MIRROR[1], "--kind", "stored-file-index"]
    args += ["--systems-elsewhere", str(STORED / "elsewhere"), "--table", str(STORED / "results-table-405b.json")]
    args += ["--table-only-rows", "--table-repo", "@".join(CM4MLPERF)]
    args += extra
    return subprocess.run(args, check=True, capture_output=True, timeout=120).stdout


def test_the_v50_rows_are_rebuilt_byte_for_byte_from_the_stored_files() -> None:
    """scripts/build_published_index.py on the saved files writes exactly the v5.0 rows the index ships (they come
    first, after the header); without the other rounds' system JSONs the NVIDIA rows cannot be built at all."""
    shipped = INDEX_405B_CSV.read_bytes().splitlines(keepends=True)
    want = b"".join([shipped[0], *(line for line in shipped[1:] if line.startswith(b"v5.0,"))])
    assert _rebuild("--header") == want
    assert shipped[1 : len(want.splitlines())] == want.splitlines(keepends=True)[1:]
    bare = subprocess.run(
        [sys.executable, str(SCRIPT), str(STORED), "--benchmark", "llama3.1-405b", "--round", "v5.0"]
        + ["--repo", MIRROR[0], "--commit", MIRROR[1], "--kind", "stored-file-index"],
        capture_output=True,
        timeout=120,
    )
    assert bare.returncode != 0 and b"NVIDIA/results/B200-SXM-180GBx8_TRT" in bare.stderr
    assert b"no system JSON and no table entry" in bare.stderr


def test_every_stored_v50_405b_result_is_indexed_as_read() -> None:
    assert Counter((r.division, r.scenario) for r in _v50()) == {
        ("closed", "Offline"): 15,
        ("closed", "Server"): 15,
        ("open", "Offline"): 6,
    }
    rows = _v50_files()
    assert len(rows) == 34 and {r.key for r in _v50() if r.table_only} == TABLE_ONLY_KEYS
    closed = {(r.submitter, r.system_folder) for r in rows if r.division == "closed"}
    assert len(closed) == 14 and {s for s, _ in closed} == {
        "ASUSTeK",
        "Cisco",
        "coreweave",
        "Dell",
        "GigaComputing",
        "Google",
        "NVIDIA",
        "Quanta_Cloud_Technology",
        "Supermicro",
    }
    assert Counter(r.submitter for r in rows if r.division == "open") == {"HPE": 1, "Krai": 4, "Supermicro": 1}
    assert all(r.benchmark_name == "llama3.1-405b" for r in rows)
    # Krai's open folders are named for their variant (and one for the model it ran, DeepSeek-V3); the table lists
    # each under llama3.1-405b, and the folder name is in the row's key
    assert Counter(r.model_folder for r in rows) == {"llama3_1-405b": 31, "llama3_1-405b-fp8_dyn": 2, "deepseek-v3": 1}
    assert "v5.0/open/Krai/xe9680_mi300x_x8_sglang/deepseek-v3/Offline" in {r.key for r in rows}
    assert {r.result_validity for r in rows} == {"VALID"} and not any(r.result_id for r in rows)
    assert all(r.source_repo == MIRROR[0] and r.source_commit == MIRROR[1] for r in rows)
    # every row agrees with MLCommons' own v5.0 results export on tokens/s and accelerator count
    assert {r.summary_crosscheck for r in rows} == {"ok"}
    assert all(r.gen_num == 8313 and set(r.metrics) == {"exact_match", "rougeL"} for r in rows)
    # 8-GPU systems but NVIDIA's GB200 NVL72 rack (4 per node x 18) and CoreWeave's one 4-GPU GB200 node
    assert Counter(r.total_accelerators for r in rows) == {8: 30, 72: 2, 4: 2}
    (rack,) = [r for r in rows if r.total_accelerators == 72 and r.scenario == "Offline"]
    assert (rack.accelerators_per_node, rack.number_of_nodes, rack.tokens_per_second) == (4, 18, 13886.4)
    (nv,) = [
        r for r in rows if r.submitter == "NVIDIA" and r.system_folder.startswith("B200") and r.scenario == "Offline"
    ]
    assert (nv.tokens_per_second, nv.per_accelerator) == (1526.29, 1526.29 / 8)


def test_counts_from_another_round_are_named_and_carry_no_software() -> None:
    """NVIDIA's v5.0 B200 x8 and H200 x8 system JSONs are stored nowhere: their count (and accelerator) come from the
    same folder's JSON of another round, which source_kind names with its repository and commit; that round's
    software (framework, host, system name) is not written into a v5.0 row."""
    sources = json.loads((STORED / "elsewhere" / "SOURCES.json").read_text())["folders"]
    nvidia = [r for r in _v50() if r.submitter == "NVIDIA"]
    assert len(nvidia) == 6
    for r in nvidia:
        (folder,) = [
            f
            for f in sources
            if (STORED / "elsewhere" / f / "closed/NVIDIA/systems" / f"{r.system_folder}.json").is_file()
        ]
        src = sources[folder]
        kind = src["kind"]
        assert r.source_kind == f"stored-file-index+{kind}-from({src['repository']}@{src['commit']})"
        assert r.framework == "" and r.host_processor_model_name == "" and r.system_name == ""
    others = [r for r in _v50_files() if r.submitter != "NVIDIA"]
    assert {r.source_kind for r in others} == {"stored-file-index"} and all(r.framework for r in others)


def _as_published(row: PublishedResult, into: Path) -> Path:
    """The row's result folder in the v5.0 layout, from the saved files: summary log, accuracy.txt, system JSON (for
    NVIDIA's two systems, the other round's JSON the row's count came from)."""
    folder = Path(row.source_path).parents[2]
    base = into / row.key.replace("/", "_") / "inference_results_v5.0"  # the round is read from the path
    sysrel = Path(row.division, row.submitter, "systems", f"{row.system_folder}.json")
    system = STORED / sysrel if (STORED / sysrel).is_file() else next((STORED / "elsewhere").glob(f"*/{sysrel}"))
    for src, rel in (
        (
            STORED / folder / "performance/run_1/mlperf_log_summary.txt",
            folder / "performance/run_1/mlperf_log_summary.txt",
        ),
        (STORED / folder / "accuracy/accuracy.txt", folder / "accuracy/accuracy.txt"),
        (system, sysrel),
    ):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, base / rel)
    return base / folder


def test_every_v50_row_verifies_as_itself(tmp_path: Path) -> None:
    """Each indexed v5.0 result that has files, laid out as its repository has it, is recognised as its own record
    with the index's per-accelerator figure at +0.0%, its accuracy judged by exact_match and rougeL, every check
    passing. Only the summary is kept here, so no row PASSes: the one reason is the missing detail log (no detail log,
    no PASS; MLCommons' checker requires it, issue 36 item 3b). The rows left out are exactly the two table-only ones
    (Dell XE9680L H200 Offline and Server): no summary log of them is stored anywhere, so there is nothing to verify."""
    assert {r.key for r in _v50()} - {r.key for r in _v50_files()} == TABLE_ONLY_KEYS
    failures = []
    for r in _v50_files():
        v = verify_dir(_as_published(r, tmp_path))
        mine = v.record is not None and v.record.row.key == r.key and v.per_gpu == r.per_accelerator
        checks = {c.name for c in v.checks}
        failed = [c.name for c in v.checks if c.fails and c.ok is False]
        only_detail = len(v.reasons) == 1 and "no mlperf_log_detail.txt beside mlperf_log_summary.txt" in v.reasons[0]
        if not (
            mine
            and v.status == "NOT A REPRODUCTION"
            and only_detail
            and not failed
            and v.deviation_pct == 0.0
            and "accuracy exact_match" in checks
        ):
            failures.append(f"{r.key}: {v.status} {v.per_gpu} {v.deviation_pct} {v.reasons[:2]}")
    assert not failures, "\n".join(failures)


def test_stored_files_are_small_and_their_source_is_declared() -> None:
    """Only files verify reads are kept (summary log, accuracy.txt, system JSON), each under 1 MB, and SOURCE.json
    lists every one with the repository and commit it was read from."""
    doc = json.loads((STORED / "SOURCE.json").read_text())
    assert (doc["repository"], doc["commit"]) == MIRROR
    kept = sorted(str(p.relative_to(STORED)) for p in STORED.rglob("*") if p.is_file() and p.name != "SOURCE.json")
    tables = ["summary-table-405b.json", "results-table-405b.json"]
    listed = sorted([*doc["files"], *tables, "elsewhere/SOURCES.json", *_elsewhere_files()])
    assert kept == listed
    assert all(p.stat().st_size < 1_000_000 for p in STORED.rglob("*") if p.is_file())
    assert {Path(f).name for f in doc["files"]} == {"mlperf_log_summary.txt", "accuracy.txt"} | {
        Path(f).name for f in doc["files"] if "/systems/" in f
    }


def _elsewhere_files() -> list[str]:
    folders = json.loads((STORED / "elsewhere" / "SOURCES.json").read_text())["folders"]
    return [f"elsewhere/{name}/{f}" for name, src in folders.items() for f in src["files"]]


def test_sources_json_names_the_v50_mirror_and_the_other_rounds() -> None:
    doc = json.loads(SOURCES_JSON.read_text())
    (v50,) = [s for s in doc["sources"] if s["round"] == "v5.0" and s["file"] == "published-llama3.1-405b.csv"]
    assert (v50["repository"].split(" ")[0], v50["commit"], v50["results"]) == (*MIRROR, 34)
    assert (v50["table"]["repository"], v50["table"]["commit"]) == CM4MLPERF
    assert "mirror" in v50["how"]
    folders = json.loads((STORED / "elsewhere" / "SOURCES.json").read_text())["folders"]
    assert {(s["repository"], s["commit"]) for s in v50["system_jsons_from"]} == {
        (f["repository"], f["commit"]) for f in folders.values()
    }


def test_the_405b_benchmark_file_has_v50_with_the_v50_checkers_scenarios() -> None:
    """v5.0's submission checker (tag v5.0) required Offline and Server for llama3.1-405b and had no Interactive;
    the limits are the same as later rounds' (6,000/175 ms)."""
    bench = load_benchmark("llama3.1-405b")
    assert "v5.0" in bench.rounds
    in_v50 = sorted(n for n, s in bench.scenarios.items() if not s.rounds or "v5.0" in s.rounds)
    assert in_v50 == ["Offline", "Server"]
    server = bench.scenarios["Server"]
    assert (server.ttft_ms, server.tpot_ms) == (6000, 175)
    assert "checker-v50" in server.sources and "checker-v50" in bench.scenarios["Offline"].sources
    assert bench.sources["checker-v50"].commit == "dcd0c3eadb6189051ba0efe0a1f251a995fe8895"


@pytest.mark.parametrize("column", ["tokens_per_second", "exact_match", "rougeL", "tokens_per_sample"])
def test_the_rows_say_what_the_saved_files_say(column: str) -> None:
    """A cross-check that does not go through the build script: each figure of a v5.0 row is the one its saved
    summary log or accuracy.txt states, read here with plain string matching."""
    with INDEX_405B_CSV.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["round"] == "v5.0" and r["source_kind"] != "results-table-only"]
    assert len(rows) == 34
    for r in rows:
        folder = STORED / Path(r["source_path"]).parents[2]
        if column == "tokens_per_second":
            key = "Tokens per second:" if r["scenario"] == "Offline" else "Completed tokens per second:"
            text = (folder / "performance/run_1/mlperf_log_summary.txt").read_text()
            (line,) = [x for x in io.StringIO(text) if x.startswith(key)]
            assert float(line.split(":")[1]) == float(r[column])
        else:
            text = (folder / "accuracy/accuracy.txt").read_text()
            stated = float(text.split(f"'{column}': ")[1].split(",")[0].split("}")[0])
            assert round(stated, 6) == float(r[column])


def test_every_summary_table_entry_is_an_indexed_row() -> None:
    """The per-system summaries (README.md beside each system's results) read for the first 13 systems list their
    llama3_1-405b Server and Offline figures; each is an indexed row and agrees with its summary log."""
    table = json.loads((STORED / "summary-table-405b.json").read_text())
    rows = {str(Path(r.source_path).parents[2]): r for r in _v50_files()}
    assert len(table) == 26 and {e["Location"] for e in table} <= set(rows)
    for e in table:
        assert abs(rows[e["Location"]].tokens_per_second - e["Performance_Result"]) <= 0.02


# MLCommons' results export, whose v5.0 llama3.1-405b entries results-table-405b.json transcribes
CM4MLPERF = ("mlcommons/cm4mlperf-results", "9f4870796f1b79d071ef63061ade15e4d285b938")
# the two results the export lists whose files no stored copy holds (folder absent from the mirror): indexed from
# the export alone, source_kind results-table-only
NOT_STORED = {
    "closed/Dell/results/XE9680L_H200_SXM_141GBx8_TRT/llama3_1-405b/Offline",
    "closed/Dell/results/XE9680L_H200_SXM_141GBx8_TRT/llama3_1-405b/Server",
}
TABLE_ONLY_KEYS = {
    "v5.0/closed/Dell/XE9680L_H200_SXM_141GBx8_TRT/llama3.1-405b/Offline",
    "v5.0/closed/Dell/XE9680L_H200_SXM_141GBx8_TRT/llama3.1-405b/Server",
}


def _accuracy(text: str) -> dict[str, float]:
    """The export's Accuracy string: `ROUGEL: 21.6  exact_match: 90.1  TOKENS_PER_SAMPLE: 648.6`."""
    parts = text.split()
    return {k.rstrip(":"): float(v) for k, v in zip(parts[::2], parts[1::2], strict=True)}


def test_the_results_export_enumerates_v50_and_every_listed_result_is_indexed() -> None:
    """MLCommons' own v5.0 results export lists 36 llama3.1-405b results (closed: 15 systems x Offline and Server;
    open: 6 Offline, none Server). Every one is an indexed row: 34 read from stored files, each agreeing with its entry
    on tokens/s, accelerator count and the accuracy figures; Dell's XE9680L H200 pair, whose files no stored copy
    holds, from the entry alone."""
    table = json.loads((STORED / "results-table-405b.json").read_text())
    assert {e["version"] for e in table} == {"v5.0"} and {e["MlperfModel"] for e in table} == {"llama3.1-405b"}
    assert Counter((e["Division"], e["Scenario"]) for e in table) == {
        ("closed", "Offline"): 15,
        ("closed", "Server"): 15,
        ("open", "Offline"): 6,
    }
    rows = {str(Path(r.source_path).parents[2]): r for r in _v50_files()}
    listed = {e["Location"] for e in table}
    assert len(listed) == len(table) and set(rows) == listed - NOT_STORED and listed >= NOT_STORED
    assert {r.source_path for r in _v50() if r.table_only} == NOT_STORED
    for e in (e for e in table if e["Location"] in rows):
        row, acc = rows[e["Location"]], _accuracy(e["Accuracy"])
        assert abs(row.tokens_per_second - e["Result"]) <= max(0.02, 1e-4 * row.tokens_per_second), e["Location"]
        assert row.total_accelerators == e["accelerators_per_node"] * e["number_of_nodes"], e["Location"]
        assert row.accelerator_model_name == e["accelerator_model_name"], e["Location"]
        assert row.metrics["exact_match"] == round(acc["exact_match"], 6), e["Location"]
        assert row.metrics["rougeL"] == round(acc["ROUGEL"], 6), e["Location"]
        assert row.tokens_per_sample == acc["TOKENS_PER_SAMPLE"], e["Location"]


def test_the_two_results_without_files_are_indexed_from_the_export_alone_and_say_so() -> None:
    """No stored copy holds a summary log of Dell's XE9680L H200 pair; following the v6.1 precedent (fields of rows
    whose files were not read come from the official table), each is a row made from its export entry alone: every
    figure is the entry's, the fields a summary log would give are empty, and source/source_kind/summary_crosscheck
    name the export, so nothing claims a log that was never read."""
    table = {e["Location"]: e for e in json.loads((STORED / "results-table-405b.json").read_text())}
    only = [r for r in _v50() if r.table_only]
    assert {r.key for r in only} == TABLE_ONLY_KEYS
    for r in only:
        e = table[r.source_path]
        acc = _accuracy(e["Accuracy"])
        assert (r.source_repo, r.source_commit, r.source_kind) == (*CM4MLPERF, "results-table-only")
        assert r.summary_crosscheck == "table_only" and e["errors"] == 0
        assert (r.tokens_per_second, r.total_accelerators) == (e["Result"], 8) and r.per_accelerator == e["Result"] / 8
        assert (r.system_name, r.framework, r.accelerator_model_name) == (
            e["SystemName"],
            e["framework"],
            e["accelerator_model_name"],
        )
        assert r.metrics == {"exact_match": round(acc["exact_match"], 6), "rougeL": round(acc["ROUGEL"], 6)}
        assert r.tokens_per_sample == acc["TOKENS_PER_SAMPLE"] and r.gen_num is None
        assert (r.log_scenario, r.samples_per_second, r.min_duration_ms_summary, r.loadgen_version) == (
            "",
            None,
            None,
            None,
        )
    assert sorted(r.tokens_per_second for r in only) == [291.486, 559.205]
    readme = (REPO / "repro" / "data" / "published" / "README.md").read_text()
    assert "XE9680L_H200_SXM_141GBx8_TRT" in readme and "results-table-only" in readme


def test_the_show_view_says_a_table_only_row_has_no_log() -> None:
    """`repro published show` on a table-only row says where it was read and that no summary log is stored."""
    key = "v5.0/closed/Dell/XE9680L_H200_SXM_141GBx8_TRT/llama3.1-405b/Offline"
    res = cli("published", "show", key, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "no summary log stored" in res.output and "the official results table alone" in res.output
    assert "559.205" in res.output and "mlcommons/cm4mlperf-results" in res.output


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"log_scenario": "Offline"}, "no summary log"),
        ({"summary_crosscheck": "ok"}, "disagree"),
    ],
)
def test_a_table_only_row_that_claims_a_log_is_refused(tmp_path: Path, changes: dict[str, str], message: str) -> None:
    """The loader refuses a results-table-only row that carries a summary-log field or a crosscheck, and a row read
    from files that calls itself table-only: the row's provenance cannot say two things."""
    rows, fields = read_csv_rows(INDEX_405B_CSV)
    (at,) = [n for n, r in enumerate(rows) if r["source_kind"] == "results-table-only" and r["scenario"] == "Offline"]
    rows[at].update(changes)
    bad = write_csv_rows(tmp_path / "published-llama3.1-405b.csv", fields, rows)
    with pytest.raises(InputError, match=rf"line {at + 2}, .*{message}"):
        load_index_file(bad, SOURCES_JSON)
    rows[at].update({"log_scenario": "", "summary_crosscheck": "table_only"})
    rows[0]["summary_crosscheck"] = "table_only"
    write_csv_rows(bad, fields, rows)
    with pytest.raises(InputError, match="line 2, .*disagree"):
        load_index_file(bad, SOURCES_JSON)
