"""Llama-2-70B (llama2-70b-99 and llama2-70b-99.9): OpenOrca, ROUGE over every sample, a dense GQA model.

mlcommons/inference @ b66003e1: `language/llama2-70b/processorca.py` writes the dataset's columns (tok_input,
tok_input_length, output, tok_output, tok_output_length; the calibration set's prompt text is `input`),
`language/llama2-70b/evaluate-accuracy.py` post-processes both sides with NLTK Punkt and scores rouge1, rouge2,
rougeL and rougeLsum over every sample. The figures are in repro/data/benchmarks/llama2-70b-99*.yaml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.core.families import Family, PreparedRows
from repro.core.families.common import ROUGE_KINDS, sentences, token_rows


def read_dataset(frame: Any, source: Path) -> PreparedRows:
    return token_rows(
        frame,
        source,
        what="MLPerf's tokenized OpenOrca set",
        input_length="tok_input_length",
        text="output",
        output_ids="tok_output",
        output_length="tok_output_length",
    )


def stand_in(prompts: list[list[int]], texts: list[str], out_len: int) -> dict[str, dict[str, list[Any]]]:
    """The two OpenOrca pickles' columns (processorca.py); the calibration file holds the prompt text alone."""
    n = len(prompts)
    sampled: dict[str, list[Any]] = {
        "input": texts,
        "tok_input": prompts,
        "tok_input_length": [len(p) for p in prompts],
        "output": [" ".join(["w3"] * out_len)] * n,
        "tok_output_length": [out_len] * n,
    }
    return {"sampled": sampled, "calibration": {"input": texts[:8]}}


FAMILY = Family(
    name="llama2_70b",
    read_dataset=read_dataset,
    kinds=ROUGE_KINDS,
    postprocess=sentences,
    stand_in=stand_in,
)
