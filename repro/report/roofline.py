"""Two ceilings for serving the recipe's benchmark model, so a measured tokens/s reads as a fraction of what the GPU
can do. The model's size and shape come from its benchmark file, as its module reads them (ModelShape,
repro/core/families/).

Memory (HBM): each decode step of a batch of B sequences reads every weight once and the KV cache of every
sequence, and produces B tokens:

    hbm bound = BW / (W / B + C x KV)

Compute (tensor cores, at the recipe's precision): every output token costs its share of the sample's matmul
and attention FLOPs, prefill included:

    compute bound = peak FLOP/s / (2 x P x (I + O) + 4 x L x D x (I^2 / 2 + O x (I + O / 2))) x O

BW: HBM bandwidth (recipe system.memory_bandwidth_tbps); W: weight bytes per GPU (quantized_size_gb when known,
else the model's parameters x precision bits / 8, over TP x PP); B: recipe trtllm.gpu_batch_size; I, O: mean input
and output tokens per sample (measured from the dataset and the run when given, else the benchmark's figures);
C = I + O/2, the mean context while decoding; KV = layers x KV heads x head dim x 2 x KV-cache bytes (GQA; MLA:
layers x latent values x bytes); P: the parameters one token passes through (all of a dense model's; a mixture of
experts' active ones); L x D = layers x hidden size (Llama-2-70B: 80 x 8 x 128, 68.98e9, 80 x 8192). The lower bound is
the ceiling; at batch 2048 that is the compute bound on Blackwell and Hopper. Activations, scheduling and
communication are ignored, so both are upper bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from repro.core.benchmarks import Benchmark, Model
from repro.core.families import ModelShape
from repro.core.recipes import Recipe

MAX_OUTPUT_TOKENS = 1e6  # more per sample than any model emits: the log is wrong, use the mean
FORMULA = "bound = BW / (W / B + C x KV)"
COMPUTE_FORMULA = "compute bound = F / (2 P (I + O) + 4 L D (I^2/2 + O (I + O/2))) x O"

BITS = {"nvfp4": 4.5, "fp4": 4.5, "fp8": 8, "bf16": 16, "fp16": 16, "fp32": 32}
BITS_NOTE = "NVFP4 counted as 4.5 bits (4-bit values + one FP8 scale per 16)"
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}

# Dense (no sparsity) tensor-core peak per GPU, TFLOP/s, by chip and the recipe's precision family.
_DATASHEETS = {
    "H100-SXM": "NVIDIA H100 datasheet: FP8 3,958 / BF16 1,979 TFLOPS with sparsity, halved for dense",
    "H100-NVL": "NVIDIA H100 NVL datasheet: FP8 3,341 / BF16 1,671 TFLOPS with sparsity, halved for dense",
    "H200": "NVIDIA H200 datasheet: FP8 3,958 / BF16 1,979 TFLOPS with sparsity, halved for dense",
    "B200": "NVIDIA HGX B200 datasheet: FP4 18 / FP8 9 PFLOPS per GPU with sparsity, halved for dense",
    "GB200": "NVIDIA GB200 NVL72 datasheet: FP4 1,440 / FP8 720 PFLOPS per 72 GPUs with sparsity, halved for dense",
    "GB300": "NVIDIA GB300 NVL72 datasheet: FP4 1,080 PFLOPS dense / FP8 720 PFLOPS with sparsity, per 72 GPUs",
}
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H100-SXM": {"fp8": 1979.0, "fp16": 989.5},
    "H100-NVL": {"fp8": 1670.5, "fp16": 835.5},
    "H200": {"fp8": 1979.0, "fp16": 989.5},
    "B200": {"fp4": 9000.0, "fp8": 4500.0, "fp16": 2250.0},
    "GB200": {"fp4": 10000.0, "fp8": 5000.0, "fp16": 2500.0},
    "GB300": {"fp4": 15000.0, "fp8": 5000.0, "fp16": 2500.0},
}
_FAMILY = {"nvfp4": "fp4", "fp4": "fp4", "fp8": "fp8", "bf16": "fp16", "fp16": "fp16"}


def kv_bytes_per_token(kv_bytes: float, shape: ModelShape) -> float:
    """The whole model's KV cache per token, by its attention (GQA: K and V for every KV head of every layer,
    Llama-2-70B: 8 heads of 128 dims in 80 layers; MLA: one latent vector per layer)."""
    per_token = shape.kv_bytes_per_token(kv_bytes)
    if per_token is None:
        raise ValueError(f"{shape.source}: no KV shape (layers, KV heads, head dim)")
    return per_token


def flops_per_output_token(input_tokens: float, output_tokens: float, shape: ModelShape) -> float:
    """Matmul FLOPs of prefill and decode (2 x the parameters a token passes through: a mixture of experts' active
    ones) plus attention over the growing context, per generated token."""
    i, o = input_tokens, output_tokens
    layers, width = _attention(shape)
    matmul = 2 * shape.active * (i + o)
    attention = 4 * layers * width * (i * i / 2 + o * (i + o / 2))
    return (matmul + attention) / o


def model_shape(bench: Benchmark, model: Model) -> ModelShape | None:
    """The model's shape as its benchmark's module reads it (repro/core/families/); None when the file gives no
    architecture (the CPU demo's tiny model) or no attention width to count FLOPs by."""
    shape = bench.spec.model_shape(model, f"benchmark {bench.name}")
    return shape if shape is not None and shape.has_kv and shape.layers and shape.hidden else None


def _attention(shape: ModelShape) -> tuple[int, int]:
    if not shape.layers or not shape.hidden:
        raise ValueError(f"{shape.source}: no layers and hidden size to count attention FLOPs by")
    return shape.layers, shape.hidden


def peak_for(recipe: Recipe) -> tuple[float, str] | None:
    """(dense tensor FLOP/s per GPU at the recipe precision, its source), or None for an unlisted chip."""
    from repro.core.published import Accelerator

    acc = Accelerator.parse(recipe.system.gpu_name)
    chip = acc.model.upper()
    if chip == "H100":
        chip = f"H100-{(acc.effective_variant or 'sxm').upper()}"
    family = _FAMILY.get(recipe.precision)
    peaks = PEAK_TFLOPS.get(chip)
    if family is None or peaks is None or family not in peaks:
        return None
    return peaks[family] * 1e12, f"{chip} {family.upper()} dense {peaks[family]:,.0f} TFLOP/s ({_DATASHEETS[chip]})"


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
    hbm_tokens_per_s: float
    measured_tokens_per_s: float | None
    input_tokens: float
    input_source: str
    output_tokens: float
    output_source: str
    model: Model
    shape: ModelShape
    compute_tokens_per_s: float | None = None
    peak_flops: float | None = None
    peak_source: str = "no tensor-core peak listed for this GPU"
    measured_hbm_tokens_per_s: float | None = None
    measured_compute_tokens_per_s: float | None = None
    measured_source: str | None = None
    """From `repro doctor --probe` on the run's own GPUs (run.json `probe`): the ceilings the chip delivered."""

    @property
    def measured_bound_tokens_per_s(self) -> float | None:
        got = [v for v in (self.measured_hbm_tokens_per_s, self.measured_compute_tokens_per_s) if v is not None]
        return min(got) if got else None

    @property
    def measured_fraction(self) -> float | None:
        bound = self.measured_bound_tokens_per_s
        if self.measured_tokens_per_s is None or not bound or not math.isfinite(bound):
            return None
        frac = self.measured_tokens_per_s / bound
        return frac if math.isfinite(frac) else None

    @property
    def measured_explanation(self) -> str:
        """The bound from measured ceilings beside the datasheet's."""
        if self.measured_bound_tokens_per_s is None:
            return "no measured ceilings: `repro doctor --probe` on the GPU VM before the run records them"
        parts = [f"measured ({self.measured_source})"]
        if self.measured_hbm_tokens_per_s is not None:
            parts.append(f"memory bound {self.measured_hbm_tokens_per_s:,.0f}")
        if self.measured_compute_tokens_per_s is not None:
            parts.append(f"compute bound {self.measured_compute_tokens_per_s:,.0f}")
        text = ", ".join(parts) + f" tokens/s per GPU: ceiling {self.measured_bound_tokens_per_s:,.0f}"
        text += f", {self.measured_bound_tokens_per_s / self.bound_tokens_per_s:.0%} of the datasheet's"
        text += f" {self.bound_tokens_per_s:,.0f}"
        if self.measured_fraction is not None:
            text += f"; yours is {self.measured_fraction:.1%} of the measured ceiling"
        return text

    @property
    def bound_tokens_per_s(self) -> float:
        """The ceiling: the lower of the two bounds."""
        if self.compute_tokens_per_s is None:
            return self.hbm_tokens_per_s
        return min(self.hbm_tokens_per_s, self.compute_tokens_per_s)

    @property
    def limiter(self) -> str:
        if self.compute_tokens_per_s is not None and self.compute_tokens_per_s < self.hbm_tokens_per_s:
            return "compute"
        return "hbm"

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
        a = self.shape
        kv = (
            f"{a.layers} x {a.kv_latent} (latent) x {self.kv_bytes:g} B"
            if a.kv_latent
            else f"{a.layers} x {a.kv_heads} x {a.head_dim} x 2 x {self.kv_bytes:g} B"
        )
        return (
            f"{FORMULA}; BW = {self.bandwidth_bytes_s / 1e12:g} TB/s, W = {self.weight_bytes / 1e9:,.2f} GB "
            f"({self.weight_source}), B = {self.batch}, C = {self.context_tokens:,.1f} tokens "
            f"(I = {self.input_tokens:,.1f}: {self.input_source}; + O/2, O = {self.output_tokens:,.1f}: "
            f"{self.output_source}), KV = {kv} = {self.kv_bytes_per_token:,.0f} B/token"
        )

    @property
    def compute_explanation(self) -> str:
        if self.compute_tokens_per_s is None or self.peak_flops is None:
            return f"compute bound not computed: {self.peak_source}"
        per_token = flops_per_output_token(self.input_tokens, self.output_tokens, self.shape)
        a = self.shape
        return (
            f"{COMPUTE_FORMULA}; F = {self.peak_source}; P = {a.active:.4g}, "
            f"L x D = {a.layers} x {a.hidden}, I = {self.input_tokens:,.1f}, "
            f"O = {self.output_tokens:,.1f}: {per_token / 1e9:,.1f} GFLOP per output token"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "formula": FORMULA,
            "explanation": self.explanation,
            "compute_formula": COMPUTE_FORMULA,
            "compute_explanation": self.compute_explanation,
            "bandwidth_bytes_s": self.bandwidth_bytes_s,
            "weight_bytes": self.weight_bytes,
            "weight_source": self.weight_source,
            "batch": self.batch,
            "input_tokens": self.input_tokens,
            "input_source": self.input_source,
            "output_tokens": self.output_tokens,
            "output_source": self.output_source,
            "context_tokens": self.context_tokens,
            "kv_bytes": self.kv_bytes,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "hbm_bound_tokens_per_s_per_gpu": self.hbm_tokens_per_s,
            "compute_bound_tokens_per_s_per_gpu": self.compute_tokens_per_s,
            "peak_flops": self.peak_flops,
            "peak_source": self.peak_source,
            "limiter": self.limiter,
            "bound_tokens_per_s_per_gpu": self.bound_tokens_per_s,
            "measured_tokens_per_s_per_gpu": self.measured_tokens_per_s,
            "fraction": self.fraction,
            "measured_hbm_bound_tokens_per_s_per_gpu": self.measured_hbm_tokens_per_s,
            "measured_compute_bound_tokens_per_s_per_gpu": self.measured_compute_tokens_per_s,
            "measured_bound_tokens_per_s_per_gpu": self.measured_bound_tokens_per_s,
            "measured_fraction": self.measured_fraction,
            "measured_source": self.measured_source,
            "measured_explanation": self.measured_explanation,
        }


def _plausible(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and 0 < value <= MAX_OUTPUT_TOKENS


def roofline(
    recipe: Recipe,
    measured_per_gpu: float | None = None,
    output_tokens: float | None = None,
    *,
    input_tokens: float | None = None,
    input_source: str | None = None,
    output_source: str | None = None,
    probe: dict[str, Any] | None = None,
) -> Roofline | None:
    """Both bounds for a recipe's GPU, or None when the recipe lacks bandwidth (the CPU demo).

    input/output_tokens: measured means per sample (the dataset, the run's logs); the defaults are used, and said
    to be assumed, when they are missing or implausible."""
    bw = recipe.system.memory_bandwidth_tbps
    model, bench = recipe.model, recipe.bench
    shape = model_shape(bench, model)
    if bw == "unknown" or recipe.trtllm is None or shape is None:
        return None
    tp = recipe.trtllm.tp_size * recipe.trtllm.pp_size
    if recipe.quantization.quantized_size_gb != "unknown":
        weights = float(recipe.quantization.quantized_size_gb) * 1e9 / tp
        source = f"quantized_size_gb {recipe.quantization.quantized_size_gb} / {tp} GPU(s)"
    else:
        bits = BITS[recipe.precision]
        weights = model.parameters * bits / 8 / tp
        source = f"{model.parameters:.4g} params x {bits:g} bits / 8 / {tp} GPU(s)" + (
            f"; {BITS_NOTE}" if bits == 4.5 else ""
        )
    kv_dtype = recipe.quantization.kv_cache_dtype
    kv_bytes = 1.0 if kv_dtype in ("fp8", "int8") else float(_DTYPE_BYTES[recipe.quantization.dtype])
    reference = bench.accuracy.tokens_per_sample.reference
    out, out_src = reference, f"{bench.name} reference mean {reference:g} (not measured)"
    if _plausible(output_tokens):
        out, out_src = float(output_tokens or 0), output_source or "measured: the run's tokens/s / samples/s"
    stated = bench.dataset.mean_input_tokens
    if _plausible(input_tokens):
        inp, inp_src = float(input_tokens or 0), input_source or "measured from the dataset"
    elif stated != "unknown":
        inp, inp_src = float(stated), f"the {bench.dataset.name} set's mean prompt (benchmark file; not measured)"
    else:
        return None  # no input length measured, and the benchmark states none: nothing to bound
    context = inp + out / 2
    per_token = kv_bytes_per_token(kv_bytes, shape)
    batch = recipe.trtllm.gpu_batch_size
    hbm = float(bw) * 1e12 / (weights / batch + context * per_token)
    peak = peak_for(recipe)
    compute = peak[0] / flops_per_output_token(inp, out, shape) if peak else None
    m_hbm, m_compute, m_source = _measured(probe, recipe, shape, weights / batch + context * per_token, inp, out)
    return Roofline(
        recipe=recipe.name,
        bandwidth_bytes_s=float(bw) * 1e12,
        weight_bytes=weights,
        weight_source=source,
        batch=batch,
        context_tokens=context,
        kv_bytes=kv_bytes,
        kv_bytes_per_token=per_token,
        hbm_tokens_per_s=hbm,
        measured_tokens_per_s=measured_per_gpu,
        input_tokens=inp,
        input_source=inp_src,
        output_tokens=out,
        output_source=out_src,
        model=model,
        shape=shape,
        compute_tokens_per_s=compute,
        peak_flops=peak[0] if peak else None,
        peak_source=peak[1] if peak else f"no dense tensor-core peak listed for {recipe.system.gpu_name}",
        measured_hbm_tokens_per_s=m_hbm,
        measured_compute_tokens_per_s=m_compute,
        measured_source=m_source,
    )


PROBE_METRIC = {"fp8": "fp8_model_tflops", "fp16": "bf16_square_tflops"}
"""Which measured GEMM stands for the recipe's precision (no FP4 GEMM is probed: Blackwell's FP4 bound stays the
datasheet's)."""


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def _measured(
    probe: dict[str, Any] | None, recipe: Recipe, shape: ModelShape, bytes_per_token: float, inp: float, out: float
) -> tuple[float | None, float | None, str | None]:
    """Both bounds from a probe's median ceilings (run.json `probe`; hostile like any result file)."""
    if not isinstance(probe, dict) or not isinstance(probe.get("ceilings"), dict):
        return None, None, None
    ceil = probe["ceilings"]
    tbps = _finite(ceil.get("hbm_copy_tbps"))
    metric = PROBE_METRIC.get(_FAMILY.get(recipe.precision, ""), "")
    tflops = _finite(ceil.get(metric)) if metric else None
    hbm = tbps * 1e12 / bytes_per_token if tbps else None
    compute = tflops * 1e12 / flops_per_output_token(inp, out, shape) if tflops else None
    if hbm is None and compute is None:
        return None, None, None
    said = [f"HBM copy {tbps:,.2f} TB/s" if tbps else "", f"{metric} {tflops:,.0f}" if tflops else ""]
    raw = probe.get("when")
    when = raw if isinstance(raw, str) else "?"
    return hbm, compute, f"repro doctor --probe {when[:19]}: " + ", ".join(x for x in said if x)
