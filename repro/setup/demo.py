"""The built-in demo: a tiny Llama-architecture model and tokenizer made locally.

The whole flow then runs with no GPU and no downloads.

Everything is deterministic (fixed seeds, a tokenizer trained on the built-in sample), so two
machines build byte-identical weights; the result is never a reproduction and is labelled 'demo'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.core.errors import InputError
from repro.core.workspace import Workspace
from repro.setup.dataset import BUILTIN_SAMPLE, load_prepared, read_builtin_sample, save_prepared

MODEL_NAME = "tiny-llama"
DATASET_NAME = "openorca-demo-sample"
SEED = 1234
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]
MODEL_CONFIG: dict[str, Any] = dict(
    hidden_size=64,
    intermediate_size=172,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=512,
    rms_norm_eps=1e-5,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=3,
    tie_word_embeddings=False,
)


def _prompt_text(row: dict[str, str]) -> str:
    sys_part = f"<<SYS>> {row['system_prompt']} <</SYS>> " if row["system_prompt"] else ""
    return f"[INST] {sys_part}{row['question']} [/INST]"


def build_tokenizer(rows: list[dict[str, str]], out_dir: Path):
    """A small byte-level BPE trained on the sample; byte-level so any text round-trips."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=SPECIAL,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [_prompt_text(r) for r in rows] + [r["response"] for r in rows]
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )
    fast.save_pretrained(out_dir)
    return fast


def build_model(model_dir: Path, vocab_size: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=vocab_size, **MODEL_CONFIG)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.do_sample = False
    model.save_pretrained(model_dir, safe_serialization=True)


def _model_ready(model_dir: Path) -> bool:
    return (
        (model_dir / "config.json").exists()
        and any(model_dir.glob("*.safetensors"))
        and (model_dir / "tokenizer.json").exists()
    )


def _build_model_dir(model_dir: Path, rows: list[dict[str, str]]) -> None:
    """Build in a folder of this process's own, then rename it into place.

    Two demo runs may start together in a fresh workspace: each builds its own copy, the first rename wins and
    the other finds a ready model there, which is success (the build is deterministic), not an error.
    """
    import contextlib
    import shutil
    import tempfile

    model_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{model_dir.name}.", suffix=".tmp", dir=model_dir.parent))
    try:
        tokenizer = build_tokenizer(rows, tmp)
        build_model(tmp, len(tokenizer))
        if model_dir.exists() and not _model_ready(model_dir):  # a broken leftover: moved aside atomically first
            aside = Path(tempfile.mkdtemp(prefix=f".{model_dir.name}.", suffix=".old", dir=model_dir.parent))
            with contextlib.suppress(FileNotFoundError):  # another process moved it
                model_dir.rename(aside / "model")
            shutil.rmtree(aside, ignore_errors=True)
        try:
            tmp.rename(model_dir)
        except OSError:
            if not _model_ready(model_dir):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prepare_demo(ws: Workspace, *, sample: Path | None = None) -> dict[str, Path]:
    """Build (once) the tiny model under models/tiny-llama and the prepared demo dataset; returns their paths."""
    ws.ensure()
    rows = read_builtin_sample(sample or BUILTIN_SAMPLE)
    model_dir = ws.models / MODEL_NAME
    data_dir = ws.preprocessed / DATASET_NAME
    if not _model_ready(model_dir):
        _build_model_dir(model_dir, rows)
    try:
        load_prepared(data_dir)
    except InputError:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        bos = tokenizer.bos_token_id
        prompts = [[bos] + tokenizer.encode(_prompt_text(r), add_special_tokens=False) for r in rows]
        outputs = [r["response"] for r in rows]
        olens = [len(tokenizer.encode(t, add_special_tokens=False)) for t in outputs]
        save_prepared(
            data_dir,
            DATASET_NAME,
            prompts,
            olens,
            outputs,
            source=f"builtin:{BUILTIN_SAMPLE.name}",
            extra={"tokenizer": str(model_dir), "ids": [r["id"] for r in rows]},
        )
    return {"model_dir": model_dir, "dataset": data_dir}
