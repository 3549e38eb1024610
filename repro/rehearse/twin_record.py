"""The server twin's record: the published summary logs (repro/data/twin/logs, verbatim), the published engines
and the published datasets' input lengths of repro/data/twin/twins.yaml, each figure read with the line it came
from, and the KV pool of an engine layout from the recipe's memory arithmetic (core/feasibility.py).
rehearse/twin.py fits from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from repro.core.recipes import Recipe

TWIN_DIR = Path(__file__).resolve().parents[1] / "data" / "twin"
TABLE = 64
"""Entries of the input and output length tables (equal-probability quantiles)."""


class LogRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repo: str
    commit: str
    path: str
    system: str
    accelerators: int


class EngineRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tp: int
    pp: int
    max_num_tokens: int
    max_batch_size: int
    max_seq_len: int
    kv_dtype: str | None = None
    """The published config's KV cache dtype (None: the recipe's)."""
    kv_fraction: float | None = None
    policy: str = "max_util"
    source: str


class ScenarioRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    log: str
    engine: str | None = None
    analog: bool = False
    """The log is another system's (the recipe's rate for this scenario is an analog's), not its own published run."""


class RecipeRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    osl_shape: str
    scenarios: dict[str, ScenarioRef]


class Lengths(BaseModel):
    """A published dataset's input lengths: equal-probability quantiles of its samples' tok_input_length."""

    model_config = ConfigDict(extra="forbid")
    isl_quantiles: list[int] = Field(min_length=16)
    isl_mean: float = Field(gt=0, description="The samples' own mean (the table's is within a few tokens)")
    isl_max: int = Field(gt=0)
    isl_source: str = Field(min_length=1)


class TwinRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int
    logs: dict[str, LogRef]
    lengths: dict[str, Lengths]
    engines: dict[str, EngineRef]
    recipes: dict[str, RecipeRef]

    def family(self, benchmark: str) -> Lengths:
        key = "llama3.1-405b" if benchmark.startswith("llama3.1-405b") else "llama2-70b"
        return self.lengths[key]


@lru_cache(maxsize=1)
def load_record() -> TwinRecord:
    from repro.core.safeio import read_text_bounded

    doc = yaml.safe_load(read_text_bounded(TWIN_DIR / "twins.yaml", 1 << 20, what="twin record"))
    return TwinRecord.model_validate(doc)


# ------------------------------------------------------------------ the logs
@dataclass(frozen=True)
class Figure:
    value: float
    source: str
    """`logs/<name>.txt:<line> <the line>`."""


SUMMARY_KEYS = {
    "samples_per_s": ("Samples per second", "Completed samples per second"),
    "tokens_per_s": ("Tokens per second", "Completed tokens per second"),
    "scheduled_qps": ("Scheduled samples per second",),
    "latency_min": ("Min latency (ns)",),
    "latency_mean": ("Mean latency (ns)",),
    "latency_max": ("Max latency (ns)",),
    "ttft_min": ("Min First Token latency (ns)",),
    "ttft_mean": ("Mean First Token latency (ns)",),
    "tpot_min": ("Min Time to Output Token (ns)", "Min Time per Output Token (ns)"),
    "tpot_mean": ("Mean Time to Output Token (ns)", "Mean Time per Output Token (ns)"),
    "samples_per_query": ("samples_per_query",),
    "target_qps": ("target_qps",),
    "min_duration_ms": ("min_duration (ms)",),
    "min_query_count": ("min_query_count",),
    "performance_sample_count": ("performance_sample_count",),
    "ttft_limit": ("ttft_latency (ns)",),
    "tpot_limit": ("tpot_latency (ns)",),
}
PCT = re.compile(r"^(\d+\.\d+) percentile (latency|first token latency|time to output token) \(ns\)$")


def read_log(name: str) -> dict[str, Figure]:
    """Every figure of a shipped summary log, in seconds where LoadGen wrote ns, each with its line."""
    path = TWIN_DIR / "logs" / f"{name}.txt"
    out: dict[str, Figure] = {}
    names = {k: key for key, spellings in SUMMARY_KEYS.items() for k in spellings}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        label, sep, raw = line.partition(":")
        if not sep:
            continue
        label, raw = label.strip(), raw.strip()
        m = PCT.match(label)
        key = names.get(label)
        if m:
            kind = {"latency": "latency", "first token latency": "ttft", "time to output token": "tpot"}[m[2]]
            key = f"{kind}_p{float(m[1]):g}"
        if key is None or key in out:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        scale = 1e-9 if "(ns)" in label else 1.0
        out[key] = Figure(value * scale, f"logs/{name}.txt:{n} {line.strip()}")
    return out


# ------------------------------------------------------------------ lengths and memory
def osl_table(shape: dict[str, Figure], mean: float, max_tokens: int) -> tuple[list[int], str]:
    """Output lengths: the shape of a Server log's latency percentiles as output tokens, scaled to `mean`."""
    ttft, tpot = shape["ttft_p50"].value, shape["tpot_p50"].value
    points = [(0.0, shape["latency_min"].value)]
    points += [
        (q / 100, shape[f"latency_p{q:g}"].value) for q in (50, 90, 95, 97, 99, 99.9) if f"latency_p{q:g}" in shape
    ]
    points.append((1.0, shape["latency_max"].value))
    # the quantile function below the median: linear from the minimum, the log gives nothing between
    curve = [(q, max(1.0, 1 + (lat - ttft) / tpot)) for q, lat in points]
    raw = [_interp(curve, (i + 0.5) / TABLE) for i in range(TABLE)]
    factor = mean / (sum(raw) / len(raw))
    table = [max(1, min(max_tokens, round(x * factor))) for x in raw]
    for _ in range(4):  # the cut at max_tokens lowers the mean: rescale what is below it
        short = mean * TABLE - max_tokens * sum(1 for x in table if x >= max_tokens)
        below = [x for x in table if x < max_tokens]
        if not below or short <= 0:
            break
        f = short / sum(below)
        table = [x if x >= max_tokens else max(1, min(max_tokens, round(x * f))) for x in table]
    how = (
        f"mean {mean:,.1f} = tokens/s / samples/s; shape from {shape['latency_p50'].source.split(':')[0]}: "
        f"1 + (latency percentile - median TTFT {ttft:.3g} s) / median TPOT {tpot * 1000:.3g} ms"
    )
    return table, how


def _interp(curve: list[tuple[float, float]], q: float) -> float:
    for (q0, v0), (q1, v1) in zip(curve, curve[1:], strict=False):
        if q <= q1:
            return v0 + (v1 - v0) * (q - q0) / max(q1 - q0, 1e-12)
    return curve[-1][1]


def isl_table(lengths: Lengths, max_seq_len: int) -> list[int]:
    """The published dataset's input lengths as the twin draws them, each under the engine's sequence limit."""
    top = min(lengths.isl_max, max_seq_len - 1)
    return [max(1, min(top, x)) for x in lengths.isl_quantiles]


@dataclass
class EngineFacts:
    tp: int
    pp: int
    max_num_tokens: int
    max_batch_size: int
    max_seq_len: int
    kv_tokens: int
    policy: str
    source: str
    kv_source: str


def engine_facts(recipe: Recipe, ref: EngineRef | None, deployment: Any = None) -> EngineFacts:
    """The published engine (the record's, else the recipe's, which follows the published config) and its KV pool;
    `deployment`: a scenario's own engine of the recipe (core/recipes.Deployment) instead of its base one."""
    from repro.core.feasibility import BYTES, memory_fit, recipe_shape

    t = deployment.trtllm if deployment is not None else recipe.trtllm
    quant = deployment.quantization if deployment is not None else recipe.quantization
    assert t is not None
    if ref is not None:
        tp, pp, mnt, batch, seq, policy, src = (
            ref.tp,
            ref.pp,
            ref.max_num_tokens,
            ref.max_batch_size,
            ref.max_seq_len,
            ref.policy,
            ref.source,
        )
    else:
        flags = t.runtime_flags
        sched = t.serve_extra_options.get("scheduler_config") or {}
        policy = "max_util" if "MAX_UTIL" in str(sched.get("capacity_scheduler_policy", "")).upper() else "no_evict"
        tp, pp, batch = t.tp_size, t.pp_size, t.gpu_batch_size
        mnt, seq = int(flags.get("max_num_tokens") or 8192), int(flags.get("max_seq_len") or 4096)
        where = "trtllm" if deployment is None or not deployment.own else f"scenarios.{deployment.scenario}"
        src = f"recipes/{recipe.name}.yaml {where} (tp_size, pp_size, gpu_batch_size, runtime_flags)"
    kv_cfg = t.serve_extra_options.get("kv_cache_config") or {}
    frac = float(kv_cfg.get("free_gpu_memory_fraction", 0.9)) if isinstance(kv_cfg, dict) else 0.9
    kv_name = quant.kv_cache_dtype or str(quant.dtype)
    if ref is not None:
        kv_name, frac = ref.kv_dtype or kv_name, ref.kv_fraction or frac
    fit = memory_fit(
        recipe_shape(recipe),
        gpu_gb=float(recipe.system.gpu_memory_gb),
        weight_bytes=BYTES.get(recipe.precision, 2.0),
        kv_bytes=BYTES.get(kv_name, 2.0),
        tp=tp,
        pp=pp,
        batch=batch,
        max_seq_len=seq,
        kv_fraction=frac,
    )
    assert fit.pool_tokens is not None
    kv_src = (
        f"core/feasibility.memory_fit: {frac:g} x ({float(recipe.system.gpu_memory_gb):g} GB - weights "
        f"{fit.weights_gb:,.1f} GB - reserve) / KV {fit.kv_bytes_per_token or 0:,.0f} B per token ({kv_name}, tp {tp} "
        f"pp {pp}) = {fit.pool_tokens:,} tokens"
    )
    return EngineFacts(tp, pp, mnt, batch, seq, fit.pool_tokens, policy, src, kv_src)
