"""The `hf` backend against plain `model.generate` on the demo model, same batches, one process.

(a) repro: `HFBackend` (the demo's tiny Llama from `repro.setup.demo.prepare_demo`), requests submitted as the
    harness does and counted through a sink.
(b) reference: the same loaded model object, `model.generate` called directly on the same batches (sorted by
    prompt length and cut into `--batch` rows as the backend does, left-padded, greedy, same max/min new tokens,
    EOS and pad ids), tokens counted up to and including the first EOS, as the backend counts them.

Runs alternate; at 1x, 4x and 16x a base number of batches. Ratio = reference time / repro time (above 1: repro
faster). CPU unless a GPU is present.

    python benchmarks/hf_vs_generate.py [--batch 16] [--max-tokens 64] [--pairs 3] [--sizes 1,4,16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _backend_sink import CountingSink, submit_all  # noqa: E402
from _sidebyside import alternate  # noqa: E402

from repro.core.workspace import Workspace  # noqa: E402
from repro.run.backends.base import Request  # noqa: E402
from repro.run.backends.hf import HFBackend  # noqa: E402
from repro.setup.dataset import PreparedDataset, load_prepared  # noqa: E402
from repro.setup.demo import prepare_demo  # noqa: E402


def run_reference(model: Any, eos: int | None, pad: int, reqs: list[Request], batch: int) -> int:
    import torch

    tokens = 0
    ordered = sorted(reqs, key=lambda r: len(r.input_ids))
    for start in range(0, len(ordered), batch):
        rows = ordered[start : start + batch]
        width = max(len(r.input_ids) for r in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for k, r in enumerate(rows):
            n = len(r.input_ids)
            ids[k, width - n :] = torch.as_tensor(np.asarray(r.input_ids, dtype=np.int64))
            mask[k, width - n :] = 1
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids.to(model.device),
                attention_mask=mask.to(model.device),
                max_new_tokens=max(r.max_tokens for r in rows),
                min_new_tokens=1,
                do_sample=False,
                eos_token_id=eos,
                pad_token_id=pad,
            )
        gen = out[:, width:].cpu().numpy()
        for k in range(len(rows)):
            hits = np.flatnonzero(gen[k] == eos) if eos is not None else np.array([], dtype=np.int64)
            tokens += int(hits[0] + 1) if hits.size else gen.shape[1]
    return tokens


def requests(dataset: PreparedDataset, n: int, max_tokens: int, start_id: int) -> list[Request]:
    return [Request(start_id + i, i % len(dataset), dataset.prompt(i % len(dataset)), max_tokens) for i in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--sizes", default="1,4,16", help="batches per run, as multiples of one batch")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.batch, args.max_tokens, args.pairs, args.sizes = 2, 4, 1, "1,2"
    import torch

    with tempfile.TemporaryDirectory(prefix="repro-hf-bench-") as tmp:
        paths = prepare_demo(Workspace.open(Path(tmp)))
        dataset = load_prepared(paths["dataset"])
        backend = HFBackend(paths["model_dir"], batch_size=args.batch)
        sink = CountingSink()
        backend.start(sink)  # type: ignore[arg-type]
        model, eos, pad = backend.model, backend.eos_id, backend.pad_id
        print(
            f"demo model {sum(p.numel() for p in model.parameters()):,} parameters on {model.device}, "
            f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch {args.batch}, "
            f"max_tokens {args.max_tokens}; {len(dataset)} demo prompts"
        )
        next_id = [0]

        def ours(n: int) -> int:
            next_id[0] += n
            return submit_all("hf", backend, sink, requests(dataset, n, args.max_tokens, next_id[0]))

        def theirs(n: int) -> int:
            return run_reference(model, eos, pad, requests(dataset, n, args.max_tokens, 0), args.batch)

        warm = args.batch
        t_ours, t_theirs = ours(warm), theirs(warm)  # first generate calls pay lazy initialisation
        assert t_ours == t_theirs, f"token counts differ: hf backend {t_ours}, generate {t_theirs}"
        per_token: list[tuple[int, float, float]] = []
        try:
            for mult in (int(s) for s in args.sizes.split(",")):
                n = args.batch * mult
                counts: dict[str, int] = {}
                pair = alternate(
                    f"{n} samples",
                    lambda n=n, counts=counts: counts.__setitem__("repro", ours(n)),
                    lambda n=n, counts=counts: counts.__setitem__("reference", theirs(n)),
                    args.pairs,
                )
                assert counts["repro"] == counts["reference"], counts
                toks = counts["repro"]
                lo, hi = pair.spread
                print(
                    f"{n:>5} samples ({toks:,} tokens): hf backend {toks / statistics.median(pair.repro_s):,.0f} "
                    f"tokens/s, model.generate {toks / statistics.median(pair.reference_s):,.0f} tokens/s, ratio "
                    f"{pair.ratio:.2f}x (spread {lo:.2f}-{hi:.2f}, {args.pairs} pairs); goal >= 1.0x: "
                    f"{'reached' if pair.ratio >= 1.0 else 'not reached'}"
                )
                per_token.append(
                    (mult, statistics.median(pair.repro_s) / toks, statistics.median(pair.reference_s) / toks)
                )
        finally:
            backend.close()
    m0, r0, f0 = per_token[0]
    for m, r, f in per_token[1:]:
        print(f"cost per token at {m // m0}x vs 1x: hf backend {r / r0:.2f}x, generate {f / f0:.2f}x; linear = 1.00x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
