"""A word-piece fast tokenizer built from a list of tokens, saved like a model's tokenizer folder.

The accuracy benchmark (benchmarks/accuracy_speed.py, word pieces) and tests/test_accuracy.py (whole words) both
score logs through a real Hugging Face tokenizer without downloading one; this builds it for both.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def wordpiece_tokenizer(tokens: Iterable[str], folder: Path) -> Any:
    """<unk>, <s>, </s>, then each new token in order; whitespace splits, decode re-joins "##" pieces to words."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for t in tokens:
        vocab.setdefault(t, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(str(folder))
    return fast
