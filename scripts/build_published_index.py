#!/usr/bin/env python3
"""Emit rows of the published-results index (repro/data/published/published-<benchmark>.csv) for one MLPerf round,
read from a copy of its results repository: a checked-out snapshot, or a folder of files saved one by one from a
stored-file index. `--benchmark` picks the model family: llama2-70b (default; published-llama2-70b.csv) or
llama3.1-405b (published-llama3.1-405b.csv, whose accuracy columns are exact_match and rougeL).

The method is the index's own (see docs in repro/data/published/README.md): one row per
`<division>/<submitter>/results/<system>/<benchmark folder>/<Scenario>/performance/run_1/mlperf_log_summary.txt`;
scenario from the folder; tokens/s and samples/s from the summary log (Offline: `Tokens per second`, Server and
Interactive: the first `Completed tokens per second`); system fields from
`<division>/<submitter>/systems/<system>.json`;
accuracy from `<Scenario>/accuracy/accuracy.txt`; `min_duration_ms_detail` and `loadgen_version` from
`performance/run_1/mlperf_log_detail.txt` where the copy has it. Where the round's results table is given (`--table`:
the round's own `summary_results.json`, or a JSON list of its entries with `Location`), each row is joined to it on
Location for the result ID (when the table has one) and the `summary_crosscheck`; a folder whose name is not the
benchmark's is kept when the table lists it under the benchmark; a row whose system JSON or accuracy.txt the copy lacks
takes those fields from the table entry and says so in `source_kind`. MLCommons' cm4mlperf-results export is such a
list too: its `MlperfModel` names the benchmark, `Model` the folder, and `accelerators_per_node` x `number_of_nodes`
the accelerator count. With `--table-only-rows`, a result the table lists and no stored copy holds a summary log
for becomes a row read from the table alone (`source_kind` results-table-only; the summary-log fields empty).

    python scripts/build_published_index.py SNAPSHOT --round v6.1 --repo intel-ai-tce/inference_results_v6.1 \
        --commit SHA --kind stored-file-index --table SNAPSHOT/summary-table-llama2.json >> rows.csv
    python scripts/build_published_index.py SNAPSHOT --benchmark llama3.1-405b --round v5.1 \
        --repo mlcommons/inference_results_v5.1 --commit SHA --table SNAPSHOT/summary_results.json >> rows.csv
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

COLUMNS = [
    "round",
    "division",
    "submitter",
    "system_folder",
    "system_name",
    "accelerator_model_name",
    "accelerators_per_node",
    "number_of_nodes",
    "total_accelerators",
    "host_processor_model_name",
    "framework",
    "benchmark",
    "model_folder",
    "scenario",
    "scenario_folder",
    "log_scenario",
    "result_validity",
    "tokens_per_second",
    "tokens_per_second_per_accelerator",
    "samples_per_second",
    "min_duration_ms_detail",
    "min_duration_ms_summary",
    "loadgen_version",
    "rouge1",
    "rouge2",
    "rougeL",
    "tokens_per_sample",
    "gen_num",
    "result_id",
    "summary_tokens_per_second",
    "summary_accelerators",
    "summary_nodes",
    "summary_crosscheck",
    "source_repo",
    "source_commit",
    "source_path",
    "source_kind",
]
SCENARIOS = {"offline": "Offline", "server": "Server", "interactive": "Interactive"}
# Per model family: the benchmark column's value for each benchmark name (results folder names are compared with
# `_` read as `.`, so Cisco's `llama3_1-405b` is llama3.1-405b) and the accuracy columns that replace rouge1..rougeL.
FAMILIES: dict[str, dict[str, Any]] = {
    "llama2-70b": {
        "benchmarks": {"llama2-70b-99": "99", "llama2-70b-99.9": "99.9"},
        # v5.0 only: the separate llama2-70b-interactive benchmark, which later rounds made llama2-70b's Interactive
        # scenario; its Server runs are indexed as Interactive (as v5.1 writes them), its Offline runs as Offline
        "interactive": {"llama2-70b-interactive-99": "99", "llama2-70b-interactive-99.9": "99.9"},
        "metrics": ["rouge1", "rouge2", "rougeL"],
        "folders": r"llama2-70b",
    },
    "llama3.1-405b": {
        "benchmarks": {"llama3.1-405b": "llama3.1-405b"},
        "metrics": ["exact_match", "rougeL"],
        "folders": r"llama3[._]1-405b",
    },
    # DeepSeek-R1: one accuracy column; accuracy.txt's `num-samples` (the scored sample count, mlcommons/inference
    # @b66003e1 language/deepseek-r1/eval_accuracy.py) is the gen_num column, as Llama's `gen_num` is
    "deepseek-r1": {
        "benchmarks": {"deepseek-r1": "deepseek-r1"},
        "metrics": ["exact_match"],
        "folders": r"deepseek-r1",
        "count": "num-samples",
    },
}
BENCHMARKS = FAMILIES["llama2-70b"]["benchmarks"]


def columns(family: str) -> list[str]:
    """The index's columns for one model family: the accuracy columns (rouge1..rougeL) are the family's metrics."""
    at = COLUMNS.index("rouge1")
    return COLUMNS[:at] + FAMILIES[family]["metrics"] + COLUMNS[COLUMNS.index("rougeL") + 1 :]


SYSTEM_FIELDS = (
    "system_name",
    "accelerator_model_name",
    "accelerators_per_node",
    "number_of_nodes",
    "host_processor_model_name",
    "framework",
)
NUMBER = r"([-+]?\d[\d.]*(?:[eE][-+]?\d+)?)"


def _num(text: str) -> str:
    """A number as the index writes it: integral values without a trailing .0, others to 6 decimals."""
    value = float(text)
    return str(int(value)) if value.is_integer() else f"{round(value, 6):.6f}".rstrip("0").rstrip(".")


def parse_summary(text: str) -> dict[str, str]:
    """The fields the index takes from mlperf_log_summary.txt; the first matching line wins."""
    patterns = {
        "log_scenario": r"^Scenario\s*:\s*(\S+)",
        "result_validity": r"^Result is\s*:\s*(\S+)",
        "offline_tokens": rf"^Tokens per second\s*:\s*{NUMBER}",
        "offline_samples": rf"^Samples per second\s*:\s*{NUMBER}",
        "server_tokens": rf"^Completed tokens per second\s*:\s*{NUMBER}",
        "server_samples": rf"^Completed samples per second\s*:\s*{NUMBER}",
        "min_duration": r"^min_duration \(ms\)\s*:\s*(\d+)",
    }
    found: dict[str, str] = {}
    for line in text.splitlines():
        for key, pattern in patterns.items():
            if key not in found and (m := re.match(pattern, line.strip())):
                found[key] = m.group(1)
    return found


def parse_detail(text: str) -> dict[str, str]:
    """loadgen_version and effective_min_duration_ms of mlperf_log_detail.txt (`:::MLLOG {json}` lines)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith(":::MLLOG "):
            continue
        try:
            record = json.loads(line[len(":::MLLOG ") :])
        except ValueError:
            continue
        if record.get("key") in ("loadgen_version", "effective_min_duration_ms"):
            found.setdefault(record["key"], str(record.get("value", "")))
    return found


def parse_accuracy(text: str, metric: str = "rouge1") -> dict[str, Any]:
    """The results dict of accuracy.txt (Python literal; numpy reprs such as np.int64(1) are unwrapped)."""
    m = re.search(rf"\{{[^{{}}]*'{metric}'[^{{}}]*\}}", text)
    if not m:
        return {}
    literal = re.sub(r"np\.\w+\(([^()]*)\)", r"\1", m.group(0))
    return dict(ast.literal_eval(literal))


def parse_table_accuracy(text: str, bare: str | None = None) -> dict[str, Any]:
    """The results table's `Accuracy` string, e.g. `ROUGE1: 44.5  ROUGE2: 22.1  TOKENS_PER_SAMPLE: 284.1`. A bare
    number (v6.1's summary.csv writes the preview DeepSeek-R1 results' accuracy so) is the metric `bare` names."""
    if bare is not None and re.fullmatch(NUMBER, text.strip()):
        return {bare: float(text)}
    pairs = dict(re.findall(rf"(\w+):\s*{NUMBER}", text))
    names = {
        "ROUGE1": "rouge1",
        "ROUGE2": "rouge2",
        "ROUGEL": "rougeL",
        "TOKENS_PER_SAMPLE": "tokens_per_sample",
        "exact_match": "exact_match",
    }
    return {names[k]: float(v) for k, v in pairs.items() if k in names}


def read_table(path: Path) -> list[dict[str, Any]]:
    """A results table: summary_results.json / summary.json (a JSON list), or a CSV with the same columns (v6.1's
    summary.csv, every value a string, read as written)."""
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    return json.loads(path.read_text())


def _count(value: Any) -> int:
    return int(str(value).strip())


def _crosscheck(tps: float, total: int, nodes: int, entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "not_in_table"
    problems = []
    table_tps = float(entry["Result"] if "Result" in entry else entry["Performance_Result"])
    if abs(table_tps - tps) > max(0.02, 1e-4 * abs(tps)):
        problems.append(f"tokens/s {tps:g} != table {table_tps:g}")
    if "total_accelerators" in entry and _count(entry["total_accelerators"]) != total:
        problems.append(f"accelerators {total} != table {entry['total_accelerators']}")
    if "total_accelerators" not in entry and "accelerators_per_node" in entry and _table_total(entry) != total:
        problems.append(f"accelerators {total} != table {_table_total(entry)}")
    if "number_of_nodes" in entry and _count(entry["number_of_nodes"]) != nodes:
        problems.append(f"nodes {nodes} != table {entry['number_of_nodes']}")
    if "total_accelerators" not in entry and "a#" in entry and _count(entry["a#"]) != total:
        per_node = _count(entry["a#"]) == total // nodes and _count(entry.get("Nodes", nodes)) == nodes
        problems.append(
            f"table a#={entry['a#']} is per-node (json {total // nodes}/node x {nodes} nodes)"
            if per_node
            else f"accelerators {total} != table a#={entry['a#']}"
        )
    if "number_of_nodes" not in entry and "Nodes" in entry and _count(entry["Nodes"]) != nodes:
        problems.append(f"nodes {nodes} != table Nodes={entry['Nodes']}")
    return "; ".join(problems) or "ok"


def _table_total(entry: dict[str, Any]) -> int:
    """A cm4mlperf-results entry's accelerator count: per node x nodes (its `number_of_nodes` defaults to 1)."""
    return _count(entry["accelerators_per_node"]) * _count(entry.get("number_of_nodes", 1))


def _table_accelerators(entry: dict[str, Any]) -> str:
    """The count the table states, as it states it: total_accelerators (v6.1), per node x nodes (cm4mlperf-results),
    else `a#` (summary_results.json; per node in multi-node results)."""
    if "total_accelerators" in entry:
        return str(entry["total_accelerators"])
    if "accelerators_per_node" in entry:
        return str(_table_total(entry))
    return str(entry.get("a#", ""))


def _location(entry: dict[str, Any]) -> str:
    """A table entry's result folder as `<...>/<Scenario>/performance/run_1` (v5.1 writes it without the tail, v6.0
    with `./` before it)."""
    loc = str(entry["Location"]).removeprefix("./").rstrip("/")
    return loc if loc.endswith("/performance/run_1") else f"{loc}/performance/run_1"


def _benchmark(model: str, family: str, entry: dict[str, Any] | None) -> str | None:
    """The benchmark column of a results folder: by its name, else by the table's Model for its Location."""
    names = FAMILIES[family]["benchmarks"] | FAMILIES[family].get("interactive", {})
    value = names.get(model) or names.get(model.replace("_", "."))
    if value is None and entry is not None:  # summary_results.json: Model; cm4mlperf-results: MlperfModel
        value = names.get(str(entry.get("Model", ""))) or names.get(str(entry.get("MlperfModel", "")))
    return value


def _scenario(folder: str, model: str, family: str, entry: dict[str, Any] | None) -> str | None:
    """The scenario of a results folder: by its name; a Server run of v5.0's llama2-70b-interactive benchmark (by
    folder name, or the table's MlperfModel) is the Interactive scenario later rounds give that benchmark."""
    scenario = SCENARIOS.get(folder.lower())
    interactive = FAMILIES[family].get("interactive", {})
    named = model in interactive or (entry is not None and str(entry.get("MlperfModel", "")) in interactive)
    return "Interactive" if scenario == "Server" and named else scenario


def build_rows(
    root: Path,
    round_: str,
    repo: str,
    commit: str,
    kind: str,
    table: list[dict[str, Any]] | None,
    family: str = "llama2-70b",
    elsewhere: Path | None = None,
) -> list[dict[str, str]]:
    by_location = {_location(e): e for e in table or []}
    other_sources = _elsewhere_sources(elsewhere)
    metrics = FAMILIES[family]["metrics"]
    rows = []
    summaries = root.glob("*/*/results/*/*/*/performance/run_1/mlperf_log_summary.txt")
    for summary in sorted(summaries, key=lambda p: [part.lower() for part in p.relative_to(root).parts]):
        rel = summary.relative_to(root)
        division, submitter, _, system, model, scenario_folder = rel.parts[:6]
        result_dir = rel.parent.parent.parent
        entry = by_location.get(f"{result_dir}/performance/run_1")
        scenario = _scenario(scenario_folder, model, family, entry)
        benchmark = _benchmark(model, family, entry)
        if division not in ("closed", "open") or benchmark is None or scenario is None:
            continue
        found = parse_summary(summary.read_text(errors="replace"))
        offline = scenario == "Offline"  # Server and Interactive logs print the same lines
        tps = found["offline_tokens" if offline else "server_tokens"]
        sps = found.get("offline_samples" if offline else "server_samples", "")

        from_table = []
        system_json = root / division / submitter / "systems" / f"{system}.json"
        other = _system_elsewhere(elsewhere, other_sources, f"{division}/{submitter}/systems/{system}.json")
        if system_json.is_file():
            sysinfo = json.loads(system_json.read_text())
        elif other is not None:  # that round's JSON: only the hardware (count, accelerator), not its software
            found_elsewhere = json.loads(other[0].read_text())
            sysinfo = {k: found_elsewhere[k] for k in COUNT_FIELDS} | {"system_name": ""}
        elif entry is not None:
            sysinfo = {k: entry[{"system_name": "SystemName"}.get(k, k)] for k in SYSTEM_FIELDS}
            from_table.append("systems")
        else:
            raise SystemExit(f"{rel}: no system JSON and no table entry")
        accuracy_txt = root / result_dir / "accuracy" / "accuracy.txt"
        if accuracy_txt.is_file():
            acc = parse_accuracy(accuracy_txt.read_text(errors="replace"), metrics[0])
            if (count := FAMILIES[family].get("count")) and count in acc:
                acc["gen_num"] = acc.pop(count)
        elif entry is not None:
            acc = parse_table_accuracy(entry.get("Accuracy", ""), _bare(family))
            from_table.append("accuracy")
        else:
            acc = {}

        detail_log = summary.with_name("mlperf_log_detail.txt")
        detail = parse_detail(detail_log.read_text(errors="replace")) if detail_log.is_file() else {}
        apn, nodes = _count(sysinfo["accelerators_per_node"]), _count(sysinfo["number_of_nodes"])
        total = apn * nodes
        row = _result_row(family, (round_, division, submitter, system, model, scenario_folder), sysinfo, total)
        row.update(
            benchmark=benchmark,
            scenario=scenario,
            log_scenario=found.get("log_scenario", ""),
            result_validity=found.get("result_validity", ""),
            tokens_per_second=_num(tps),
            tokens_per_second_per_accelerator=_num(str(float(tps) / total)),
            samples_per_second=_num(sps) if sps else "",
            min_duration_ms_detail=detail.get("effective_min_duration_ms", ""),
            min_duration_ms_summary=found.get("min_duration", ""),
            loadgen_version=detail.get("loadgen_version", ""),
            source_repo=repo,
            source_commit=commit,
            source_path=str(rel),
            source_kind=kind
            + (f"+{other[1]}" if other is not None and not system_json.is_file() else "")
            + ("+summary-table(" + ",".join(from_table) + ")" if from_table else ""),
        )
        for key in (*metrics, "tokens_per_sample", "gen_num"):
            if key in acc:
                row[key] = _num(str(acc[key]))
        if table is None:
            row["summary_crosscheck"] = "no_table"
        else:
            row["summary_crosscheck"] = _crosscheck(float(tps), total, nodes, entry)
            if entry is not None:
                row["result_id"] = entry.get("ID") or ""
                row["summary_tokens_per_second"] = _num(str(entry.get("Result", entry.get("Performance_Result"))))
                row["summary_accelerators"] = _table_accelerators(entry)
                row["summary_nodes"] = str(entry.get("number_of_nodes", entry.get("Nodes", "")))
        rows.append(row)
    return rows


def _bare(family: str) -> str | None:
    """The metric a bare accuracy number of the results table is: a family with one accuracy column's."""
    metrics = FAMILIES[family]["metrics"]
    return metrics[0] if len(metrics) == 1 else None


# source_kind of a row made from the results table alone (no summary log stored anywhere), and its crosscheck value
TABLE_ONLY = "results-table-only"


def table_only_rows(
    roots: list[Path], table: list[dict[str, Any]], round_: str, repo: str, commit: str, family: str
) -> list[dict[str, str]]:
    """`--table-only-rows`: a row for each table entry of the family whose results folder has no summary log under
    any ROOT, every field from the entry (the official table: tokens/s, accelerator count, system and accuracy fields);
    the summary-log fields stay empty, `source_*` name the table, and `source_kind`/`summary_crosscheck` say it."""
    metrics = FAMILIES[family]["metrics"]
    rows = []
    for entry in table:
        loc = _location(entry)
        if any((root / loc / "mlperf_log_summary.txt").is_file() for root in roots):
            continue
        division, submitter, _, system, model, scenario_folder = loc.split("/")[:6]
        benchmark, scenario = _benchmark(model, family, entry), _scenario(scenario_folder, model, family, entry)
        if benchmark is None or scenario is None:
            continue
        if str(entry.get("errors")) != "0":  # summary.json: 0; summary.csv: "0"
            raise SystemExit(f"{loc}: a table-only row needs the entry's `errors: 0` (a result the round accepted)")
        apn, nodes = _count(entry["accelerators_per_node"]), _count(entry.get("number_of_nodes", 1))
        tps = str(entry["Result"])
        acc = parse_table_accuracy(str(entry.get("Accuracy", "")), _bare(family))
        sysinfo = {
            "system_name": entry.get("SystemName", ""),
            "accelerator_model_name": entry["accelerator_model_name"],
            "accelerators_per_node": apn,
            "number_of_nodes": nodes,
        } | {k: entry.get(k, "") for k in ("host_processor_model_name", "framework")}
        row = _result_row(family, (round_, division, submitter, system, model, scenario_folder), sysinfo, apn * nodes)
        row.update(
            benchmark=benchmark,
            scenario=scenario,
            result_validity="VALID",
            tokens_per_second=_num(tps),
            tokens_per_second_per_accelerator=_num(str(float(tps) / (apn * nodes))),
            summary_tokens_per_second=_num(tps),
            summary_accelerators=_table_accelerators(entry),
            summary_nodes=str(nodes),
            summary_crosscheck="table_only",
            source_repo=repo,
            source_commit=commit,
            source_path=loc.removesuffix("/performance/run_1"),
            source_kind=TABLE_ONLY,
        )
        for key in (*metrics, "tokens_per_sample"):
            if key in acc:
                row[key] = _num(str(acc[key]))
        rows.append(row)
    return rows


def _result_row(family: str, where: tuple[str, ...], sysinfo: dict[str, Any], total: int) -> dict[str, str]:
    """A row's columns that say where the result is and on what system, read from a system JSON or a table entry
    alike (`where`: round, division, submitter, system folder, model folder, scenario folder); the rest empty."""
    round_, division, submitter, system, model, scenario_folder = where
    row = dict.fromkeys(columns(family), "")
    row.update(
        round=round_,
        division=division,
        submitter=submitter,
        system_folder=system,
        system_name=str(sysinfo["system_name"]),
        accelerator_model_name=str(sysinfo["accelerator_model_name"]),
        accelerators_per_node=str(sysinfo["accelerators_per_node"]),
        number_of_nodes=str(sysinfo["number_of_nodes"]),
        total_accelerators=str(total),
        host_processor_model_name=str(sysinfo.get("host_processor_model_name", "")),
        framework=str(sysinfo.get("framework", "")),
        model_folder=model,
        scenario_folder=scenario_folder,
    )
    return row


def _order(row: dict[str, str]) -> list[str]:
    """Rows sort by their summary log's path, parts compared without case; a table-only row by where its log would
    be."""
    path = row["source_path"]
    if row["source_kind"] == TABLE_ONLY:
        path += "/performance/run_1/mlperf_log_summary.txt"
    return [part.lower() for part in Path(path).parts]


# What a system JSON read from another round gives a row: the accelerator and its count, never the software.
COUNT_FIELDS = ("accelerator_model_name", "accelerators_per_node", "number_of_nodes")


def _elsewhere_sources(elsewhere: Path | None) -> dict[str, str]:
    """`--systems-elsewhere DIR`: its SOURCES.json maps each subfolder to the repository and full commit its files
    were read from and their kind: `system-json` (the same system's JSON of another round, verbatim) or
    `summary-readme` (the count transcribed from the round's own generated summary of the system, README.md /
    summary.html); returns subfolder -> the source_kind suffix naming it."""
    if elsewhere is None:
        return {}
    doc = json.loads((elsewhere / "SOURCES.json").read_text())
    out = {}
    for folder, src in doc["folders"].items():
        if not re.fullmatch(r"[0-9a-f]{40}", str(src.get("commit", ""))):
            raise SystemExit(f"{elsewhere}/SOURCES.json: {folder}: commit is not a full 40-character hash")
        kind = src.get("kind", "system-json")
        if kind not in ("system-json", "summary-readme"):
            raise SystemExit(f"{elsewhere}/SOURCES.json: {folder}: kind {kind!r} is not system-json or summary-readme")
        out[folder] = f"{kind}-from({src['repository']}@{src['commit']})"
    return out


def _system_elsewhere(elsewhere: Path | None, sources: dict[str, str], rel: str) -> tuple[Path, str] | None:
    """The same system's JSON read from another stored repository or round (the copy in ROOT lacks it): the first
    SOURCES.json folder, in sorted order, holding `rel`, with where it came from. Only COUNT_FIELDS are taken."""
    if elsewhere is None:
        return None
    for folder in sorted(sources):
        path = elsewhere / folder / rel
        if path.is_file():
            return path, sources[folder]
    return None


def extract(git_dir: Path, family: str, into: Path) -> str:
    """The files the index reads for one family, taken from a fetched repository's HEAD (`git archive`, read-only)
    into `into`; returns HEAD's commit hash."""

    def git(*args: str) -> bytes:
        return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True, capture_output=True).stdout

    commit = git("rev-parse", "HEAD").decode().strip()
    folders = FAMILIES[family]["folders"]
    wanted = re.compile(
        rf"^(summary_results\.json|(closed|open)/[^/]+/systems/[^/]+\.json|"
        rf"(closed|open)/[^/]+/results/[^/]+/[^/]*{folders}[^/]*/[^/]+/"
        r"(performance/run_1/mlperf_log_(summary|detail)\.txt|accuracy/accuracy\.txt))$",
        re.I,
    )
    paths = [p for p in git("ls-tree", "-r", "--name-only", "HEAD").decode().splitlines() if wanted.match(p)]
    with tempfile.TemporaryFile() as tar:
        tar.write(git("archive", "--format=tar", "HEAD", "--", *paths))
        tar.seek(0)
        with tarfile.open(fileobj=tar) as archive:
            archive.extractall(into, filter="data")
    return commit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "root",
        type=Path,
        nargs="+",
        help="the round's results tree (snapshot or saved stored files); several folders of files saved from the same "
        "repository and commit are read as one tree",
    )
    ap.add_argument("--git-dir", action="store_true", help="ROOT is a fetched repository's git directory: read HEAD")
    ap.add_argument("--benchmark", default="llama2-70b", choices=sorted(FAMILIES), help="model family to index")
    ap.add_argument("--round", required=True, help="e.g. v6.1")
    ap.add_argument("--repo", required=True, help="owner/name the files come from")
    ap.add_argument("--commit", required=True, help="full commit hash the files come from")
    ap.add_argument("--kind", default="git-snapshot", help="git-snapshot or stored-file-index")
    ap.add_argument(
        "--table",
        type=Path,
        help="the round's results table: a JSON list of entries with Location, or a CSV of them (v6.1's summary.csv)",
    )
    ap.add_argument(
        "--systems-elsewhere",
        type=Path,
        help="folder of system JSONs read from other stored repositories or rounds (owner+name/<division>/<submitter>/"
        "systems/<system>.json, with SOURCES.json): used where ROOT lacks a system's JSON, named in source_kind",
    )
    ap.add_argument(
        "--table-only-rows",
        action="store_true",
        help="also write a row for each --table entry with no summary log under ROOT, from the entry alone "
        f"(source_kind {TABLE_ONLY}, summary_crosscheck table_only)",
    )
    ap.add_argument("--table-repo", help="OWNER/NAME@COMMIT the --table was read from (the table-only rows' source)")
    ap.add_argument("--header", action="store_true", help="print the CSV header first")
    ap.add_argument("--crlf", action="store_true", help="end rows with CRLF (the v4.1, v5.1 and v6.0 70B rows do)")
    args = ap.parse_args(argv)
    if not re.fullmatch(r"[0-9a-f]{40}", args.commit):
        ap.error(f"--commit {args.commit!r} is not a full 40-character commit hash")
    if args.git_dir and len(args.root) > 1:
        ap.error("--git-dir reads one repository")
    with tempfile.TemporaryDirectory() as tmp:
        roots = args.root
        if args.git_dir:
            roots = [Path(tmp)]
            head = extract(args.root[0], args.benchmark, roots[0])
            if head != args.commit:
                ap.error(f"{args.root[0]}: HEAD is {head}, not --commit {args.commit}")
        table_path = roots[0] / args.table if args.git_dir and args.table else args.table
        table = read_table(table_path) if table_path else None
        rows = []
        for root in roots:
            rows += build_rows(
                root, args.round, args.repo, args.commit, args.kind, table, args.benchmark, args.systems_elsewhere
            )
        if len(roots) > 1:
            seen = Counter(r["source_path"] for r in rows)
            if dupes := sorted(k for k, n in seen.items() if n > 1):
                ap.error(f"a result is in more than one ROOT: {dupes[0]}")
            rows.sort(key=_order)
        if args.table_only_rows:
            if table is None or not args.table_repo or not re.fullmatch(r"[^@\s]+@[0-9a-f]{40}", args.table_repo):
                ap.error("--table-only-rows needs --table and --table-repo OWNER/NAME@FULL_COMMIT")
            repo, commit = args.table_repo.split("@")
            rows = sorted(rows + table_only_rows(roots, table, args.round, repo, commit, args.benchmark), key=_order)
    out = csv.DictWriter(sys.stdout, fieldnames=columns(args.benchmark), lineterminator="\r\n" if args.crlf else "\n")
    if args.header:
        out.writeheader()
    out.writerows(rows)
    print(f"{len(rows)} rows from {', '.join(map(str, args.root))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
