"""One name per count on a real demo run: the progress line counts the samples LoadGen issued
(`generated_samples_per_query`, padded to whole shuffles of the loaded set), `verify` judges the unpadded number
LoadGen required (`samples_per_query`, what MLPerf's submission checker reads) and names both (issue 25 item 20,
issue 24 item 9: "5,568 vs 5,537", "316 where the run issued 320")."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from repro.core.ledger import Ledger
from repro.core.workspace import Workspace


@pytest.mark.slow
def test_progress_and_verify_name_the_same_issued_count(tmp_path):
    ws = tmp_path / "ws"
    env = {**os.environ, "REPRO_HOME": str(ws), "REPRO_IMDS_URL": "http://127.0.0.1:9/", "REPRO_HEARTBEAT_S": "0.5"}
    cli = [sys.executable, "-c", "from repro.cli import main; main()"]
    run = subprocess.run(
        [*cli, "run", "offline", "--recipe", "demo"], capture_output=True, text=True, timeout=300, env=env
    )
    assert run.returncode == 0, run.stderr[-3000:]
    run_dir = Path(Ledger.load(Workspace.open(ws).ledger_path).steps["run-offline"].details["run_dir"])
    detail = next(run_dir.rglob("mlperf_log_detail.txt")).read_text()
    summary = next(run_dir.rglob("mlperf_log_summary.txt")).read_text()
    issued = int(re.search(r'"key": "generated_samples_per_query", "value": (\d+)', detail).group(1))
    required = int(re.search(r"^samples_per_query : (\d+)$", summary, re.M).group(1))
    loaded = int(re.search(r'"key": "effective_performance_sample_count", "value": (\d+)', detail).group(1))
    # padded to whole sets of the loaded samples: the two numbers the user saw differ, except in the one run in
    # `loaded` whose measured rate asks for a whole number of sets (3,776 = 59 x 64 happened in CI)
    assert issued == -(-required // loaded) * loaded and loaded > 1, (issued, required, loaded)

    last = [line for line in run.stderr.splitlines() if "issued samples done" in line][-1]
    assert f"{issued:,}/{issued:,} issued samples done" in last, last

    ver = subprocess.run([*cli, "verify", str(run_dir), "--json"], capture_output=True, text=True, timeout=120, env=env)
    doc = json.loads(ver.stdout)
    spq = next(c for c in doc["checks"] if c["name"] == "samples per query")
    assert spq["detail"].startswith(f"{required:,} required < 24,576"), spq
    text = subprocess.run([*cli, "verify", str(run_dir)], capture_output=True, text=True, timeout=120, env=env)
    said = " ".join((text.stdout + text.stderr).split())
    if issued > required:  # both named, in the JSON and on the screen
        assert f"{issued:,} issued samples" in spq["detail"] and f"{issued:,} issued samples" in said, spq
    else:  # one number: nothing padded to explain
        assert "issued samples" not in spq["detail"] and "issued samples" not in said, spq
