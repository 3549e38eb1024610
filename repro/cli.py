"""Wiring only: each command lives in repro/commands/ as a thin function over a pure module."""

from __future__ import annotations

import functools
import os
from typing import Annotated, Any, Callable

import typer

from repro import __version__
from repro.commands import build_engine as build
from repro.commands import flow as doctor
from repro.commands import published, report, run, verify
from repro.commands import setup_cmd as setup
from repro.commands import recipes as recipes_cmd
from repro.core.errors import explain
from repro.ui.output import error

_state = {"debug": bool(os.environ.get("REPRO_DEBUG"))}


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Expected failures become one line and an exit code through the error table; bugs keep their traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except BaseException as exc:  # noqa: BLE001 - the table decides
            explained = explain(exc)
            if explained is None or _state["debug"]:
                raise
            error(explained.message, explained.next_command)
            raise typer.Exit(explained.exit_code) from None

    return wrapper


def _app(help_text: str, **kw: Any) -> typer.Typer:
    return typer.Typer(help=help_text, add_completion=False, pretty_exceptions_enable=False,
                       rich_markup_mode=None, **kw)


app = _app("Reproduce the published MLPerf Inference Llama-2-70B Offline results and check your number against them.",
           invoke_without_command=True)
run_app = _app("Run the benchmark through MLCommons LoadGen.", no_args_is_help=True)
recipes_app = _app("List, show and validate recipes.", no_args_is_help=True)
published_app = _app("Every published MLPerf Llama-2-70B result (shipped index): list, filter, show one.",
                     invoke_without_command=True)


def _add(target: typer.Typer, fn: Callable[..., Any], name: str | None = None) -> None:
    target.command(name=name)(_guarded(fn))


_add(app, setup.setup)
_add(app, build.build_engine, "build-engine")
_add(app, verify.verify)
_add(app, verify.aggregate)
_add(app, doctor.doctor)
_add(app, doctor.status)
_add(app, doctor.guide)
_add(app, report.report)
_add(run_app, run.offline)
_add(run_app, run.server)
_add(recipes_app, recipes_cmd.list_recipes, "list")
_add(recipes_app, recipes_cmd.show)
_add(recipes_app, recipes_cmd.validate)
_add(published_app, published.show)
published_app.callback()(_guarded(published.list_published))
app.add_typer(run_app, name="run")
app.add_typer(recipes_app, name="recipes")
app.add_typer(published_app, name="published")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"repro {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for expected errors too.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    """With no command, walk through doctor -> setup -> build-engine -> run offline -> verify."""
    _state["debug"] = bool(os.environ.get("REPRO_DEBUG")) or debug
    if ctx.invoked_subcommand is None:
        _guarded(doctor.guide)()


def main() -> None:
    app(prog_name="repro")
