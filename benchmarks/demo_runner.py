"""The demo with the numpy runner (its default) against the hf runner (transformers + torch on the CPU), side by side.

(1) engine: both backends loaded in this process (one thread each: repro's default), the same requests (every demo
    prompt, 32 new tokens, batches of 64 as the demo runs them) submitted through the same counting sink, timed
    alternately with benchmarks/_sidebyside.py. Ratio = hf time / numpy time.
(2) command: each side is the user's own command, `repro run offline --recipe demo --backend B --json`, in its
    own process, alternating, in one fresh workspace (the model is built once, before the first pair). Reported per
    side: LoadGen's tokens/s (each run sizes itself from a probe of its own backend, as the demo does) and the whole
    command's wall time (start-up, model load, probe, LoadGen run). Ratio = numpy / hf tokens/s and hf / numpy wall
    time (above 1: the numpy runner is faster). Both sides alternate through benchmarks/_sidebyside.py.
Needs torch for the hf side (the `test` or `hf` extra). The hf engine side is pinned to the CPU; the command side
uses a GPU where there is one (as the hf backend does), while the numpy runner stays on the CPU everywhere.

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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))
from _backend_sink import CountingSink, submit_all  # noqa: E402
from _sidebyside import alternate  # noqa: E402


def engine(ws: Path, pairs: int, rounds: int, max_tokens: int) -> None:
    """Both backends on the same requests in this process; prints the ratio of their median times."""
    from repro.run.backends.base import Request
    from repro.run.backends.hf import HFBackend
    from repro.run.backends.numpy import NumpyBackend
    from repro.setup.dataset import load_prepared
    from repro.setup.demo import prepare_demo

    paths = prepare_demo(ws_open(ws))
    data = load_prepared(paths["dataset"])
    reqs = [Request(i, i % len(data), data.prompt(i % len(data)), max_tokens) for i in range(rounds * len(data))]
    counts: dict[str, int] = {}
    backends = {"numpy": NumpyBackend(paths["model_dir"]), "hf": HFBackend(paths["model_dir"], device="cpu")}
    sinks = {name: CountingSink() for name in backends}
    for name, be in backends.items():
        be.start(sinks[name])

    def go(name: str) -> None:
        counts[name] = submit_all(name, backends[name], sinks[name], reqs)

    go("numpy"), go("hf")  # warm-up: lazy initialisation on both sides
    pair = alternate("engine", lambda: go("numpy"), lambda: go("hf"), pairs)
    for be in backends.values():
        be.close()
    print(pair.line())
    print(
        f"engine: numpy {counts['numpy'] / statistics.median(pair.repro_s):,.0f} tokens/s, "
        f"hf {counts['hf'] / statistics.median(pair.reference_s):,.0f} tokens/s, same tokens "
        f"{counts['numpy'] == counts['hf']} ({counts['numpy']:,} and {counts['hf']:,})",
        flush=True,
    )


def ws_open(root: Path) -> Any:
    from repro.core.workspace import Workspace

    return Workspace.open(root)


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
    with tempfile.TemporaryDirectory() as tmp:
        engine(Path(tmp), pairs if args.smoke else 2 * pairs + 1, 1 if args.smoke else 4, 4 if args.smoke else 32)
    rates: dict[str, list[float]] = {"numpy": [], "hf": []}

    def command(ws: Path, backend: str) -> None:
        rate, wall, device = one(ws, backend, extra)
        rates[backend].append(rate)
        print(f"{backend} ({device}): {rate:,.1f} tokens/s, command {wall:.1f} s", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        one(ws, "numpy", ["--samples", "8"])  # builds the demo model and dataset once, outside the timings
        pair = alternate("command", lambda: command(ws, "numpy"), lambda: command(ws, "hf"), pairs)
    walls = {"numpy": pair.repro_s, "hf": pair.reference_s}
    med = {b: (statistics.median(rates[b]), statistics.median(walls[b])) for b in rates}
    print(
        f"demo: numpy {med['numpy'][0]:,.1f} tokens/s, hf {med['hf'][0]:,.1f} tokens/s, "
        f"ratio {med['numpy'][0] / med['hf'][0]:.2f}x; command numpy {med['numpy'][1]:.1f} s, hf {med['hf'][1]:.1f} s, "
        f"ratio {med['hf'][1] / med['numpy'][1]:.2f}x ({pairs} pairs)"
    )


if __name__ == "__main__":
    main()
