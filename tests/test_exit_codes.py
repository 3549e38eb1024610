"""Exit codes a script can rely on (issue 26 item 5): a bug is 3, never the 1 of a FAIL verdict, and a missing
optional package is the one-line install hint, never a traceback."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO

# A real command whose core function raises an unexpected exception, as a bug in repro would.
_BUG = """
import sys
import repro.commands.recipes as cmd
def broken(*a, **kw):
    raise ZeroDivisionError("planted bug")
import repro.core.recipes
repro.core.recipes.all_recipes = broken
from repro.cli import main
main(sys.argv[1:])
"""

# The ROUGE scorer's package missing: the hint names the extra that installs it.
_NO_ROUGE = """
import sys
sys.modules["rouge_score_rs"] = None
from repro.results.accuracy import score_pairs
from repro.core.errors import explain
try:
    score_pairs(["a b"], ["a b"])
except BaseException as exc:
    found = explain(exc)
    print(found.exit_code, found.next_command)
"""


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env_path = str(REPO)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )


def test_a_bug_exits_3_with_one_line_and_the_traceback_in_a_file() -> None:
    proc = _run(_BUG, "recipes", "list")
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: repro hit a bug (ZeroDivisionError: planted bug)"), lines
    path = re.search(r"traceback is in (\S+?\.txt)", proc.stderr).group(1)
    assert "ZeroDivisionError: planted bug" in Path(path).read_text() and "Traceback" in Path(path).read_text()
    Path(path).unlink()


def test_a_bug_under_debug_prints_the_traceback_and_json_says_3() -> None:
    proc = _run(_BUG, "--debug", "recipes", "list", "--json")
    assert proc.returncode == 3
    assert "Traceback" in proc.stderr and "planted bug" in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] is False and doc["error"]["exit_code"] == 3
    Path(re.search(r"traceback is in (\S+?\.txt)", proc.stderr).group(1)).unlink()


def test_missing_rouge_scorer_is_the_install_hint() -> None:
    """The ROUGE scorer is in the base install (the demo's, no torch): missing, it is a reinstall, not an extra."""
    proc = _run(_NO_ROUGE)
    assert proc.stdout.split(maxsplit=1) == [
        "2",
        "`pip install repro` (from a clone: `pip install -e .`)\n",
    ]
