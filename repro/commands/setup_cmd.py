"""`repro setup` (issue #4): download and check the model and dataset."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from repro.ui.options import DryRunOpt, ForceOpt, JsonOpt, RecipeOpt, WorkspaceOpt, YesOpt

if TYPE_CHECKING:  # imported where used, so `repro --help` does not load the setup stack
    from rich.console import Group

    from repro.core.steps import StepOutcome

SourceOpt = Annotated[
    str,
    typer.Option(
        "--dataset-source",
        help="fetch: MLPerf's published pickles; rebuild: from the raw "
        "OpenOrca parquet like processorca.py; both: do both and compare checksums.",
    ),
]


class SetupView:
    """One result for both views: the StepOutcome as JSON, and a per-file table for people."""

    def __init__(self, outcome: StepOutcome):
        self.outcome = outcome

    def to_json(self) -> dict[str, Any]:
        return self.outcome.to_json()

    def __rich__(self) -> Group:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        from repro.ui.render import renderable

        files = self.outcome.details.get("files") or []
        table = Table(title="repro setup" + (" (dry run: nothing changed)" if self.outcome.status == "dry-run" else ""))
        for col in ("file", "size", "action", "from"):
            table.add_column(col, justify="right" if col == "size" else "left", overflow="fold")
        for f in files:
            size = f.get("size")
            table.add_row(
                str(f.get("dest") or f.get("path")),
                "unknown" if size is None else f"{size:,}",
                str(f.get("action") or ("built here" if self.outcome.details.get("demo") else "-")),
                str(f.get("source", "")),
            )
        parts: list[Any] = [table] if files else []
        comparison = self.outcome.details.get("comparison")
        if comparison:
            parts.append(
                Text(
                    f"published vs rebuilt dataset: same content {comparison['same_content']}, "
                    f"same file bytes {comparison['same_file']}"
                )
            )
        for note in self.outcome.details.get("notes") or []:
            parts.append(Text(f"note: {note}", style="yellow"))
        checks = self.outcome.details.get("checks") or []
        if checks:
            parts.append(Text("checksums: " + "; ".join(checks), style="dim"))
        parts.append(renderable(self.outcome))
        return Group(*parts)


def setup(
    recipe: RecipeOpt = None,
    workspace: WorkspaceOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
    yes: YesOpt = False,
    force: ForceOpt = False,
    dataset_source: SourceOpt = "fetch",
) -> None:
    """Download the model and the MLPerf OpenOrca dataset into the workspace, verified by checksum."""
    from repro.core.errors import InputError
    from repro.core.workspace import Workspace
    from repro.setup.download import run_setup
    from repro.ui.options import recipe_flag
    from repro.ui.output import confirm, emit
    from repro.ui.progress import download_progress

    if dataset_source not in ("fetch", "rebuild", "both"):
        raise InputError(f"--dataset-source {dataset_source!r}: use fetch, rebuild or both.", "`repro setup --help`")
    ws = Workspace.open(workspace)
    chosen = recipe_flag(recipe, ws)
    if not json and not dry_run:
        from repro.ui.output import info

        # said at once: the first files take seconds (the demo builds its model here) and the screen stayed empty
        doing = "building the tiny demo model and sample dataset here" if chosen.demo else "checking what is there"
        info(f"setup: recipe {chosen.name} in {ws.root}: {doing}...")
    outcome = run_setup(
        chosen,
        ws,
        dry_run=dry_run,
        yes=yes,
        force=force,
        source=dataset_source,  # type: ignore[arg-type]
        progress=None if json else download_progress,
        confirm=confirm,
    )
    emit(SetupView(outcome), json)
    d = outcome.details
    short = outcome.status == "dry-run" and d.get("free_bytes", 0) < d.get("needed_bytes", 0)
    if not outcome.ok or short:  # a plan the real run would refuse is not a success
        raise typer.Exit(1)
