"""What machine is this: Azure IMDS for the VM size, NVML for the GPUs. Never raises; absent facts are None."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from repro.core.errors import RecipeError
from repro.core.gpu_arch import is_blackwell

if TYPE_CHECKING:
    from repro.core.recipes import Recipe
    from repro.core.workspace import Workspace

IMDS_URL = "http://169.254.169.254/metadata/instance?api-version=2021-02-01"


@dataclass
class GPU:
    index: int
    name: str
    uuid: str
    memory_mib: int
    compute_capability: str | None = None

    @property
    def arch(self) -> str | None:
        """'9.0' -> 'sm_90', '10.3' -> 'sm_103': the form recipes use."""
        if not self.compute_capability:
            return None
        major, _, minor = self.compute_capability.partition(".")
        return f"sm_{major}{minor or '0'}"

    @property
    def blackwell(self) -> bool:
        return is_blackwell(self.arch, self.name)


@dataclass
class SystemInfo:
    vm_size: str | None
    gpus: list[GPU] = field(default_factory=list)
    driver: str | None = None
    cuda_driver: str | None = None
    nvml_error: str | None = None
    imds_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for gpu, row in zip(self.gpus, data["gpus"], strict=False):
            row["arch"] = gpu.arch
        return data

    @property
    def on_azure(self) -> bool:
        return self.vm_size is not None


def imds_vm_size(url: str | None = None, timeout: float = 1.0) -> tuple[str | None, str | None]:
    """(vmSize, error). The endpoint only answers inside Azure; elsewhere it times out quickly."""
    url = url or os.environ.get("REPRO_IMDS_URL", IMDS_URL)
    import urllib.request  # only detection asks IMDS; `repro verify` imports this module too

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
            gpus.append(
                GPU(
                    i,
                    _s(pynvml.nvmlDeviceGetName(h)),
                    _s(pynvml.nvmlDeviceGetUUID(h)),
                    int(pynvml.nvmlDeviceGetMemoryInfo(h).total // (1 << 20)),
                    f"{major}.{minor}",
                )
            )
        return gpus, driver, f"{cuda // 1000}.{(cuda % 1000) // 10}", None
    except Exception as exc:  # noqa: BLE001
        return [], None, None, f"NVML query failed: {exc}"
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def detect_system(imds_timeout: float = 1.0) -> SystemInfo:
    vm_size, imds_error = imds_vm_size(timeout=imds_timeout)
    gpus, driver, cuda, nvml_error = nvml_gpus()
    return SystemInfo(vm_size, gpus, driver, cuda, nvml_error, imds_error)


def match_recipe(info: SystemInfo) -> tuple[Recipe | None, str]:
    """(recipe, why) from the VM size first, then the GPU name; (None, why not) when nothing fits."""
    from repro.core.recipes import by_gpu_name, by_vm_size

    if info.vm_size:
        recipe = by_vm_size(info.vm_size)
        if recipe is not None:
            return recipe, f"Azure VM size {info.vm_size} (instance metadata)"
    if info.gpus:
        name = info.gpus[0].name
        recipe = by_gpu_name(name, len(info.gpus))
        if recipe is not None:
            where = f"unknown VM size {info.vm_size}" if info.vm_size else "not on Azure"
            return recipe, f"{len(info.gpus)} x {name} (NVML; {where})"
    place = (
        f"Azure VM size {info.vm_size} has no recipe"
        if info.vm_size
        else f"not on Azure (instance metadata: {info.imds_error or 'no answer'})"
    )
    gpus = (
        f"GPU {info.gpus[0].name} has no recipe"
        if info.gpus
        else f"no NVIDIA GPU found ({info.nvml_error or 'NVML found none'})"
    )
    return None, f"{place}; {gpus}"


class NoRecipeForMachine(RecipeError):
    """Nothing matches the detected VM or GPU; without a GPU the CPU demo is the one recipe that runs."""

    def __init__(self, why: str, *, gpus: int):
        self.why, self.gpus = why, gpus
        if gpus:
            super().__init__(
                f"No recipe matches this machine: {why}. Pick one with --recipe NAME from the list.",
                "repro recipes list",
            )
        else:
            super().__init__(
                f"No recipe matches this machine: {why}. Without a GPU, the CPU demo runs (never a reproduction).",
                "repro run offline --recipe demo",
            )


def select_recipe(info: SystemInfo, explicit: str | None = None) -> tuple[Recipe, str]:
    """The recipe to use and why; an explicit --recipe always wins, and nothing is guessed."""
    from repro.core.recipes import get_recipe

    if explicit:
        return get_recipe(explicit), "chosen with --recipe"
    recipe, why = match_recipe(info)
    if recipe is None:
        raise NoRecipeForMachine(why, gpus=len(info.gpus))
    return recipe, why


DEMO_OUTRANKED = "the demo recorded in the workspace ledger does not outrank real GPUs"


def resolve_recipe(
    explicit: str | None, ws: Workspace | None = None, *, info: SystemInfo | None = None
) -> tuple[Recipe, str]:
    """The one recipe resolver every command uses: --recipe, else the workspace ledger's, else the detected machine's.

    Returns the recipe and a sentence saying why it was chosen; raises RecipeError when none applies.
    """
    from repro.core.errors import LedgerError
    from repro.core.ledger import Ledger
    from repro.core.recipes import get_recipe

    if explicit:
        return get_recipe(explicit), "chosen with --recipe"
    if ws is not None and ws.ledger_path.exists():
        try:
            remembered = Ledger.load(ws.ledger_path).recipe_name()
        except LedgerError:
            remembered = None
        if remembered:
            recipe = get_recipe(remembered)
            if not recipe.demo:
                return recipe, "recorded in the workspace ledger"
            # A rehearsal on the CPU demo must not plan the demo again on the GPU VM it rehearsed for.
            found, why = match_recipe(info if info is not None else detect_system())
            if found is not None:
                return found, f"detected {why}; {DEMO_OUTRANKED}"
            return recipe, "recorded in the workspace ledger"
    return select_recipe(info if info is not None else detect_system())
