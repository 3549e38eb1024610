"""Where a run came from: software versions, recipe hash, container, driver, VM size and GPUs, for run.json."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from repro import __version__

PACKAGES = ("mlcommons-loadgen", "torch", "transformers", "tensorrt_llm", "numpy")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def loadgen_version() -> str | None:
    return package_version("mlcommons-loadgen") or package_version("mlcommons_loadgen")


def container_digest() -> str | None:
    """The image digest when repro runs inside its container (the build passes it in REPRO_CONTAINER_DIGEST)."""
    digest = os.environ.get("REPRO_CONTAINER_DIGEST")
    if digest:
        return digest
    if Path("/.dockerenv").exists():
        return os.environ.get("REPRO_CONTAINER_IMAGE", "unknown (in a container)")
    return None


def cpu_model() -> str | None:
    """The host CPU's name: what a CPU run (the demo) ran on, and context for every run."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model name", "cpu model") and value.strip():
                    return value.strip()[:200]
    except OSError:
        pass
    return platform.processor() or None


def _mode(pair: Any) -> str:
    """NVML's (current, pending) mode pair as words; a pending change is named."""
    current, pending = pair
    word = {0: "disabled", 1: "enabled"}
    now = word.get(int(current), str(current))
    return now if int(pending) == int(current) else f"{now} (pending {word.get(int(pending), str(pending))})"


def nvml_gpu_details() -> list[dict[str, Any]]:
    """Per GPU what NVML reports about how it was set up: power limit, max and application clocks, ECC and MIG.

    Each query on its own: a field the GPU or driver does not support is "unknown", never a guess, and never
    costs the other fields. Empty when NVML is not there."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: nothing to record
        return []

    def ask(fn: Any, *args: Any, then: Any = None) -> Any:
        try:
            value = fn(*args)
        except Exception:  # noqa: BLE001 - NVML_ERROR_NOT_SUPPORTED and the like
            return "unknown"
        return then(value) if then else value

    out: list[dict[str, Any]] = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            out.append(
                {
                    "index": i,
                    "power_limit_w": ask(pynvml.nvmlDeviceGetPowerManagementLimit, h, then=lambda mw: mw / 1000),
                    "enforced_power_limit_w": ask(pynvml.nvmlDeviceGetEnforcedPowerLimit, h, then=lambda mw: mw / 1000),
                    "sm_clock_max_mhz": ask(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM),
                    "mem_clock_max_mhz": ask(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_MEM),
                    "app_sm_clock_mhz": ask(pynvml.nvmlDeviceGetApplicationsClock, h, pynvml.NVML_CLOCK_SM),
                    "app_mem_clock_mhz": ask(pynvml.nvmlDeviceGetApplicationsClock, h, pynvml.NVML_CLOCK_MEM),
                    "ecc_mode": ask(pynvml.nvmlDeviceGetEccMode, h, then=_mode),
                    "mig_mode": ask(pynvml.nvmlDeviceGetMigMode, h, then=_mode),
                }
            )
    except Exception:  # noqa: BLE001 - a failed device count: what was read so far stands
        pass
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    return out


def collect(*, detect: bool = True) -> dict[str, Any]:
    """Facts for run.json; `detect=False` skips NVML/IMDS (tests, the harness benchmark)."""
    facts: dict[str, Any] = {
        "repro_version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": platform.node(),
        "packages": {p: package_version(p) for p in PACKAGES},
        "loadgen_version": loadgen_version(),
        "container_digest": container_digest(),
        "vm_size": None,
        "driver": None,
        "cuda_driver": None,
        "gpus": {"count": 0, "names": [], "uuids": []},
        "cpu": {"model": cpu_model(), "logical_cpus": os.cpu_count()},
    }
    if detect:
        from repro.core.systems import detect_system

        info = detect_system(imds_timeout=0.5)
        facts.update(
            vm_size=info.vm_size,
            driver=info.driver,
            cuda_driver=info.cuda_driver,
            gpus={"count": len(info.gpus), "names": [g.name for g in info.gpus], "uuids": [g.uuid for g in info.gpus]},
        )
        if info.gpus:
            facts["gpus"]["details"] = nvml_gpu_details()
    return facts
