#!/usr/bin/env python3
"""Emit rows of repro/data/published/published-llama2-70b.csv for one MLPerf round, read from a copy of its results
repository: a checked-out snapshot, or a folder of files saved one by one from a stored-file index.

The method is the index's own (see docs in repro/data/published/README.md): one row per
`<division>/<submitter>/results/<system>/llama2-70b-99[.9]/<Scenario>/performance/run_1/mlperf_log_summary.txt`;
scenario from the folder; tokens/s and samples/s from the summary log (Offline: `Tokens per second`, Server and
Interactive: the first `Completed tokens per second`); system fields from
`<division>/<submitter>/systems/<system>.json`;
accuracy from `<Scenario>/accuracy/accuracy.txt`. Where the round's results table is given (`--table`, a JSON list of
its entries with `Location`), each row is joined to it on Location for the result ID (when the table has one) and the
`summary_crosscheck`; a row whose system JSON or accuracy.txt the copy lacks takes those fields from the table entry
and says so in `source_kind`.

    python scripts/build_published_index.py SNAPSHOT --round v6.1 --repo intel-ai-tce/inference_results_v6.1 \
        --commit SHA --kind stored-file-index --table SNAPSHOT/summary-table-llama2.json >> rows.csv
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import re
import sys
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
BENCHMARKS = {"llama2-70b-99": "99", "llama2-70b-99.9": "99.9"}
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


def parse_accuracy(text: str) -> dict[str, Any]:
    """The results dict of accuracy.txt (Python literal; numpy reprs such as np.int64(1) are unwrapped)."""
    m = re.search(r"\{[^{}]*'rouge1'[^{}]*\}", text)
    if not m:
        return {}
    literal = re.sub(r"np\.\w+\(([^()]*)\)", r"\1", m.group(0))
    return dict(ast.literal_eval(literal))


def parse_table_accuracy(text: str) -> dict[str, Any]:
    """The results table's `Accuracy` string, e.g. `ROUGE1: 44.5  ROUGE2: 22.1  TOKENS_PER_SAMPLE: 284.1`."""
    pairs = dict(re.findall(rf"(\w+):\s*{NUMBER}", text))
    names = {"ROUGE1": "rouge1", "ROUGE2": "rouge2", "ROUGEL": "rougeL", "TOKENS_PER_SAMPLE": "tokens_per_sample"}
    return {names[k]: float(v) for k, v in pairs.items() if k in names}


def _count(value: Any) -> int:
    return int(str(value).strip())


def _crosscheck(tps: float, total: int, nodes: int, entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "not_in_table"
    problems = []
    table_tps = float(entry["Result"])
    if abs(table_tps - tps) > max(0.02, 1e-4 * abs(tps)):
        problems.append(f"tokens/s {tps:g} != table {table_tps:g}")
    if "total_accelerators" in entry and _count(entry["total_accelerators"]) != total:
        problems.append(f"accelerators {total} != table {entry['total_accelerators']}")
    if "number_of_nodes" in entry and _count(entry["number_of_nodes"]) != nodes:
        problems.append(f"nodes {nodes} != table {entry['number_of_nodes']}")
    return "; ".join(problems) or "ok"


def build_rows(
    root: Path, round_: str, repo: str, commit: str, kind: str, table: list[dict[str, Any]] | None
) -> list[dict[str, str]]:
    by_location = {e["Location"].removeprefix("./").removesuffix("/"): e for e in table or []}
    rows = []
    for summary in sorted(root.glob("*/*/results/*/*/*/performance/run_1/mlperf_log_summary.txt")):
        rel = summary.relative_to(root)
        division, submitter, _, system, model, scenario_folder = rel.parts[:6]
        scenario = SCENARIOS.get(scenario_folder.lower())
        if division not in ("closed", "open") or model not in BENCHMARKS or scenario is None:
            continue
        result_dir = rel.parent.parent.parent
        entry = by_location.get(f"{result_dir}/performance/run_1")
        found = parse_summary(summary.read_text(errors="replace"))
        offline = scenario == "Offline"
        tps = found["offline_tokens" if offline else "server_tokens"]
        sps = found.get("offline_samples" if offline else "server_samples", "")

        from_table = []
        system_json = root / division / submitter / "systems" / f"{system}.json"
        if system_json.is_file():
            sysinfo = json.loads(system_json.read_text())
        elif entry is not None:
            sysinfo = {k: entry[{"system_name": "SystemName"}.get(k, k)] for k in SYSTEM_FIELDS}
            from_table.append("systems")
        else:
            raise SystemExit(f"{rel}: no system JSON and no table entry")
        accuracy_txt = root / result_dir / "accuracy" / "accuracy.txt"
        if accuracy_txt.is_file():
            acc = parse_accuracy(accuracy_txt.read_text(errors="replace"))
        elif entry is not None:
            acc = parse_table_accuracy(entry.get("Accuracy", ""))
            from_table.append("accuracy")
        else:
            acc = {}

        apn, nodes = _count(sysinfo["accelerators_per_node"]), _count(sysinfo["number_of_nodes"])
        total = apn * nodes
        row = dict.fromkeys(COLUMNS, "")
        row.update(
            round=round_,
            division=division,
            submitter=submitter,
            system_folder=system,
            system_name=sysinfo["system_name"],
            accelerator_model_name=sysinfo["accelerator_model_name"],
            accelerators_per_node=str(sysinfo["accelerators_per_node"]),
            number_of_nodes=str(sysinfo["number_of_nodes"]),
            total_accelerators=str(total),
            host_processor_model_name=sysinfo.get("host_processor_model_name", ""),
            framework=sysinfo.get("framework", ""),
            benchmark=BENCHMARKS[model],
            model_folder=model,
            scenario=scenario,
            scenario_folder=scenario_folder,
            log_scenario=found.get("log_scenario", ""),
            result_validity=found.get("result_validity", ""),
            tokens_per_second=_num(tps),
            tokens_per_second_per_accelerator=_num(str(float(tps) / total)),
            samples_per_second=_num(sps) if sps else "",
            min_duration_ms_summary=found.get("min_duration", ""),
            source_repo=repo,
            source_commit=commit,
            source_path=str(rel),
            source_kind=kind + ("+summary-table(" + ",".join(from_table) + ")" if from_table else ""),
        )
        for key in ("rouge1", "rouge2", "rougeL", "tokens_per_sample", "gen_num"):
            if key in acc:
                row[key] = _num(str(acc[key]))
        if table is None:
            row["summary_crosscheck"] = "no_table"
        else:
            row["summary_crosscheck"] = _crosscheck(float(tps), total, nodes, entry)
            if entry is not None:
                row["result_id"] = entry.get("ID") or ""
                row["summary_tokens_per_second"] = _num(str(entry["Result"]))
                row["summary_accelerators"] = str(entry.get("total_accelerators", entry.get("a#", "")))
                row["summary_nodes"] = str(entry.get("number_of_nodes", entry.get("Nodes", "")))
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="the round's results tree (snapshot or saved stored files)")
    ap.add_argument("--round", required=True, help="e.g. v6.1")
    ap.add_argument("--repo", required=True, help="owner/name the files come from")
    ap.add_argument("--commit", required=True, help="full commit hash the files come from")
    ap.add_argument("--kind", default="git-snapshot", help="git-snapshot or stored-file-index")
    ap.add_argument("--table", type=Path, help="the round's results table as a JSON list of entries with Location")
    ap.add_argument("--header", action="store_true", help="print the CSV header first")
    args = ap.parse_args(argv)
    if not re.fullmatch(r"[0-9a-f]{40}", args.commit):
        ap.error(f"--commit {args.commit!r} is not a full 40-character commit hash")
    table = json.loads(args.table.read_text()) if args.table else None
    rows = build_rows(args.root, args.round, args.repo, args.commit, args.kind, table)
    out = csv.DictWriter(sys.stdout, fieldnames=COLUMNS, lineterminator="\n")
    if args.header:
        out.writeheader()
    out.writerows(rows)
    print(f"{len(rows)} rows from {args.root}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
