"""Rebuild MLPerf's processed OpenOrca set from the raw `Open-Orca/OpenOrca` GPT-4 parquet.

Follows mlcommons/inference `language/llama2-70b/processorca.py`: Llama-2 chat prompt, tokenize
(prompt + token 29871), keep English-only rows, input and output under the token limit, outputs of
at least 3 tokens, drop the listed weak system prompts for niv/t0, then sample equally per origin
(seed 1337) and draw the calibration subset from the sample (seed 12345).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.core.errors import InputError
from repro.core.fsutil import atomic_write_bytes
from repro.setup.dataset import llama2_prompt
from repro.setup.frame_encode import encode_frame

REQUIRED_COLUMNS = ("id", "system_prompt", "question", "response")
RESPONSE_INIT_TOKEN = 29871
SAMPLE_SEED = 1337
CALIB_SEED = 12345
ALLOWED_NON_ASCII = ("’", "–", "“", "”", "—")
BAD_PROMPTS = (
    "",
    "You are an AI assistant that follows instruction extremely well. Help as much as you can.",
    "You are an AI assistant. Provide a detailed answer so user don’t need to search outside to understand the answer.",
    "You are an AI assistant. Provide a detailed answer so user don't need to search outside to understand the answer.",
    "User will you give you a task with some instruction. Your job is follow the instructions as faithfully "
    "as you can. "
    "While answering think step-by-step and justify your answer.",
    "Explain how you used the definition to come up with the answer.",
)


def sampled_name(n: int) -> str:
    return f"open_orca_gpt4_tokenized_llama.sampled_{n}.pkl"


def calibration_name(n: int) -> str:
    return f"open_orca_gpt4_tokenized_llama.calibration_{n}.pkl"


def is_english(text: str) -> bool:
    return all(c.isascii() or c in ALLOWED_NON_ASCII for c in text)


def load_tokenizer(model_dir: Path) -> Any:
    """The model's own tokenizer (LlamaTokenizerFast for Llama-2, as processorca.py loads it)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(model_dir))
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{model_dir}: no usable Llama tokenizer ({str(exc).splitlines()[0]}).",
            "`repro setup` to download the model first",
        ) from None


def read_raw(parquet: Path):
    import pandas as pd
    import pyarrow.lib

    parquet = Path(parquet)
    try:
        df = pd.read_parquet(parquet)
    except FileNotFoundError:
        raise InputError(f"{parquet}: no such parquet file.", "`repro setup --dataset-source rebuild`") from None
    except (pyarrow.lib.ArrowException, OSError, ValueError) as exc:
        raise InputError(
            f"{parquet}: not a readable parquet file ({str(exc).splitlines()[0]}).",
            "delete it, then `repro setup --dataset-source rebuild`",
        ) from None
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            f"{parquet}: missing column(s) {', '.join(missing)}; an OpenOrca parquet has "
            f"{', '.join(REQUIRED_COLUMNS)}.",
            "point at `1M-GPT4-Augmented.parquet`, then `repro setup --dataset-source rebuild`",
        )
    return df


def _tokenize(tokenizer: Any, texts: list[Any], append_init: bool) -> list[list[int]]:
    idx = [i for i, t in enumerate(texts) if isinstance(t, str)]
    out: list[list[int]] = [[] for _ in texts]
    if idx:
        ids = tokenizer([texts[i] for i in idx])["input_ids"]
        for i, toks in zip(idx, ids, strict=False):
            out[i] = list(toks) + ([RESPONSE_INIT_TOKEN] if append_init else [])
    return out


def filtered_frame(df, tokenizer: Any, io_token_limit: int):
    """The full filtered set (processorca's `...full.pkl`)."""
    df = df.rename(columns={"response": "output"}).copy()
    df["input"] = [llama2_prompt(s or "", q) for s, q in zip(df["system_prompt"], df["question"], strict=False)]
    df["tok_input"] = _tokenize(tokenizer, list(df["input"]), True)
    df["tok_output"] = _tokenize(tokenizer, list(df["output"]), False)
    df["origin"] = [str(x).split(".")[0] for x in df["id"]]
    english = [is_english(i) and is_english(o) for i, o in zip(df["input"], df["output"], strict=False)]
    df = df[english].reset_index(drop=True)
    df["tok_input_length"] = [len(x) for x in df["tok_input"]]
    df["tok_output_length"] = [len(x) for x in df["tok_output"]]
    df = df[(df["tok_input_length"] < io_token_limit) & (df["tok_output_length"] < io_token_limit)].reset_index(
        drop=True
    )
    df = df[df["tok_output_length"] >= 3].reset_index(drop=True)
    for prompt in BAD_PROMPTS:
        df = df[~((df["system_prompt"] == prompt) & ((df["origin"] == "niv") | (df["origin"] == "t0")))]
    return df.reset_index(drop=True)


def sample(df, n_samples: int, calib_size: int, source: Path):
    import pandas as pd

    groups = {origin: sub.reset_index(drop=True) for origin, sub in df.groupby("origin")}
    if not groups:
        raise InputError(
            f"{source}: no rows survive the MLPerf filters.",
            "check the parquet, then `repro setup --dataset-source rebuild`",
        )
    if n_samples % len(groups):
        raise InputError(
            f"{source}: {n_samples} samples cannot be split equally over {len(groups)} origins ({', '.join(groups)}).",
            "check the parquet and the recipe's dataset.samples",
        )
    per = n_samples // len(groups)
    parts = []
    for origin, sub in groups.items():
        if len(sub) < per:
            raise InputError(
                f"{source}: origin '{origin}' has {len(sub)} usable rows, {per} are needed.",
                "check the parquet and the recipe's dataset.samples",
            )
        parts.append(sub.sample(n=per, random_state=SAMPLE_SEED))
    sampled = pd.concat(parts).reset_index(drop=True)
    return sampled, calibration_frame(sampled, calib_size, source)


def calibration_frame(sampled, calib_size: int, source: Path):
    """processorca.py's calibration set: `sampled.sample(n=calib_size, random_state=12345)`, index reset. The
    calibration rows are a subset of the sampled set, so a verified sampled set gives them without a second
    (unpinned) pickle."""
    if calib_size > len(sampled):
        raise InputError(
            f"{source}: calibration size {calib_size} exceeds the {len(sampled)} samples.",
            "check the recipe's dataset.calibration_samples",
        )
    return sampled.sample(n=calib_size, random_state=CALIB_SEED).reset_index(drop=True)


def build_from_parquet(
    parquet: Path, tokenizer_dir: Path, out_dir: Path, *, n_samples: int, calib_size: int, io_token_limit: int = 1024
) -> dict[str, Path]:
    """Write the sampled and calibration pickles (whole files or nothing) with repro's own DataFrame-pickle writer
    (frame_encode.py: the form pandas 2.x writes, object and int64 columns); returns role -> path."""
    df = read_raw(parquet)
    full = filtered_frame(df, load_tokenizer(tokenizer_dir), io_token_limit)
    sampled, calib = sample(full, n_samples, calib_size, Path(parquet))
    out = {"sampled": Path(out_dir) / sampled_name(n_samples)}
    atomic_write_bytes(out["sampled"], encode_frame(frame_columns(sampled)))
    if calib_size:
        out["calibration"] = Path(out_dir) / calibration_name(calib_size)
        atomic_write_bytes(out["calibration"], encode_frame(frame_columns(calib)))
    return out


def frame_columns(df: Any) -> dict[str, Any]:
    """A pandas frame's columns for encode_frame: numbers as numpy arrays, everything else as a list of items."""
    return {str(c): df[c].to_numpy() if df[c].dtype.kind in "iufb" else list(df[c]) for c in df.columns}
