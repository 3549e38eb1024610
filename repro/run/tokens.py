"""The model's own tokenizer, for turning a server's text answer back into token ids (as NVIDIA's harness does)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")


def tokenizer_dir(candidates: Iterable[str | Path | None]) -> Path | None:
    """The first folder that holds tokenizer files: the model folder `repro setup` filled, then the dataset's."""
    for cand in candidates:
        if cand and Path(cand).is_dir() and any((Path(cand) / f).exists() for f in TOKENIZER_FILES):
            return Path(cand)
    return None


def load_tokenizer(candidates: Iterable[str | Path | None]) -> Any | None:
    """A transformers tokenizer from the first usable folder; None when there is none or transformers is missing."""
    folder = tokenizer_dir(candidates)
    if folder is None:
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None
    return AutoTokenizer.from_pretrained(str(folder))
