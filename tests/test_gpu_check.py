"""benchmarks/gpu_check.sh: shellcheck clean, its arguments checked, and its CPU-only parts run end to end here
(doctor, the demo, a random-weight Llama served by `transformers serve`, an --endpoint Offline run, tune then a
Server run, the probe saying it needs a GPU, verify/explain/report, one summary file)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, required

SCRIPT = REPO / "benchmarks" / "gpu_check.sh"


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "PYTHON": sys.executable, "REPRO": f"{sys.executable} -m repro"}


def test_gpu_check_is_shellcheck_clean() -> None:
    if not shutil.which("shellcheck"):
        if required("REPRO_REQUIRE_SHELLCHECK"):
            pytest.fail("shellcheck is not installed")
        pytest.skip("shellcheck is not installed")
    proc = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_unknown_argument_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--gpus", "8"], capture_output=True, text=True, env=_env(), cwd=tmp_path, check=False
    )
    assert proc.returncode == 2 and "unknown argument '--gpus'" in proc.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.soak  # the device script's CPU part, about 75 s: run it before taking the script to a GPU machine
def test_cpu_only_parts_run_and_write_one_summary(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="needs transformers[serving] (the test extra)")
    out = tmp_path / "check"
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--cpu-only", "--out", str(out)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=900,
        check=False,
    )
    summary = (out / "summary.txt").read_text()
    assert proc.returncode == 0, summary + proc.stderr[-3000:]
    for step in ("doctor-nd-h100-v5", "demo-offline", "endpoint-offline", "tune-server", "endpoint-server", "probe"):
        assert f"\n{step} " in summary, summary
    assert "telemetry              SKIP (needs a GPU" in summary
    assert "probe: unavailable: the probe needs a GPU" in summary
    assert "validity=VALID" in summary.split("endpoint-offline", 1)[1].splitlines()[0]
    assert (out / "report.md").is_file() and "failed steps: 0" in summary
