"""Llama-3.1-405B (llama3.1-405b): MLCommons' processed LongBench/RULER/GovReport subset, scored per sample by the
dataset's `metric` column, a dense GQA model.

mlcommons/inference: `language/llama3.1-405b/dataset.py` @ b66003e1 reads input, tok_input, tok_input_len;
`language/llama3.1-405b/evaluate-accuracy.py` @ e0d093d6 post-processes both sides with NLTK Punkt, scores
ROUGE-L over the 'rouge' samples and an exact match over the 'niah_em' and 'qa_em' ones (the scorers below), each
the mean over its own samples. The figures are in repro/data/benchmarks/llama3.1-405b.yaml.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from repro.core.families import Family, MetricKind, PreparedRows
from repro.core.families.common import ROUGE_KINDS, sentences, token_rows

_UUID = re.compile(r"[\w]{8}-[\w]{4}-[\w]{4}-[\w]{4}-[\w]{12}")
_ANSWER = "Answer: "
KINDS = ("rouge", "niah_em", "qa_em")
"""The values of the dataset's `metric` column, in the order the real set mixes them."""


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


def read_dataset(frame: Any, source: Path) -> PreparedRows:
    return token_rows(
        frame,
        source,
        what="MLPerf's processed Llama-3.1-405B set",
        input_length="tok_input_len",
        text="gt_output",
        kind="metric",
    )


def stand_in(prompts: list[list[int]], texts: list[str], out_len: int) -> dict[str, dict[str, list[Any]]]:
    """The two pickles' columns (dataset.py): each sample's metric in turn, as the real set mixes them; the
    calibration file holds the prompts, text and ids."""
    n = len(prompts)
    sampled: dict[str, list[Any]] = {
        "input": texts,
        "tok_input": prompts,
        "tok_input_len": [len(p) for p in prompts],
        "gt_output": [" ".join(["w3"] * out_len)] * n,
        "metric": [KINDS[i % len(KINDS)] for i in range(n)],
    }
    calibration: dict[str, list[Any]] = {
        "input": texts[:8],
        "tok_input": prompts[:8],
        "tok_input_len": [len(p) for p in prompts[:8]],
    }
    return {"sampled": sampled, "calibration": calibration}


FAMILY = Family(
    name="llama3_1_405b",
    read_dataset=read_dataset,
    kinds={"rougeL": ROUGE_KINDS["rougeL"], "exact_match": MetricKind()},
    scorers={"niah_em": niah_em, "qa_em": qa_em},
    sample_kinds=KINDS,
    postprocess=sentences,
    stand_in=stand_in,
)
