"""Recipes are data (one YAML per system under recipes/); this module is their schema and the systems registry.

The registry is the single lookup used by detection (Azure VM size, NVML GPU name), by
`repro verify` (system JSON name) and by every step that needs a recipe.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from repro.core.accelerators import Accelerator, same_accelerator
from repro.core.backends import RECIPE_BACKENDS, recipe_backend
from repro.core.benchmarks import (
    BENCHMARK_NAME,
    NAME_LEN,
    Benchmark,
    Dataset,
    Model,
    format_validation,
    load_benchmark,
)
from repro.core.errors import RecipeError
from repro.core.gpu_arch import is_blackwell
from repro.core.merge import merged
from repro.core.mlperf_rules import recipe_violations, rulebook
from repro.core.names import Name, text_problem
from repro.core.safeio import read_text_bounded, safe_yaml, yaml_kind, yaml_problem
from repro.core.textsafe import sh_quote

Unknown = Literal["unknown"]
Scenario = Literal["Offline", "Server", "Interactive"]
Precision = Literal["nvfp4", "fp4", "fp8", "bf16", "fp16", "fp32"]
Backend = Literal[RECIPE_BACKENDS]  # type: ignore[valid-type]  # the choices come from the backend registry


MAX_COUNT = 4096
"""GPUs, servers, ranks or VMs one recipe may name: far above any system (an NVL72 rack is 72 GPUs), low enough that
a loop over them ends (`tp_size: 1e30` once hung build-engine)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class System(_Strict):
    vm_size: str | None = Field(description="Azure VM size (IMDS compute.vmSize); null for non-Azure systems")
    gpu_name: str = Field(description="Marketing name, e.g. 'NVIDIA GB300'")
    nvml_names: list[str] = Field(description="Substrings that NVML's device name contains for this GPU")
    gpus_per_vm: int = Field(gt=0, le=MAX_COUNT, strict=True)
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
    output_name: Name = Field(description="The quantized checkpoint's folder under engines/<recipe>/checkpoints/")
    quantized_size_gb: float | Unknown = Field(default="unknown", description="Size of the quantized checkpoint")


def serve_options_problem(options: dict[str, Any]) -> str | None:
    """Why the serve options repro itself reads (doctor's KV arithmetic, the twin, explain) cannot be what
    trtllm-serve takes, or None: kv_cache_config and scheduler_config are mappings, free_gpu_memory_fraction a
    share of the GPU's memory (0, 1], capacity_scheduler_policy a name, moe_expert_parallel_size a GPU count. The
    rest of the block goes to trtllm-serve as written."""
    for block in ("kv_cache_config", "scheduler_config"):
        if block in options and not isinstance(options[block], dict):
            return f"{block} is {type(options[block]).__name__}, not a mapping of options"
    kv = options.get("kv_cache_config") or {}
    frac = kv.get("free_gpu_memory_fraction")
    if frac is not None and (isinstance(frac, bool) or not isinstance(frac, int | float) or not 0 < frac <= 1):
        return f"kv_cache_config.free_gpu_memory_fraction is {frac!r}; it is a share of GPU memory in (0, 1]"
    policy = (options.get("scheduler_config") or {}).get("capacity_scheduler_policy")
    if policy is not None and not isinstance(policy, str):
        return f"scheduler_config.capacity_scheduler_policy is {policy!r}, not a policy name"
    ep = options.get("moe_expert_parallel_size")
    if ep is not None and (isinstance(ep, bool) or not isinstance(ep, int) or not 0 < ep <= MAX_COUNT):
        return f"moe_expert_parallel_size is {ep!r}; it counts GPUs: a whole number from 1 to {MAX_COUNT}"
    return None


class RoleLayout(_Strict):
    """One role of a disaggregated system (context or generation servers): how many, their parallelism, and the
    serve options that are theirs (merged onto the deployment's serve_extra_options)."""

    instances: int = Field(gt=0, le=MAX_COUNT, strict=True)
    tp_size: int = Field(gt=0, le=MAX_COUNT, strict=True)
    pp_size: int = Field(default=1, gt=0, le=MAX_COUNT, strict=True)
    ep_size: int | None = Field(
        default=None, gt=0, le=MAX_COUNT, strict=True, description="Expert parallelism (MoE), as its config states"
    )
    serve_extra_options: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _serve_options_typed(self) -> RoleLayout:
        if (why := serve_options_problem(self.serve_extra_options)) is not None:
            raise ValueError(f"serve_extra_options.{why}")
        return self

    @property
    def gpus(self) -> int:
        return self.tp_size * self.pp_size


class SystemLayout(_Strict):
    """One system over many nodes serving a scenario (MLPerf's rack systems, e.g. Azure's DeepSeek-R1 GB300 NVL72
    x72: 18 nodes, one LoadGen): aggregated servers of the trtllm block's tp_size x pp_size GPUs each, which may span
    nodes, or disaggregated context and generation servers behind front ends. Absent: one VM's servers_per_vm
    servers (a rack of such VMs is N independent runs)."""

    nodes: int = Field(gt=1, le=MAX_COUNT, strict=True, description="The system's nodes (each system.gpus_per_vm GPUs)")
    instances: int | None = Field(
        default=None, gt=0, le=MAX_COUNT, strict=True, description="Aggregated servers, tp_size x pp_size GPUs each"
    )
    context: RoleLayout | None = None
    generation: RoleLayout | None = None
    front_ends: int = Field(
        default=0, ge=0, le=MAX_COUNT, strict=True, description="`trtllm-serve disaggregated` routers LoadGen sends to"
    )
    env: dict[str, str] = Field(default_factory=dict, description="Every rank's environment (the config's env file)")
    source: str = Field(min_length=1, description="The published config the layout is read from")

    @model_validator(mode="after")
    def _one_kind(self) -> SystemLayout:
        disagg = self.context is not None or self.generation is not None
        if disagg and (self.context is None or self.generation is None):
            raise ValueError("a disaggregated system needs both context and generation servers")
        if disagg == (self.instances is not None):
            raise ValueError("give either instances (aggregated servers) or context and generation servers")
        if disagg != (self.front_ends > 0):
            raise ValueError("front_ends: disaggregated servers need at least one, aggregated servers none")
        return self


_COUNT_FLAGS = {"max_num_tokens", "max_seq_len", "max_batch_size", "max_input_len", "max_beam_width"}


class TensorRTLLM(_Strict):
    version: str = Field(description="The TensorRT-LLM release repro installs in the container")
    published_version: str | Unknown = Field(description="What the published run used, as far as its sources say")
    base_image: str = Field(description="Base image repro's Dockerfile builds FROM")
    cuda_architectures: str | None
    tp_size: int = Field(gt=0, le=MAX_COUNT, strict=True)
    pp_size: int = Field(gt=0, le=MAX_COUNT, strict=True)
    servers_per_vm: int = Field(gt=0, le=MAX_COUNT, strict=True)
    base_port: int = Field(gt=1024, lt=65536)
    gpu_batch_size: int = Field(gt=0, le=1 << 20, strict=True)
    client_concurrency: int | None = Field(
        default=None,
        gt=0,
        description="Requests repro keeps in flight per server (NVIDIA's endpoint client runtime flag "
        "max_concurrency); null: gpu_batch_size, NVIDIA's default. Where the KV cache holds far fewer sequences than "
        "the batch, the rest wait unanswered inside the server: the recipe sizes it (and says how) from the KV pool",
    )
    build_flags: dict[str, str | int | float | bool] = Field(default_factory=dict)
    runtime_flags: dict[str, str | int | float | bool] = Field(default_factory=dict)
    serve_extra_options: dict[str, Any] = Field(default_factory=dict)
    system: SystemLayout | None = Field(
        default=None, description="One system over many nodes (servers spanning nodes, one LoadGen); null: one VM's"
    )

    @model_validator(mode="after")
    def _counts_are_counts(self) -> TensorRTLLM:
        """A token or sequence budget in the flags is a whole number above 0: `max_seq_len: 0.5` became 0 and
        divided by it in doctor's KV arithmetic."""
        for where, flags in (("build_flags", self.build_flags), ("runtime_flags", self.runtime_flags)):
            for key in _COUNT_FLAGS & set(flags):
                value = flags[key]
                if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1 << 24:
                    raise ValueError(f"{where}.{key} is {value!r}; it counts tokens or sequences: a whole number > 0")
        if (why := serve_options_problem(self.serve_extra_options)) is not None:
            raise ValueError(f"serve_extra_options.{why}")
        return self

    @property
    def requests_in_flight(self) -> int:
        """Per server: client_concurrency, else gpu_batch_size (NVIDIA's default: egmsft/AI-benchmarking-guide @
        3371c0c3 `Azure_Results/1M_ND_GB300_v6_Inference/code/llmlib/config.py:572-581`, max_concurrency = the build's
        max_batch_size per core)."""
        return self.client_concurrency or self.gpu_batch_size


class EngineLayout(_Strict):
    """How one scenario's engine and servers are laid out: what a run records (run.json `serving.engine`) and what a
    published run used (`published[...].engine`), so verify can set one against the other. Multi-node layouts
    (DeepSeek-R1: expert parallelism, an instance's GPUs across nodes, context and generation servers) add their
    fields here; an unset field is not compared."""

    tp_size: int = Field(gt=0, le=MAX_COUNT, strict=True)
    pp_size: int = Field(gt=0, le=MAX_COUNT, strict=True)
    max_num_tokens: int | None = Field(default=None, gt=0, description="The engine's and the server's token budget")
    gpu_batch_size: int | None = Field(default=None, gt=0)
    servers_per_vm: int | None = Field(default=None, gt=0, le=MAX_COUNT, strict=True)
    source: str = Field(default="", description="Where a published layout is read from (file:lines)")

    def text(self) -> str:
        """'TP4xPP1, max_num_tokens 2,048': the words every view uses."""
        out = f"TP{self.tp_size}xPP{self.pp_size}"
        if self.max_num_tokens is not None:
            out += f", max_num_tokens {self.max_num_tokens:,}"
        return out

    def differences(self, other: EngineLayout) -> list[str]:
        """'tp_size 2 (published 4)' for every field both state and that differs."""
        out = []
        for key in ("tp_size", "pp_size", "max_num_tokens", "gpu_batch_size", "servers_per_vm"):
            mine, theirs = getattr(self, key), getattr(other, key)
            if mine is not None and theirs is not None and mine != theirs:
                out.append(f"{key} {mine:,} (published {theirs:,})")
        return out


# Fields of the trtllm block that name the one container image of a recipe: a scenario cannot change them.
_IMAGE_KEYS = ("version", "published_version", "base_image", "cuda_architectures")


class ScenarioOverride(_Strict):
    """One scenario's own engine and serving setup where it is not the recipe's base (Offline) one: a partial
    `quantization` and `trtllm` block merged key by key onto the base (flag and option mappings too), then validated
    as whole blocks. Parallelism, token budget, serve options and the checkpoint name vary per scenario; the
    container image is the recipe's one."""

    source: str = Field(min_length=1, description="The published config this scenario's setup is read from")
    quantization: dict[str, Any] = Field(default_factory=dict)
    trtllm: dict[str, Any] = Field(default_factory=dict)
    disk_gb: float = Field(default=0, ge=0, description="Disk its checkpoint and engine add (within disk_needed_gb)")
    note: str = ""

    @model_validator(mode="after")
    def _image_is_the_recipes(self) -> ScenarioOverride:
        fixed = sorted(set(_IMAGE_KEYS) & set(self.trtllm))
        if fixed:
            raise ValueError(f"a scenario cannot change trtllm.{', '.join(fixed)} (one image per recipe)")
        return self


Effect = Literal["moves", "may move", "none"]


class HostSettings(_Strict):
    """Host settings the published run's harness set around the run (NVIDIA's `vboost_slider`: `nvidia-smi
    boost-slider --vboost N` before, 0 after). repro records the host's own in run.json and names a difference;
    it never changes a host setting itself (doctor names the command)."""

    vboost_slider: int | None = Field(default=None, ge=0)
    source: str = Field(min_length=1)


class KnownDifference(_Strict):
    """Something repro's stack does otherwise than the published run, which the recipe cannot follow (a private
    branch, an in-process executor): verify and explain name it beside the differences they derive."""

    key: str = Field(min_length=1, description="What differs, in a few words ('serving stack')")
    published: str = Field(min_length=1)
    here: str = Field(min_length=1, description="What repro does instead")
    effect: Effect = "may move"
    scenarios: list[Scenario] = Field(default_factory=list, description="Where it applies; empty: every scenario")
    source: str = Field(min_length=1)


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
    min_query_count: int = Field(
        ge=0, description="Offline's (default: the benchmark's); Server and Interactive take the benchmark's own"
    )
    performance_sample_count: int = Field(gt=0, description="Default: the benchmark's")
    max_tokens: int = Field(gt=0, description="Default: the benchmark's max_new_tokens")


class Rack(_Strict):
    """A published rack claim (statistics over independent per-VM runs) and, where published, each VM's own log."""

    vms: int = Field(gt=0, le=MAX_COUNT, strict=True)
    total_tokens_per_s: float
    min_tokens_per_s: float
    max_tokens_per_s: float
    mean_tokens_per_s: float
    median_tokens_per_s: float | Unknown
    vm_tokens_per_s: dict[Name, float] = Field(
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
    scenario: Scenario = "Offline"
    source: str
    note: str = ""
    rack: Rack | None = None
    engine: EngineLayout | None = Field(
        default=None, description="The engine layout the published run used, with its source; null: not stated"
    )

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
    benchmark: str = Field(
        pattern=BENCHMARK_NAME,
        max_length=NAME_LEN,
        description="The MLPerf benchmark it runs: NAME.yaml in a folder of the benchmark search path",
    )
    backend: Backend
    precision: Precision
    model: Model = Field(description="The benchmark's model; a recipe may override single fields (tests, demo)")
    dataset: Dataset = Field(description="The benchmark's dataset; a recipe may override single fields")
    quantization: Quantization
    trtllm: TensorRTLLM | None
    scenarios: dict[Scenario, ScenarioOverride] = Field(
        default_factory=dict, description="Scenarios whose engine or serving setup is not the base (Offline) one"
    )
    loadgen: LoadGen
    published: Published = Field(description="The headline published result (Offline)")
    published_scenarios: list[Published] = Field(
        default_factory=list, description="This system's published results for other scenarios (Server, Interactive)"
    )
    disk_needed_gb: float = Field(gt=0)
    expected_runtime_min: float | Unknown
    published_host: HostSettings | None = Field(
        default=None, description="Host settings the published run's harness set (vboost); null: none stated"
    )
    known_differences: list[KnownDifference] = Field(
        default_factory=list, description="What repro's stack does otherwise than the published run, with sources"
    )
    waive_rules: list[str] = Field(
        default_factory=list,
        description="MLPerf rules (ids in repro/data/mlperf_rules.yaml) this recipe knowingly breaks, for an "
        "experiment: it loads, and its runs are labelled non-compliant, never a reproduction",
    )
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
                out[key] = merge_section(section.model_dump(), mine or {})
        if isinstance(out.get("dataset"), dict):
            out["dataset"] = _pins_follow_files(bench.dataset.model_dump(), data.get("dataset") or {}, out["dataset"])
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
        self._check_scenarios()
        known = {r.id for r in rulebook().rules}
        unknown = [r for r in self.waive_rules if r not in known]
        if unknown:
            raise ValueError(
                f"waive_rules: {unknown[0]!r} is not an MLPerf rule repro checks ({', '.join(sorted(known))})"
            )
        broken = [v for v in recipe_violations(self) if v.rule.id not in self.waive_rules]
        if broken:
            more = f" ({len(broken) - 1} more rule(s) broken)" if len(broken) > 1 else ""
            raise ValueError(f"breaks an MLPerf rule: {broken[0].message()}{more}")
        return self

    def _check_scenarios(self) -> None:
        """Every scenario's own blocks merge into valid ones, and the disk they add is inside disk_needed_gb."""
        if self.scenarios and self.trtllm is None:
            raise ValueError("scenarios: only a recipe with a trtllm section has per-scenario engines")
        for scenario in self.scenarios:
            self.deployment(scenario)
        for dep in self.deployments():
            _check_system(dep)
        extra = sum(o.disk_gb for o in self.scenarios.values())
        if extra >= self.disk_needed_gb:
            raise ValueError(
                f"disk_needed_gb {self.disk_needed_gb:g} must count the scenarios' own {extra:g} GB and the base's"
            )

    def deployment(self, scenario: str) -> Deployment:
        """What this recipe runs for one scenario (its own blocks, else the base's), resolved once and passed on by
        build-engine, run, doctor and verify alike."""
        over = self.scenarios.get(scenario)  # type: ignore[call-overload]
        if over is None:
            return Deployment(self, scenario, self.quantization, self.trtllm, own=False, source=None)
        assert self.trtllm is not None
        where = f"scenarios.{scenario}"
        try:
            quant = Quantization.model_validate(merged(self.quantization.model_dump(), over.quantization))
            trt = TensorRTLLM.model_validate(merged(self.trtllm.model_dump(), over.trtllm))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"{where}: {field}: {first['msg']}") from None
        return Deployment(self, scenario, quant, trt, own=True, source=over.source)

    def deployments(self) -> list[Deployment]:
        """The base deployment (every scenario without its own) and each scenario's own, in that order."""
        return [self.deployment("Offline"), *(self.deployment(s) for s in self.scenarios if s != "Offline")]

    def hash(self) -> str:
        """Content hash of the validated recipe: the input hash of every step that depends on it. Fields added
        since schema 1 count only when set, so a recipe that does not use them keeps its hash."""
        doc = self.model_dump(mode="json")
        for key in _OPTIONAL_KEYS:
            if doc.get(key) in (None, {}, []):
                doc.pop(key, None)
        for pub in (doc["published"], *doc["published_scenarios"]):
            if pub.get("engine") is None:
                pub.pop("engine", None)
        if isinstance(doc.get("trtllm"), dict) and doc["trtllm"].get("system") is None:
            doc["trtllm"].pop("system", None)
        blob = json.dumps(doc, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def blackwell(self) -> bool:
        return is_blackwell(self.system.gpu_arch)


def _check_system(dep: Deployment) -> None:
    """A deployment's servers fit its GPUs: on one VM, servers_per_vm x tp x pp within gpus_per_vm (more ended run in
    "repro hit a bug" planning GPUs the VM lacks); a system layout, every instance a divisor of a node's GPUs or
    whole nodes, all of them within nodes x gpus_per_vm."""
    sys = dep.trtllm.system if dep.trtllm is not None else None
    if dep.trtllm is None:
        return
    per_node = dep.recipe.system.gpus_per_vm
    if sys is None:  # one VM's servers_per_vm servers of tp x pp GPUs each: the VM has them all
        t, where = dep.trtllm, "trtllm" if not dep.own else f"scenarios.{dep.scenario}.trtllm"
        need = t.servers_per_vm * t.tp_size * t.pp_size
        if need > per_node:
            raise ValueError(
                f"{where}: {t.servers_per_vm} servers x TP{t.tp_size} x PP{t.pp_size} need {need} GPUs; "
                f"system.gpus_per_vm is {per_node}"
            )
        return
    where = f"trtllm.system ({dep.scenario})" if dep.own else "trtllm.system"
    roles = (
        [("server", sys.instances, dep.trtllm.tp_size * dep.trtllm.pp_size)]
        if sys.instances is not None
        else [(r, getattr(sys, r).instances, getattr(sys, r).gpus) for r in ("context", "generation")]
    )
    total = 0
    for role, count, gpus in roles:
        if (gpus > per_node and gpus % per_node) or (gpus < per_node and per_node % gpus):
            raise ValueError(
                f"{where}: a {role} of {gpus} GPUs is neither a divisor of a node's {per_node} nor whole nodes"
            )
        total += (count or 0) * (-(-gpus // per_node) * per_node if gpus > per_node else gpus)
    if total > sys.nodes * per_node:
        raise ValueError(
            f"{where}: its servers need {total} GPUs; {sys.nodes} nodes of {per_node} have {sys.nodes * per_node}"
        )


def merge_section(bench: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    """The benchmark's model or dataset with a recipe's fields over it, tables key by key: a copy that pins
    `sha256: {sampled: X}` keeps the benchmark's other roles (calibration) instead of dropping them. A role's own
    entry (an md5 pin and its sources) is replaced whole, never mixed with the benchmark's."""
    out = dict(bench)
    for field, value in mine.items():
        base = bench.get(field)
        out[field] = {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
    return out


_OPTIONAL_KEYS = ("scenarios", "published_host", "known_differences", "waive_rules")


@dataclass(frozen=True)
class Deployment:
    """One scenario of a recipe as it is built and served: the checkpoint, the engine, the servers. Resolved once
    (`Recipe.deployment`) and handed to every stage, so no stage re-derives which engine a scenario uses."""

    recipe: Recipe
    scenario: str
    quantization: Quantization
    trtllm: TensorRTLLM | None
    own: bool
    """The scenario has its own blocks (`scenarios:` in the recipe); False: the base, which every scenario without
    its own shares (it is the Offline engine)."""
    source: str | None

    @property
    def engine_scenario(self) -> str:
        """The scenario whose engine this is: folders and ledger steps are named after it."""
        return self.scenario if self.own else "Offline"

    @property
    def layout(self) -> EngineLayout | None:
        t = self.trtllm
        if t is None:
            return None
        tokens = t.runtime_flags.get("max_num_tokens", t.build_flags.get("max_num_tokens"))
        return EngineLayout(
            tp_size=t.tp_size,
            pp_size=t.pp_size,
            max_num_tokens=int(tokens) if isinstance(tokens, (int, float)) and not isinstance(tokens, bool) else None,
            gpu_batch_size=t.gpu_batch_size,
            servers_per_vm=t.servers_per_vm,
        )

    @property
    def build_step(self) -> str:
        """Its ledger step: `build-engine` for the base, `build-engine-server` for Server's own engine."""
        return "build-engine" if not self.own else f"build-engine-{self.scenario.lower()}"

    def build_command(self, workspace: str | None = None) -> str:
        """The command that builds this deployment's checkpoint and engine."""
        argv = ["repro", "build-engine", "--recipe", self.recipe.name]
        argv += ["--scenario", self.scenario] if self.own else []
        argv += ["--workspace", workspace] if workspace else []
        return shlex.join(argv)

    def build_hash(self) -> str:
        """What the checkpoint and engine depend on (model, dataset, quantization, engine flags), not the serving
        options or LoadGen's settings: a change elsewhere in the recipe does not rebuild an engine for hours."""
        t = self.trtllm.model_dump(mode="json") if self.trtllm is not None else {}
        runtime = (
            "serve_extra_options",
            "runtime_flags",
            "servers_per_vm",
            "base_port",
            "client_concurrency",
            "system",
        )
        for key in (*runtime, "published_version"):
            t.pop(key, None)
        doc = [
            self.recipe.model.model_dump(mode="json"),
            self.recipe.dataset.model_dump(mode="json"),
            self.recipe.precision,
            self.quantization.model_dump(mode="json"),
            t,
        ]
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def as_deployment(target: Recipe | Deployment) -> Deployment:
    """A stage given a recipe builds and serves its base deployment (the Offline engine); given a deployment, that."""
    return target if isinstance(target, Deployment) else target.deployment("Offline")


def _pins_follow_files(bench: dict[str, Any], mine: dict[str, Any], merged: dict[str, Any]) -> dict[str, Any]:
    """A benchmark's checksum of a file pins that file: a recipe that names another file for a role (a test set, a
    mirror's name) keeps the pins it gives itself, not the benchmark's for the file it replaced."""
    files, ours = merged.get("files"), bench.get("files") or {}
    if not isinstance(files, dict):
        return merged
    out = dict(merged)
    for table, unset in (("sha256", "unknown"), ("md5", None)):
        own = mine.get(table)
        given: dict[str, Any] = own if isinstance(own, dict) else {}
        pins = out.get(table)
        if not isinstance(pins, dict):
            continue
        pins = dict(pins)
        for role in list(pins):
            if role not in given and role in ours and files.get(role) != ours[role]:
                if unset is None:
                    del pins[role]
                else:
                    pins[role] = unset
        out[table] = pins
    return out


def recipes_dir() -> Path:
    """Recipes ship inside the wheel (repro/_recipes) and live at the repo root in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "_recipes", here.parent.parent / "recipes"):
        if candidate.is_dir():
            return candidate
    raise RecipeError("No recipes folder found next to the repro package.", "reinstall with `pip install -e .`")


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
        raise RecipeError(f"{path}: {yaml_problem(exc)}.", f"fix it, then `repro recipes validate {path}`") from None
    if not isinstance(raw, dict):
        raise RecipeError(
            f"{path}: a recipe must be a mapping of fields (name, system, benchmark, ...), not {yaml_kind(raw)}.",
            f"`repro recipes validate {path}`",
        )
    bad_text = text_problem(raw)
    if bad_text is not None:
        raise RecipeError(
            f"{path}: field '{bad_text[0]}' {bad_text[1]}.", f"fix it, then `repro recipes validate {path}`"
        )
    if isinstance(raw.get("benchmark"), str):
        try:
            load_benchmark(raw["benchmark"])
        except RecipeError as exc:
            raise RecipeError(f"{path}: field 'benchmark': {exc.message}", exc.next_command) from None
    try:
        recipe = Recipe.model_validate(raw)
    except ValidationError as exc:
        raise RecipeError(format_validation(path, exc), f"fix it, then `repro recipes validate {path}`") from None
    if recipe.name != path.stem:
        if re.fullmatch(r"[a-z0-9][a-z0-9-]*", path.stem):
            fix, then = f"change its line 'name: {recipe.name}' to 'name: {path.stem}'", path
        else:
            then = path.with_name(f"{recipe.name}.yaml")
            fix = f"rename it to {then.name} (a name is lower-case letters, digits and '-')"
        raise RecipeError(
            f"{path}: field 'name' is '{recipe.name}' but the file is named '{path.stem}' (a recipe is known by its "
            f"file's name): {fix}.",
            f"`repro recipes validate {sh_quote(str(then))}`",
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
