"""`repro verify` and `repro aggregate` (issue #2)."""

from __future__ import annotations

from ..errors import ReproError
from ..options import JsonOpt, ResultDirArg


def verify(result_dir: ResultDirArg, json: JsonOpt = False) -> None:
    """Say per GPU whether a run is inside the published band, and why not."""
    raise ReproError("in progress", None)


def aggregate(json: JsonOpt = False) -> None:
    """The rack table over one result folder per VM."""
    raise ReproError("in progress", None)
