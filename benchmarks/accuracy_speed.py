"""How long `repro.accuracy` takes to score a full-size accuracy log (24,576 samples) on this machine.

Synthetic but realistic data: ~270-token outputs (Zipf-distributed English-like words), ~1,200-char
references that share about half their words with the output, token ids in a LoadGen-format
mlperf_log_accuracy.json, decoded with a word-level tokenizer built locally (no downloads).
Prints the wall time of decode + post-processing + ROUGE, and rouge_score's per-sample time for scale.

    python benchmarks/accuracy_speed.py [--samples 24576] [--workers N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from repro.results import accuracy


def synthetic_vocab(rng: random.Random, size: int = 6000) -> list[str]:
    letters = "etaoinshrdlcumwfgypbvk"
    words = {"the", "a", "of", "and", "to", "in", "is", "it", "that", "for", "Mr.", "e.g.", "U.S."}
    while len(words) < size:
        n = max(2, min(12, int(rng.gauss(6, 2.5))))
        words.add("".join(rng.choice(letters) for _ in range(n)) + rng.choice(["", "", "", "ing", "ed", "s", "ly"]))
    ordered = sorted(words)
    rng.shuffle(ordered)
    return ordered


def sentence_words(rng: random.Random, vocab: list[str], cum, n: int) -> list[str]:
    out, left = [], n
    while left > 0:
        k = min(left, rng.randint(8, 24))
        sent = rng.choices(vocab, cum_weights=cum, k=k)
        sent[0] = sent[0].capitalize()
        sent[-1] += rng.choice([".", ".", ".", "?", "!"])
        out.extend(sent)
        left -= k
    return out


def make_case(n: int, seed: int = 0):
    """(word vocabulary, list of token-id arrays, list of reference strings)."""
    rng = random.Random(seed)
    vocab = synthetic_vocab(rng)
    cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(vocab))))
    outputs, refs = [], []
    for _ in range(n):
        ref_words = sentence_words(rng, vocab, cum, rng.randint(140, 190))
        swaps = iter(rng.choices(vocab, cum_weights=cum, k=len(ref_words)))
        pred_words = [w if rng.random() < 0.55 else next(swaps) for w in ref_words]
        pred_words += sentence_words(rng, vocab, cum, max(0, rng.randint(250, 290) - len(pred_words)))
        refs.append(" ".join(ref_words))
        outputs.append(pred_words[:rng.randint(250, 290)])
    return outputs, refs


def word_tokenizer(words: list[str], folder: Path):
    """A word-level fast tokenizer saved like a model's tokenizer folder: decode joins with spaces."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for w in words:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(str(folder))
    return fast


def write_log(path: Path, token_ids: list[list[int]]) -> None:
    entries = [{"seq_id": i, "qsl_idx": i, "data": np.asarray(ids, dtype="<i4").tobytes().hex().upper(),
                "token_count": len(ids)} for i, ids in enumerate(token_ids)]
    path.write_text(json.dumps(entries))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=24576)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--reference-samples", type=int, default=200, help="samples timed with rouge_score itself")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    outputs, refs = make_case(args.samples)
    print(f"made {args.samples} synthetic samples in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        words = sorted({w for o in outputs for w in o} | {w for r in refs for w in r.split()})
        tok = word_tokenizer(words, Path(tmp) / "tokenizer")
        ids = [[tok.convert_tokens_to_ids(w) for w in o] for o in outputs]
        log = Path(tmp) / accuracy.ACCURACY_JSON
        write_log(log, ids)
        workers = accuracy.default_workers() if args.workers is None else args.workers
        start = time.perf_counter()
        scores = accuracy.evaluate_accuracy_log(log, refs, Path(tmp) / "tokenizer", workers=workers)
        elapsed = time.perf_counter() - start

    pairs = [(accuracy.postprocess(r), accuracy.postprocess(" ".join(o))) for r, o in
             zip(refs[:args.reference_samples], outputs[:args.reference_samples])]
    t0 = time.perf_counter()
    for _ in accuracy.iter_reference_pairs(pairs):
        pass
    ref_per_sample = (time.perf_counter() - t0) / max(1, len(pairs))

    print(f"scores: {scores}")
    print(f"repro.accuracy: {args.samples} samples in {elapsed:.1f} s with {workers} worker(s) "
          f"({elapsed / args.samples * 1000:.2f} ms/sample wall)")
    print(f"rouge_score reference path: {ref_per_sample * 1000:.1f} ms/sample on one core "
          f"(~{ref_per_sample * args.samples / workers:.0f} s for {args.samples} samples on {workers} core(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
