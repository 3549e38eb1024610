"""`repro run offline|server` (issue #3; `--launcher slurm` is issue #7)."""

from __future__ import annotations

from ..errors import ReproError
from ..options import DryRunOpt, JsonOpt, RecipeOpt, WorkspaceOpt


def offline(recipe: RecipeOpt = None, workspace: WorkspaceOpt = None, dry_run: DryRunOpt = False, json: JsonOpt = False) -> None:
    """Run the Offline scenario through MLCommons LoadGen and write MLPerf logs to a run folder."""
    raise ReproError("`repro run offline` is not built yet.", "see issue #3")


def server(recipe: RecipeOpt = None, workspace: WorkspaceOpt = None, dry_run: DryRunOpt = False, json: JsonOpt = False) -> None:
    """Run the Server scenario through MLCommons LoadGen."""
    raise ReproError("`repro run server` is not built yet.", "see issue #3")
