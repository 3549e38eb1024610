"""Start-up stays small: importing the CLI (what `repro --help` pays) loads no command's stack (issue 17).

Checked by module names in a fresh interpreter, never by timing; benchmarks/cli_startup.py measures the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from repro.core.published import SORTS

REPO = Path(__file__).resolve().parents[1]
# Each is imported by some command's core (recipes, results, engine, run, rendering), none by the wiring.
HEAVY = ("rich", "pydantic", "yaml", "numpy", "repro.core.recipes", "repro.results", "repro.engine", "repro.run")


def _modules_after(code: str, *args: str) -> list[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)), file=sys.__stderr__)"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env, cwd=REPO, check=False
    )
    return list(json.loads(proc.stderr.strip().splitlines()[-1]))


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_importing_the_cli_loads_no_command_stack() -> None:
    assert _heavy(_modules_after("import repro.cli")) == []


def test_help_loads_no_command_stack() -> None:
    code = "from repro.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    assert _heavy(_modules_after(code)) == []


def test_verify_loads_only_what_verify_uses() -> None:
    fixture = REPO / "tests" / "fixtures" / "published" / "azure-nd-gb200-v6-v5.1"
    code = f"from repro.cli import main\ntry:\n    main(['verify', {str(fixture)!r}])\nexcept SystemExit:\n    pass"
    loaded = _modules_after(code)
    assert "repro.results.verify" in loaded  # the probe really ran the command
    assert not [m for m in loaded if m.startswith(("repro.engine", "repro.run", "repro.setup", "numpy"))]


def test_published_help_names_every_sort() -> None:
    from typer.testing import CliRunner

    from repro.cli import app

    out = CliRunner().invoke(app, ["published", "--help"], env={"COLUMNS": "400"}).output
    assert all(name in out for name in SORTS), out
