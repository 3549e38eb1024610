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

from repro.core.families import ModelShape

if TYPE_CHECKING:
    from repro.core.recipes import Deployment, Recipe

GB = 10**9
BYTES = {"fp4": 0.5625, "nvfp4": 0.5625, "fp8": 1.0, "int8": 1.0, "float16": 2.0, "fp16": 2.0, "bfloat16": 2.0}
"""Bytes per value. NVFP4 is 4 bits plus one FP8 scale per 16 values (NVIDIA's NVFP4 block format): 0.5625."""
RESERVE_GB = 3.0
"""Per GPU, held back from the KV pool for the CUDA context, NCCL buffers and activations (an estimate: TensorRT-LLM
measures the free memory after loading the weights and one warm-up pass, then takes its fraction of that)."""


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
    input_tokens: float | None = None
    """The mean prompt (None: not known, so `typical_tokens` counts outputs only)."""
    input_source: str = ""
    in_flight: int | None = None
    """The requests the client keeps in flight per server (None: not stated)."""

    @property
    def sequences_at_once(self) -> int | None:
        """How many sequences of the typical length the KV pool holds at once: the engine's effective batch."""
        if self.pool_tokens is None or not self.typical_tokens:
            return None
        return int(self.pool_tokens // self.typical_tokens)

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
        if self.typical_tokens and self.input_tokens is not None:
            text += f"; {self._at_once()}"
        elif self.typical_tokens:
            share = self.pool_tokens / self.batch
            text += (
                f"; {share:,.0f} tokens/sequence at batch {self.batch:,} (outputs of {self.typical_tokens:,.0f}; "
                f"prompts not counted: {self.input_source or 'no prepared dataset yet'})"
            )
        return text

    def _at_once(self) -> str:
        """What the pool holds of sequences of the typical prompt + output, and what that means for the batch and
        the requests in flight."""
        fits, typical = self.sequences_at_once or 0, self.typical_tokens or 0.0
        prompt = self.input_tokens or 0.0
        text = (
            f"{plural(fits, 'sequence')} of {typical:,.0f} tokens fit at once (mean prompt {prompt:,.0f} from "
            f"{self.input_source}, output {typical - prompt:,.0f})"
        )
        if fits >= self.batch:
            return text + f": the full batch of {self.batch:,} fits"
        text += f": the engine batches at most {fits:,} of its {self.batch:,}"
        if self.in_flight is not None and self.in_flight > fits:
            text += f"; of the client's {self.in_flight:,} in flight per server, the rest wait in the server's queue"
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
            "input_tokens": self.input_tokens,
            "input_source": self.input_source,
            "sequences_at_once": self.sequences_at_once,
            "client_in_flight": self.in_flight,
            "reserve_gb": RESERVE_GB,
            "status": self.level,
            "assumptions": self.assumptions,
        }


def stage_weights_gb(shape: ModelShape, weight_bytes: float, tp: int, pp: int, embed_bytes: float | None) -> float:
    """Per GPU of the heaviest pipeline stage. Without the vocabulary (or `embed_bytes`) every parameter is at
    `weight_bytes`, split evenly. With them the quantized layers split over tp x pp, the embedding is whole on each
    first-stage rank and the lm_head split over the last stage's tp ranks, both at `embed_bytes` (405B TP2xPP2:
    56.5 + 4.2 = 60.7 GB on stage 0, not 57.1)."""
    emb = shape.embedding_params
    if not emb or embed_bytes is None:
        return shape.params * weight_bytes / (tp * pp) / GB
    layers = (shape.params - 2 * emb) * weight_bytes / (tp * pp)
    first = layers + emb * embed_bytes + (emb * embed_bytes / tp if pp == 1 else 0.0)
    last = layers + emb * embed_bytes / tp
    return max(first, last) / GB


def kv_bytes_per_token(shape: ModelShape, kv_bytes: float, tp: int, pp: int = 1) -> float | None:
    """The KV cache per token on one GPU of a tp x pp server, by the model's attention (ModelShape: GQA or MLA)."""
    return shape.kv_bytes_per_token(kv_bytes, tp, pp)


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
    embed_bytes: float | None = None,
) -> MemoryFit:
    """Weights = params x bytes / (tp x pp) (with `embed_bytes` and the shape's vocabulary: the heaviest stage,
    `stage_weights_gb`); the KV pool is kv_fraction of what is left after the weights and the reserve (TensorRT-LLM's
    free_gpu_memory_fraction), compared with batch x max_seq_len and batch x typical."""
    weights = stage_weights_gb(shape, weight_bytes, tp, pp, embed_bytes)
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
    """The model's shape as its benchmark's module reads the recipe's model data (repro/core/families/); None when
    the file gives no architecture (the CPU demo's tiny model)."""
    where = f"benchmark {recipe.benchmark} (repro/data/benchmarks/{recipe.benchmark}.yaml)"
    return recipe.bench.spec.model_shape(recipe.model, where)


def recipe_memory_fit(
    target: Recipe | Deployment,
    gpu_gb: float,
    model_dir: Path | None = None,
    input_tokens: tuple[float, str] | None = None,
) -> MemoryFit | None:
    """A deployment's precision, parallelism, batch and sequence limit on a GPU of `gpu_gb` (a recipe: its base
    deployment); None without trtllm. `input_tokens`: the mean prompt and where it was measured (the prepared
    dataset), so a sequence counts its prompt as well as its output."""
    from repro.core.recipes import as_deployment

    dep = as_deployment(target)
    recipe, t = dep.recipe, dep.trtllm
    if t is None:
        return None
    shape = recipe_shape(recipe, model_dir)
    weight = BYTES.get(recipe.precision, 2.0)
    embed = BYTES.get(str(dep.quantization.dtype), 2.0)
    notes = [f"model: {shape.source}", f"weights at {recipe.precision} ({weight:g} bytes per parameter)"]
    if shape.embedding_params:
        notes.append(
            f"embedding and lm_head at {dep.quantization.dtype} ({embed:g} bytes): the embedding whole on each "
            "first-stage GPU, the lm_head split over the last stage's tensor-parallel GPUs"
        )
    kv_name: str | None = dep.quantization.kv_cache_dtype
    if kv_name is None:
        kv_name = str(dep.quantization.dtype)
        notes.append(f"KV cache at {kv_name}: the recipe names no KV dtype (the checkpoint's may be smaller)")
    else:
        notes.append(f"KV cache at {kv_name}")
    flags = t.runtime_flags
    seq = int(flags.get("max_seq_len") or recipe.loadgen.max_tokens * 2)
    kv_cfg = t.serve_extra_options.get("kv_cache_config") or {}
    frac = float(kv_cfg.get("free_gpu_memory_fraction", 0.9)) if isinstance(kv_cfg, dict) else 0.9
    notes.append(f"batch {t.gpu_batch_size} and max_seq_len {seq} from the recipe; KV fraction {frac:g}")
    output = min(recipe.bench.accuracy.tokens_per_sample.reference, float(recipe.loadgen.max_tokens))
    prompt, source = input_tokens if input_tokens is not None else (None, "")
    notes.append(
        f"typical sequence: {output:g} output tokens (the benchmark's reference tokens_per_sample)"
        + (f" + a mean prompt of {prompt:,.0f} tokens ({source})" if prompt is not None else "; prompts not counted")
    )
    fit = memory_fit(
        shape,
        gpu_gb=gpu_gb,
        weight_bytes=weight,
        kv_bytes=BYTES.get(str(kv_name), 2.0),
        tp=t.tp_size,
        pp=t.pp_size,
        batch=t.gpu_batch_size,
        max_seq_len=seq,
        kv_fraction=frac,
        typical_tokens=output + (prompt or 0.0),
        assumptions=notes,
        embed_bytes=embed,
    )
    fit.input_tokens, fit.in_flight = prompt, t.requests_in_flight
    fit.input_source = source or "no prepared dataset yet: `repro setup` measures the prompts"
    return fit
