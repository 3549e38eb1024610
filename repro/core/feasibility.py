"""Whether a recipe can run on a machine at all: servers x tensor-parallel GPUs, and weights + KV cache per GPU.

Pure arithmetic on numbers the caller resolves (the benchmark's model shape, the recipe's parallelism and limits,
the GPUs NVML reports): doctor shows it before a 130 GB download and an engine build that could never start a
server. Every assumption travels with the answer, so the row that prints it can say what was assumed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from repro.core.recipes import Recipe

GB = 10**9
BYTES = {"fp4": 0.5625, "nvfp4": 0.5625, "fp8": 1.0, "int8": 1.0, "float16": 2.0, "fp16": 2.0, "bfloat16": 2.0}
"""Bytes per value. NVFP4 is 4 bits plus one FP8 scale per 16 values (NVIDIA's NVFP4 block format): 0.5625."""
RESERVE_GB = 3.0
"""Per GPU, held back from the KV pool for the CUDA context, NCCL buffers and activations (an estimate: TensorRT-LLM
measures the free memory after loading the weights and one warm-up pass, then takes its fraction of that)."""


@dataclass(frozen=True)
class ModelShape:
    """What the memory arithmetic needs of a model; layers/kv_heads/head_dim None when no source gives them."""

    params: float
    layers: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    source: str = ""

    @property
    def has_kv(self) -> bool:
        return bool(self.layers and self.kv_heads and self.head_dim)


@dataclass(frozen=True)
class ServerFit:
    gpus: int
    tp: int
    pp: int
    servers: int

    @property
    def per_server(self) -> int:
        return self.tp * self.pp

    @property
    def fit(self) -> int:
        return min(self.servers, self.gpus // self.per_server)

    @property
    def needed(self) -> int:
        return self.servers * self.per_server


def server_fit(gpus: int, tp: int, pp: int, servers: int) -> ServerFit:
    """How many of the recipe's servers (tp x pp GPUs each) this machine's GPUs can hold."""
    return ServerFit(gpus, tp, pp, servers)


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


@dataclass
class MemoryFit:
    """Per GPU of one server, in decimal GB (1 GB = 10^9 bytes), as the disk and download checks count."""

    gpu_gb: float
    weights_gb: float
    kv_bytes_per_token: float | None
    pool_gb: float
    pool_tokens: int | None
    batch: int
    max_seq_len: int
    full_batch_kv_gb: float | None
    typical_tokens: float | None
    assumptions: list[str] = field(default_factory=list)

    @property
    def weights_fit(self) -> bool:
        return self.weights_gb + RESERVE_GB < self.gpu_gb

    @property
    def sequences_at_full_length(self) -> int | None:
        if self.pool_tokens is None:
            return None
        return self.pool_tokens // self.max_seq_len

    @property
    def level(self) -> str:
        """FAIL: the weights or one full-length sequence do not fit; WARN: the full batch cannot hold sequences of
        the benchmark's typical length; else PASS (also when no model shape sizes the KV cache: the detail says so)."""
        if not self.weights_fit:
            return "FAIL"
        if self.pool_tokens is None:
            return "PASS"  # the weights fit; the detail says the KV cache was not sized
        if self.pool_tokens < self.max_seq_len:
            return "FAIL"
        if self.typical_tokens and self.pool_tokens < self.batch * self.typical_tokens:
            return "WARN"
        return "PASS"

    def detail(self) -> str:
        head = f"per GPU: weights {self.weights_gb:,.1f} of {self.gpu_gb:,.1f} GB"
        if not self.weights_fit:
            return f"{head}: the weights alone do not fit (with {RESERVE_GB:g} GB for context and activations)"
        if self.pool_tokens is None or self.kv_bytes_per_token is None:
            return f"{head}; KV cache not sized (no model shape: layers, KV heads, head dim)"
        seqs = self.sequences_at_full_length or 0
        text = (
            f"{head}; KV {self.kv_bytes_per_token / 1e3:,.1f} kB/token, pool {self.pool_gb:,.1f} GB = "
            f"{self.pool_tokens:,} tokens ({plural(seqs, 'sequence')} of {self.max_seq_len:,}"
        )
        if self.full_batch_kv_gb is not None:
            text += f"; batch {self.batch:,} at full length: {self.full_batch_kv_gb:,.0f} GB"
        text += ")"
        if self.typical_tokens:
            share = self.pool_tokens / self.batch
            text += f"; {share:,.0f} tokens/sequence at batch {self.batch:,} (typical {self.typical_tokens:,.0f})"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu_gb": round(self.gpu_gb, 2),
            "weights_gb": round(self.weights_gb, 2),
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "pool_gb": round(self.pool_gb, 2),
            "pool_tokens": self.pool_tokens,
            "batch": self.batch,
            "max_seq_len": self.max_seq_len,
            "full_batch_kv_gb": None if self.full_batch_kv_gb is None else round(self.full_batch_kv_gb, 1),
            "sequences_at_full_length": self.sequences_at_full_length,
            "typical_tokens": self.typical_tokens,
            "reserve_gb": RESERVE_GB,
            "status": self.level,
            "assumptions": self.assumptions,
        }


def kv_bytes_per_token(shape: ModelShape, kv_bytes: float, tp: int, pp: int = 1) -> float | None:
    """K and V for every layer: 2 x layers x kv_heads x head_dim x bytes, split over tp (KV heads) and pp (layers);
    with fewer KV heads than tp ranks each rank holds one head."""
    if not shape.has_kv:
        return None
    assert shape.layers and shape.kv_heads and shape.head_dim
    heads = max(1.0, shape.kv_heads / tp)
    return 2 * shape.layers / pp * heads * shape.head_dim * kv_bytes


def memory_fit(
    shape: ModelShape,
    *,
    gpu_gb: float,
    weight_bytes: float,
    kv_bytes: float,
    tp: int,
    pp: int,
    batch: int,
    max_seq_len: int,
    kv_fraction: float = 0.9,
    typical_tokens: float | None = None,
    assumptions: list[str] | None = None,
) -> MemoryFit:
    """Weights = params x bytes / (tp x pp); the KV pool is kv_fraction of what is left after the weights and the
    reserve (TensorRT-LLM's free_gpu_memory_fraction), compared with batch x max_seq_len and batch x typical."""
    weights = shape.params * weight_bytes / (tp * pp) / GB
    per_token = kv_bytes_per_token(shape, kv_bytes, tp, pp)
    pool = max(0.0, gpu_gb - weights - RESERVE_GB) * kv_fraction
    tokens = None if per_token is None else int(pool * GB / per_token)
    full = None if per_token is None else batch * max_seq_len * per_token / GB
    notes = list(assumptions or [])
    notes.append(
        f"KV pool = {kv_fraction:g} x (GPU memory - weights - {RESERVE_GB:g} GB reserve), as TensorRT-LLM's "
        "free_gpu_memory_fraction"
    )
    return MemoryFit(gpu_gb, weights, per_token, pool, tokens, batch, max_seq_len, full, typical_tokens, notes)


# ------------------------------------------------------------------ the recipe's numbers
def _config_shape(model_dir: Path, params: float, why: str) -> ModelShape | None:
    """The architecture from the downloaded model's own config.json (bounded read; anything odd is ignored)."""
    path = model_dir / "config.json"
    try:
        if not path.is_file() or path.stat().st_size > 1 << 20:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
        layers = int(doc["num_hidden_layers"])
        heads = int(doc["num_attention_heads"])
        kv = int(doc.get("num_key_value_heads") or heads)
        dim = int(doc.get("head_dim") or int(doc["hidden_size"]) // heads)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if min(layers, kv, dim) <= 0:
        return None
    return ModelShape(params, layers, kv, dim, f"{why}; architecture from {path}")


def recipe_shape(recipe: Recipe, model_dir: Path | None = None) -> ModelShape:
    """The model's parameter count and architecture: the benchmark's data where the recipe names one, else the
    download size at the recipe's checkpoint dtype and the downloaded config.json (if any)."""
    bench = _benchmark_shape(recipe)
    if bench is not None:
        return bench
    dtype = recipe.quantization.dtype
    params = recipe.model.size_gb * GB / BYTES[dtype]
    why = f"{params / 1e9:,.1f} B parameters from the download size {recipe.model.size_gb:g} GB at {dtype}"
    if model_dir is not None:
        found = _config_shape(model_dir, params, why)
        if found is not None:
            return found
    return ModelShape(params, source=why)


def _benchmark_shape(recipe: Recipe) -> ModelShape | None:
    """The model's data from its benchmark file (repro/data/benchmarks/), as the recipe resolved it; None when the
    file gives no architecture (the CPU demo's tiny model)."""
    model, arch = recipe.model, recipe.model.architecture
    if arch is None:
        return None
    return ModelShape(
        float(model.parameters),
        arch.layers,
        arch.kv_heads,
        arch.head_dim,
        f"benchmark {recipe.benchmark} (repro/data/benchmarks/{recipe.benchmark}.yaml)",
    )


def recipe_memory_fit(recipe: Recipe, gpu_gb: float, model_dir: Path | None = None) -> MemoryFit | None:
    """The recipe's precision, parallelism, batch and sequence limit on a GPU of `gpu_gb`; None without trtllm."""
    t = recipe.trtllm
    if t is None:
        return None
    shape = recipe_shape(recipe, model_dir)
    weight = BYTES.get(recipe.precision, 2.0)
    notes = [f"model: {shape.source}", f"weights at {recipe.precision} ({weight:g} bytes per parameter)"]
    kv_name: str | None = recipe.quantization.kv_cache_dtype
    if kv_name is None:
        kv_name = str(recipe.quantization.dtype)
        notes.append(f"KV cache at {kv_name}: the recipe names no KV dtype (the checkpoint's may be smaller)")
    else:
        notes.append(f"KV cache at {kv_name}")
    flags = t.runtime_flags
    seq = int(flags.get("max_seq_len") or recipe.loadgen.max_tokens * 2)
    kv_cfg = t.serve_extra_options.get("kv_cache_config") or {}
    frac = float(kv_cfg.get("free_gpu_memory_fraction", 0.9)) if isinstance(kv_cfg, dict) else 0.9
    notes.append(f"batch {t.gpu_batch_size} and max_seq_len {seq} from the recipe; KV fraction {frac:g}")
    typical = recipe.bench.accuracy.tokens_per_sample.low
    notes.append(f"typical sequence: {typical:g} output tokens per sample (the accuracy floor; prompts not counted)")
    return memory_fit(
        shape,
        gpu_gb=gpu_gb,
        weight_bytes=weight,
        kv_bytes=BYTES.get(str(kv_name), 2.0),
        tp=t.tp_size,
        pp=t.pp_size,
        batch=t.gpu_batch_size,
        max_seq_len=seq,
        kv_fraction=frac,
        typical_tokens=typical,
        assumptions=notes,
    )
