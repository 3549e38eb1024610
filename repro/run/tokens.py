"""The model's own tokenizer, for turning a server's text answer back into token ids (as NVIDIA's harness does).

`AutoTokenizer` costs an `--endpoint` run ~700 MB before any request: in transformers 5 its module imports the
config machinery, which imports torch. For a Llama tokenizer (the only model repro runs) the class it would pick is
known from the folder's own files, and that class loads without torch, giving the same tokenizer and the same ids.
Anything else still goes through `AutoTokenizer`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")
_GENERIC = ("TokenizersBackend", "PreTrainedTokenizerFast")
_LLAMA = ("LlamaTokenizer", "LlamaTokenizerFast")
_CONFIG_CAP = 1 << 20  # a tokenizer_config.json or config.json is a few KB; a larger one goes the long way


def tokenizer_dir(candidates: Iterable[str | Path | None]) -> Path | None:
    """The first folder that holds tokenizer files: the model folder `repro setup` filled, then the dataset's."""
    for cand in candidates:
        if cand and Path(cand).is_dir() and any((Path(cand) / f).exists() for f in TOKENIZER_FILES):
            return Path(cand)
    return None


def _small_json(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > _CONFIG_CAP:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def direct_class(folder: Path) -> str | None:
    """The transformers class `AutoTokenizer` picks for a Llama tokenizer folder (transformers 5.x rules: a generic
    class stays generic; `LlamaTokenizer` unless tokenizer.json is byte-level); None where those rules do not
    settle it (remote code, another model type, another class), and AutoTokenizer decides."""
    cfg = _small_json(folder / "tokenizer_config.json")
    if cfg is None or "auto_map" in cfg or not (folder / "tokenizer.json").is_file():
        return None
    if (folder / "config.json").exists():
        model = _small_json(folder / "config.json")
        if model is None or model.get("model_type") != "llama" or "auto_map" in model:
            return None
    name = cfg.get("tokenizer_class")
    if name in _GENERIC:
        return "TokenizersBackend"  # absent in transformers 4: load_tokenizer falls back to AutoTokenizer
    if name not in _LLAMA:
        return None
    import transformers

    # transformers 4 has neither the class nor the rule: AutoTokenizer decides there.
    byte_level = getattr(getattr(transformers, "TokenizersBackend", None), "_tokenizer_json_has_byte_level", None)
    if byte_level is None:
        return None
    return "TokenizersBackend" if byte_level(str(folder), local_files_only=True) else "LlamaTokenizer"


def load_tokenizer(candidates: Iterable[str | Path | None]) -> Any | None:
    """A transformers tokenizer from the first usable folder; None when there is none or transformers is missing."""
    folder = tokenizer_dir(candidates)
    if folder is None:
        return None
    try:
        import transformers
    except ImportError:
        return None
    name = direct_class(folder)
    cls = getattr(transformers, name, None) if name else None
    if cls is None:
        from transformers import AutoTokenizer

        cls = AutoTokenizer
    return cls.from_pretrained(str(folder))
