"""The model's own tokenizer, for turning a server's text answer back into token ids (as NVIDIA's harness does).

Where the folder holds a tokenizer.json, the `tokenizers` library (in the base install) runs it, built as
transformers 5 builds the class `AutoTokenizer` would pick for it: a generic fast tokenizer (and a byte-level one
that names `LlamaTokenizer`) is the file as saved; a SentencePiece-style `LlamaTokenizer` is the file's vocabulary
and merges under `LlamaTokenizer`'s own pipeline (no normalizer, a Metaspace pre-tokenizer, byte fallback). So an
`--endpoint` run and a rehearsal need neither transformers nor torch, and get the ids transformers would give
(tests/test_tokens.py compares them). Anything else (remote code, another model type, a folder with only
tokenizer.model) is left to transformers' `AutoTokenizer`, and without transformers the message names its extra.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from repro.core.errors import InputError
from repro.core.safeio import read_bytes_bounded

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")
_GENERIC = ("TokenizersBackend", "PreTrainedTokenizerFast")
_LLAMA = ("LlamaTokenizer", "LlamaTokenizerFast")
_CONFIG_CAP = 1 << 20  # a tokenizer_config.json or config.json is a few KB; a larger one goes the long way
_TOKENIZER_CAP = 64 << 20  # Llama-3's tokenizer.json is 9 MB
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# transformers' clean_up_tokenization, applied on decode when the config asks for it
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


def tokenizer_dir(candidates: Iterable[str | Path | None]) -> Path | None:
    """The first folder that holds tokenizer files: the model folder `repro setup` filled, then the dataset's."""
    for cand in candidates:
        if cand and Path(cand).is_dir() and any((Path(cand) / f).exists() for f in TOKENIZER_FILES):
            return Path(cand)
    return None


def _small_json(path: Path, cap: int = _CONFIG_CAP) -> dict[str, Any] | None:
    try:
        doc = json.loads(read_bytes_bounded(path, cap, what="tokenizer file"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _byte_level(folder: Path) -> bool:
    """transformers 5's rule (`TokenizersBackend._tokenizer_json_has_byte_level`): the file names "ByteLevel"."""
    try:
        return b'"ByteLevel"' in read_bytes_bounded(folder / "tokenizer.json", _TOKENIZER_CAP, what="tokenizer")
    except (OSError, ValueError):
        return False


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
        return "TokenizersBackend"
    if name not in _LLAMA:
        return None
    return "TokenizersBackend" if _byte_level(folder) else "LlamaTokenizer"


class FileTokenizer:
    """A tokenizer.json run by `tokenizers` alone, with the calls harness and scorers make of a transformers one:
    encode, decode, batch_decode and get_vocab (and its name_or_path, for run.json)."""

    def __init__(self, tok: Any, folder: Path, kind: str, cleanup: bool) -> None:
        self._tok = tok
        self.name_or_path = str(folder)
        self.kind = kind
        self._cleanup = cleanup

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        text = str(self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens))
        if self._cleanup:
            for a, b in _CLEANUP:
                text = text.replace(a, b)
        return text

    def batch_decode(self, ids: Sequence[Sequence[int]], skip_special_tokens: bool = False) -> list[str]:
        """The accuracy scorers decode a whole log at once, as they do with a transformers tokenizer."""
        return [self.decode(one, skip_special_tokens=skip_special_tokens) for one in ids]

    def get_vocab(self) -> dict[str, int]:
        return dict(self._tok.get_vocab(with_added_tokens=True))


def _llama_pipeline(doc: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any] | None:
    """tokenizer.json as transformers 5's `LlamaTokenizer.__init__` rebuilds it: the file's BPE vocabulary and merges
    (fuse_unk, byte fallback, no unk token: an unknown piece is dropped), no normalizer, Metaspace with the prepend
    scheme of `legacy` and `add_prefix_space`, and its decoder; None for a model that is not BPE."""
    model = doc.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE":
        return None
    vocab = model.get("vocab")
    if isinstance(vocab, list):
        vocab = {(v[0] if isinstance(v, list) else v): i for i, v in enumerate(vocab)}
    prefix = cfg.get("add_prefix_space")
    prefix = True if prefix is None else bool(prefix)
    scheme = ("first" if not cfg.get("legacy", False) else "always") if prefix else "never"
    decoders: list[dict[str, Any]] = [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ]
    if prefix:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    out = dict(doc)
    out["model"] = {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": True,
        "byte_fallback": True,
        "ignore_merges": False,
        "vocab": vocab,
        "merges": model.get("merges", []),
    }
    out["normalizer"] = None
    out["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": False}
    out["decoder"] = {"type": "Sequence", "decoders": decoders}
    return out


def _content(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _add_config_tokens(tok: Any, cfg: dict[str, Any], file_added: list[Any]) -> None:
    """The added and special tokens transformers puts on top of the backend: the config's added_tokens_decoder
    (else the file's added_tokens), then each named special token the tokenizer does not already have."""
    from tokenizers import AddedToken

    have = {str(c) for c in tok.get_added_tokens_decoder().values()}
    listed = cfg.get("added_tokens_decoder")
    entries = list(listed.values()) if isinstance(listed, dict) else file_added
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str) or entry["content"] in have:
            continue
        keys = ("single_word", "lstrip", "rstrip", "normalized", "special")
        added = AddedToken(entry["content"], **{k: bool(entry[k]) for k in keys if k in entry})
        (tok.add_special_tokens if entry.get("special") else tok.add_tokens)([added])
        have.add(entry["content"])
    extra = cfg.get("additional_special_tokens") or cfg.get("extra_special_tokens") or []
    named = [cfg.get(k) for k in _SPECIAL_KEYS] + (list(extra) if isinstance(extra, list) else [])
    for value in named:
        content = _content(value)
        if content and content not in have:
            tok.add_special_tokens([AddedToken(content, special=True, normalized=False)])
            have.add(content)


def file_tokenizer(folder: Path) -> FileTokenizer | None:
    """The folder's tokenizer.json as `tokenizers` runs it, for the classes whose building is known (see the module
    docstring); None for anything AutoTokenizer must decide."""
    kind = direct_class(folder)
    if kind is None:
        return None
    from tokenizers import Tokenizer

    cfg = _small_json(folder / "tokenizer_config.json") or {}
    doc = _small_json(folder / "tokenizer.json", _TOKENIZER_CAP)
    if doc is None:
        return None
    built = doc if kind == "TokenizersBackend" else _llama_pipeline(doc, cfg)
    if built is None:
        return None
    try:
        tok = Tokenizer.from_str(json.dumps(built))
    except Exception:  # noqa: BLE001 - a file tokenizers cannot read goes the long way (AutoTokenizer)
        return None
    added = doc.get("added_tokens")
    _add_config_tokens(tok, cfg, added if isinstance(added, list) else [])
    return FileTokenizer(tok, folder, kind, bool(cfg.get("clean_up_tokenization_spaces", False)))


def load_tokenizer(candidates: Iterable[str | Path | None]) -> Any | None:
    """The tokenizer of the first folder that holds one (None when none does): `tokenizers` where the folder's
    tokenizer.json settles the class, else transformers' AutoTokenizer, whose absence is one error naming its extra."""
    folder = tokenizer_dir(candidates)
    if folder is None:
        return None
    tok = file_tokenizer(folder)
    if tok is not None:
        return tok
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise InputError(
            f"{folder}: this tokenizer (not a plain tokenizer.json that `tokenizers` runs alone) needs the optional "
            "package 'transformers', which is not installed.",
            "pip install 'repro[hf]'",
        ) from None
    return AutoTokenizer.from_pretrained(str(folder))
