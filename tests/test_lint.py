"""Lint and types run with the tests: ruff (rules and format), mypy on the package, shellcheck on every script."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import REPO, required

SHELL_SCRIPTS = sorted([*REPO.glob("scripts/*.sh"), *REPO.glob(".ci/*"), *REPO.glob("repro/**/*.sh")])


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff_rules_are_clean() -> None:
    res = _run(sys.executable, "-m", "ruff", "check", "repro", "tests", "benchmarks", "scripts")
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_format_is_clean() -> None:
    res = _run(sys.executable, "-m", "ruff", "format", "--check", "repro", "tests", "benchmarks", "scripts")
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_on_the_package_is_clean() -> None:
    res = _run(sys.executable, "-m", "mypy")
    assert res.returncode == 0, res.stdout + res.stderr


def test_shellcheck_on_every_script() -> None:
    if shutil.which("shellcheck") is None:
        if required("REPRO_REQUIRE_SHELLCHECK"):
            pytest.fail("shellcheck is not installed; `bash scripts/dev-setup.sh` installs it")
        pytest.skip("shellcheck not installed (`apt-get install shellcheck`)")
    scripts = [str(p) for p in SHELL_SCRIPTS if p.is_file() and p.read_text().startswith("#!")]
    assert scripts, "no shell scripts found"
    res = _run("shellcheck", "-x", *scripts)
    assert res.returncode == 0, res.stdout + res.stderr
