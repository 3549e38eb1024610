"""The demo with the numpy runner (its default) against the hf runner (transformers + torch on the CPU), side by side.

Each side is the user's own command, `repro run offline --recipe demo --backend B --json`, in its own process,
alternating, in one fresh workspace (the model is built once, before the first pair). Reported per side: LoadGen's
tokens/s (each run sizes itself from a probe of its own backend, as the demo does) and the whole command's wall time
(start-up, model load, probe and the LoadGen run). Ratio = numpy / hf tokens/s and hf / numpy wall time (above 1:
the numpy runner is faster). Needs torch for the hf side (the `test` or `hf` extra); run it on a machine with a GPU
too: the numpy runner stays on the CPU there, the hf one uses the GPU.

    python benchmarks/demo_runner.py [--pairs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one(ws: Path, backend: str, extra: list[str]) -> tuple[float, float, str]:
    """(LoadGen tokens/s, wall seconds, device) of one demo command."""
    env = {
        **os.environ,
        "REPRO_HOME": str(ws),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    argv = [sys.executable, "-c", "from repro.cli import main; main()", "run", "offline", "--recipe", "demo"]
    argv += ["--backend", backend, "--json", *extra]
    start = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=900)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{backend}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    log_dir = Path(json.loads(proc.stdout)["details"]["log_dir"])
    info = json.loads((log_dir / "run.json").read_text())
    text = (log_dir / "mlperf_log_summary.txt").read_text()
    rate = next(float(line.split(":")[1]) for line in text.splitlines() if line.startswith("Tokens per second"))
    return rate, wall, str(info.get("backend_details", {}).get("device"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    args = ap.parse_args()
    extra = ["--samples", "16"] if args.smoke else []
    pairs = 1 if args.smoke else args.pairs
    rates: dict[str, list[float]] = {"numpy": [], "hf": []}
    walls: dict[str, list[float]] = {"numpy": [], "hf": []}
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        one(ws, "numpy", ["--samples", "8"])  # builds the demo model and dataset once, outside the timings
        for i in range(pairs):
            for backend in ("numpy", "hf") if i % 2 == 0 else ("hf", "numpy"):
                rate, wall, device = one(ws, backend, extra)
                rates[backend].append(rate)
                walls[backend].append(wall)
                print(f"{backend} ({device}): {rate:,.1f} tokens/s, command {wall:.1f} s", flush=True)
    med = {b: (statistics.median(rates[b]), statistics.median(walls[b])) for b in rates}
    print(
        f"demo: numpy {med['numpy'][0]:,.1f} tokens/s, hf {med['hf'][0]:,.1f} tokens/s, "
        f"ratio {med['numpy'][0] / med['hf'][0]:.2f}x; command numpy {med['numpy'][1]:.1f} s, hf {med['hf'][1]:.1f} s, "
        f"ratio {med['hf'][1] / med['numpy'][1]:.2f}x ({pairs} pairs)"
    )


if __name__ == "__main__":
    main()
