"""Recipes are data (one YAML per system under recipes/); this module is their schema and the systems registry.

The registry is the single lookup used by detection (Azure VM size, NVML GPU name), by
`repro verify` (system JSON name) and by every step that needs a recipe.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from repro.core.accelerators import Accelerator, same_accelerator
from repro.core.backends import RECIPE_BACKENDS, recipe_backend
from repro.core.benchmarks import Benchmark, Dataset, Model, load_benchmark
from repro.core.errors import RecipeError
from repro.core.gpu_arch import is_blackwell
from repro.core.safeio import read_text_bounded, safe_yaml

Unknown = Literal["unknown"]
Precision = Literal["nvfp4", "fp4", "fp8", "bf16", "fp16", "fp32"]
Backend = Literal[RECIPE_BACKENDS]  # type: ignore[valid-type]  # the choices come from the backend registry


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class System(_Strict):
    vm_size: str | None = Field(description="Azure VM size (IMDS compute.vmSize); null for non-Azure systems")
    gpu_name: str = Field(description="Marketing name, e.g. 'NVIDIA GB300'")
    nvml_names: list[str] = Field(description="Substrings that NVML's device name contains for this GPU")
    gpus_per_vm: int = Field(gt=0)
    gpu_memory_gb: float | Unknown
    gpu_arch: str = Field(pattern=r"^(sm_\d+|cpu)$")
    cpu_arch: Literal["x86_64", "aarch64", "any"]
    memory_bandwidth_tbps: float | Unknown = Field(description="HBM bandwidth per GPU, for the roofline")
    tdp_tokens_per_watt: float | Unknown | None = None
    local_nvme_hint: str | None = None
    accelerator: Accelerator | None = Field(
        default=None, description="Hardware identity for verify; null: the last word of gpu_name, no form factor"
    )

    def accelerator_identity(self) -> Accelerator:
        if self.accelerator is not None:
            return self.accelerator
        return Accelerator(model=re.sub(r"[^A-Za-z0-9]", "", self.gpu_name.split()[-1]) or "unknown")


class Quantization(_Strict):
    qformat: Precision
    kv_cache_dtype: Literal["fp8", "int8"] | None
    dtype: Literal["float16", "bfloat16", "float32"]
    calib_size: int = Field(ge=0)
    tool: Literal["hf_quantize", "trtllm_quantize", "none"]
    output_name: str
    quantized_size_gb: float | Unknown = Field(default="unknown", description="Size of the quantized checkpoint")


class TensorRTLLM(_Strict):
    version: str = Field(description="The TensorRT-LLM release repro installs in the container")
    published_version: str | Unknown = Field(description="What the published run used, as far as its sources say")
    base_image: str = Field(description="Base image repro's Dockerfile builds FROM")
    cuda_architectures: str | None
    tp_size: int = Field(gt=0)
    pp_size: int = Field(gt=0)
    servers_per_vm: int = Field(gt=0)
    base_port: int = Field(gt=1024, lt=65536)
    gpu_batch_size: int = Field(gt=0)
    build_flags: dict[str, str | int | float | bool] = Field(default_factory=dict)
    runtime_flags: dict[str, str | int | float | bool] = Field(default_factory=dict)
    serve_extra_options: dict[str, Any] = Field(default_factory=dict)


class ScenarioTarget(_Strict):
    """The arrival rate LoadGen schedules in Server or Interactive. Above what the system sustains the queue grows
    without bound and TTFT/TPOT fail, so it comes from a published Server (Interactive) run, never the Offline rate."""

    target_qps: float = Field(gt=0)
    min_duration_ms: int | None = Field(default=None, ge=0, description="The source's own min_duration, if it says")
    source: str = Field(min_length=1, description="Where the rate comes from (user.conf or published result)")


class LoadGen(_Strict):
    offline_expected_qps: float = Field(gt=0)
    server: ScenarioTarget | None = None
    interactive: ScenarioTarget | None = None
    min_duration_ms: int = Field(ge=0)
    min_query_count: int = Field(ge=0, description="Default: the benchmark's Offline min_query_count")
    performance_sample_count: int = Field(gt=0, description="Default: the benchmark's")
    max_tokens: int = Field(gt=0, description="Default: the benchmark's max_new_tokens")


class Rack(_Strict):
    """A published rack claim (statistics over independent per-VM runs) and, where published, each VM's own log."""

    vms: int = Field(gt=0)
    total_tokens_per_s: float
    min_tokens_per_s: float
    max_tokens_per_s: float
    mean_tokens_per_s: float
    median_tokens_per_s: float | Unknown
    vm_tokens_per_s: dict[str, float] = Field(
        default_factory=dict, description="VM folder name -> Tokens per second printed in that VM's published summary"
    )
    vm_source: str = ""

    def claim_vs_logs(self) -> list[str]:
        """Where the published statistics disagree with the published per-VM logs (empty if they agree or no logs)."""
        values = list(self.vm_tokens_per_s.values())
        if len(values) != self.vms:
            return []
        logs = {
            "total": sum(values),
            "min": min(values),
            "max": max(values),
            "mean": statistics.fmean(values),
            "median": statistics.median(values),
        }
        out = []
        for key, computed in logs.items():
            claimed = getattr(self, f"{key}_tokens_per_s")
            if claimed != "unknown" and abs(float(claimed) - computed) > 0.1:
                out.append(
                    f"the published {key} {float(claimed):,.1f} tokens/s disagrees with its own {self.vms} "
                    f"per-VM logs, which give {computed:,.1f}"
                )
        return out


class Published(_Strict):
    status: Literal["published", "analog", "unknown"] = Field(
        description="published: this system's own result; analog: another submitter's same-GPU result; "
        "unknown: none found"
    )
    tokens_per_s_per_vm: float | Unknown
    tokens_per_s_per_gpu: float | Unknown
    band_pct: float = Field(default=5.0, gt=0, lt=100)
    mlperf_round: str | Unknown
    mlperf_id: str | Unknown
    result_id: str | None = Field(
        default=None,
        description="The result in the shipped published index (`repro published show REF`): an official "
        "ID such as 5.1-0008, or ROUND/DIVISION/SUBMITTER/SYSTEM for rounds without IDs",
    )
    scenario: Literal["Offline", "Server", "Interactive"] = "Offline"
    source: str
    note: str = ""
    rack: Rack | None = None

    @model_validator(mode="after")
    def _known_when_published(self) -> Published:
        if self.status != "unknown" and self.tokens_per_s_per_gpu == "unknown":
            raise ValueError("tokens_per_s_per_gpu must be a number unless status is 'unknown'")
        return self

    def band(self) -> tuple[float, float] | None:
        if self.tokens_per_s_per_gpu == "unknown":
            return None
        centre = float(self.tokens_per_s_per_gpu)
        return centre * (1 - self.band_pct / 100), centre * (1 + self.band_pct / 100)


class Recipe(_Strict):
    schema_version: Literal[1]
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    reference_only: bool = Field(
        default=False, description="A published system nobody runs through repro (e.g. DGX H100)"
    )
    demo: bool = Field(default=False, description="Built-in CPU demo; its runs are never a reproduction")
    system: System
    benchmark: str = Field(description="The MLPerf benchmark it runs: a file in repro/data/benchmarks/")
    backend: Backend
    precision: Precision
    model: Model = Field(description="The benchmark's model; a recipe may override single fields (tests, demo)")
    dataset: Dataset = Field(description="The benchmark's dataset; a recipe may override single fields")
    quantization: Quantization
    trtllm: TensorRTLLM | None
    loadgen: LoadGen
    published: Published = Field(description="The headline published result (Offline)")
    published_scenarios: list[Published] = Field(
        default_factory=list, description="This system's published results for other scenarios (Server, Interactive)"
    )
    disk_needed_gb: float = Field(gt=0)
    expected_runtime_min: float | Unknown
    sources: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_benchmark(cls, data: Any) -> Any:
        """Fill what the benchmark decides (model, dataset, LoadGen counts, limits, max tokens) before validation;
        the recipe's own values override single fields."""
        if not isinstance(data, dict) or not isinstance(data.get("benchmark"), str):
            return data
        try:
            bench = load_benchmark(data["benchmark"])
        except RecipeError as exc:
            raise ValueError(exc.message) from None
        out = dict(data)
        for key, section in (("model", bench.model), ("dataset", bench.dataset)):
            mine = data.get(key)
            if mine is None or isinstance(mine, dict):
                out[key] = {**section.model_dump(), **(mine or {})}
        lg = data.get("loadgen")
        if isinstance(lg, dict):
            offline = bench.rules("Offline")
            defaults = {
                "min_query_count": offline.min_query_count,
                "performance_sample_count": offline.performance_sample_count,
                "max_tokens": bench.generation.max_new_tokens,
            }
            out["loadgen"] = {**defaults, **lg}
        return out

    @property
    def bench(self) -> Benchmark:
        """The benchmark this recipe runs (loaded once, cached)."""
        return load_benchmark(self.benchmark)

    def published_for(self, scenario: str) -> Published | None:
        """The published result for one scenario; None when this system published none for it."""
        return next((p for p in (self.published, *self.published_scenarios) if p.scenario == scenario), None)

    @model_validator(mode="after")
    def _consistent(self) -> Recipe:
        scenarios = [p.scenario for p in (self.published, *self.published_scenarios)]
        if len(set(scenarios)) != len(scenarios):
            raise ValueError(f"published results repeat a scenario: {', '.join(scenarios)}")
        if recipe_backend(self.backend).starts_servers and self.trtllm is None:
            raise ValueError(f"backend {self.backend} needs a trtllm section")
        if self.backend.startswith("trtllm") and self.loadgen.server is None:
            raise ValueError("a trtllm recipe needs loadgen.server (its Server target_qps and the source)")
        ceiling = self.bench.generation.max_new_tokens
        if self.loadgen.max_tokens > ceiling:
            raise ValueError(
                f"loadgen.max_tokens {self.loadgen.max_tokens} is over benchmark {self.benchmark}'s max_new_tokens "
                f"{ceiling}"
            )
        if self.precision in ("nvfp4", "fp4") and not self.blackwell:
            raise ValueError(
                f"precision {self.precision} needs a Blackwell GPU (sm_100 or newer), not {self.system.gpu_arch}"
            )
        return self

    def hash(self) -> str:
        """Content hash of the validated recipe: the input hash of every step that depends on it."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def blackwell(self) -> bool:
        return is_blackwell(self.system.gpu_arch)


def recipes_dir() -> Path:
    """Recipes ship inside the wheel (repro/_recipes) and live at the repo root in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "_recipes", here.parent.parent / "recipes"):
        if candidate.is_dir():
            return candidate
    raise RecipeError("No recipes folder found next to the repro package.", "reinstall with `pip install -e .`")


def _format_validation(path: Path, exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{path}: field '{field}': {first['msg']}{more}"


MAX_RECIPE_BYTES = 1 << 20


def load_recipe_file(path: Path) -> Recipe:
    """A recipe file: regular files only (a FIFO or /dev/zero is refused, not read), at most 1 MB."""
    path = Path(path)
    try:
        raw = safe_yaml(read_text_bounded(path, MAX_RECIPE_BYTES, what="recipe"))
    except FileNotFoundError:
        raise RecipeError(f"{path}: no such recipe file.", "`repro recipes list`") from None
    except OSError as exc:
        raise RecipeError(
            f"{path}: cannot be read as a recipe ({exc.strerror or exc}).", "`repro recipes list`"
        ) from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RecipeError(f"{path}: not valid YAML ({why}).", f"fix it, then `repro recipes validate {path}`") from None
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}: a recipe must be a mapping of fields.", f"`repro recipes validate {path}`")
    if isinstance(raw.get("benchmark"), str):
        try:
            load_benchmark(raw["benchmark"])
        except RecipeError as exc:
            raise RecipeError(f"{path}: field 'benchmark': {exc.message}", exc.next_command) from None
    try:
        recipe = Recipe.model_validate(raw)
    except ValidationError as exc:
        raise RecipeError(_format_validation(path, exc), f"fix it, then `repro recipes validate {path}`") from None
    if recipe.name != path.stem:
        raise RecipeError(
            f"{path}: field 'name' is '{recipe.name}' but the file is named '{path.stem}'.",
            f"`repro recipes validate {path}`",
        )
    return recipe


@cache
def _all_cached(directory: str) -> tuple[Recipe, ...]:
    return tuple(load_recipe_file(p) for p in sorted(Path(directory).glob("*.yaml")))


def all_recipes() -> tuple[Recipe, ...]:
    return _all_cached(str(recipes_dir()))


def get_recipe(name: str) -> Recipe:
    """A recipe by name, or a path to a recipe file (for values the user typed, such as --recipe)."""
    if name.endswith((".yaml", ".yml")) or "/" in name:
        return load_recipe_file(Path(name))
    return registry_recipe(name)


def is_registry_recipe(recipe: Recipe) -> bool:
    """Shipped with repro, unchanged: a node can load it by name."""
    return any(r.name == recipe.name and r.hash() == recipe.hash() for r in all_recipes())


def registry_recipe(name: str) -> Recipe:
    """A recipe from the shipped registry by name; never a path. For names read from result or rack files."""
    for recipe in all_recipes():
        if recipe.name == name:
            return recipe
    import difflib

    known = [r.name for r in all_recipes()]
    shown = name if len(name) <= 80 and name.isprintable() else ascii(name[:80])
    close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.82)
    if close:
        raise RecipeError(f"Unknown recipe '{shown}'. Did you mean '{close[0]}'?", f"repro recipes show {close[0]}")
    raise RecipeError(f"Unknown recipe '{shown}'. Known recipes: {', '.join(known)}.", "`repro recipes list`")


def _norm(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def by_vm_size(vm_size: str) -> Recipe | None:
    """IMDS reports e.g. 'Standard_ND128isr_GB300_v6'; case and separators vary across tools."""
    want = _norm(vm_size)
    return _system_default([r for r in all_recipes() if r.system.vm_size and _norm(r.system.vm_size) == want], None)


def _nvml_match(recipe: Recipe, gpu_name: str) -> int:
    """How specifically the recipe names this GPU: the length of its longest NVML name inside it (0: not at all)."""
    name = gpu_name.lower()
    return max((len(n) for n in recipe.system.nvml_names if n.lower() in name), default=0)


def gpu_is_recipes(recipe: Recipe, gpu_name: str) -> bool:
    """The GPU is the recipe's by the identity verify holds runs to (chip, form factor, memory: 'NVIDIA H100 NVL' is not
    nd-h100-v5's SXM H100, 'NVIDIA GH200' not an H200). A recipe without one falls back to its NVML names, where the
    most specific among the shipped recipes wins."""
    if recipe.system.accelerator is not None:
        return same_accelerator(gpu_name, recipe.system.accelerator)[0]
    mine = _nvml_match(recipe, gpu_name)
    return mine > 0 and all(_nvml_match(r, gpu_name) <= mine for r in all_recipes())


def by_gpu_name(gpu_name: str, gpu_count: int | None = None) -> Recipe | None:
    """Map an NVML name ('NVIDIA H100 80GB HBM3') to the runnable recipe for that GPU: the GPU's identity first (it
    is the hardware), then the recipe with that many GPUs per VM."""
    matches = [r for r in all_recipes() if not r.reference_only and not r.demo and gpu_is_recipes(r, gpu_name)]
    if gpu_count is not None:
        exact = [r for r in matches if r.system.gpus_per_vm == gpu_count]
        matches = exact or matches
    if not matches:
        return None
    first = matches[0]  # the most specific GPU identity; of one system's recipes, its default (_system_default)
    same = [
        r for r in matches if (r.system.vm_size, r.system.gpu_name) == (first.system.vm_size, first.system.gpu_name)
    ]
    return _system_default(same, None)


def _system_default(matches: list[Recipe], benchmark: str | None) -> Recipe | None:
    """Of the recipes for one system, the one for `benchmark`'s model (its exact benchmark first); without a
    benchmark the system's first recipe, the one named after the system alone (nd-gb200-v6, not
    nd-gb200-v6-llama3.1-405b). None when no recipe of that system runs the benchmark's model."""
    if not matches:
        return None
    matches = sorted(matches, key=lambda r: (len(r.name), r.name))
    if benchmark is None:
        return matches[0]
    exact = [r for r in matches if r.benchmark == benchmark]
    if exact:
        return exact[0]
    family = load_benchmark(benchmark).mlperf_model
    same = [r for r in matches if r.bench.mlperf_model == family]
    return same[0] if same else None


def by_system_name(system_name: str, benchmark: str | None = None) -> Recipe | None:
    """Match an MLPerf system-description `system_name` (e.g. 'ND_GB200_v6', ' 18xND_GB300_v6') to a recipe; with
    a benchmark, the system's recipe for that benchmark's model (another model's recipe is never its reference)."""
    want = _norm(re.sub(r"^\s*\d+\s*x\s*", "", system_name, flags=re.I))
    matches = []
    for recipe in all_recipes():
        keys = {_norm(recipe.name), _norm(recipe.title)}
        if recipe.system.vm_size:
            keys.add(_norm(recipe.system.vm_size.replace("Standard_", "")))
        if want in keys or _norm(recipe.name.replace("-", "")) == want:
            matches.append(recipe)
    vm_sizes = {r.system.vm_size for r in matches if r.system.vm_size}
    matches += [r for r in all_recipes() if r not in matches and r.system.vm_size in vm_sizes]  # its other benchmarks
    return _system_default(matches, benchmark)
