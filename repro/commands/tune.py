"""`repro tune server|interactive`: find the Server/Interactive target QPS before the long run (issue 28)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from repro.commands.run import EndpointOpt, KeepServersOpt, ReadyTimeoutOpt, ServedModelOpt, ServerImageOpt
from repro.ui.options import DryRunOpt, JsonOpt, RecipeOpt, WorkspaceOpt, finite_in

MaxMinutesOpt = Annotated[
    float,
    typer.Option(
        "--max-minutes",
        callback=finite_in(0, 7 * 24 * 60),
        help="Stop searching after this long and keep the best rate found.",
    ),
]
MarginOpt = Annotated[
    float | None,
    typer.Option(
        "--margin",
        callback=finite_in(0, 0.9, above=False),
        help="Extra margin below the highest rate whose p99 upper bounds pass: 0 on a GPU (the bounds and the "
        "confirming probe decide); 0.2 for the CPU demo and rehearsals, whose stand-ins share this machine's cores; "
        "0.6 for the demo's Interactive, whose capacity is a cliff.",
    ),
]
StartOpt = Annotated[
    float | None,
    typer.Option(
        "--start-qps",
        callback=finite_in(0, 1e6),
        help="First rate to try (default: the recipe's published rate for the scenario).",
    ),
]
ProbeSecondsOpt = Annotated[
    float | None,
    typer.Option(
        "--probe-seconds", callback=finite_in(0, 86400), help="LoadGen min_duration of each probe (default 60 s)."
    ),
]
ProbeQueriesOpt = Annotated[
    int | None,
    typer.Option(
        "--probe-queries",
        min=1,
        max=100_000_000,
        help="LoadGen min_query_count of each probe (default 1,001: its p99 bound is the 4th largest at 99% "
        "confidence; below 459 no bound reaches 99%, and the confidence is printed).",
    ),
]
RunSamplesOpt = Annotated[
    int | None,
    typer.Option(
        "--run-samples",
        min=1,
        max=100_000_000,
        help="The run that follows uses `--samples N`: judge the probes and size the confirmation for N queries.",
    ),
]


def _tune(
    scenario: str,
    *,
    recipe: str | None,
    workspace: Path | None,
    endpoint: list[str] | None,
    served_model: str | None,
    keep_servers: bool,
    ready_timeout: float | None,
    server_image: str | None,
    max_minutes: float,
    margin: float | None,
    start_qps: float | None,
    probe_seconds: float | None,
    probe_queries: int | None,
    run_samples: int | None,
    dry_run: bool,
    json: bool,
) -> None:
    from repro.core.systems import resolve_recipe
    from repro.core.workspace import Workspace
    from repro.run.servers import ServerOptions
    from repro.run.tune import tune
    from repro.run.tune_options import TuneOptions
    from repro.ui.output import emit, show_err

    ws = Workspace.open(workspace)
    chosen, _ = resolve_recipe(recipe, ws)
    options = TuneOptions.build(
        chosen,
        ws,
        scenario=scenario,
        endpoints=endpoint or None,
        servers=ServerOptions(image=server_image, keep=keep_servers, ready_timeout_s=ready_timeout),
        served_model=served_model,
        start_qps=start_qps,
        margin=margin,
        max_minutes=max_minutes,
        probe_s=probe_seconds,
        probe_queries=probe_queries,
        run_settings=None if run_samples is None else {"min_query_count": run_samples, "min_duration": 0},
        dry_run=dry_run,
        argv=["repro", *sys.argv[1:]],
    )
    result = tune(options, show=show_err)
    emit(result, json)


def server(
    recipe: RecipeOpt = None,
    workspace: WorkspaceOpt = None,
    endpoint: EndpointOpt = None,
    served_model: ServedModelOpt = None,
    keep_servers: KeepServersOpt = False,
    ready_timeout: ReadyTimeoutOpt = None,
    server_image: ServerImageOpt = None,
    max_minutes: MaxMinutesOpt = 60.0,
    margin: MarginOpt = None,
    start_qps: StartOpt = None,
    probe_seconds: ProbeSecondsOpt = None,
    probe_queries: ProbeQueriesOpt = None,
    run_samples: RunSamplesOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Find the highest Server target QPS that meets TTFT/TPOT (short LoadGen runs); `repro run server` uses it."""
    _tune("Server", **locals())


def interactive(
    recipe: RecipeOpt = None,
    workspace: WorkspaceOpt = None,
    endpoint: EndpointOpt = None,
    served_model: ServedModelOpt = None,
    keep_servers: KeepServersOpt = False,
    ready_timeout: ReadyTimeoutOpt = None,
    server_image: ServerImageOpt = None,
    max_minutes: MaxMinutesOpt = 60.0,
    margin: MarginOpt = None,
    start_qps: StartOpt = None,
    probe_seconds: ProbeSecondsOpt = None,
    probe_queries: ProbeQueriesOpt = None,
    run_samples: RunSamplesOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """As `tune server`, under the benchmark's Interactive TTFT/TPOT limits; `repro run interactive` uses it."""
    _tune("Interactive", **locals())
