"""`repro published` (list and filter the shipped index) and `repro published show REF` (issue #14)."""

from __future__ import annotations

from typing import Annotated

import typer

from repro.ui.options import BenchmarkOpt, JsonOpt

# repro.core.published.SORTS, spelled out so the help needs no pydantic import (tests/test_cli_imports.py checks it).
SORTS_HELP = "per-accelerator, tokens, round, submitter"

REF_HELP = (
    "An official result ID (5.1-0008: every benchmark and scenario of that system), optionally narrowed "
    "(5.1-0008/99/Offline, 5.1-0008/llama3.1-405b/Server, 5.1-0008/Server); or, for rounds without IDs "
    "(v4.0, v4.1, v6.1), a key or its prefix: "
    "ROUND/DIVISION/SUBMITTER/SYSTEM/BENCHMARK/SCENARIO, e.g. "
    "v4.1/closed/NVIDIA/DGX-H100_H100-SXM-80GBx8_TRT/99.9/Offline "
    "(SYSTEM is the results folder; case does not matter)."
)


def list_published(
    ctx: typer.Context,
    accelerator: Annotated[
        str | None,
        typer.Option(
            "--accelerator", "-a", help="GPU model, e.g. GB200, H100, 'H100 NVL', MI300X (GH200 is not H200)."
        ),
    ] = None,
    submitter: Annotated[
        str | None, typer.Option("--submitter", help="Submitter folder name, e.g. Azure, NVIDIA (any case).")
    ] = None,
    round_: Annotated[
        str | None, typer.Option("--round", help="MLPerf round: v4.0, v4.1, v5.0, v5.1, v6.0, v6.1.")
    ] = None,
    scenario: Annotated[str | None, typer.Option("--scenario", help="Offline, Server or Interactive.")] = None,
    benchmark: BenchmarkOpt = None,
    division: Annotated[str | None, typer.Option("--division", help="closed or open.")] = None,
    min_nodes: Annotated[
        int | None, typer.Option("--min-nodes", min=1, help="Only systems with at least N nodes.")
    ] = None,
    sort: Annotated[
        str,
        typer.Option("--sort", help=f"One of: {SORTS_HELP} (default: tokens/s per accelerator, highest first)."),
    ] = "per-accelerator",
    json: JsonOpt = False,
) -> None:
    """List every published MLPerf result of Llama-2-70B, Llama-3.1-405B and DeepSeek-R1 in the shipped index (and a
    benchmark's own published-<name>.csv beside its file), filtered, best per accelerator first."""
    if ctx.invoked_subcommand is not None:
        return
    from repro.core.published import Filters, load_index
    from repro.ui.output import emit
    from repro.ui.published import PublishedList

    index = load_index()
    filters = Filters(accelerator, submitter, round_, scenario, benchmark, division, min_nodes)
    emit(PublishedList(index, index.select(filters, sort), filters, sort), json)


def show(ref: Annotated[str, typer.Argument(help=REF_HELP)], json: JsonOpt = False) -> None:
    """Show one published result (or every row of one result ID) with its source repository, commit and path."""
    from repro.core.published import load_index
    from repro.ui.output import emit
    from repro.ui.published import PublishedShow

    index = load_index()
    emit(PublishedShow(index, ref, index.resolve(ref)), json)
