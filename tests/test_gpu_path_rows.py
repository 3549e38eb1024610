"""The rows of shared/reference/gpu-path-check.md (second check) that issue 23 fixes: LoadGen on aarch64, the
official 600 s minimum duration as a choice."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repro.cli import app
from repro.core.recipes import get_recipe
from repro.run.settings import expected_samples, loadgen_settings

REPO = Path(__file__).resolve().parents[1]


def _run_instruction() -> str:
    """The Dockerfile's install RUN as the shell script docker hands to /bin/sh."""
    text = (REPO / "containers" / "Dockerfile").read_text()
    body = re.search(r"^RUN (.*?[^\\])$", text, re.S | re.M)
    assert body is not None
    return body[1].replace("\\\n", "")


@pytest.mark.parametrize(("arch", "from_source"), [("aarch64", True), ("x86_64", False)])
def test_the_image_builds_loadgen_from_source_on_grace(tmp_path: Path, arch: str, from_source: bool) -> None:
    """PyPI has no aarch64 wheel of mlcommons-loadgen 6.0.17: on Grace pip must build the sdist, with g++ present.
    The RUN script itself runs here under /bin/sh; only `uname`, `g++` and `python3` answer from a folder in PATH."""
    shims = tmp_path / "bin"
    shims.mkdir()
    log = tmp_path / "calls"
    for name, body in (("uname", f"echo {arch}"), ("g++", "true"), ("python3", f'echo "$*" >>{log}')):
        (shims / name).write_text(f"#!/bin/sh\n{body}\n")
        (shims / name).chmod(0o755)
    env = {"PATH": f"{shims}:/usr/bin:/bin", "REPRO_INSTALL": "full", "LOADGEN_VERSION": "6.0.17"}
    done = subprocess.run(["/bin/sh", "-ec", _run_instruction()], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    pip = log.read_text().splitlines()[0]
    assert "mlcommons-loadgen==6.0.17" in pip
    assert ("--no-binary=mlcommons-loadgen" in pip) is from_source


def test_official_600_s_minimum_is_a_choice_with_its_cost() -> None:
    """Azure's 2,400 s stays the default; MLPerf's own 600 s is a valid run with a quarter of the samples."""
    gb200 = get_recipe("nd-gb200-v6")
    default = loadgen_settings(gb200, "Offline")
    official = loadgen_settings(gb200, "Offline", official_min_duration=True)
    assert default["min_duration"] == 2_400_000 and official["min_duration"] == 600_000
    assert expected_samples(default, "Offline") == 607_200 and expected_samples(official, "Offline") == 151_800
    assert "max_duration" not in official and official["min_query_count"] == 24576
    res = CliRunner().invoke(
        app, ["run", "offline", "--recipe", "nd-gb200-v6", "--official-min-duration", "--dry-run", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert "llama2-70b.Offline.min_duration = 600000" in res.stdout
    helptext = CliRunner(env={"COLUMNS": "200", **os.environ}).invoke(app, ["run", "offline", "--help"]).output
    assert "--official-min-duration" in helptext and "2,400 s" in helptext


def test_setup_offers_the_mlcommons_dataset_source_beside_the_mirror() -> None:
    res = CliRunner().invoke(app, ["setup", "--recipe", "nd-gb300-v6", "--dry-run", "--json"])
    doc = json.loads(res.stdout)
    notes = " ".join(doc["details"]["notes"])
    assert "llama-2-70b-open-orca-dataset.uri" in notes and "mlc-r2-downloader.sh" in notes
    assert any("storage.googleapis.com" in f["source"] for f in doc["details"]["files"])  # the pinned mirror stays
    demo = json.loads(CliRunner().invoke(app, ["setup", "--recipe", "demo", "--dry-run", "--json"]).stdout)
    assert not any("mlcommons" in n for n in demo["details"].get("notes", []))
