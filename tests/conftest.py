"""Shared test isolation: every test gets its own REPRO_HOME and never sees a real HF token."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

# The Docker fixtures (`client`, `base_image`) live in container_base.py, shared by every Docker test.
pytest_plugins = ["container_base"]

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("REPRO_FIXTURES", REPO / "tests" / "fixtures" / "published")).resolve()
GOLDEN = Path(__file__).resolve().parent / "golden"

# A shell starts background jobs (`cmd &`, nohup) with SIGINT ignored, and Python then leaves it ignored: the Ctrl-C
# tests would see nothing. The suite tests Ctrl-C, so it takes SIGINT back; its children inherit the default on exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "repro-home"
    monkeypatch.setenv("REPRO_HOME", str(home))
    monkeypatch.setenv("REPRO_IMDS_URL", "http://127.0.0.1:9/metadata/instance")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("COLUMNS", "120")
    return home


@pytest.fixture
def fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"published-log fixtures not found at {FIXTURES}")
    return FIXTURES


CI_PROVIDES = {"REPRO_REQUIRE_DOCKER", "REPRO_REQUIRE_SLURM", "REPRO_REQUIRE_CHROMIUM", "REPRO_REQUIRE_SHELLCHECK"}


def required(env: str) -> bool:
    """CI (CI=true) installs Docker, Slurm, Chromium and shellcheck: there their absence fails instead of skipping.

    NVML is never in CI."""
    return os.environ.get(env) == "1" or (os.environ.get("CI") == "true" and env in CI_PROVIDES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use the `slurm` fixture carry the slurm marker, so `-m "not slurm"` leaves them out.

    The `slow` ones (rehearsals, rate searches, whole-flow walks: minutes each on 2 cores) run in CI (CI=true, as
    `.ci/run` sets it), with REPRO_SLOW_TESTS=1, or when `-m` names them; the same command elsewhere skips them to
    keep a developer's run short (15 minutes is the goal; docs/BENCHMARKS.md has what it takes). Tests that need
    the machine to themselves carry `machine`: README command 2 runs the others on three workers (pytest-xdist; a
    third keeps 2 cores busy while the others wait), then these one after another.

    The `soak` ones repeat what a `slow` test already walks, at length (every GPU recipe's rehearsal, several full
    Server runs at a tuned rate, the published pace): they run only with REPRO_SOAK_TESTS=1 or when `-m` names
    them, so CI stays under 30 minutes on two cores."""
    markexpr = config.option.markexpr or ""
    run_soak = os.environ.get("REPRO_SOAK_TESTS") == "1" or "soak" in markexpr
    run_slow = run_soak or os.environ.get("CI") == "true" or os.environ.get("REPRO_SLOW_TESTS") == "1"
    run_slow = run_slow or "slow" in markexpr
    skip = pytest.mark.skip(reason="slow: runs in CI, or with REPRO_SLOW_TESTS=1")
    skip_soak = pytest.mark.skip(reason="soak: runs with REPRO_SOAK_TESTS=1 (what a slow test walks, at length)")
    for item in items:
        if not run_soak and "soak" in item.keywords:
            item.add_marker(skip_soak)
        if "slurm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)
        if _needs_the_machine(item):
            item.add_marker(pytest.mark.machine)
        if not run_slow and "slow" in item.keywords:
            item.add_marker(skip)


MACHINE_FIXTURES = {"client", "base_image", "serve_image", "slurm"}
MACHINE_MARKERS = {"docker", "slurm", "enroot", "chromium"}
MACHINE_FILES = {
    # they count what is left on the machine (containers by label, Slurm steps, processes) or hold a terminal
    "test_rehearse.py",
    "test_rehearse_system.py",
    "test_rehearse_tty.py",
    "test_launch_slurm.py",
    "test_sandbox.py",
    "test_tmux_flow.py",
    "test_guide.py",
    "test_first_hour.py",
    "test_light_install.py",
    # rate searches: their latencies are the measurement, so they never share the machine with each other
    "test_projection.py",
    "test_tune.py",
    "test_tune_noisy.py",
    "test_thirdparty_server.py",
    "test_gpu_check.py",
    "test_twin_stall.py",
}


def _needs_the_machine(item: pytest.Item) -> bool:
    """Tests that use the machine's shared services, count what is left on it, or measure latencies: never run
    beside another test (README command 2 runs them after the parallel part, `-m machine`)."""
    if MACHINE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    if any(m.name in MACHINE_MARKERS for m in item.iter_markers()):
        return True
    return item.path.name in MACHINE_FILES


@functools.lru_cache(maxsize=1)
def slurm_up() -> bool:
    """Asked once a process: where no controller answers, `sinfo` takes 9 s to say so, before each Slurm test."""
    if shutil.which("sinfo") is None:
        return False
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return out.returncode == 0 and any(s.rstrip("*") in ("idle", "mixed", "allocated") for s in out.stdout.split())


@pytest.fixture
def slurm() -> None:
    if not slurm_up():
        if required("REPRO_REQUIRE_SLURM"):
            pytest.fail("REPRO_REQUIRE_SLURM=1 but no idle Slurm node answers `sinfo`; run `sudo .ci/start-slurm.sh`")
        pytest.skip("no local Slurm cluster (start one with `sudo .ci/start-slurm.sh`)")
