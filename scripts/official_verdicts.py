#!/usr/bin/env python3
"""Golden verdicts of MLCommons' own tools on every fixture bundle: tests/golden/official_verdicts.json.

Usage: python scripts/official_verdicts.py INFERENCE_CHECKOUT COMMIT
INFERENCE_CHECKOUT holds mlcommons/inference at COMMIT (at least compliance/TEST06/run_verification.py and
tools/submission/submission_checker/constants.py). TEST06: run_verification.py itself is run (as a subprocess,
with --dtype int32 and int64). Accuracy: the submission checker's accuracy_result_check rule (targets, upper
limit, hash line, open division accepted) applied with the targets and patterns of its own constants.py; the
checker as a whole needs a full submission tree, so this is its rule, not its main(). Validity: the
summary's 'Result is' line, which the checker's performance check reads.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HOW = (
    "TEST06: compliance/TEST06/run_verification.py run with --dtype int32 and int64. Accuracy: the submission "
    "checker's accuracy_result_check rule with the targets and patterns of its constants.py (open: accepted). "
    "Validity: the summary's 'Result is' line."
)
ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "published"
OUT = ROOT / "tests" / "golden" / "official_verdicts.json"


def _constants(checkout: Path) -> dict[str, object]:
    scope: dict[str, object] = {}
    path = checkout / "tools/submission/submission_checker/constants.py"
    exec(compile(path.read_text(), str(path), "exec"), scope)  # noqa: S102 - the checker's own data module
    return scope


def _accuracy(text: str, benchmark: str, division: str, consts: dict[str, object]) -> dict[str, object]:
    config = consts["MODEL_CONFIG"]["v6.0"]  # type: ignore[index]
    patterns = consts["ACC_PATTERN"]
    target = config["accuracy-target"][benchmark]  # type: ignore[index]
    upper = config["accuracy-upper-limit"].get(benchmark)  # type: ignore[index,union-attr]
    seen, valid, limit_ok, hash_val = {}, True, True, None
    for line in text.splitlines():
        if m := re.match(r"^hash=([\w\d]+)$", line):
            hash_val = m.group(1)
        for kind, floor in zip(target[::2], target[1::2], strict=True):
            if m := re.match(patterns[kind], line):  # type: ignore[index]
                seen[kind] = True
                valid &= float(m.group(1)) >= floor
        if upper:
            for kind, ceiling in zip(upper[::2], upper[1::2], strict=True):
                if (m := re.match(patterns[kind], line)) and float(m.group(1)) > ceiling:  # type: ignore[index]
                    limit_ok = False
    closed_ok = valid and len(seen) == len(target) // 2 and limit_ok and hash_val is not None
    return {"closed_rule": closed_ok, "division": division, "accepted": True if division == "open" else closed_ok}


def _test06(folder: Path, checkout: Path, scenario: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for dtype in ("int32", "int64"):
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.run(
                [
                    sys.executable,
                    str(checkout / "compliance/TEST06/run_verification.py"),
                    "-c",
                    str(folder / "accuracy"),
                    "-o",
                    tmp,
                    "-s",
                    scenario,
                    "--dtype",
                    dtype,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            written = Path(tmp, "TEST06", "verify_accuracy.txt")
            text = written.read_text() if written.is_file() else proc.stdout
        if proc.returncode != 0 and "Traceback" in proc.stderr:
            out[dtype] = "error: " + proc.stderr.strip().splitlines()[-1]
        else:
            out[dtype] = "pass" if "TEST06 verification complete" in text else "fail"
    return out


def main(checkout: Path, commit: str) -> None:
    consts = _constants(checkout)
    bundles: dict[str, object] = {}
    for summary in sorted(FIXTURES.rglob("mlperf_log_summary.txt")):
        run = summary.parent
        if run.parent.name != "performance" or "accuracy" in run.parts:
            continue
        scenario_dir = run.parent.parent
        rel = scenario_dir.relative_to(FIXTURES).as_posix()
        bench = re.search(r"llama2-70b-99(?:\.9)?(?![\d.])", scenario_dir.as_posix())
        systems = list(scenario_dir.glob("systems/*.json"))
        division = json.loads(systems[0].read_text()).get("division", "closed") if systems else "closed"
        log = summary.read_text(errors="replace")
        validity = re.search(r"Result is\s*:\s*(\w+)", log)
        scen = re.search(r"Scenario\s*:\s*(\w+)", log)
        scenario = "Interactive" if "Interactive" in rel else scen.group(1) if scen else "Offline"
        entry: dict[str, object] = {
            "run": run.name,
            "validity": validity.group(1) if validity else None,
        }
        acc = scenario_dir / "accuracy" / "accuracy.txt"
        if acc.is_file() and bench:
            entry["accuracy"] = _accuracy(acc.read_text(errors="replace"), bench.group(0), division, consts)
        t06 = scenario_dir / "TEST06"
        if (t06 / "accuracy" / "mlperf_log_accuracy.json").is_file():
            entry["test06"] = _test06(t06, checkout, scenario)
        bundles[f"{rel}/performance/{run.name}"] = entry
    doc = {
        "tool": "mlcommons/inference",
        "commit": commit,
        "how": HOW,
        "bundles": bundles,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
