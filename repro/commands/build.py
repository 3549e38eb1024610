"""`repro build-engine` (issue #5): container, quantization and engine."""

from __future__ import annotations

from ..errors import ReproError
from ..options import DryRunOpt, ForceOpt, JsonOpt, RecipeOpt, WorkspaceOpt


def build_engine(recipe: RecipeOpt = None, workspace: WorkspaceOpt = None, force: ForceOpt = False,
                 dry_run: DryRunOpt = False, json: JsonOpt = False) -> None:
    """Build the TensorRT-LLM container, quantize to NVFP4 (FP8 on Hopper) and build the engine."""
    raise ReproError("`repro build-engine` is not built yet.", "see issue #5")
