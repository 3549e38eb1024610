"""How fast can the harness go? LoadGen + SUT bookkeeping + the sim backend at unlimited rate, on one core.

The goal is >= 10x the best published per-VM rate (62,804 tokens/s, ~230 samples/s), so the harness
is never the bottleneck. Prints tokens/s and samples/s (LoadGen's own summary numbers) and writes them as JSON.

    python benchmarks/harness_overhead.py [--samples 24576] [--scenario Offline] [--out harness_overhead.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.results.logs import parse_run
from repro.run.harness import run_benchmark
from repro.run.options import RunHooks, RunOptions
from repro.setup.dataset import save_prepared

BEST_PUBLISHED_TOKENS_PER_S = 62_804
BEST_PUBLISHED_SAMPLES_PER_S = 230


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=24576)
    ap.add_argument("--scenario", choices=["Offline", "Server"], default="Offline")
    ap.add_argument(
        "--mean-output", type=int, default=273, help="mean output tokens per sample (published runs: ~272.7)"
    )
    ap.add_argument("--recipe", default="nd-gb300-v6")
    ap.add_argument("--out", type=Path, default=Path("harness_overhead.json"))
    ap.add_argument("--all-cores", action="store_true", help="do not pin to one core")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.samples, args.out = 64, Path(tempfile.gettempdir()) / "harness_overhead.smoke.json"
    if not args.all_cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    recipe = get_recipe(args.recipe)
    rng = np.random.default_rng(0)
    n = args.samples
    with tempfile.TemporaryDirectory(prefix="repro-bench-") as tmp:
        ws = Workspace.open(Path(tmp)).ensure()
        prompts = [rng.integers(3, 32000, size=int(k)).tolist() for k in rng.integers(16, 128, size=n)]
        olens = np.clip(rng.normal(args.mean_output, 120, size=n), 1, 1024).astype(int).tolist()
        save_prepared(
            ws.preprocessed / recipe.dataset.name, recipe.dataset.name, prompts, olens, [""] * n, source="synthetic"
        )
        t0 = time.perf_counter()
        out = run_benchmark(
            RunOptions.build(
                recipe,
                ws,
                scenario=args.scenario,
                backend="sim",
                samples=n,
                detect=False,
                argv=[sys.executable, *sys.argv],
            ),
            RunHooks(progress=False),
        )
        wall = time.perf_counter() - t0
        run = parse_run(Path(out.details["log_dir"]))
        info = json.loads((Path(out.details["log_dir"]) / "run.json").read_text())
    result = {
        "what": "repro LoadGen harness + sim backend at unlimited rate",
        "scenario": args.scenario,
        "samples": n,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "tokens_per_s": run.tokens_per_s,
        "samples_per_s": run.samples_per_s,
        "tokens": info["measured_by_harness"]["tokens"],
        "wall_s_including_setup": round(wall, 2),
        "x_best_published_tokens_per_s": round(run.tokens_per_s / BEST_PUBLISHED_TOKENS_PER_S, 1),
        "x_best_published_samples_per_s": round(run.samples_per_s / BEST_PUBLISHED_SAMPLES_PER_S, 1),
        "loadgen_version": info["loadgen_version"],
        "python": sys.version.split()[0],
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{args.scenario}: {run.tokens_per_s:,.0f} tokens/s, {run.samples_per_s:,.0f} samples/s on "
        f"{result['cores']} core(s) "
        f"({result['x_best_published_tokens_per_s']}x / {result['x_best_published_samples_per_s']}x the best "
        "published VM); "
        f"wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
