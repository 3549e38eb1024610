"""Score an MLPerf accuracy log the way the benchmark's own evaluation does: the metrics are the benchmark file's
(repro/data/benchmarks/), how each kind is computed and each sample scored is its module's (repro/core/families/:
llama2-70b ROUGE over every sample as `language/llama2-70b/evaluate-accuracy.py`; llama3.1-405b ROUGE-L or an exact
match per sample, by the dataset's metric column, as `language/llama3.1-405b/evaluate-accuracy.py`).

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
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from repro.core.benchmarks import Benchmark
from repro.core.errors import InputError
from repro.core.families.common import punkt, sentences
from repro.core.fsutil import atomic_write_text, sha256_file
from repro.core.safeio import iter_json_list, open_regular

ACCURACY_JSON = "mlperf_log_accuracy.json"
ACCURACY_TXT = "accuracy.txt"
ROUGE_KEYS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
_NEXT = "re-run `repro run offline --accuracy`"
_MAX_LOG = 1 << 30  # a whole Llama-2-70B log (up to 1,024 int32 ids a sample, in hex) is ~210 MB (int64: ~410 MB)
_MAX_ENTRIES = 1_000_000
_MAX_ENTRY = 1 << 20


# ---------------------------------------------------------------- reading the log


def read_accuracy_log(path: Path, n_references: int | None = None) -> list[tuple[int, np.ndarray]]:
    """(qsl_idx, int32 token ids) for each first occurrence of a qsl_idx, in log order, as the reference keeps them.

    Streamed entry by entry (#29): a 200 MB `[{},{},...]` stops at its first entry instead of expanding to 12 GB,
    and the caps bound a log of valid entries (a full Llama-2-70B log is ~200 MB, one entry per sample)."""
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

postprocess = sentences
"""MLCommons' Llama post-processing (strip, one sentence per line): the shipped families' (core/families/common.py)."""


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


def _post_chunk(texts: list[str], fn: Callable[[str], str] = sentences) -> list[str]:
    return [fn(t) for t in texts]


def _postprocess_all(texts: list[str], workers: int, fn: Callable[[str], str] = sentences) -> list[str]:
    """The family's post-processing of every text (Punkt is pure Python: spread over forked processes when more
    than one core is asked for)."""
    chunk = max(256, math.ceil(len(texts) / (workers * 4)))
    chunks = [texts[i : i + chunk] for i in range(0, len(texts), chunk)]
    import multiprocessing as mp

    if workers <= 1 or len(chunks) <= 1 or "fork" not in mp.get_all_start_methods():
        return _post_chunk(texts, fn)
    pool = mp.get_context("fork").Pool(min(workers, len(chunks)), initializer=_worker_signals)
    try:
        out = [x for part in pool.imap(partial(_post_chunk, fn=fn), chunks) for x in part]
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
    punkt()  # loaded once in this process, before the workers fork
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


def score_benchmark(
    predictions: list[str],
    references: list[str],
    bench: Benchmark,
    sample_metrics: Sequence[str] | None = None,
    *,
    workers: int | None = None,
) -> dict[str, Any]:
    """Each of the benchmark's metrics over its samples, as its evaluation prints them, plus gen_len; how each is
    computed is its module's (`bench.spec`, repro/core/families/).

    Both sides are post-processed by the family first (the Llama ones: strip, one sentence per line). A metric with
    `scorers` covers the samples whose dataset per-sample column names one of them (llama3.1-405b: rougeL over
    'rouge' samples, exact_match over 'niah_em' and 'qa_em' ones); without, every sample. A ROUGE kind is
    rouge_score's F-measure x 100: with `digits` the mean F-measure x 100 rounded (llama2-70b), else the unrounded
    mean of per-sample x 100 values (llama3.1-405b). Any other kind is the mean of per-sample scores (x 100): its
    own scorer's, or each sample's by its kind. A metric no sample is scored by is left out, as a pandas mean over
    no rows is."""
    if not predictions:
        raise InputError("the accuracy log holds no samples.", _NEXT)
    if len(predictions) != len(references):
        raise ValueError("predictions and references differ in length")
    family = bench.spec
    needs_kind = any(m.scorers for m in bench.accuracy.metrics)
    if needs_kind and (sample_metrics is None or len(sample_metrics) != len(predictions)):
        raise InputError(
            f"the {bench.name} evaluation needs each sample's metric (the dataset's 'metric' column), and the "
            "prepared dataset has none.",
            "`repro setup --force` to prepare the dataset again",
        )
    workers = default_workers() if workers is None else workers
    if family.postprocess is not None:
        if family.postprocess is sentences:
            punkt()  # loaded once in this process, before the workers fork
        texts = _postprocess_all(list(predictions) + list(references), workers, family.postprocess)
    else:
        texts = list(predictions) + list(references)
    preds, refs = texts[: len(predictions)], texts[len(predictions) :]
    rouge: list[tuple[float, float, float, float]] | None = None
    result: dict[str, Any] = {}
    for metric in bench.accuracy.metrics:
        kind = family.kinds[metric.kind]
        picked = [
            i
            for i in range(len(preds))
            if not metric.scorers or (sample_metrics and sample_metrics[i] in metric.scorers)
        ]
        if not picked:
            continue
        if kind.rouge is not None:
            rouge = rouge if rouge is not None else score_pairs(refs, preds)
            column = ROUGE_KEYS.index(kind.rouge)
            values = [rouge[i][column] for i in picked]
            if metric.digits is not None:
                result[metric.name] = round(float(np.mean(values)) * 100, metric.digits)
            else:
                result[metric.name] = float(np.mean([v * 100 for v in values]))
            continue
        scores = []
        for i in picked:
            scorer = kind.scorer or (family.scorers.get(sample_metrics[i]) if sample_metrics else None)
            if scorer is None:
                said = sample_metrics[i] if sample_metrics else None
                raise InputError(
                    f"benchmark {bench.name}: metric {metric.name} ({metric.kind}) scores each sample by its kind, "
                    f"and sample {i}'s ({said!r}) is none module {family.name} scores.",
                    f"name the per-sample kinds in the metric's scorers ({', '.join(family.scorers) or 'none'})",
                )
            scores.append(scorer(refs[i], preds[i]))
        mean = float(np.mean(scores))
        result[metric.name] = round(mean, metric.digits) if metric.digits is not None else mean
    result["gen_len"] = int(sum(len(p) for p in preds))
    return result


Evaluator = Callable[[Path, list[str], Any, Benchmark, "Sequence[str] | None", "int | None"], dict[str, Any]]
"""(accuracy log, references by qsl_idx, tokenizer, benchmark, per-sample kinds by qsl_idx, workers) -> the scores
exactly as its accuracy.txt states them (gen_num, tokens_per_sample and the rest included)."""
EVALUATORS: dict[str, str] = {}
"""Whole-log evaluators by the name a benchmark module's `evaluator` gives (repro/core/families/), each a
`module:function` of repro.results imported when a log of that benchmark is scored (as run/backends/ modules are
imported for the core's backend names)."""


def evaluator(bench: Benchmark) -> Evaluator:
    """The whole-log evaluator the benchmark's module names; InputError when none is registered by that name."""
    import importlib

    name = bench.spec.evaluator or ""
    where = EVALUATORS.get(name)
    if where is None:
        raise InputError(
            f"benchmark {bench.name}: its module {bench.module} names the evaluator '{name}', which repro does not "
            f"have (it has {', '.join(EVALUATORS) or 'none'}).",
            "update repro, or name one of those in the module's Family(evaluator=...)",
        )
    module, _, function = where.partition(":")
    fn: Evaluator = getattr(importlib.import_module(module), function)
    return fn


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
    per-sample `sample_metrics` indexed by qsl_idx where it scores by kind), or its module's whole-log evaluator;
    without, every ROUGE kind.
    """
    if bench is not None and bench.spec.evaluator is not None:
        return evaluator(bench)(Path(accuracy_json), references, tokenizer, bench, sample_metrics, workers)
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


TOTALS = ("gen_len", "gen_num", "gen_tok_len", "tokens_per_sample")
"""What every benchmark's evaluation prints after its metrics (evaluate-accuracy.py's totals), in that order."""


def format_accuracy_txt(scores: dict, log_sha256: str) -> str:
    """The scores in their own order (the benchmark's metrics), then the totals, as evaluate-accuracy.py prints."""
    keys = (*(k for k in scores if k not in TOTALS), *TOTALS)
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
    missing = [k for k in TOTALS if k not in scores]
    if missing or len(scores) == len(TOTALS):
        raise ValueError(f"scores lack {', '.join(missing)}")
    out = run_dir / ACCURACY_TXT
    atomic_write_text(out, format_accuracy_txt(scores, sha256_file(log)))
    return out
