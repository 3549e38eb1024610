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
INIT_STD = 0.02
ROPE_THETA = 10000.0
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


TOKENIZER_CONFIG: dict[str, Any] = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "backend": "tokenizers",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "pad_token": "<pad>",
    "clean_up_tokenization_spaces": False,
}


def build_tokenizer(rows: list[dict[str, str]], out_dir: Path):
    """A small byte-level BPE trained on the sample; byte-level so any text round-trips.

    Written with `tokenizers` alone (no transformers in the demo's install) as the Hugging Face files
    transformers' generic fast tokenizer loads: tokenizer.json plus tokenizer_config.json naming its specials."""
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

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
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2, sort_keys=True) + "\n")
    return tok


def model_config(vocab_size: int) -> dict[str, Any]:
    """config.json as transformers writes a LlamaConfig (4.x reads rope_theta, 5.x rope_parameters)."""
    heads = MODEL_CONFIG["num_attention_heads"]
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **MODEL_CONFIG,
        "vocab_size": vocab_size,
        "head_dim": MODEL_CONFIG["hidden_size"] // heads,
        "hidden_act": "silu",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "initializer_range": INIT_STD,
        "rope_theta": ROPE_THETA,
        "rope_parameters": {"rope_theta": ROPE_THETA, "rope_type": "default"},
        "dtype": "float32",
        "torch_dtype": "float32",
        "use_cache": True,
    }


def build_model(model_dir: Path, vocab_size: int) -> None:
    """Weights drawn as transformers initialises a Llama (normal, std 0.02; norms 1), from numpy's fixed-seed generator,
    saved as a Hugging Face folder: the numpy backend runs it, and transformers loads it where torch is installed."""
    import json

    import numpy as np
    from safetensors.numpy import save_file

    cfg = model_config(vocab_size)
    rng = np.random.default_rng(SEED)
    hidden, inter = cfg["hidden_size"], cfg["intermediate_size"]
    q = cfg["num_attention_heads"] * cfg["head_dim"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]

    def normal(*dims: int) -> np.ndarray:
        return rng.normal(0.0, INIT_STD, size=dims).astype(np.float32)

    tensors = {"model.embed_tokens.weight": normal(vocab_size, hidden)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors |= {
            p + "self_attn.q_proj.weight": normal(q, hidden),
            p + "self_attn.k_proj.weight": normal(kv, hidden),
            p + "self_attn.v_proj.weight": normal(kv, hidden),
            p + "self_attn.o_proj.weight": normal(hidden, q),
            p + "mlp.gate_proj.weight": normal(inter, hidden),
            p + "mlp.up_proj.weight": normal(inter, hidden),
            p + "mlp.down_proj.weight": normal(hidden, inter),
            p + "input_layernorm.weight": np.ones(hidden, np.float32),
            p + "post_attention_layernorm.weight": np.ones(hidden, np.float32),
        }
    tensors["model.norm.weight"] = np.ones(hidden, np.float32)
    tensors["lm_head.weight"] = normal(vocab_size, hidden)
    save_file(tensors, str(model_dir / "model.safetensors"), metadata={"format": "pt"})
    (model_dir / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    generation = {k: cfg[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")} | {"do_sample": False}
    (model_dir / "generation_config.json").write_text(json.dumps(generation, indent=2, sort_keys=True) + "\n")


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
        build_model(tmp, tokenizer.get_vocab_size(with_added_tokens=True))
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
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        bos = SPECIAL.index("<s>")
        prompts = [[bos] + tokenizer.encode(_prompt_text(r), add_special_tokens=False).ids for r in rows]
        outputs = [r["response"] for r in rows]
        olens = [len(tokenizer.encode(t, add_special_tokens=False).ids) for t in outputs]
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
