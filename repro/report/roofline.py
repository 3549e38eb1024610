"""A memory-bandwidth roofline for Llama-2-70B decode, so a measured tokens/s can be read as a fraction of a ceiling.

Each decode step of a batch of B sequences reads every weight once and the KV cache of every sequence, and
produces B tokens. Time per step >= bytes read / bandwidth, so per GPU:

    bound = BW / (W / B + C * KV)

BW: HBM bandwidth (recipe system.memory_bandwidth_tbps); W: weight bytes per GPU (quantized_size_gb when known,
else 70e9 params x precision bits / 8, divided by the tensor-parallel size); B: recipe trtllm.gpu_batch_size;
C: mean context length during decode = mean prompt + half the mean output; KV = 80 layers x 8 KV heads x 128 dim
x 2 (K and V) x KV-cache bytes. Prefill compute, activations and scheduling are ignored, so it is an upper bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from repro.core.recipes import Recipe

PARAMS = 70e9
LAYERS, KV_HEADS, HEAD_DIM = 80, 8, 128
MEAN_INPUT_TOKENS = 624.0
MEAN_OUTPUT_TOKENS = 294.45
MAX_OUTPUT_TOKENS = 1e6  # more per sample than any model emits: the log is wrong, use the mean
FORMULA = "bound = BW / (W / B + C x KV)"

BITS = {"nvfp4": 4.5, "fp4": 4.5, "fp8": 8, "bf16": 16, "fp16": 16, "fp32": 32}
BITS_NOTE = "NVFP4 counted as 4.5 bits (4-bit values + one FP8 scale per 16)"
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


def kv_bytes_per_token(kv_bytes: float) -> float:
    """Llama-2-70B GQA: K and V for 8 KV heads of 128 dims in each of 80 layers."""
    return LAYERS * KV_HEADS * HEAD_DIM * 2 * kv_bytes


@dataclass(frozen=True)
class Roofline:
    recipe: str
    bandwidth_bytes_s: float
    weight_bytes: float
    weight_source: str
    batch: int
    context_tokens: float
    kv_bytes: float
    kv_bytes_per_token: float
    bound_tokens_per_s: float
    measured_tokens_per_s: float | None

    @property
    def fraction(self) -> float | None:
        if self.measured_tokens_per_s is None or not 0 < self.bound_tokens_per_s < math.inf:
            return None
        frac = self.measured_tokens_per_s / self.bound_tokens_per_s
        return frac if math.isfinite(frac) else None  # tokens/s of inf or 1e308 from a hostile log (#16)

    def bound_at(self, batch: float) -> float:
        return self.bandwidth_bytes_s / (self.weight_bytes / batch + self.context_tokens * self.kv_bytes_per_token)

    @property
    def explanation(self) -> str:
        return (
            f"{FORMULA}; BW = {self.bandwidth_bytes_s / 1e12:g} TB/s, W = {self.weight_bytes / 1e9:,.2f} GB "
            f"({self.weight_source}), B = {self.batch}, C = {self.context_tokens:,.1f} tokens "
            f"(mean prompt {MEAN_INPUT_TOKENS:g}, assumed, + half the mean output tokens per sample), KV = 80 "
            "x 8 x 128 x 2 x "
            f"{self.kv_bytes:g} B = {self.kv_bytes_per_token:,.0f} B/token"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "formula": FORMULA,
            "explanation": self.explanation,
            "bandwidth_bytes_s": self.bandwidth_bytes_s,
            "weight_bytes": self.weight_bytes,
            "weight_source": self.weight_source,
            "batch": self.batch,
            "context_tokens": self.context_tokens,
            "kv_bytes": self.kv_bytes,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "bound_tokens_per_s_per_gpu": self.bound_tokens_per_s,
            "measured_tokens_per_s_per_gpu": self.measured_tokens_per_s,
            "fraction": self.fraction,
        }


def roofline(
    recipe: Recipe, measured_per_gpu: float | None = None, output_tokens: float | None = None
) -> Roofline | None:
    """The bound for a recipe's GPU, or None when the recipe lacks bandwidth (the CPU demo)."""
    bw = recipe.system.memory_bandwidth_tbps
    if bw == "unknown" or recipe.trtllm is None:
        return None
    tp = recipe.trtllm.tp_size * recipe.trtllm.pp_size
    if recipe.model.quantized_size_gb != "unknown":
        weights = float(recipe.model.quantized_size_gb) * 1e9 / tp
        source = f"quantized_size_gb {recipe.model.quantized_size_gb} / {tp} GPU(s)"
    else:
        bits = BITS[recipe.precision]
        weights = PARAMS * bits / 8 / tp
        source = (
            f"70e9 params x {bits:g} bits / 8 / {tp} GPU(s); {BITS_NOTE}"
            if bits == 4.5
            else f"70e9 params x {bits:g} bits / 8 / {tp} GPU(s)"
        )
    kv_dtype = recipe.quantization.kv_cache_dtype
    kv_bytes = 1.0 if kv_dtype in ("fp8", "int8") else float(_DTYPE_BYTES[recipe.quantization.dtype])
    plausible = output_tokens is not None and 0 < output_tokens <= MAX_OUTPUT_TOKENS
    out = output_tokens if plausible and output_tokens else MEAN_OUTPUT_TOKENS
    context = MEAN_INPUT_TOKENS + out / 2
    per_token = kv_bytes_per_token(kv_bytes)
    batch = recipe.trtllm.gpu_batch_size
    bound = float(bw) * 1e12 / (weights / batch + context * per_token)
    return Roofline(
        recipe=recipe.name,
        bandwidth_bytes_s=float(bw) * 1e12,
        weight_bytes=weights,
        weight_source=source,
        batch=batch,
        context_tokens=context,
        kv_bytes=kv_bytes,
        kv_bytes_per_token=per_token,
        bound_tokens_per_s=bound,
        measured_tokens_per_s=measured_per_gpu,
    )
