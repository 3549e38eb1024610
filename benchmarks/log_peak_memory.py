"""Peak memory of repro commands on the largest untrusted inputs tried (issues #16 and #29; figures in
docs/BENCHMARKS.md and docs/SECURITY.md).

    cd <checkout> && PYTHONPATH=$PWD python benchmarks/log_peak_memory.py [--only NAME]

Each case builds its input in a temp folder, then runs one CLI command in a fresh interpreter with the importable
repro (capped at 3 GB of address space, so an unbounded read fails fast instead of taking the machine) and prints
the child's peak resident set (VmHWM; ru_maxrss would count the parent's, kept across exec), its exit code and the
input's size:
- a 200 MB mlperf_log_detail.txt (a real published detail log then padding MLLOG lines): `repro verify`;
- a 60 MB ledger.json: `repro status`;
- a 150 MB power.csv beside a real published run: `repro report`;
- a billion-laughs recipe (nine nested YAML aliases in trtllm.serve_extra_options): `recipes validate`,
  `recipes show`, `run offline --dry-run`.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "fixtures" / "published"
CHILD = """
import sys
from repro.cli import main
code = 0
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
except BaseException as exc:
    code = type(exc).__name__
hwm = next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print("PEAK_MB", int(hwm) / 1024, "RC", code, file=sys.stderr)
"""


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _detail(tmp: Path) -> tuple[list[str], Path]:
    run = tmp / "run"
    shutil.copytree(FIX / "azure-nd-gb300-v6-rack" / "ND_GB300_v6_1", run)
    big = next(run.rglob("mlperf_log_detail.txt"))
    filler = b':::MLLOG {"key": "padding", "value": "' + b"x" * 180 + b'", "metadata": {}}\n'
    with open(big, "ab") as fh:
        for _ in range((200 << 20) // (len(filler) * 4096)):
            fh.write(filler * 4096)
    return ["verify", str(run)], big


def _ledger(tmp: Path) -> tuple[list[str], Path]:
    ws = tmp / "ws"
    ws.mkdir()
    path = ws / "ledger.json"
    with open(path, "w") as fh:
        fh.write('{"schema_version": 2, "steps": {}, "facts": {"pad": [')
        fh.write("0.5," * (15 << 20))
        fh.write("0.5]}}")
    return ["status", "--recipe", "demo", "--workspace", str(ws)], path


def _power(tmp: Path) -> tuple[list[str], Path]:
    run = tmp / "run"
    shutil.copytree(FIX / "azure-nd-gb200-v6-v5.1", run)
    perf = next(run.rglob("mlperf_log_summary.txt")).parent
    chunk = "".join(f"1.000000000000,{g},300.000000000000\n" for g in range(8)) * 4096
    with open(perf / "power.csv", "w") as fh:
        fh.write("time_s,gpu_index,watts\n" + "".join(f"0,{g},300\n" for g in range(8)))
        for _ in range(140):
            fh.write(chunk)
        fh.write("".join(f"2,{g},300\n" for g in range(8)))
    return ["report", str(run)], perf / "power.csv"


def _laughs(tmp: Path) -> Path:
    lines = ['    l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"    l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    text = (REPO / "recipes" / "nd-gb300-v6.yaml").read_text()
    path = tmp / "nd-gb300-v6.yaml"
    path.write_text(text.replace("  serve_extra_options:\n", "  serve_extra_options:\n" + "\n".join(lines) + "\n", 1))
    return path


CASES: dict[str, Callable[[Path], tuple[list[str], Path]]] = {
    "200 MB detail log, verify": _detail,
    "60 MB ledger.json, status": _ledger,
    "150 MB power.csv, report": _power,
    "billion-laughs recipe, recipes validate": lambda t: (["recipes", "validate", str(p := _laughs(t))], p),
    "billion-laughs recipe, recipes show": lambda t: (["recipes", "show", str(p := _laughs(t))], p),
    "billion-laughs recipe, run offline --dry-run": lambda t: (
        ["run", "offline", "--dry-run", "--workspace", str(t / "ws"), "--recipe", str(p := _laughs(t))],
        p,
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    a = ap.parse_args()
    if a.smoke:
        a.only = "billion-laughs recipe, recipes validate"
    for name, build in CASES.items():
        if a.only not in name:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            argv, src = build(Path(tmp))
            size = src.stat().st_size
            try:
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, *argv],
                    capture_output=True,
                    text=True,
                    timeout=300,
                    preexec_fn=_cap,
                ).stderr
            except subprocess.TimeoutExpired:
                print(f"{name:46} input {size / 2**20:8.1f} MB  HANG (300 s)")
                continue
            tail = out[out.rindex("PEAK_MB") :].split() if "PEAK_MB" in out else ["", "nan", "", "?"]
            print(f"{name:46} input {size / 2**20:8.1f} MB  peak RSS {float(tail[1]):6.0f} MB  exit {tail[3]}")


if __name__ == "__main__":
    main()
