"""Accuracy scoring: repro's scorer and MLPerf's evaluate-accuracy.py method side by side in one invocation.

Both sides get the same decoded text pairs and do the same work: strip, NLTK Punkt sentence split joined
by newlines, ROUGE-1/2/L/Lsum F-measures with the Porter stemmer per sample, mean x 100 rounded to 4
decimals, gen_len. The reference is the method of mlcommons/inference language/llama2-70b/
evaluate-accuracy.py (v5.1): `nltk.sent_tokenize` + `evaluate`'s rouge, which calls rouge_score 0.1.2's
`RougeScorer(use_stemmer=True).score(target, prediction)` per pair (evaluate/metrics/rouge/rouge.py).
Runs alternate (repro, reference, reference, repro, ...) on one core, at 1x, 4x and 16x a base size,
and print the ratio with its spread, the cost per sample at each size (linear cost keeps it flat) and a
per-sample check that the scores agree.

Synthetic MLPerf-shaped data (no downloads): ~180-word outputs cut into ~285 word-piece tokens
(~1,090 characters; published runs: 273 tokens, gen_len/gen_num 1,080) with Zipf-distributed English-like
words, ~165-word references sharing about half their words, ~9% of outputs with non-ASCII words
(accents, CJK, Cyrillic, Greek, emoji, the Kelvin sign and dotted I that lowercase to ASCII), and a few
empty, token-less and runaway (700-1,400 word) outputs.

    python benchmarks/accuracy_speed.py [--base 96] [--repeats 3]      # side by side at 1x, 4x, 16x
    python benchmarks/accuracy_speed.py --full-check 24576 [--jobs 1]  # every sample of a full log, per sample
    python benchmarks/accuracy_speed.py --startup                      # fixed cost before the first sample
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from repro.core.families.common import punkt
from repro.results import accuracy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _wordpiece import wordpiece_tokenizer  # noqa: E402

KEYS = accuracy.ROUGE_KEYS
NON_ASCII = (
    "café",
    "naïve",
    "Straße",
    "İstanbul",
    "façade",
    "résumé",
    "Zürich",
    "São",
    "东京",
    "日本語",
    "Москва",
    "Ελλάδα",
    "€5",
    "20°C",
    "—",
    "…",
    "“quoted”",
    "\u212aelvin",
    "ﬁnal",
    "😀",
    "مرحبا",
    "x²",
    "½",
    "①",
    "Ⅻ",
    "ǅemal",
    "ＡＢＣ",
    "Ǆ",
    "ß",
)
NO_TOKENS = ("…", "—", "东京。", "😀😀", "!!!", "?")


# ---------------------------------------------------------------- data


def synthetic_vocab(rng: random.Random, size: int = 6000) -> list[str]:
    letters = "etaoinshrdlcumwfgypbvk"
    words = {"the", "a", "of", "and", "to", "in", "is", "it", "that", "for", "Mr.", "e.g.", "U.S."}
    while len(words) < size:
        n = max(1, min(12, int(rng.gauss(3.4, 2.0))))
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


def _sprinkle(rng: random.Random, words: list[str]) -> None:
    for _ in range(rng.randint(1, 3)):
        words.insert(rng.randint(0, len(words)), rng.choice(NON_ASCII))


def make_case(n: int, seed: int = 0) -> tuple[list[list[str]], list[str]]:
    """(output word lists, reference strings) for n samples; see the module docstring for their shape."""
    rng = random.Random(seed)
    vocab = synthetic_vocab(rng)
    cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(vocab))))
    outputs, refs = [], []
    for _ in range(n):
        ref_words = sentence_words(rng, vocab, cum, rng.randint(140, 190))
        swaps = iter(rng.choices(vocab, cum_weights=cum, k=len(ref_words)))
        pred_words = [w if rng.random() < 0.4 else next(swaps) for w in ref_words]
        length = rng.randint(160, 200)
        pred_words = (pred_words + sentence_words(rng, vocab, cum, max(0, length - len(pred_words))))[:length]
        kind = rng.random()
        if kind < 1 / 400:
            pred_words = []
        elif kind < 2 / 400:
            pred_words = [rng.choice(NO_TOKENS) for _ in range(rng.randint(1, 4))]
        elif kind < 4 / 400:
            loop = pred_words[: rng.randint(20, 60)]
            pred_words = (loop * 80)[: rng.randint(700, 1400)]
        if pred_words and rng.random() < 0.09:
            _sprinkle(rng, pred_words)
        if rng.random() < 0.05:
            _sprinkle(rng, ref_words)
        refs.append(" ".join(ref_words))
        outputs.append(pred_words)
    return outputs, refs


def pieces(word: str) -> list[str]:
    """A word as word-piece tokens: ~1.55 a word here, ~285 an output (Llama-2 in published runs: 273)."""
    return [word[:4]] + ["##" + word[i : i + 5] for i in range(4, len(word), 5)]


def word_tokenizer(words: list[str], folder: Path):
    """A word-piece fast tokenizer saved like a model's tokenizer folder: decode re-joins words with spaces."""
    return wordpiece_tokenizer((p for w in words for p in pieces(w)), folder)


def token_ids(tok, outputs: list[list[str]]) -> list[list[int]]:
    return [tok.convert_tokens_to_ids([p for w in o for p in pieces(w)]) for o in outputs]


def write_log(path: Path, ids: list[list[int]]) -> None:
    entries = [
        {"seq_id": i, "qsl_idx": i, "data": np.asarray(t, dtype="<i4").tobytes().hex().upper(), "token_count": len(t)}
        for i, t in enumerate(ids)
    ]
    path.write_text(json.dumps(entries))


def nltk_punkt_tab(root: Path) -> Path:
    """The English punkt_tab folder `nltk.sent_tokenize` loads, written from the bundled model (no download)."""
    from punkt.data import load_module

    m = load_module("english")
    d = root / "tokenizers" / "punkt_tab" / "english"
    d.mkdir(parents=True, exist_ok=True)
    (d / "abbrev_types.txt").write_text("\n".join(sorted(m.ABBREV_TYPES)) + "\n")
    (d / "collocations.tab").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(m.COLLOCATIONS)))
    (d / "sent_starters.txt").write_text("\n".join(sorted(m.SENT_STARTERS)) + "\n")
    (d / "ortho_context.tab").write_text("".join(f"{w}\t{f}\n" for w, f in sorted(m.ORTHO_CONTEXT.items())))
    return root


# ---------------------------------------------------------------- the two methods


def reference_fmeasures(pairs) -> list[tuple[float, ...]]:
    """rouge_score's own per-pair F-measures (target, prediction), as evaluate's rouge computes them."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(KEYS), use_stemmer=True)
    out = []
    for target, pred in pairs:
        s = scorer.score(target, pred)
        out.append(tuple(s[k].fmeasure for k in KEYS))
    return out


def _reference_parts(preds: list[str], targets: list[str]) -> tuple[list[tuple[float, ...]], int]:
    import nltk

    preds = ["\n".join(nltk.sent_tokenize(p.strip())) for p in preds]
    targets = ["\n".join(nltk.sent_tokenize(t.strip())) for t in targets]
    return reference_fmeasures(zip(targets, preds, strict=True)), int(np.sum([len(p) for p in preds]))


def _reference_result(per: list[tuple[float, ...]], gen_len: int) -> dict:
    result: dict = {k: round(float(np.mean([s[i] for s in per])) * 100, 4) for i, k in enumerate(KEYS)}
    result["gen_len"] = gen_len
    return result


def reference_method(preds: list[str], targets: list[str]) -> tuple[dict, list[tuple[float, ...]]]:
    """evaluate-accuracy.py steps after batch_decode: postprocess_text, rouge per sample, rounded means, gen_len."""
    per, gen_len = _reference_parts(preds, targets)
    return _reference_result(per, gen_len), per


def repro_method(preds: list[str], targets: list[str]) -> dict:
    return accuracy.score_texts(preds, targets, workers=1)


def _fresh_repro() -> None:
    """No warm caches carried from an earlier timed run: new Punkt memo, new scorer (loads are not timed)."""
    punkt.cache_clear()
    accuracy._scorer.cache_clear()
    punkt()
    accuracy._scorer()


def _use_nltk_data(tmp: Path) -> str:
    import nltk

    folder = str(nltk_punkt_tab(tmp / "nltk_data"))
    nltk.data.path.insert(0, folder)
    nltk.sent_tokenize("Warm up. Load the model.")
    return folder


def compare(mine: list[tuple[float, ...]], ref: list[tuple[float, ...]]) -> dict:
    """Per key: samples whose F-measure differs at all, the largest difference, and the first such samples."""
    out = {}
    for i, k in enumerate(KEYS):
        diffs = [(abs(a[i] - b[i]), n) for n, (a, b) in enumerate(zip(mine, ref, strict=True)) if a[i] != b[i]]
        out[k] = {
            "differ": len(diffs),
            "max_abs": max((d for d, _ in diffs), default=0.0),
            "samples": [n for _, n in sorted(diffs, reverse=True)[:10]],
        }
    return out


def agree4(a: dict, b: dict) -> bool:
    return all(f"{a[k]:.4f}" == f"{b[k]:.4f}" for k in KEYS) and a["gen_len"] == b["gen_len"]


# ---------------------------------------------------------------- side by side


def breakdown(preds: list[str], targets: list[str]) -> dict:
    """Where each side's time goes: post-processing (NLTK Punkt on both) and ROUGE, timed apart, ms per sample."""
    import nltk

    n = len(preds)
    t_ref_post, (ref_preds, ref_targets) = _timed(
        lambda: (
            ["\n".join(nltk.sent_tokenize(p.strip())) for p in preds],
            ["\n".join(nltk.sent_tokenize(t.strip())) for t in targets],
        )
    )
    t_ref_rouge, _ = _timed(reference_fmeasures, list(zip(ref_targets, ref_preds, strict=True)))
    _fresh_repro()
    t_post, texts = _timed(accuracy._postprocess_all, list(preds) + list(targets), 1)
    t_rouge, _ = _timed(accuracy.score_pairs, texts[n:], texts[:n])
    return {
        "samples": n,
        "reference_postprocess_ms": t_ref_post / n * 1000,
        "reference_rouge_ms": t_ref_rouge / n * 1000,
        "repro_postprocess_ms": t_post / n * 1000,
        "repro_rouge_ms": t_rouge / n * 1000,
        "rouge_ratio": t_ref_rouge / t_rouge,
        "postprocess_ratio": t_ref_post / t_post,
    }


def _timed(fn, *args):
    gc.collect()
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def side_by_side(base: int, repeats: int, scales=(1, 4, 16)) -> dict:
    outputs, refs = make_case(base * max(scales), seed=1)
    preds_all = [" ".join(o) for o in outputs]
    rows = []
    for scale in scales:
        n = base * scale
        preds, targets = preds_all[:n], refs[:n]
        mine_t, ref_t, ratios = [], [], []
        mine = ref = None
        for r in range(repeats):
            order = ("repro", "ref") if r % 2 == 0 else ("ref", "repro")
            times = {}
            for who in order:
                if who == "repro":
                    _fresh_repro()
                    times[who], mine = _timed(repro_method, preds, targets)
                else:
                    times[who], (ref, ref_per) = _timed(reference_method, preds, targets)
            mine_t.append(times["repro"])
            ref_t.append(times["ref"])
            ratios.append(times["ref"] / times["repro"])
        _, per_mine = accuracy.sample_scores(preds, targets, workers=1)
        diff = compare(per_mine, ref_per)
        rows.append(
            {
                "scale": scale,
                "samples": n,
                "repro_s": statistics.median(mine_t),
                "reference_s": statistics.median(ref_t),
                "ratio": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
                "repro_ms_per_sample": statistics.median(mine_t) / n * 1000,
                "reference_ms_per_sample": statistics.median(ref_t) / n * 1000,
                "scores_repro": mine,
                "scores_reference": ref,
                "agree_4_decimals": agree4(mine, ref),
                "samples_differing": sum(d["differ"] for d in diff.values()),
                "max_abs_difference": max(d["max_abs"] for d in diff.values()),
            }
        )
    mid = base * scales[len(scales) // 2]
    parts = breakdown(preds_all[:mid], refs[:mid])
    first = rows[0]
    for row in rows:
        row["repro_cost_growth"] = row["repro_ms_per_sample"] / first["repro_ms_per_sample"]
        row["reference_cost_growth"] = row["reference_ms_per_sample"] / first["reference_ms_per_sample"]
    return {"base": base, "repeats": repeats, "rows": rows, "breakdown": parts}


def print_side_by_side(res: dict) -> None:
    print(
        f"{'samples':>8} {'repro s':>8} {'ref s':>8} {'ratio (min-max)':>20} {'repro ms/smp':>13} "
        f"{'ref ms/smp':>11} {'growth repro/ref':>17} {'4-dec agree':>12} {'smp differ':>10}"
    )
    for r in res["rows"]:
        print(
            f"{r['samples']:>8} {r['repro_s']:>8.3f} {r['reference_s']:>8.2f} "
            f"{r['ratio']:>8.1f}x ({r['ratio_min']:.1f}-{r['ratio_max']:.1f}) {r['repro_ms_per_sample']:>13.3f} "
            f"{r['reference_ms_per_sample']:>11.2f} "
            f"{r['repro_cost_growth']:>8.2f}/{r['reference_cost_growth']:<8.2f} "
            f"{r['agree_4_decimals']!s:>12} {r['samples_differing']:>10}"
        )
    last = res["rows"][-1]
    linear = all(0.8 < r["repro_cost_growth"] < 1.25 for r in res["rows"])
    b = res["breakdown"]
    print(
        f"where the time goes ({b['samples']} samples, ms/sample): post-processing (NLTK Punkt, both sides) "
        f"repro {b['repro_postprocess_ms']:.3f} vs reference {b['reference_postprocess_ms']:.3f} "
        f"({b['postprocess_ratio']:.1f}x); ROUGE repro {b['repro_rouge_ms']:.3f} vs reference "
        f"{b['reference_rouge_ms']:.2f} ({b['rouge_ratio']:.0f}x)"
    )
    print(
        f"repro cost per sample {'stays flat (linear)' if linear else 'changes with size'} from "
        f"{res['rows'][0]['samples']} to {last['samples']} samples; scores: {last['scores_repro']}"
    )


# ---------------------------------------------------------------- every sample of a full log


def full_check(n: int, jobs: int, tmp: Path) -> dict:
    """An n-sample LoadGen log, read, decoded and scored: repro's evaluate_accuracy_log against the reference method.

    Both sides decode with the same already-loaded tokenizer; loading it is start-up, timed by --startup."""
    outputs, refs = make_case(n, seed=0)
    words = sorted({w for o in outputs for w in o})
    tok = word_tokenizer(words, tmp / "tokenizer")
    log = tmp / accuracy.ACCURACY_JSON
    write_log(log, token_ids(tok, outputs))
    shape = {
        "non_ascii_predictions": sum(any(not w.isascii() for w in o) for o in outputs),
        "non_ascii_references": sum(not r.isascii() for r in refs),
        "empty_predictions": sum(not o for o in outputs),
        "token_less_predictions": sum(bool(o) and all(w in NO_TOKENS for w in o) for o in outputs),
        "predictions_over_700_words": sum(len(o) >= 700 for o in outputs),
    }
    _fresh_repro()
    loaded = accuracy.load_tokenizer(tmp / "tokenizer")
    t_mine, mine = _timed(accuracy.evaluate_accuracy_log, log, refs, loaded)
    gc.collect()
    t0 = time.perf_counter()
    samples = accuracy.read_accuracy_log(log, len(refs))
    decoded = loaded.batch_decode([ids for _, ids in samples], skip_special_tokens=True)
    assert decoded == [" ".join(o) for o in outputs]
    targets = [refs[i] for i, _ in samples]
    if jobs <= 1:
        ref, ref_per = reference_method(decoded, targets)
    else:
        import multiprocessing as mp

        step = -(-n // (jobs * 8))
        chunks = [(decoded[i : i + step], targets[i : i + step]) for i in range(0, n, step)]
        with mp.get_context("fork").Pool(jobs) as pool:
            parts = pool.starmap(_reference_parts, chunks)
        ref_per = [x for per, _ in parts for x in per]
        ref = _reference_result(ref_per, sum(g for _, g in parts))
    t_ref = time.perf_counter() - t0
    _, mine_per = accuracy.sample_scores(decoded, targets)
    diff = compare(mine_per, ref_per)
    return {
        "samples": n,
        "shape": shape,
        "repro_s": t_mine,
        "reference_s": t_ref,
        "reference_jobs": jobs,
        "scores_repro": mine,
        "scores_reference": ref,
        "agree_4_decimals": all(f"{mine[k]:.4f}" == f"{ref[k]:.4f}" for k in KEYS),
        "per_sample": diff,
    }


# ---------------------------------------------------------------- fixed start-up cost


_REPRO_START = """
import time, sys; t0 = time.perf_counter(); marks = []
from pathlib import Path
from repro.results import accuracy as A; marks.append(("import repro.results.accuracy", time.perf_counter()))
from repro.core.families.common import punkt; punkt(); marks.append(("nltk + Punkt model", time.perf_counter()))
A._scorer(); marks.append(("rouge-score-rs", time.perf_counter()))
tok = A.load_tokenizer(sys.argv[1]); marks.append(("transformers + tokenizer load", time.perf_counter()))
A.evaluate_accuracy_log(Path(sys.argv[2]), [sys.argv[3]], tok, workers=1)
marks.append(("one sample", time.perf_counter()))
prev = t0
for name, t in marks:
    print(f"{name}\\t{t - prev:.4f}"); prev = t
"""

_REFERENCE_START = """
import sys, json
from transformers import AutoTokenizer
import nltk
import numpy as np
from rouge_score import rouge_scorer
nltk.data.path.insert(0, sys.argv[4])
tok = AutoTokenizer.from_pretrained(sys.argv[1], model_max_length=2048, padding_side="left", use_fast=False)
ids = [np.frombuffer(bytes.fromhex(e["data"]), np.int32) for e in json.load(open(sys.argv[2]))]
preds = ["\\n".join(nltk.sent_tokenize(p.strip())) for p in tok.batch_decode(ids, skip_special_tokens=True)]
refs = ["\\n".join(nltk.sent_tokenize(sys.argv[3].strip()))]
scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=True)
[scorer.score(t, p) for t, p in zip(refs, preds)]
"""


def startup(tmp: Path, repeats: int) -> dict:
    """Wall time of a fresh process that scores a one-sample log: repro's path vs the reference script's, vs `pass`."""
    outputs, refs = make_case(1, seed=3)
    tok = word_tokenizer(sorted(set(outputs[0])), tmp / "tok1")
    log = tmp / "one" / accuracy.ACCURACY_JSON
    log.parent.mkdir()
    write_log(log, token_ids(tok, outputs))
    nltk_dir = nltk_punkt_tab(tmp / "nltk_data")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")])
        ),
    }
    cmds = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "repro": [sys.executable, "-c", _REPRO_START, str(tmp / "tok1"), str(log), refs[0]],
        "reference": [sys.executable, "-c", _REFERENCE_START, str(tmp / "tok1"), str(log), refs[0], str(nltk_dir)],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    phases: dict[str, list[float]] = {}
    for r in range(repeats):
        for name in list(cmds) if r % 2 == 0 else list(cmds)[::-1]:
            t0 = time.perf_counter()
            proc = subprocess.run(cmds[name], env=env, capture_output=True, text=True, check=True)
            times[name].append(time.perf_counter() - t0)
            if name == "repro":
                for line in proc.stdout.splitlines():
                    k, v = line.split("\t")
                    phases.setdefault(k, []).append(float(v))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "repeats": repeats,
        "median_s": med,
        "min_s": {k: min(v) for k, v in times.items()},
        "max_s": {k: max(v) for k, v in times.items()},
        "repro_phases_median_s": {k: statistics.median(v) for k, v in phases.items()},
        "ratio_reference_over_repro": med["reference"] / med["repro"],
    }


def print_startup(res: dict) -> None:
    for k, v in res["median_s"].items():
        print(
            f"start-up {k:>16}: {v:.3f} s median ({res['min_s'][k]:.3f}-{res['max_s'][k]:.3f}, {res['repeats']} runs)"
        )
    print("repro phases: " + ", ".join(f"{k} {v:.3f} s" for k, v in res["repro_phases_median_s"].items()))


# ---------------------------------------------------------------- main


def _run_all(args: argparse.Namespace, tmp: Path, result: dict) -> None:
    result["side_by_side"] = sbs = side_by_side(args.base, args.repeats)
    print_side_by_side(sbs)
    if args.full_check:
        result["full_check"] = fc = full_check(args.full_check, args.jobs, tmp)
        print(
            f"full log, {fc['samples']} samples ({fc['shape']}): repro {fc['repro_s']:.1f} s "
            f"(read + decode + score), reference {fc['reference_s']:.1f} s on {fc['reference_jobs']} process(es): "
            f"{fc['reference_s'] / fc['repro_s']:.1f}x; agree to 4 decimals: {fc['agree_4_decimals']}"
        )
        print(f"scores: {fc['scores_repro']}")
        print(
            "per-sample differences: "
            + ", ".join(f"{k} {v['differ']} (max {v['max_abs']:g})" for k, v in fc["per_sample"].items())
        )
    if args.startup:
        result["startup"] = st = startup(tmp, max(3, args.repeats))
        print_startup(st)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=int, default=96, help="samples at 1x (also run at 4x and 16x)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating repro/reference pairs per size")
    ap.add_argument("--full-check", type=int, default=0, metavar="N", help="also score an N-sample log both ways")
    ap.add_argument("--jobs", type=int, default=1, help="processes for the reference in --full-check")
    ap.add_argument("--startup", action="store_true", help="also time the fixed start-up of a one-sample log")
    ap.add_argument("--all-cores", action="store_true", help="do not pin to one core")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    args = ap.parse_args(argv)
    if args.smoke:
        args.base, args.repeats = 1, 1
    if not args.all_cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    result: dict = {
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": sys.version.split()[0],
        "loadavg_start": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="repro-acc-bench-") as tmp_name:
        tmp = Path(tmp_name)
        import nltk

        nltk_dir = _use_nltk_data(tmp)
        try:
            _run_all(args, tmp, result)
        finally:
            nltk.data.path.remove(nltk_dir)
    result["loadavg_end"] = os.getloadavg()
    print(
        f"load average (1 min) at start {result['loadavg_start'][0]:.1f}, at end {result['loadavg_end'][0]:.1f} "
        f"on {os.cpu_count()} cores: other work on the machine widens the spread"
    )
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
