"""The exact command lines of the quantize, engine-build and serve steps for a recipe (reference §1.3, §3.3, §3.4).

Pure: paths in, argv lists and YAML text out. Every path is the one the container sees, under the
workspace bind mount, so the same lines appear in `--dry-run`, in the ledger and in the golden tests.
Each function takes the deployment of one scenario (`Recipe.deployment`: its checkpoint, engine and servers); a
recipe stands for its base deployment, the Offline engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from repro.core.errors import RecipeError
from repro.core.recipes import Deployment, Recipe, TensorRTLLM, as_deployment

CONTAINER_WORKSPACE = PurePosixPath("/workspace")
TRTLLM_QUANTIZE = "/app/tensorrt_llm/examples/quantization/quantize.py"
ENTRY = "/opt/repro/container_entry.py"


@dataclass(frozen=True)
class Paths:
    """Where each input and output lives, as seen inside the container."""

    model_dir: PurePosixPath
    calib_pkl: PurePosixPath
    calib_dir: PurePosixPath
    checkpoint_dir: PurePosixPath
    engine_dir: PurePosixPath | None
    serve_config: PurePosixPath

    def to_json(self) -> dict[str, Any]:
        return {k: (str(v) if v is not None else None) for k, v in self.__dict__.items()}


Target = Recipe | Deployment


def engine_name(target: Target) -> str:
    """NVIDIA's harness names engines `gpu-<precision>-b<batch>-tp<tp>-pp<pp>`; keep that shape."""
    dep = as_deployment(target)
    t = _trt(dep)
    return f"gpu-{dep.recipe.precision}-b{t.gpu_batch_size}-tp{t.tp_size}-pp{t.pp_size}"


def paths_for(
    target: Target, root: PurePosixPath = CONTAINER_WORKSPACE, model_dir: PurePosixPath | None = None
) -> Paths:
    """Each deployment's checkpoint and engine in its own folder: the base's engine under Offline/ (NVIDIA's
    `build/engines/<system>/<model>/<scenario>/` shape), a scenario's own under its name, with its serve config."""
    dep = as_deployment(target)
    recipe = dep.recipe
    base = root / "engines" / recipe.name
    calib_file = recipe.dataset.files.get("calibration", "calibration.pkl")
    own = base / dep.scenario if dep.own else base
    return Paths(
        model_dir=model_dir or root / "models" / recipe.model.repo_id.split("/")[-1],
        calib_pkl=root / "data" / recipe.dataset.name / calib_file,
        calib_dir=root / "preprocessed" / recipe.dataset.name / recipe.dataset.calibration_dir,
        checkpoint_dir=base / "checkpoints" / dep.quantization.output_name,
        engine_dir=base / dep.engine_scenario / recipe.bench.mlperf_model / engine_name(dep)
        if recipe.backend == "trtllm-engine"
        else None,
        serve_config=own / "trtllm_serve_extra_conf.yaml",
    )


def _trt(dep: Deployment) -> TensorRTLLM:
    if dep.trtllm is None:
        raise RecipeError(
            f"Recipe '{dep.recipe.name}' has no trtllm section, so there is no TensorRT-LLM step to run.",
            f"`repro recipes show {dep.recipe.name}`",
        )
    return dep.trtllm


def qformat(target: Target) -> str:
    """The harness rewrites precision 'fp4' to NVFP4 ("Using NVFP4 for FP4 quantization")."""
    q = as_deployment(target).quantization.qformat
    return "nvfp4" if q in ("fp4", "nvfp4") else q


def prepare_calib_command(target: Target, p: Paths) -> list[str]:
    """Checks the calibration parquet (`text` column) `repro setup` wrote; the container never unpickles."""
    return ["python3", ENTRY, "prepare-calib", f"--pkl={p.calib_pkl}", f"--output_dir={p.calib_dir}"]


def quantize_command(target: Target, p: Paths) -> list[str]:
    """TRT-LLM checkpoint via quantize.py for the engine path; ModelOpt HF checkpoint for the PyTorch path."""
    dep = as_deployment(target)
    q = dep.quantization
    t = _trt(dep)
    common = [
        f"--model_dir={p.model_dir}",
        f"--output_dir={p.checkpoint_dir}",
        f"--calib_dataset={p.calib_dir}",
        f"--calib_size={q.calib_size}",
        f"--dtype={q.dtype}",
        f"--qformat={qformat(dep)}",
    ]
    kv = [f"--kv_cache_dtype={q.kv_cache_dtype}"] if q.kv_cache_dtype else []
    if q.tool == "trtllm_quantize":
        return ["python3", TRTLLM_QUANTIZE, f"--tp_size={t.tp_size}", f"--pp_size={t.pp_size}", *common, *kv]
    if q.tool == "hf_quantize":
        return ["python3", ENTRY, "hf-quantize", *common, *kv]
    raise RecipeError(
        f"Recipe '{dep.recipe.name}' has quantization.tool 'none'; there is nothing to quantize.",
        f"`repro recipes show {dep.recipe.name}`",
    )


def _flag_value(value: Any) -> str:
    if isinstance(value, bool):
        return "enable" if value else "disable"
    return "nvfp4" if value == "fp4" else str(value)


def build_command(target: Target, p: Paths) -> list[str] | None:
    """trtllm-build with the recipe's flags, in recipe order; None on the PyTorch path, which has no engine."""
    dep = as_deployment(target)
    if dep.recipe.backend != "trtllm-engine":
        return None
    t = _trt(dep)
    forbidden = {"tensor_parallelism", "pipeline_parallelism", "max_batch_size"} & set(t.build_flags)
    if forbidden:
        raise RecipeError(
            f"Recipe '{dep.recipe.name}': trtllm.build_flags may not set {', '.join(sorted(forbidden))} "
            "(they come from tp_size, pp_size and gpu_batch_size).",
            "fix it, then `repro recipes validate`",
        )
    argv = [
        "trtllm-build",
        f"--checkpoint_dir={p.checkpoint_dir}",
        f"--output_dir={p.engine_dir}",
        f"--max_batch_size={t.gpu_batch_size}",
    ]
    argv += [f"--{k}={_flag_value(v)}" for k, v in t.build_flags.items()]
    if t.tp_size * t.pp_size > 1:
        argv.append(f"--workers={t.tp_size * t.pp_size}")
    return argv


def serve_config(target: Target) -> str:
    """The `--extra_llm_api_options` YAML, exactly the deployment's serve_extra_options."""
    return yaml.safe_dump(
        dict(_trt(as_deployment(target)).serve_extra_options), sort_keys=False, default_flow_style=False
    )


def _release(version: str) -> tuple[int, int]:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError) as exc:
        raise RecipeError(
            f"trtllm.version '{version}' is not a TensorRT-LLM release number such as 1.1.0.",
            "fix it, then `repro recipes validate`",
        ) from exc


def serve_backend(target: Target) -> str:
    """trtllm-serve's --backend value for the recipe's release: engines are `trt` up to 1.0 (click rejects
    `tensorrt` there) and `tensorrt` from 1.1 on (TensorRT-LLM PR #7829 renamed the choice)."""
    dep = as_deployment(target)
    if dep.recipe.backend != "trtllm-engine":
        return "pytorch"
    return "trt" if _release(_trt(dep).version) < (1, 1) else "tensorrt"


@dataclass(frozen=True)
class ServeInstance:
    rank: int
    cuda_visible_devices: str
    port: int
    argv: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "cuda_visible_devices": self.cuda_visible_devices,
            "port": self.port,
            "argv": self.argv,
        }


def serve_commands(target: Target, p: Paths) -> list[ServeInstance]:
    """One trtllm-serve per data-parallel rank, each on its own GPUs and port 30000+i, as the harness launches them."""
    dep = as_deployment(target)
    t = _trt(dep)
    per = t.tp_size * t.pp_size
    engine = dep.recipe.backend == "trtllm-engine"
    model = p.engine_dir if engine else p.checkpoint_dir
    max_seq_len = t.build_flags.get("max_seq_len", t.runtime_flags.get("max_seq_len"))
    out = []
    for i in range(t.servers_per_vm):
        gpus = ",".join(str(g) for g in range(i * per, (i + 1) * per))
        argv = [
            "trtllm-serve",
            str(model),
            "--host",
            "127.0.0.1",  # no authentication on these endpoints: `repro run --listen` opens them wider
            "--port",
            str(t.base_port + i),
            "--extra_llm_api_options",
            str(p.serve_config),
            "--num_postprocess_workers",
            str(t.runtime_flags.get("num_postprocess_workers", 2)),
            "--tp_size",
            str(t.tp_size),
            "--pp_size",
            str(t.pp_size),
            "--max_num_tokens",
            str(t.runtime_flags["max_num_tokens"]),
            "--max_batch_size",
            str(t.gpu_batch_size),
            "--max_seq_len",
            str(max_seq_len),
            "--max_beam_width",
            str(t.runtime_flags.get("max_beam_width", 1)),
            "--tokenizer",
            # The folder `repro setup` downloaded: a hub id would make every server fetch the gated repo, and the
            # server containers get no token and no hub cache.
            str(p.model_dir) if engine else str(p.checkpoint_dir),
            "--backend",
            serve_backend(dep),
        ]
        out.append(ServeInstance(i, gpus, t.base_port + i, argv))
    return out
