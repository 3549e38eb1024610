"""`repro report` (issue #8): published tables, plots and measured power from your runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from repro.core.errors import InputError
from repro.ui.options import DryRunOpt, GpusOpt, JsonOpt, PricePerHourOpt, RecipeOpt


def _target(path: Path | None, kind: str) -> Path | None:
    """`-` is stdout; a folder is refused here (write_output refuses devices, FIFOs and symlinks)."""
    if path is not None and str(path) != "-" and path.is_dir():
        raise InputError(
            f"{path}: is a folder; --{kind} needs a file name.",
            f"`repro report RESULT_DIR --{kind} {path / ('report.' + ('md' if kind == 'markdown' else kind))}`",
        )
    return path


def report(
    result_dirs: Annotated[
        list[Path], typer.Argument(help="Run folders, one per VM, or one folder holding per-VM folders.")
    ],
    html: Annotated[Path | None, typer.Option("--html", help="Also write a self-contained HTML report here.")] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Also write a Markdown report here.")] = None,
    recipe: RecipeOpt = None,
    gpus: GpusOpt = None,
    json: JsonOpt = False,
    dry_run: DryRunOpt = False,
    price_per_hour: PricePerHourOpt = None,
) -> None:
    """Compare your runs with every published result, with plots, business and efficiency figures."""
    from repro.core.fsutil import check_output, write_output
    from repro.report.model import build_report
    from repro.ui.output import emit, info

    html, markdown = _target(html, "html"), _target(markdown, "markdown")
    to_stdout = [kind for path, kind in ((html, "html"), (markdown, "markdown")) if str(path) == "-"]
    if len(to_stdout) > 1 or (to_stdout and json):
        raise InputError(
            "Only one thing can go to stdout: `-` for --html or --markdown, or --json.",
            "`repro report RESULT_DIR --html - > report.html`",
        )
    for path, kind in ((html, "html"), (markdown, "markdown")):
        if path is not None and str(path) != "-":
            check_output(path, result_dirs, kind, "repro report")
    result = build_report(result_dirs, recipe=recipe, gpus=gpus, price_per_hour=price_per_hour)
    for path, kind in ((html, "html"), (markdown, "markdown")):
        if path is not None and str(path) != "-":
            check_output(path, result_dirs, kind, "repro report", read=result.sources)
    for path, kind in ((html, "html"), (markdown, "markdown")):
        if path is None:
            continue
        if kind == "html":
            from repro.report.html import render_html  # matplotlib: the report extra, only when a plot is drawn

            text = render_html(result)
        else:
            from repro.report.markdown import render_markdown

            text = render_markdown(result)
        if dry_run:
            result.outputs[kind] = f"would write {path} ({len(text.encode()):,} bytes)"
        else:
            result.outputs[kind] = write_output(path, text.encode(), option=kind)
    if to_stdout and not dry_run:
        for line in result.outputs.values():
            info(line)  # stdout holds the document; the summary of what was written goes to stderr
        raise typer.Exit(result.exit_code)
    emit(result, json)
    if json:
        for line in result.outputs.values():
            info(line)
    raise typer.Exit(result.exit_code)  # the verdict's exit code, as `repro verify` gives it
