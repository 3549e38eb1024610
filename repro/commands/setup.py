"""`repro setup` (issue #4): download and check the model and dataset."""

from __future__ import annotations

from ..errors import ReproError
from ..options import DryRunOpt, JsonOpt, RecipeOpt, WorkspaceOpt


def setup(recipe: RecipeOpt = None, workspace: WorkspaceOpt = None, dry_run: DryRunOpt = False, json: JsonOpt = False) -> None:
    """Download the model and the MLPerf OpenOrca dataset into the workspace, verified by checksum."""
    raise ReproError("`repro setup` is not built yet.", "see issue #4")
