"""Either side of a comparison, read once: a run folder, a published result or a recipe's figure, as a `Side`;
and what differs between two sides (LoadGen settings, serving configuration, software stack), each `Diff` with
how surely it moves the throughput figure. `repro explain` ranks causes from these.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

from repro.core.errors import InputError
from repro.core.published import PublishedResult
from repro.core.recipes import Recipe
from repro.results.audit import published_settings, stack_of_system
from repro.results.hardware import run_accelerator
from repro.results.identity import ResultIdentity, identify
from repro.results.index_match import effective_scenario
from repro.results.logfiles import parse_detail
from repro.results.logs import LoadGenRun

Effect = Literal["moves", "may move", "none"]


# LoadGen settings (effective_*/requested_* without the prefix) and how each moves the throughput figure.
_OFFLINE_SIZE: tuple[Effect, str] = (
    "may move",
    "sets the size of Offline's one query (target QPS x min duration): a shorter run makes the drain at the end "
    "a larger share",
)
_SETTING_EFFECT: dict[str, tuple[Effect, str]] = {
    "scenario": ("moves", "another scenario is another benchmark"),
    "test_mode": ("moves", "only PerformanceOnly measures throughput"),
    "target_qps": _OFFLINE_SIZE,
    "offline_expected_qps": _OFFLINE_SIZE,
    "samples_per_query": _OFFLINE_SIZE,
    "min_sample_count": _OFFLINE_SIZE,
    "generated_samples_per_query": _OFFLINE_SIZE,
    "min_duration_ms": ("may move", "a shorter run has a larger share of ramp-up and drain"),
    "max_duration_ms": ("moves", "a capped run stops before the queue drains"),
    "max_query_count": ("moves", "a capped run stops early"),
    "performance_sample_count": ("moves", "fewer distinct samples: another mix of prompt and output lengths"),
    "performance_sample_count_override": ("moves", "fewer distinct samples: another mix of prompt and output lengths"),
    "qsl_rng_seed": ("may move", "another round's seed: another sample mix"),
    "sample_index_rng_seed": ("may move", "another round's seed: another sample order"),
    "schedule_rng_seed": ("may move", "another round's seed: another arrival schedule"),
    "performance_issue_unique": ("moves", "a compliance-audit setting: the run repeats or dedups samples"),
    "performance_issue_same": ("moves", "a compliance-audit setting: the run repeats one sample"),
    "performance_issue_same_index": ("moves", "a compliance-audit setting"),
    "accuracy_log_probability": ("may move", "logging outputs costs the harness time"),
    "accuracy_log_sampling_target": ("may move", "logging outputs costs the harness time"),
    "sample_concatenate_permutation": ("may move", "changes how the query is filled to its size"),
    "max_async_queries": ("may move", "limits queries in flight"),
    "use_token_latencies": ("moves", "without it LoadGen counts no tokens"),
    "ttft_latency_ns": ("moves", "the first-token limit a Server run must keep"),
    "tpot_latency_ns": ("moves", "the per-token limit a Server run must keep"),
    "target_latency_ns": ("may move", "the latency bound of a Server run"),
    "target_latency_percentile": ("may move", "the percentile the latency bound applies to"),
}
_UNKNOWN_SETTING: tuple[Effect, str] = ("may move", "a LoadGen setting this tool has no rule for")
_SERVER_QPS: tuple[Effect, str] = ("moves", "Server issues queries at this rate: completed tokens/s cannot exceed it")
_IGNORED = re.compile(r"^(result_|loadgen_|qsl_reported|test_datetime|sut_name|min_query_count$|print_timestamps$)")


@dataclass(frozen=True)
class Diff:
    """One setting or version that differs between the run and its reference."""

    area: Literal["settings", "serving", "stack"]
    key: str
    yours: Any
    reference: Any
    effect: Effect
    why: str

    def to_json(self) -> dict[str, Any]:
        return {
            "area": self.area,
            "key": self.key,
            "yours": self.yours,
            "reference": self.reference,
            "effect": self.effect,
            "why": self.why,
        }


@dataclass
class Side:
    """What a comparison needs of either side: the figures, the effective settings, the stack, the serving config."""

    name: str
    kind: Literal["run", "published", "recipe"]
    scenario: str
    tokens_per_s: float | None
    samples_per_s: float | None
    accelerators: int | None
    settings: dict[str, Any] = field(default_factory=dict)
    stack: dict[str, str] = field(default_factory=dict)
    serving: dict[str, Any] = field(default_factory=dict)
    tokens_per_sample: float | None = None
    tokens_source: str = ""
    ttft_ns: dict[str, float] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)
    label: str | None = None
    source: str = ""
    accelerator: str | None = None

    @property
    def per_gpu(self) -> float | None:
        if self.tokens_per_s is None or not self.accelerators:
            return None
        return self.tokens_per_s / self.accelerators

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "scenario": self.scenario,
            "label": self.label,
            "tokens_per_s": self.tokens_per_s,
            "samples_per_s": self.samples_per_s,
            "accelerators": self.accelerators,
            "tokens_per_s_per_gpu": self.per_gpu,
            "tokens_per_sample": self.tokens_per_sample,
            "tokens_per_sample_source": self.tokens_source,
            "stack": self.stack,
            "serving": self.serving,
            "ttft_ns": self.ttft_ns,
            "machine": self.machine,
            "source": self.source,
            "accelerator": self.accelerator,
        }


def _settings_from_detail(values: dict[str, Any]) -> dict[str, Any]:
    """Effective settings win over requested ones; generated_* say what LoadGen actually issued."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key.startswith("requested_"):
            out.setdefault(key[len("requested_") :], value)
    for key, value in values.items():
        if key.startswith("effective_"):
            out[key[len("effective_") :]] = value
        elif key.startswith("generated_"):
            out[key] = value
    if "server_ttft_latency" in out:
        out.setdefault("ttft_latency_ns", out.pop("server_ttft_latency"))
    if "server_tpot_latency" in out:
        out.setdefault("tpot_latency_ns", out.pop("server_tpot_latency"))
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _stack_of_run_info(info: dict[str, Any], recipe: Recipe | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if info.get("driver"):
        out["driver"] = str(info["driver"])
    prov = _dict(info.get("provenance"))
    for key, name in (("cuda", "CUDA"), ("tensorrt_llm", "TensorRT-LLM"), ("trtllm_version", "TensorRT-LLM")):
        if prov.get(key):
            out[name] = str(prov[key])
    if (
        "TensorRT-LLM" not in out
        and recipe is not None
        and recipe.trtllm is not None
        and info.get("backend") == "trtllm"
    ):
        out["TensorRT-LLM"] = f"{recipe.trtllm.version} (the recipe's image)"
    return out


_SERVE_FLAGS = {
    "--max_batch_size": "gpu_batch_size",
    "--max_num_tokens": "max_num_tokens",
    "--tp_size": "tp_size",
    "--pp_size": "pp_size",
    "--kv_cache_free_gpu_memory_fraction": "kv_cache_free_gpu_memory_fraction",
    "--max_seq_len": "max_seq_len",
}


def _number(text: Any) -> Any:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return text
    return int(value) if value.is_integer() else value


def serving_of_run(info: dict[str, Any]) -> dict[str, Any]:
    """The serving configuration a run recorded: its `serving` block, else the server argv and client concurrency."""
    if isinstance(info.get("serving"), dict):
        return {k: v for k, v in info["serving"].items() if v is not None}
    out: dict[str, Any] = {}
    servers = _dict(info.get("servers"))
    for server in (servers.get("servers") or [])[:1]:
        argv = server.get("command") or []
        argv = shlex.split(argv) if isinstance(argv, str) else [str(a) for a in argv]
        for i, arg in enumerate(argv[:-1]):
            if arg in _SERVE_FLAGS:
                out[_SERVE_FLAGS[arg]] = _number(argv[i + 1])
    details = _dict(info.get("backend_details"))
    for key in ("max_concurrency_per_endpoint", "max_concurrency"):
        if details.get(key) is not None:
            out["client_concurrency"] = _number(details[key])
            break
    return out


def serving_of_recipe(recipe: Recipe) -> dict[str, Any]:
    if recipe.trtllm is None:
        return {}
    trt = recipe.trtllm
    kv = trt.serve_extra_options.get("kv_cache_config", {}) if isinstance(trt.serve_extra_options, dict) else {}
    out: dict[str, Any] = {
        "gpu_batch_size": trt.gpu_batch_size,
        "tp_size": trt.tp_size,
        "pp_size": trt.pp_size,
        "precision": recipe.precision,
        "servers_per_vm": trt.servers_per_vm,
        "client_concurrency": trt.requests_in_flight,
        "max_tokens": recipe.loadgen.max_tokens,
    }
    if "max_num_tokens" in trt.runtime_flags:
        out["max_num_tokens"] = trt.runtime_flags["max_num_tokens"]
    if isinstance(kv, dict) and "free_gpu_memory_fraction" in kv:
        out["kv_cache_free_gpu_memory_fraction"] = kv["free_gpu_memory_fraction"]
    return out


def _identity(run: LoadGenRun) -> ResultIdentity | None:
    """The run's identity read once (results.identity); None when its own files disagree on the count."""
    try:
        return identify(run)
    except InputError:
        return None


def _machine_of_run(run: LoadGenRun) -> dict[str, Any]:
    """What the run recorded about the machine: NVML samples (nvml.csv/power.csv) and the harness's CPU time."""
    out: dict[str, Any] = {}
    info = run.run_info.to_json() if run.run_info is not None else {}
    cpu = _dict(info.get("harness_cpu"))
    wall = cpu.get("wall_s")
    if isinstance(wall, (int, float)) and wall > 0:
        out["harness_wall_s"] = wall
        out["harness_cpu_s"] = cpu.get("cpu_s")
        on_cpu, waiting = cpu.get("busiest_thread_cpu_s"), cpu.get("busiest_thread_wait_s")
        all_cpu, all_wait = cpu.get("threads_cpu_s"), cpu.get("threads_wait_s")
        if isinstance(all_cpu, (int, float)) and isinstance(all_wait, (int, float)):
            on_cpu, waiting = all_cpu, all_wait  # together: the GIL lets Python use one core across threads
        if isinstance(on_cpu, (int, float)) and isinstance(waiting, (int, float)):
            out["harness_thread_cpu_share"] = on_cpu / wall
            out["harness_thread_wait_share"] = waiting / wall
            out["harness_thread_runnable_share"] = (on_cpu + waiting) / wall
    from repro.run.power import read_gpu_samples

    try:
        samples = read_gpu_samples(run.folder)
    except InputError:
        samples = None
    if samples:
        out.update(samples)
    return out


def side_of_run(run: LoadGenRun, recipe: Recipe | None, name: str | None = None) -> Side:
    info = run.run_info.to_json() if run.run_info is not None else {}
    values = parse_detail(run.detail_path)["values"] if run.detail_path else {}
    settings = _settings_from_detail(values) if values else dict(run.settings)
    for key in ("ttft_latency_ns", "tpot_latency_ns"):
        if key in run.settings:
            settings.setdefault(key, run.settings[key])
    tps = run.tokens_per_s / run.samples_per_s if run.tokens_per_s and run.samples_per_s else None
    stack = stack_of_system(run.system) or _stack_of_run_info(info, recipe)
    if run.loadgen_version:
        stack["LoadGen"] = str(run.loadgen_version).split(" @")[0]
    ident = _identity(run)
    return Side(
        name=name or str(run.folder),
        kind="run",
        scenario=effective_scenario(run),
        tokens_per_s=run.tokens_per_s,
        samples_per_s=run.samples_per_s,
        accelerators=ident.count.total if ident is not None and ident.count is not None else None,
        settings=settings,
        stack=stack,
        serving=serving_of_run(info) if info else {},
        tokens_per_sample=tps,
        tokens_source="LoadGen: tokens per second / samples per second" if tps else "",
        ttft_ns=dict(run.ttft_ns),
        machine=_machine_of_run(run),
        label=run.label,
        source=str(run.summary_path or run.detail_path or run.folder),
        accelerator=ident.accelerator if ident is not None else run_accelerator(run, None)[0],
    )


def side_of_published(row: PublishedResult) -> Side:
    shipped = published_settings().get(row.key)
    settings: dict[str, Any] = {}
    stack: dict[str, str] = {}
    ttft: dict[str, float] = {}
    source = row.source
    if shipped:
        values = shipped.get("detail", {})
        settings = _settings_from_detail(values)
        stack = stack_of_system(shipped.get("stack"))
        if values.get("loadgen_version"):
            stack["LoadGen"] = str(values["loadgen_version"]).split(" @")[0]
        for key, value in values.items():
            if m := re.match(r"^result_first_token_(\d+\.\d+)_percentile_latency_ns$", key):
                ttft["p" + m.group(1).rstrip("0").rstrip(".")] = value
            elif m := re.match(r"^result_first_token_(min|max|mean)_latency_ns$", key):
                ttft[m.group(1)] = value
        src = shipped.get("source", {})
        source = f"{src.get('repository')}@{str(src.get('commit'))[:12]} {src.get('path')}/performance/run_1"
    elif row.framework:
        stack = stack_of_system({"framework": row.framework})
    tps = row.tokens_per_second / row.samples_per_second if row.samples_per_second else None
    return Side(
        name=row.ref,
        kind="published",
        scenario=row.scenario,
        tokens_per_s=row.tokens_per_second,
        samples_per_s=row.samples_per_second,
        accelerators=row.total_accelerators,
        settings=settings,
        stack=stack,
        tokens_per_sample=tps,
        tokens_source="published tokens/s / samples/s" if tps else "",
        ttft_ns=ttft,
        source=source,
        accelerator=row.accelerator_model_name,
    )


def side_of_recipe(recipe: Recipe, scenario: str) -> Side:
    pub = recipe.published_for(scenario)
    if pub is None:  # never another scenario's figure in this one's place
        raise InputError(
            f"recipe {recipe.name} has no published {scenario} result to compare with.",
            f"repro published --scenario {scenario}",
        )
    per_vm = pub.tokens_per_s_per_vm
    return Side(
        name=f"{recipe.name} published figure",
        kind="recipe",
        scenario=pub.scenario,
        tokens_per_s=float(per_vm) if per_vm != "unknown" else None,
        samples_per_s=None,
        accelerators=recipe.system.gpus_per_vm,
        serving=serving_of_recipe(recipe),
        source=pub.source,
        accelerator=recipe.system.gpu_name,
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return str(a).strip().lower() == str(b).strip().lower()


def settings_diffs(run: Side, ref: Side) -> list[Diff]:
    if not run.settings or not ref.settings:
        return []
    out: list[Diff] = []
    for key in sorted(set(run.settings) & set(ref.settings)):
        if _IGNORED.match(key) or key == "generated_query_duration":
            continue
        a, b = run.settings[key], ref.settings[key]
        if _same(a, b):
            continue
        effect, why = _SETTING_EFFECT.get(key, _UNKNOWN_SETTING)
        if key in ("target_qps", "server_target_qps") and run.scenario != "Offline":
            effect, why = _SERVER_QPS
        out.append(Diff("settings", key, a, b, effect, why))
    return out


_STACK_EFFECT: dict[str, tuple[Effect, str]] = {
    "TensorRT-LLM": ("may move", "another engine release: other kernels and scheduler"),
    "TensorRT": ("may move", "another engine release: other kernels"),
    "vLLM": ("may move", "another engine release"),
    "CUDA": ("may move", "another CUDA: other libraries (cuBLAS, NCCL)"),
    "cuDNN": ("none", "Llama-2 inference does not run through cuDNN"),
    "driver": ("may move", "another driver: clocks and power management can differ"),
    "power limit": ("moves", "a lower power limit lowers sustained clocks"),
    "LoadGen": ("none", "LoadGen counts, it does not serve; versions only differ in rules"),
    "OS": ("none", "the OS does not serve tokens"),
}


def stack_diffs(run: Side, ref: Side) -> list[Diff]:
    out = []
    for key in sorted(set(run.stack) & set(ref.stack)):
        if _same(run.stack[key], ref.stack[key]):
            continue
        effect, why = _STACK_EFFECT.get(key, ("may move", "another component version"))
        out.append(Diff("stack", key, run.stack[key], ref.stack[key], effect, why))
    return out


_SERVING_WHY = {
    "gpu_batch_size": "fewer sequences per step: the weights are read for fewer tokens",
    "client_concurrency": "the client keeps fewer requests in flight than the server can batch",
    "max_num_tokens": "a smaller token budget per step slows prefill and batching",
    "tp_size": "another tensor-parallel split: other communication and per-GPU batch",
    "pp_size": "another pipeline split",
    "precision": "another precision: other weight bytes and tensor-core rate",
    "kv_cache_free_gpu_memory_fraction": "less KV cache: fewer sequences fit at once",
    "servers_per_vm": "another number of servers per VM",
    "max_seq_len": "another sequence limit",
}


def serving_diffs(run: Side, ref: Side) -> list[Diff]:
    out = []
    for key in sorted(set(run.serving) & set(ref.serving)):
        if _same(run.serving[key], ref.serving[key]):
            continue
        out.append(Diff("serving", key, run.serving[key], ref.serving[key], "moves", _SERVING_WHY.get(key, "")))
    return out
