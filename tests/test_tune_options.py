"""`TuneOptions` (run/tune_options.py): what `repro tune` was asked, validated once and resolved into the search's
numbers before any server starts or any folder is written (issue 42 item 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repro.cli import app
from repro.core.errors import InputError
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.run.settings import loadgen_settings
from repro.run.tune import tune
from repro.run.tune_options import TuneOptions


def test_defaults_are_resolved_once_from_the_recipe(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws")
    o = TuneOptions.build("nd-h100-v5", ws, endpoints=["http://127.0.0.1:1"])
    full = loadgen_settings(get_recipe("nd-h100-v5"), "Server", dataset_size=24576)
    s = o.search
    assert (s.margin, s.resolution, s.limits_ms) == (0.0, 0.03, (2000.0, 200.0))
    assert s.full_min_s == int(full["min_duration"]) / 1000 and s.full_queries == int(full["min_query_count"])
    assert (s.probe_s, s.probe_queries) == (min(60.0, s.full_min_s), min(1001, s.full_queries))
    assert o.endpoints == ("http://127.0.0.1:1",) and o.backend_name == "trtllm" and o.probe_servers.keep
    demo = TuneOptions.build("demo", ws, scenario="Interactive")
    assert (demo.search.margin, demo.search.resolution, demo.label) == (0.6, 0.1, "demo")
    short = TuneOptions.build("nd-h100-v5", ws, run_settings={"min_query_count": 200, "min_duration": 0})
    assert (short.search.full_queries, short.search.probe_queries, short.search.probe_s) == (200, 200, 0.0)


@pytest.mark.parametrize(
    "kw,said",
    [
        ({"scenario": "Offline"}, "searches Server or Interactive"),
        ({"margin": 0.95}, "--margin must be between 0 and 0.9"),
        ({"max_minutes": 0}, "must be positive"),
        ({"probe_s": 0}, "must be positive"),
        ({"probe_queries": 0}, "must be positive"),
        ({"start_qps": -1.0}, "--start-qps must be positive"),
        ({"run_settings": {"min_query_count": 0, "min_duration": 0}}, "--run-samples must be positive"),
    ],
)
def test_bad_options_are_refused_before_anything_is_written(tmp_path: Path, kw: dict, said: str) -> None:
    ws = Workspace.open(tmp_path / "ws")
    with pytest.raises(InputError, match=said):
        TuneOptions.build("nd-h100-v5", ws, **kw)
    assert not (tmp_path / "ws").exists()


def test_a_reference_only_recipe_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="reference-only"):
        TuneOptions.build("dgx-h100", Workspace.open(tmp_path / "ws"))


def test_the_command_builds_the_options_from_its_flags(tmp_path: Path) -> None:
    """`repro tune server --dry-run --json` reports the options it built: the flags, resolved, and nothing written."""
    w = ["-w", str(tmp_path / "ws")]
    flags = ["--probe-seconds", "5", "--probe-queries", "300", "--margin", "0.1", "--max-minutes", "7"]
    res = CliRunner().invoke(
        app, ["tune", "server", "--recipe", "nd-h100-v5", *w, *flags, "--run-samples", "900", "--dry-run", "--json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["probe_settings"]["min_duration"] == 5000 and doc["probe_settings"]["min_query_count"] == 300
    assert doc["margin"] == 0.1 and doc["max_minutes"] == 7 and doc["full_run"]["min_query_count"] == 900
    assert doc["dry_run"] is True and doc["folder"] is None
    direct = tune(
        TuneOptions.build(
            "nd-h100-v5",
            Workspace.open(tmp_path / "ws"),
            probe_s=5,
            probe_queries=300,
            margin=0.1,
            max_minutes=7,
            run_settings={"min_query_count": 900, "min_duration": 0},
            dry_run=True,
        )
    ).to_json()
    same = ("probe_settings", "margin", "resolution", "max_minutes", "full_run", "limits_ms", "start_qps")
    assert {k: direct[k] for k in same} == {k: doc[k] for k in same}
