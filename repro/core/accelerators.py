"""Which GPU a name states (an NVML device name, an MLPerf system JSON's accelerator): chip, form factor, memory.

One reading serves GPU detection, `repro doctor` and `repro verify`, so the machine a recipe is picked for and the
hardware a verdict accepts are the same."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_FORMS = {"SXM": "SXM", "SXM4": "SXM", "SXM5": "SXM", "NVL": "NVL", "PCIE": "PCIe"}
_VENDOR_WORDS = {
    "NVIDIA",
    "AMD",
    "INTEL",
    "INSTINCT",
    "TESLA",
    "GEFORCE",
    "RTX",
    "ARC",
    "PRO",
    "R",
    "TM",
    "VIRTUALIZED",
    "GRACE",
    "HOPPER",
    "SUPERCHIP",
    "BLACKWELL",
    "SERVER",
    "EDITION",
    "HBM3",
    "HBM3E",
}
_MODEL = re.compile(r"^[A-Z]{1,4}\d{2,4}[A-Z]?$")
_MEMORY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)GB?$")


class Accelerator(BaseModel):
    """What identifies the GPU in an MLPerf system JSON or an NVML name: another chip, form factor or memory
    size is different hardware, and its runs are never a reproduction of this recipe."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(pattern=r"^[A-Za-z0-9]+$", description="Chip token as MLPerf and NVML write it: H100, GB300")
    form_factor: Literal["SXM", "NVL", "PCIe"] | None = Field(
        default=None, description="SXM, NVL or PCIe; null for chips sold in one form (GB200, GB300)"
    )
    memory_gb: float | None = Field(default=None, gt=0, description="Memory per GPU as the name states it")


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[^A-Z0-9.]+", name.upper()) if t]


def model_token(name: str) -> str | None:
    """The chip in an accelerator name: 'NVIDIA H100-SXM-80GB' -> H100, 'AMD Instinct MI300X ...' -> MI300X."""
    for tok in _tokens(name):
        if tok not in _VENDOR_WORDS and _MODEL.match(tok) and not _MEMORY.match(tok) and not tok.endswith("W"):
            return tok
    return None


def chips(name: str) -> list[str]:
    """Every distinct chip an accelerator name states, in order: two or more is a mixed system."""
    found = [
        t
        for t in _tokens(name)
        if t not in _VENDOR_WORDS and _MODEL.match(t) and not _MEMORY.match(t) and not re.fullmatch(r"X\d+", t)
    ]
    return list(dict.fromkeys(t for t in found if not t.endswith("W")))


def accelerator_of(name: str) -> Accelerator | None:
    """The identity an accelerator name states (chip, form factor, memory), e.g. for a published record's GPU."""
    found = chips(name)
    if len(found) != 1:
        return None
    tokens = _tokens(name)
    forms = [_FORMS[t] for t in tokens if t in _FORMS]
    sizes = [float(m.group(1)) for t in tokens if (m := _MEMORY.match(t))]
    return Accelerator(model=found[0], form_factor=forms[0] if forms else None, memory_gb=sizes[0] if sizes else None)  # type: ignore[arg-type]


def same_accelerator(name: str, want: Accelerator) -> tuple[bool, str]:
    """Chip, then form factor, then memory size: each that the name states must match the recipe's."""
    tokens = _tokens(name)
    if len(several := chips(name)) > 1:
        return False, f"a mixed system ({' + '.join(several)}) is not one accelerator ({want.model})"
    recipe_text = " ".join(
        filter(None, [want.model, want.form_factor, f"{want.memory_gb:g} GB" if want.memory_gb else None])
    )
    if want.model.upper() not in tokens:
        found = model_token(name) or "another chip"
        return False, f"{found} is not the recipe's {want.model}"
    forms = {_FORMS[t] for t in tokens if t in _FORMS}
    if want.form_factor and forms and want.form_factor not in forms:
        return False, f"{want.model} {'/'.join(sorted(forms))} is not the recipe's {recipe_text}"
    sizes = [float(m.group(1)) for t in tokens if (m := _MEMORY.match(t))]
    if want.memory_gb and sizes and all(abs(s - want.memory_gb) / want.memory_gb > 0.1 for s in sizes):
        return False, f"{want.model} with {sizes[0]:g} GB is not the recipe's {recipe_text}"
    unstated = want.form_factor is not None and not forms
    return True, f"same accelerator as the recipe ({recipe_text})" + (
        f"; the name does not state the form factor ({want.form_factor})" if unstated else ""
    )
