"""`repro doctor --probe`: each GPU's measured GEMM and HBM ceilings, in about 30 s, before any hour is spent.

A GPU that is throttled, mis-clocked or sick runs every benchmark slower, and a multi-hour run is the wrong place to
find out. Per GPU, through torch: FP8 and BF16 dense GEMM TFLOP/s at a square shape and at the model's MLP shape,
and HBM bandwidth from a device-to-device copy (read + write bytes). A GPU more than 5% below the median of its
siblings, or below 95% of the expected figure for its model (repro/data/gpu_ceilings.yaml, measured, with sources),
is named. The result is saved in the workspace (probe/latest.json); `repro run` copies it into run.json (`probe`)
when it ran on the same GPUs, and explain/report draw the roofline from these ceilings beside the datasheet's.
torch is imported only here and only when asked: the TensorRT-LLM image has it; the host may not.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from repro.core.clock import now_iso
from repro.core.workspace import Workspace

SLOWER = 0.05
"""More than this below its siblings' median or its model's expected figure: the GPU is named."""
SECONDS_PER_MEASURE = 0.6
METRICS = ("fp8_square_tflops", "fp8_model_tflops", "bf16_square_tflops", "hbm_copy_tbps")
LABELS = {
    "fp8_square_tflops": "FP8 GEMM {square} TFLOP/s",
    "fp8_model_tflops": "FP8 GEMM {model} TFLOP/s",
    "bf16_square_tflops": "BF16 GEMM {square} TFLOP/s",
    "hbm_copy_tbps": "HBM copy TB/s",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Shape(_Strict):
    m: int = Field(gt=0)
    k: int = Field(gt=0)
    n: int = Field(gt=0)

    def text(self) -> str:
        return f"{self.m}x{self.k}x{self.n}"


class Shapes(_Strict):
    square: Shape
    model: Shape
    copy_bytes: int = Field(gt=0)


class Expected(_Strict):
    chip: str
    nvml_names: list[str]
    expected: dict[str, float]
    source: str


class Ceilings(_Strict):
    schema_version: int
    shapes: Shapes
    gpus: list[Expected]

    def expected_for(self, name: str) -> Expected | None:
        return next((g for g in self.gpus if any(n.lower() in name.lower() for n in g.nvml_names)), None)


def load_ceilings() -> Ceilings:
    text = resources.files("repro.data").joinpath("gpu_ceilings.yaml").read_text(encoding="utf-8")
    return Ceilings.model_validate(yaml.safe_load(text))


@dataclass
class GpuFigures:
    index: int
    name: str
    uuid: str | None
    figures: dict[str, float | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


@dataclass
class ProbeResult:
    status: str  # PASS, FAIL (a GPU named), unavailable (no torch or no GPU)
    reason: str
    gpus: list[GpuFigures] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    ceilings: dict[str, float] = field(default_factory=dict)
    expected: dict[str, Any] | None = None
    shapes: dict[str, str] = field(default_factory=dict)
    torch: str | None = None
    seconds: float = 0.0
    when: str = field(default_factory=now_iso)
    file: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc = dict(self.__dict__)
        doc["gpus"] = [g.__dict__ for g in self.gpus]
        return doc


# ------------------------------------------------------------------ judging (pure)
def judge(gpus: list[GpuFigures], expected: Expected | None) -> tuple[list[str], dict[str, float]]:
    """Names of slow GPUs (vs siblings' median, vs the model's expected figure) and the median ceilings."""
    flagged: list[str] = []
    medians: dict[str, float] = {}
    for metric in METRICS:
        values = [g.figures.get(metric) for g in gpus]
        got = [v for v in values if isinstance(v, (int, float)) and v > 0]
        if not got:
            continue
        med = statistics.median(got)
        medians[metric] = med
        want = expected.expected.get(metric) if expected else None
        for g in gpus:
            v = g.figures.get(metric)
            if not isinstance(v, (int, float)):
                continue
            unit = "TB/s" if metric.endswith("tbps") else "TFLOP/s"
            what = metric.removesuffix("_tflops").removesuffix("_tbps").replace("_", " ")
            if len(got) > 1 and v < med * (1 - SLOWER):
                flagged.append(
                    f"GPU {g.index} ({g.uuid or g.name}): {what} {v:,.2f} {unit}, {1 - v / med:.1%} below its "
                    f"siblings' median {med:,.2f}"
                )
            if want and v < want * (1 - SLOWER):
                flagged.append(
                    f"GPU {g.index} ({g.uuid or g.name}): {what} {v:,.2f} {unit}, {1 - v / want:.1%} below the "
                    f"{expected.chip if expected else ''} expected {want:,.2f}"
                )
    return flagged, medians


# ------------------------------------------------------------------ measuring (torch, one GPU at a time)
def _timed(torch: Any, fn: Any, seconds: float) -> float:
    """Seconds per call of fn on the current device: warm up, then as many calls as fit `seconds`."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = max(time.perf_counter() - t0, 1e-6)
    iters = max(3, int(seconds / once))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000 / iters


def _gemm(torch: Any, shape: Shape, fp8: bool, seconds: float) -> float:
    m, k, n = shape.m, shape.k, shape.n
    dev = torch.cuda.current_device()
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    if fp8:
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()  # b column-major, as cuBLASLt wants
        one = torch.ones((), device=dev, dtype=torch.float32)
        per = _timed(
            torch, lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), seconds
        )
    else:
        bt = b.t()
        per = _timed(torch, lambda: a @ bt, seconds)
    return 2.0 * m * k * n / per / 1e12


def _copy(torch: Any, size: int, seconds: float) -> float:
    dev = torch.cuda.current_device()
    src = torch.empty(size, device=dev, dtype=torch.uint8)
    dst = torch.empty_like(src)
    per = _timed(torch, lambda: dst.copy_(src), seconds)
    return 2.0 * size / per / 1e12


def measure_gpu(torch: Any, index: int, shapes: Shapes, seconds: float = SECONDS_PER_MEASURE) -> GpuFigures:
    torch.cuda.set_device(index)
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    out = GpuFigures(index, str(props.name), f"GPU-{uuid}" if uuid is not None else None)
    steps = {
        "fp8_square_tflops": lambda: _gemm(torch, shapes.square, True, seconds),
        "fp8_model_tflops": lambda: _gemm(torch, shapes.model, True, seconds),
        "bf16_square_tflops": lambda: _gemm(torch, shapes.square, False, seconds),
        "hbm_copy_tbps": lambda: _copy(torch, shapes.copy_bytes, seconds),
    }
    for metric, step in steps.items():
        try:
            out.figures[metric] = round(step(), 2)
        except Exception as exc:  # noqa: BLE001 - FP8 needs sm_89+; one failed measure is said, not fatal
            out.figures[metric] = None
            out.errors[metric] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        torch.cuda.empty_cache()
    return out


def _torch() -> tuple[Any | None, str]:
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - absent or broken: the probe says which
        return None, (
            "torch is not installed here, so the probe cannot run "
            f"({type(exc).__name__}); the TensorRT-LLM image has it: run the probe inside it, or `pip install torch`"
        )
    if not torch.cuda.is_available():
        return None, (
            f"the probe needs a GPU: torch {torch.__version__} sees no CUDA device on this machine "
            "(no NVIDIA GPU, no driver, or a CPU-only torch)"
        )
    return torch, ""


def model_shapes(ceilings: Ceilings, hidden: int | None, intermediate: int | None) -> tuple[Shapes, bool]:
    """The probe's shapes with the model GEMM at the recipe's model (M x hidden x intermediate: its MLP
    up-projection); True when that is the shape the expected figures were measured at."""
    base = ceilings.shapes
    if not hidden or not intermediate:
        return base, True
    model = Shape(m=base.model.m, k=hidden, n=intermediate)
    return base.model_copy(update={"model": model}), model == base.model


def run_probe(
    ws: Workspace,
    *,
    seconds: float = SECONDS_PER_MEASURE,
    save: bool = True,
    hidden: int | None = None,
    intermediate: int | None = None,
) -> ProbeResult:
    """Measure every GPU torch sees, judge them, and save the result in the workspace. `hidden`/`intermediate`:
    the recipe's model (its benchmark file), for the model-shaped GEMM."""
    ceilings = load_ceilings()
    probe_shapes, same = model_shapes(ceilings, hidden, intermediate)
    shapes = {"square": probe_shapes.square.text(), "model": probe_shapes.model.text()}
    torch, why = _torch()
    if torch is None:
        return ProbeResult("unavailable", why, shapes=shapes)
    t0 = time.monotonic()
    gpus = [measure_gpu(torch, i, probe_shapes, seconds) for i in range(torch.cuda.device_count())]
    expected = ceilings.expected_for(gpus[0].name) if gpus else None
    if expected is not None and not same:  # measured at another model's shape: not comparable
        kept = {k: v for k, v in expected.expected.items() if k != "fp8_model_tflops"}
        expected = expected.model_copy(update={"expected": kept})
    flagged, medians = judge(gpus, expected)
    result = ProbeResult(
        "FAIL" if flagged else "PASS",
        f"{len(flagged)} slow GPU figure(s)" if flagged else f"{len(gpus)} GPU(s) within {SLOWER:.0%}",
        gpus=gpus,
        flagged=flagged,
        ceilings=medians,
        expected=expected.model_dump() if expected else None,
        shapes=shapes,
        torch=str(torch.__version__),
        seconds=round(time.monotonic() - t0, 1),
    )
    if save:
        result.file = str(save_probe(ws, result))
    return result


def probe_dir(ws: Workspace) -> Path:
    return ws.root / "probe"


def save_probe(ws: Workspace, result: ProbeResult) -> Path:
    from repro.core.fsutil import atomic_write_json

    path = probe_dir(ws) / "latest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, result.to_json())
    return path


def latest_probe(ws: Workspace, uuids: list[str | None]) -> dict[str, Any] | None:
    """The workspace's last probe when it measured exactly these GPUs (by NVML UUID); else None."""
    from repro.core.safeio import loads_json, read_text_bounded

    path = probe_dir(ws) / "latest.json"
    if not path.is_file() or not uuids:
        return None
    try:
        doc = loads_json(read_text_bounded(path, 1 << 20))
    except Exception:  # noqa: BLE001 - a damaged probe file is no probe
        return None
    if not isinstance(doc, dict) or doc.get("status") not in ("PASS", "FAIL"):
        return None
    probed = sorted(str(g.get("uuid")) for g in doc.get("gpus") or [] if isinstance(g, dict))
    return doc if probed == sorted(str(u) for u in uuids) else None
