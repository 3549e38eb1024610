#!/usr/bin/env python3
"""Build repro/data/published/settings.json: the effective LoadGen settings, software stack and accuracy figures of
published results, read from a git mirror of an MLCommons results repository (no work tree needed).

`repro explain` diffs a run against these. Only settings, results and stack fields are kept (the 160 KB sample
index of a detail log is dropped), so the shipped file stays small.

    python scripts/extract_published_settings.py --git-dir MIRROR --repo mlcommons/inference_results_v5.1 \
        --commit SHA --round v5.1 closed/Azure/results/ND_GB200_v6/llama2-70b-99/Offline ...

`--root DIR` reads the same files from a folder saved file by file from a stored copy of that repository and commit
(tests/fixtures/published/v6.1_Azure_deepseek-r1: Azure's v6.1 DeepSeek-R1 results), instead of a git mirror.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "repro" / "data" / "published" / "settings.json"
DROP = {"loaded_qsl_set", "loadgen_file_sha1", "loadgen_git_log_message", "test_datetime"}
KEEP_PREFIX = ("requested_", "effective_", "generated_", "result_")
KEEP = {"loadgen_version", "sut_name", "num_errors", "early_stopping_met"}
STACK = (
    "submitter",
    "system_name",
    "accelerator_model_name",
    "accelerators_per_node",
    "number_of_nodes",
    "accelerator_memory_capacity",
    "host_processor_model_name",
    "framework",
    "other_software_stack",
    "operating_system",
    "sw_notes",
    "hw_notes",
)


def show(git_dir: str, commit: str, path: str, root: Path | None = None) -> str | None:
    if root is not None:
        file = root / path
        return file.read_text() if file.is_file() else None
    done = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], capture_output=True, text=True, check=False
    )
    return done.stdout if done.returncode == 0 else None


def detail_values(text: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.startswith(":::MLLOG"):
            continue
        entry = json.loads(line[len(":::MLLOG") :])
        key = entry["key"]
        if key in DROP or not (key in KEEP or key.startswith(KEEP_PREFIX)):
            continue
        values[key] = entry["value"]
    return values


def accuracy_scores(text: str) -> dict[str, float]:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and ("tokens_per_sample" in line or "rouge" in line or "exact_match" in line):
            cleaned = re.sub(r"\b(?:np|numpy)\.\w+\(\s*([^()]*?)\s*\)", r"\1", line)
            parsed = ast.literal_eval(cleaned)
            return {str(k): float(v) for k, v in parsed.items() if isinstance(v, (int, float, str))}
    return {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--git-dir")
    where.add_argument("--root", type=Path, help="a folder of the repository's files, saved one by one")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--round", required=True)
    ap.add_argument("paths", nargs="+", help="<division>/<submitter>/results/<system>/<benchmark>/<scenario>")
    args = ap.parse_args()
    if args.root is not None:
        if not re.fullmatch(r"[0-9a-f]{40}", args.commit):
            ap.error("--root needs --commit as the full commit hash the files were read at")
        commit = args.commit
    else:
        commit = subprocess.run(
            ["git", "--git-dir", args.git_dir, "rev-parse", args.commit], capture_output=True, text=True, check=True
        ).stdout.strip()
    doc = json.loads(OUT.read_text()) if OUT.is_file() else {"about": "", "results": {}}
    doc["about"] = (
        "Effective LoadGen settings (mlperf_log_detail.txt), system JSON stack fields and accuracy.txt scores of "
        "published results, keyed like the index (ROUND/DIVISION/SUBMITTER/SYSTEM/BENCHMARK/SCENARIO); built by "
        "scripts/extract_published_settings.py from the named repository and commit."
    )
    for path in args.paths:
        division, submitter, _, system, bench, scenario = path.strip("/").split("/")
        benchmark = bench.removeprefix("llama2-70b-").removeprefix("interactive-")
        key = f"{args.round}/{division}/{submitter}/{system}/{benchmark}/{scenario}"
        detail = show(args.git_dir, commit, f"{path}/performance/run_1/mlperf_log_detail.txt", args.root)
        if detail is None:
            print(f"{path}: no performance/run_1/mlperf_log_detail.txt", file=sys.stderr)
            return 1
        system_json = f"{division}/{submitter}/systems/{system}.json"
        system_doc = json.loads(show(args.git_dir, commit, system_json, args.root) or "{}")
        acc = show(args.git_dir, commit, f"{path}/accuracy/accuracy.txt", args.root)
        doc["results"][key] = {
            "source": {"repository": args.repo, "commit": commit, "path": path},
            "detail": detail_values(detail),
            "stack": {k: system_doc[k] for k in STACK if k in system_doc},
            "accuracy": accuracy_scores(acc) if acc else {},
        }
    doc["results"] = dict(sorted(doc["results"].items()))
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    print(f"{OUT}: {len(doc['results'])} result(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
