"""Wiring only: each command lives in repro/commands/ as a thin function over a pure module."""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
from collections.abc import Callable
from typing import Annotated, Any

import typer

from repro import __version__
from repro.commands import attest as attest_cmd
from repro.commands import build_engine as build
from repro.commands import explain as explain_cmd
from repro.commands import flow as doctor
from repro.commands import published, rehearse, report, run, tune, verify
from repro.commands import recipes as recipes_cmd
from repro.commands import setup_cmd as setup
from repro.core.backends import CHOICES as BACKEND_CHOICES
from repro.core.errors import BUG_EXIT_CODE, explain, sigterm_as_interrupt
from repro.core.launchers import choices as launcher_choices
from repro.ui.options import DryRunOpt, JsonOpt, RecipeOpt, WorkspaceOpt, YesOpt
from repro.ui.output import error, start_command, traceback_text

# Root options that act as defaults for the subcommand (`repro --json status`, `repro --recipe demo`).
_state: dict[str, Any] = {
    "debug": bool(os.environ.get("REPRO_DEBUG")),
    "json": False,
    "recipe": None,
    "workspace": None,
}


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Expected failures become one line and an exit code through the error table; bugs keep their traceback.

    The exit code comes from the table whether or not --debug is on; --debug only adds the traceback.
    """
    params = set(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start_command()
        for key in ("json", "recipe", "workspace"):
            if key in params and _state[key] and not kwargs.get(key):
                kwargs[key] = _state[key]
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except BrokenPipeError:
            from repro.ui.safe import closed_pipe

            closed_pipe()
        except BaseException as exc:  # noqa: BLE001 - the table decides
            explained = explain(exc)
            if explained is None:
                _bug(exc, as_json=bool(kwargs.get("json")))
                raise typer.Exit(BUG_EXIT_CODE) from None
            if _state["debug"]:
                sys.stderr.write(traceback_text(exc))
            error(
                explained.message,
                explained.next_command,
                exit_code=explained.exit_code,
                as_json=bool(kwargs.get("json")),
            )
            if getattr(exc, "abandoned_threads", False):
                _state["abandoned"] = True
            raise typer.Exit(explained.exit_code) from None

    return wrapper


def _bug(exc: BaseException, *, as_json: bool) -> None:
    """An unexpected exception is a bug: exit 3 (never the 1 of a FAIL verdict), one line naming it and the file
    that keeps its traceback (redacted); --debug also prints the traceback."""
    import tempfile

    text = traceback_text(exc)
    fd, path = tempfile.mkstemp(prefix="repro-traceback-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    if _state["debug"]:
        sys.stderr.write(text)
    first = (str(exc).splitlines() or [""])[0][:200]
    error(
        f"repro hit a bug ({type(exc).__name__}: {first}); its traceback is in {path}.",
        None,
        exit_code=BUG_EXIT_CODE,
        as_json=as_json,
    )


def _app(help_text: str, **kw: Any) -> typer.Typer:
    kw.setdefault("add_completion", False)
    return typer.Typer(help=help_text, pretty_exceptions_enable=False, rich_markup_mode=None, **kw)


app = _app(
    "Reproduce published MLPerf Inference results (Llama-2-70B, Llama-3.1-405B, DeepSeek-R1; Offline, Server, "
    "Interactive) and check your number against them.",
    invoke_without_command=True,
    add_completion=True,
)
run_app = _app("Run the benchmark through MLCommons LoadGen.", no_args_is_help=True)
recipes_app = _app("List, show and validate recipes.", no_args_is_help=True)
tune_app = _app(
    "Find the Server or Interactive target QPS that meets TTFT/TPOT with short LoadGen runs; `repro run` uses it.",
    no_args_is_help=True,
)
published_app = _app(
    "Every published MLPerf Inference result of Llama-2-70B, Llama-3.1-405B and DeepSeek-R1 (the shipped index; a "
    "benchmark's own published-<name>.csv beside its file too): list, filter, show one.",
    invoke_without_command=True,
)


def _add(target: typer.Typer, fn: Callable[..., Any], name: str | None = None, short: str | None = None) -> None:
    """`short`: the whole summary `repro --help` lists, short enough never to be cut with '...'."""
    target.command(name=name, short_help=short)(_guarded(fn))


_add(app, setup.setup, short="Download the model and the MLPerf dataset.")
_add(app, build.build_engine, "build-engine", short="Build the TensorRT-LLM image and engine.")
_add(app, verify.verify, short="Judge a run per GPU against the published band.")
_add(app, verify.aggregate, short="The rack table over per-VM runs.")
_add(app, doctor.doctor, short="Check GPUs, driver, Docker, disk and token.")
_add(app, doctor.status, short="Show the steps done and the next command.")
_add(app, doctor.guide, short="Walk through every step (same as `repro`).")
_add(app, report.report, short="Compare your runs with every published result.")
_add(app, explain_cmd.explain, short="Rank the causes of a gap to a published result.")
_add(app, rehearse.rehearse, short="Try a GPU recipe's flow here, GPUs stood in.")
_add(app, attest_cmd.attest, short="Sign a run's evidence; `attest verify` checks it.")
_add(run_app, run.offline, short="LoadGen Offline: all samples at once.")
_add(run_app, run.server, short="LoadGen Server: queries at a target rate.")
_add(run_app, run.interactive, short="LoadGen Interactive: Server with tight latency.")
_add(tune_app, tune.server, short="Find the highest Server rate that passes.")
_add(tune_app, tune.interactive, short="Find the highest Interactive rate that passes.")
_add(recipes_app, recipes_cmd.list_recipes, "list", short="List the recipes.")
_add(recipes_app, recipes_cmd.show, short="Show one recipe.")
_add(recipes_app, recipes_cmd.validate, short="Check recipe files against the schema.")
_add(published_app, published.show, short="Show one published result.")
published_app.callback()(_guarded(published.list_published))
app.add_typer(run_app, name="run")
app.add_typer(tune_app, name="tune", short_help="Find the target QPS that meets TTFT/TPOT.")
app.add_typer(recipes_app, name="recipes")
app.add_typer(published_app, name="published", short_help="Every published result, of every benchmark.")


def _version(value: bool) -> None:
    if value:
        if "--json" in sys.argv[1:]:
            from repro.ui.output import json_document

            typer.echo(json_document({"version": __version__}))
        else:
            typer.echo(f"repro {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    recipe: RecipeOpt = None,
    workspace: WorkspaceOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Also show the traceback of an expected error (exit codes stay the same).")
    ] = False,
    version: Annotated[
        bool | None, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = None,
) -> None:
    """With no command, walk through doctor -> setup -> build-engine -> run offline -> verify (`repro guide`).

    --recipe, --workspace and --json given here also apply to the command that follows.
    """
    _state.update(debug=bool(os.environ.get("REPRO_DEBUG")) or debug, json=json, recipe=recipe, workspace=workspace)
    if ctx.invoked_subcommand is None:
        _guarded(doctor.guide)(recipe=recipe, workspace=workspace, yes=yes, dry_run=dry_run, json=json)


_METAVARS = {
    "recipe": "NAME",
    "round_": "ROUND",
    "server_image": "IMAGE",
    "endpoint": "URL",
    "ready_timeout": "SECONDS",
    "stall_timeout": "SECONDS",
    "client_processes": "N",
    "served_model": "NAME",
    "image_registry": "REGISTRY",
    "image_source": "archive|registry|enroot|host",
    "workspace": "DIR",
    "gpus": "N",
    "run_samples": "N",
    "time_scale": "FACTOR",
    "price_per_hour": "USD",
    "nodes": "N",
    "time_limit": "TIME",
    "expect": "N",
    "samples": "N",
    "duration": "SECONDS",
    "sim_rate": "TOKENS_PER_S",
    "html": "FILE",
    "markdown": "FILE",
    "rerun_failed": "RACK_DIR",
    "base_image": "IMAGE",
    "container_image": "IMAGE",
    "backend": BACKEND_CHOICES,
    "launcher": launcher_choices(),
    "dataset_source": "fetch|rebuild|both",
    "partition": "PARTITION",
    "max_minutes": "MINUTES",
    "margin": "FRACTION",
    "start_qps": "QPS",
    "probe_seconds": "SECONDS",
    "probe_queries": "N",
}


# A command with many options lists them in these groups (in this order); any other option goes under "Other".
_PANELS: dict[str, tuple[str, ...]] = {
    "Run": (
        "recipe", "workspace", "backend", "duration", "official_min_duration", "samples", "accuracy",
        "compliance", "into", "sim_rate", "target_qps", "stop_if_below_band", "repeat",
    ),
    "Search": ("max_minutes", "margin", "start_qps", "probe_seconds", "probe_queries", "run_samples"),
    "Server": (
        "endpoint", "served_model", "server_image", "keep_servers", "listen", "ready_timeout", "stall_timeout",
        "client_processes",
    ),
    "Rack (--launcher slurm)": (
        "nodes", "launcher", "partition", "container_image", "image_registry", "image_source", "rerun_failed",
        "time_limit", "inside_job",
    ),
    "Output": ("dry_run", "json", "help"),
}  # fmt: skip
_GROUP_FROM = 12


def _grouped_help(cmd: Any) -> None:
    """Long option lists read in groups (run, servers, rack, output) instead of one undivided list."""
    options = [p for p in cmd.params if p.param_type_name == "option"]
    if len(options) < _GROUP_FROM:
        return

    def format_options(ctx: Any, formatter: Any) -> None:
        params = cmd.get_params(ctx)
        args = [r for p in params if p.param_type_name == "argument" and (r := p.get_help_record(ctx))]
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        placed: set[str] = set()
        for title, names in [*_PANELS.items(), ("Other", ())]:
            rows = []
            for p in params:
                if p.param_type_name != "option" or p.name in placed:
                    continue
                if title == "Other" or p.name in names:
                    if (record := p.get_help_record(ctx)) is not None:
                        rows.append(record)
                    placed.add(p.name)
            if rows:
                with formatter.section(f"{title} options"):
                    formatter.write_dl(rows)

    cmd.format_options = format_options


def _plain_metavars(cmd: Any) -> None:
    """Help shows NAME, DIR, N: words a user types, never Python types such as <list[Path]>."""
    for param in cmd.params:
        if param.metavar is None and not getattr(param, "is_flag", False) and param.name:
            param.metavar = _METAVARS.get(param.name, param.name.upper())
        if param.param_type_name == "argument":
            param.display_type_rich = lambda ctx: None  # the name says it; Typer would append <path>
            # usage reads `repro verify RESULT_DIR`, as typed, not Typer's `{RESULT_DIR}`
            shown = param.metavar + ("..." if param.nargs != 1 else "")
            param._usage_display_name = lambda shown=shown: shown
    _grouped_help(cmd)
    for sub in getattr(cmd, "commands", {}).values():
        _plain_metavars(sub)


def _json_requested(args: list[str]) -> bool:
    return "--json" in args[: args.index("--")] if "--" in args else "--json" in args


# The root's options, as users type them after any command too (`repro run offline --yes`); value: takes a value.
_GLOBAL_OPTS = {
    "--yes": False, "-y": False, "--json": False, "--debug": False, "--dry-run": False,
    "--recipe": True, "-r": True, "--workspace": True, "-w": True,
}  # fmt: skip


def _hoist_globals(cmd: Any, argv: list[str]) -> list[str]:
    """A root option typed after a command that has no such option of its own moves before the command, so
    `--yes`, `--debug`, `--json`... work wherever a user puts them (the command's own option wins where it has one)."""
    group, i, end = cmd, 0, -1
    while i < len(argv) and argv[i] != "--":
        tok = argv[i]
        if tok.startswith("-"):
            i += 2 if _GLOBAL_OPTS.get(tok) else 1
            continue
        sub = getattr(group, "commands", {}).get(tok)
        if sub is None:
            break
        group, end, i = sub, i, i + 1
    if end < 0 or hasattr(group, "commands"):
        return argv
    own: set[str] = set()
    takes_value: set[str] = set()
    for p in group.params:
        names = [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]
        own.update(names)
        if p.param_type_name == "option" and not getattr(p, "is_flag", False) and not getattr(p, "count", False):
            takes_value.update(names)
    head, tail, moved = argv[: end + 1], [], []
    j = end + 1
    while j < len(argv):
        tok = argv[j]
        if tok == "--":
            tail += argv[j:]
            break
        name = tok.split("=", 1)[0]
        if name in _GLOBAL_OPTS and name not in own:
            width = 2 if _GLOBAL_OPTS[name] and "=" not in tok else 1
            moved += argv[j : j + width]
            j += width
            continue
        width = 2 if name in takes_value and "=" not in tok else 1
        tail += argv[j : j + width]
        j += width
    return [*moved, *head, *tail] if moved else argv


def main(args: list[str] | None = None) -> None:
    """The console script: usage errors get the same one-line (and --json) treatment as every other error."""
    argv = list(sys.argv[1:] if args is None else args)
    from repro.ui.streams import degrade_streams

    degrade_streams()  # an ASCII or latin-1 terminal: characters degrade (± as +/-), never a UnicodeEncodeError
    if threading.current_thread() is threading.main_thread():
        sigterm_as_interrupt()  # every command: kept work marked, exit 143 (130 is Ctrl-C's)
    cmd = typer.main.get_command(app)
    _plain_metavars(cmd)
    argv = _hoist_globals(cmd, argv)
    try:
        rv = cmd.main(args=argv, prog_name="repro", standalone_mode=False)
    except typer.TyperException as exc:  # Typer's vendored Click: usage errors and bad parameters
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "repro"
        code = getattr(exc, "exit_code", 2)
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()  # type: ignore[attr-defined]
            sys.exit(code)
        error(exc.format_message(), f"{where} --help", exit_code=code, as_json=_json_requested(argv))
        sys.exit(code)
    except typer.Abort:
        error("Aborted.", "repro status", exit_code=1, as_json=_json_requested(argv))
        sys.exit(1)
    except BrokenPipeError:
        from repro.ui.safe import closed_pipe

        closed_pipe()
    except Exception as exc:  # noqa: BLE001 - a bug: one line, its traceback kept in a file
        _bug(exc, as_json=_json_requested(argv))
        sys.exit(BUG_EXIT_CODE)
    code = rv if isinstance(rv, int) else 0
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        from repro.ui.safe import closed_pipe

        closed_pipe()
    if _state.get("abandoned"):
        # A stopped Server run leaves LoadGen's scheduler thread in C++; interpreter shutdown would wait for it or
        # crash in its destructors. Everything is written and marked, so leave now with the signal's exit code.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
