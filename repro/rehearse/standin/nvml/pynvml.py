"""A stand-in for NVIDIA's NVML Python bindings (nvidia-ml-py's `pynvml`), put first on PYTHONPATH only for a
rehearsal's `repro doctor`: it answers with the recipe's GPUs from $STANDIN_GPUS, never with real hardware.

$STANDIN_GPUS is JSON: {"name", "count", "memory_mib", "compute_capability" ("10.3"), "driver", "cuda" (12080 for
12.8, as nvmlSystemGetCudaDriverVersion_v2 returns it)}. Only the calls repro makes are here (core/systems.py,
run/power.py); the names, return types and units are those of nvidia-ml-py 12.x.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
STANDIN = True  # lets a caller tell this module from the real bindings


class NVMLError(Exception):
    pass


@dataclass
class _Memory:
    total: int
    free: int
    used: int


def _spec() -> dict[str, Any]:
    try:
        spec = json.loads(os.environ["STANDIN_GPUS"])
    except (KeyError, ValueError) as exc:
        raise NVMLError(f"stand-in NVML: $STANDIN_GPUS unset or not JSON ({exc})") from None
    return spec if isinstance(spec, dict) else {}


_started = False


def nvmlInit() -> None:
    global _started
    _spec()
    _started = True


def nvmlShutdown() -> None:
    global _started
    _started = False


def _need() -> dict[str, Any]:
    if not _started:
        raise NVMLError("Uninitialized")
    return _spec()


def nvmlSystemGetDriverVersion() -> str:
    return str(_need()["driver"])


def nvmlSystemGetCudaDriverVersion_v2() -> int:
    return int(_need()["cuda"])


def nvmlDeviceGetCount() -> int:
    return int(_need()["count"])


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    if not 0 <= index < nvmlDeviceGetCount():
        raise NVMLError("Invalid Argument")
    return index


def nvmlDeviceGetName(handle: int) -> str:
    return str(_need()["name"])


def nvmlDeviceGetUUID(handle: int) -> str:
    return f"GPU-00000000-5a4d-0000-0000-{handle:012d}"


def nvmlDeviceGetMemoryInfo(handle: int) -> _Memory:
    total = int(_need()["memory_mib"]) << 20
    return _Memory(total, total, 0)


def nvmlDeviceGetCudaComputeCapability(handle: int) -> tuple[int, int]:
    major, _, minor = str(_need()["compute_capability"]).partition(".")
    return int(major), int(minor or 0)


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    return 0  # milliwatts: nothing is drawn by a stand-in


def nvmlDeviceGetClockInfo(handle: int, kind: int) -> int:
    return 0


def nvmlDeviceGetTemperature(handle: int, sensor: int) -> int:
    return 0


def nvmlDeviceGetCurrentClocksThrottleReasons(handle: int) -> int:
    return 0
