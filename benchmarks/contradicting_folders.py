"""Count what self-contradicting and oversized result folders do to whichever `repro` is importable (issue #29
items 2 and 4; numbers in docs/SECURITY.md).

    cd <checkout> && PYTHONPATH=$PWD python benchmarks/contradicting_folders.py [--inputs 200] [--seed 29]

Part 1 builds `--inputs` folders from real published bundles, each with 1-3 seeded random disagreements between
its own files (tests/contradicting.py, the same edits the property suite draws), runs `repro verify` on each
in-process and counts: inputs tried, tracebacks (an exception past the CLI's error edge, or an exit code other
than 0/1/2), hangs (no answer in 20 s) and false PASS (exit 0: every input contradicts itself).
Part 2 runs `repro verify` in a child process capped at 3 GB of address space on four oversized result files
(a 200 MB `[{},...]` TEST06 log, a 1 GB detail-log line, a 6 GB sparse summary tail, a 60 MB accuracy.txt line)
and prints each child's exit, what escaped, and its peak RSS.
"""

from __future__ import annotations

import argparse
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from contradicting import BUNDLE_EDITS, GB200, GB300, PERF, VM_EDITS, build  # noqa: E402


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang


def probe(inputs: int, seed: int) -> Counter[str]:
    from typer.testing import CliRunner

    from repro.cli import app

    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    signal.signal(signal.SIGALRM, _alarm)
    for _ in range(inputs):
        base = rng.choice(["vm", "bundle"])
        edits = VM_EDITS if base == "vm" else BUNDLE_EDITS
        names = rng.sample(sorted(edits), rng.randint(1, 3))
        with tempfile.TemporaryDirectory(prefix="repro-contra-") as tmp:
            args = build(Path(tmp) / "in", base, names, rng)
            counts["tried"] += 1
            signal.alarm(20)
            try:
                res = CliRunner().invoke(app, args)
            except Hang:
                counts["hangs"] += 1
                continue
            finally:
                signal.alarm(0)
            escaped = res.exception is not None and not isinstance(res.exception, SystemExit)
            if escaped or res.exit_code not in (0, 1, 2):
                counts["tracebacks"] += 1
            elif res.exit_code == 0:
                counts["false PASS"] += 1
                print("false PASS:", base, names, file=sys.stderr)
            counts[f"exit {res.exit_code}"] += 1
    counts["peak RSS MB (in-process probe)"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return counts


CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from typer.testing import CliRunner
from repro.cli import app
res = CliRunner().invoke(app, sys.argv[1:])
exc = res.exception if not isinstance(res.exception, SystemExit) else None
hwm = next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))  # this image's peak, in KB
print("RESULT", res.exit_code, type(exc).__name__ if exc else "-", hwm)
"""


def _big_cases(tmp: Path) -> dict[str, list[str]]:
    cases: dict[str, list[str]] = {}
    rack = tmp / "test06"
    shutil.copytree(GB300, rack)
    acc = rack / "ND_GB300_v6_1" / "llama2-70b-99" / "Offline" / "TEST06" / "accuracy"
    acc.mkdir(parents=True)
    with open(acc / "mlperf_log_accuracy.json", "wb") as fh:
        fh.write(b"[")
        for _ in range(70):
            fh.write(b"{}," * (1 << 20))
        fh.write(b"{}]")
    cases["200 MB [{},...] TEST06 accuracy log"] = ["verify", str(rack / "ND_GB300_v6_1")]
    rack = tmp / "line"
    shutil.copytree(GB300, rack)
    with open(rack / "ND_GB300_v6_1" / "llama2-70b-99" / "Offline" / "mlperf_log_detail.txt", "ab") as fh:
        fh.write(b":::MLLOG ")
        fh.truncate(fh.tell() + (1 << 30))
    cases["1 GB line in the detail log"] = ["verify", str(rack / "ND_GB300_v6_1")]
    tree = tmp / "tail"
    shutil.copytree(GB200, tree / "a")
    shutil.copytree(GB200, tree / "b")
    with open(tree / "b" / PERF / "mlperf_log_summary.txt", "ab") as fh:
        fh.write(b"\n" * 8192)
        fh.truncate(fh.tell() + (6 << 30))
    cases["6 GB sparse tail on a summary"] = ["verify", str(tree), "--recipe", "nd-gb200-v6"]
    bundle = tmp / "acc"
    shutil.copytree(GB200, bundle)
    txt = bundle / "llama2-70b-99" / "Offline" / "accuracy" / "accuracy.txt"
    txt.write_bytes(b"{'rouge1': 44.0" + b", 'x': 1" * (60 << 17) + b"}\n" + txt.read_bytes())
    cases["60 MB accuracy.txt line"] = ["verify", str(bundle)]
    return cases


def big_files() -> None:
    with tempfile.TemporaryDirectory(prefix="repro-big-") as tmp:
        for what, args in _big_cases(Path(tmp)).items():
            try:
                proc = subprocess.run(
                    [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=300, cwd=Path.cwd()
                )
            except subprocess.TimeoutExpired:
                print(f"{what}: hang (no answer in 300 s)")
                continue
            m = re.search(r"^RESULT (-?\d+) (\S+) (\d+)$", proc.stdout, re.M)
            if not m:
                print(f"{what}: child died (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
                continue
            escaped = "" if m.group(2) == "-" else f", {m.group(2)} escaped (a traceback)"
            print(f"{what}: exit {m.group(1)}{escaped}, peak RSS {int(m.group(3)) / 1024:,.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--skip-big", action="store_true", help="only the self-contradicting folders")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    args = parser.parse_args()
    if args.smoke:
        args.inputs, args.skip_big = 3, True
    counts = probe(args.inputs, args.seed)
    for key in ("tried", "tracebacks", "hangs", "false PASS", "exit 1", "exit 2", "peak RSS MB (in-process probe)"):
        print(f"{key}: {counts.get(key, 0)}")
    if not args.skip_big:
        big_files()


if __name__ == "__main__":
    main()
