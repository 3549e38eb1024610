"""Which GPU generation a part is: the one rule both recipes and the detected system ask."""

from __future__ import annotations

BLACKWELL_MIN_MAJOR = 10
_PRE_BLACKWELL_NAMES = ("H100", "H200", "H800", "H20", "A100", "A10", "L40", "L4", "V100", "T4")


def is_blackwell(arch: str | None, gpu_name: str | None = None) -> bool:
    """The one Blackwell rule (NVFP4 needs it): compute capability 10 or newer, e.g. sm_100, sm_103, sm_120.

    Without an architecture (an old NVML), the GPU name decides: anything not a known older part counts.
    """
    if arch and arch.startswith("sm_") and arch[3:].isdigit() and len(arch) > 4:
        return int(arch[3:-1]) >= BLACKWELL_MIN_MAJOR
    if gpu_name:
        return not any(n in gpu_name.upper() for n in _PRE_BLACKWELL_NAMES)
    return False
