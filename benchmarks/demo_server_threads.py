"""The demo's Server run with the hf backend on one torch thread (repro's default) against two or more
(`--backend numpy`: the demo's default runner, its BLAS threads).

Each side is a separate `repro run server --recipe demo --target-qps Q --duration S` process (REPRO_CPU_THREADS set
for it), alternating, in one fresh workspace; reported: LoadGen's completed samples/s and p99 TTFT/TPOT.

    python benchmarks/demo_server_threads.py [--qps 2] [--duration 20] [--pairs 2] [--threads 2] [--backend hf]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

KEYS = {
    "completed q/s": r"Completed samples per second\s*:\s*([\d.e+]+)",
    "p99 TTFT ms": r"99.00 percentile first token latency \(ns\)\s*:\s*(\d+)",
    "p99 TPOT ms": r"99.00 percentile time to output token \(ns\)\s*:\s*(\d+)",
}


def one(ws: Path, threads: int, qps: float, duration: float, backend: str) -> dict[str, float]:
    env = {**os.environ, "REPRO_HOME": str(ws), "REPRO_CPU_THREADS": str(threads)}
    argv = [sys.executable, "-c", "from repro.cli import main; main()", "run", "server", "--recipe", "demo"]
    argv += ["--target-qps", str(qps), "--duration", str(duration), "--backend", backend, "--json"]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    log_dir = Path(json.loads(out.stdout)["details"]["log_dir"])
    text = (log_dir / "mlperf_log_summary.txt").read_text()
    found = {k: float(m.group(1)) for k, rx in KEYS.items() if (m := re.search(rx, text))}
    for k in ("p99 TTFT ms", "p99 TPOT ms"):
        found[k] = found.get(k, 0.0) / 1e6
    return found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--qps", type=float, default=2.0)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--backend", default="hf", help="hf (torch threads, as measured in BENCHMARKS.md) or numpy (BLAS)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.qps, args.duration, args.pairs = 5.0, 0.5, 1
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        for i in range(args.pairs):
            order = [1, args.threads] if i % 2 == 0 else [args.threads, 1]
            for n in order:
                r = one(ws, n, args.qps, args.duration, args.backend)
                print(f"threads {n}: " + ", ".join(f"{k} {v:,.2f}" for k, v in r.items()), flush=True)


if __name__ == "__main__":
    main()
