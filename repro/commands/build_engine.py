"""`repro build-engine` (issue #5): container, quantization and engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from repro.ui.options import DryRunOpt, ForceOpt, JsonOpt, RecipeOpt, WorkspaceOpt

if TYPE_CHECKING:  # imported where used, so `repro --help` does not load the build stack
    from rich.console import Group

    from repro.core.steps import StepOutcome

BaseImageOpt = Annotated[
    str | None,
    typer.Option(
        "--base-image", help="Build FROM this image instead of the recipe's NGC image (e.g. a private mirror)."
    ),
]


ScenarioOpt = Annotated[
    str | None,
    typer.Option(
        "--scenario",
        help="Build this scenario's own engine where the recipe gives it one (e.g. Server: 405B's TP4xPP1); "
        "default: the base engine, which Offline and every scenario without its own use.",
        case_sensitive=False,
    ),
]


@dataclass
class BuildResult:
    outcome: StepOutcome

    def to_json(self) -> dict[str, Any]:
        return self.outcome.to_json()

    def __rich__(self) -> Group:
        from rich.console import Group
        from rich.markup import escape
        from rich.text import Text

        from repro.ui.render import renderable

        parts: list[Any] = [renderable(self.outcome)]
        if self.outcome.status == "dry-run":
            parts += [Text("")] + [
                Text.from_markup(f"[dim]{escape(ln)}[/]") if ln.startswith("#") else Text(ln)
                for ln in self.outcome.details.get("plan", [])
            ]
        return Group(*parts)


def build_engine(
    recipe: RecipeOpt = None,
    workspace: WorkspaceOpt = None,
    force: ForceOpt = False,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
    base_image: BaseImageOpt = None,
    scenario: ScenarioOpt = None,
) -> None:
    """Build the TensorRT-LLM container, quantize to NVFP4 (FP8 on Hopper) and build the engine."""
    from repro.core.workspace import Workspace
    from repro.engine import plan as b
    from repro.ui.options import recipe_flag
    from repro.ui.output import emit
    from repro.ui.progress import BuildView

    ws = Workspace.open(workspace)
    chosen = recipe_flag(recipe, ws)
    target = b.deployment_for(chosen, scenario)
    outcome = b.run_build(
        target, ws, force=force, dry_run=dry_run, base_image=base_image, view=None if json else BuildView
    )
    emit(BuildResult(outcome), json)
