"""What machine is this: Azure IMDS for the VM size, NVML for the GPUs. Never raises; absent facts are None."""

from __future__ import annotations

import json
import os
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any

IMDS_URL = "http://169.254.169.254/metadata/instance?api-version=2021-02-01"


@dataclass
class GPU:
    index: int
    name: str
    uuid: str
    memory_mib: int
    compute_capability: str | None = None


@dataclass
class SystemInfo:
    vm_size: str | None
    gpus: list[GPU] = field(default_factory=list)
    driver: str | None = None
    cuda_driver: str | None = None
    nvml_error: str | None = None
    imds_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def imds_vm_size(url: str | None = None, timeout: float = 1.0) -> tuple[str | None, str | None]:
    """(vmSize, error). The endpoint only answers inside Azure; elsewhere it times out quickly."""
    url = url or os.environ.get("REPRO_IMDS_URL", IMDS_URL)
    req = urllib.request.Request(url, headers={"Metadata": "true"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as resp:
            doc = json.loads(resp.read().decode("utf-8"))
        return doc["compute"]["vmSize"], None
    except Exception as exc:  # noqa: BLE001 - any failure means "not known"
        return None, f"{type(exc).__name__}: {exc}"


def nvml_gpus() -> tuple[list[GPU], str | None, str | None, str | None]:
    """(gpus, driver, cuda_driver, error) from NVML; empty with an error string when NVML is missing."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return [], None, None, f"NVML unavailable: {exc}"
    try:
        def _s(v: Any) -> str:
            return v.decode() if isinstance(v, bytes) else str(v)
        driver = _s(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            gpus.append(GPU(i, _s(pynvml.nvmlDeviceGetName(h)), _s(pynvml.nvmlDeviceGetUUID(h)),
                            int(pynvml.nvmlDeviceGetMemoryInfo(h).total // (1 << 20)), f"{major}.{minor}"))
        return gpus, driver, f"{cuda // 1000}.{(cuda % 1000) // 10}", None
    except Exception as exc:  # noqa: BLE001
        return [], None, None, f"NVML query failed: {exc}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def detect_system(imds_timeout: float = 1.0) -> SystemInfo:
    vm_size, imds_error = imds_vm_size(timeout=imds_timeout)
    gpus, driver, cuda, nvml_error = nvml_gpus()
    return SystemInfo(vm_size, gpus, driver, cuda, nvml_error, imds_error)
