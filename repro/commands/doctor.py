"""`repro doctor`, `repro status` and the guided flow (issue #6)."""

from __future__ import annotations

from ..errors import ReproError
from ..options import JsonOpt, RecipeOpt, WorkspaceOpt, YesOpt


def doctor(recipe: RecipeOpt = None, workspace: WorkspaceOpt = None, json: JsonOpt = False) -> None:
    """Check GPUs, driver, Docker, disk, token and LoadGen before hours are spent."""
    raise ReproError("`repro doctor` is not built yet.", "see issue #6")


def status(workspace: WorkspaceOpt = None, json: JsonOpt = False) -> None:
    """Show the step ledger: done, stale, failed, to do, and the next command."""
    raise ReproError("`repro status` is not built yet.", "see issue #6")


def guide(recipe: RecipeOpt = None, workspace: WorkspaceOpt = None, yes: YesOpt = False) -> None:
    """Walk through doctor -> setup -> build-engine -> run offline -> verify, resuming from the ledger."""
    raise ReproError("The guided flow is not built yet.", "see issue #6")
