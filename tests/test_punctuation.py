"""Messages built from sentences end in one stop: doctor, the error table and hints joined text that already ended
in a full stop, so `repro doctor` printed `reproduction).).` (issue 25, item 9)."""

from __future__ import annotations

import errno
import re
import subprocess
import sys

import pytest
from rich.console import Console

from repro.core.errors import ReproError, explain
from repro.core.fmt import clause, end_sentence, join_sentences
from repro.core.recipes import all_recipes
from repro.core.workspace import Workspace
from repro.flow.doctor import run_doctor
from repro.ui.flow import doctor_report

# two stops in a row (". .", "..", ".).") but not an ellipsis, a path ("./x", "../x") or a version ("5.1.")
DOUBLED = re.compile(r"(?<![./\w])[.!?]\)?\s?[.](?![./\w])|(?<=[a-z)])[.]\)?\s?[.](?![./\w])")


def _doubled(text: str) -> list[str]:
    return [text[max(0, m.start() - 30) : m.end() + 5] for m in DOUBLED.finditer(text)]


def test_the_pattern_finds_what_the_user_saw():
    assert _doubled("Without a GPU, the CPU demo runs (never a reproduction).). Fix the FAIL rows.")
    assert _doubled("the disk is full.. then") and _doubled("the disk is full. . then")
    assert not _doubled("see ./run and ../x, round 5.1. Wait... then v1.2.3.")


def test_join_sentences_ends_each_part_once():
    joined = join_sentences("Disk full.", "Free space, then `repro doctor`")
    assert joined == "Disk full. Free space, then `repro doctor`."
    assert join_sentences("No GPU", None, "", "Run the demo.") == "No GPU. Run the demo."
    assert end_sentence("(see the log.)") == "(see the log.)" and end_sentence("Ready?") == "Ready?"
    assert clause("the CPU demo runs (never a reproduction).") == "the CPU demo runs (never a reproduction)"


def _render(report) -> str:
    console = Console(width=400, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(doctor_report(report))
    return console.export_text()


@pytest.mark.parametrize("recipe", [None, "demo", *(r.name for r in all_recipes() if r.name != "demo")][:5])
def test_doctor_output_has_no_doubled_stop(tmp_path, monkeypatch, recipe):
    """The real checks on this machine (no GPU, no Azure metadata): every row and the summary line."""
    monkeypatch.setenv("REPRO_IMDS_URL", "http://127.0.0.1:9/metadata/instance")
    ws = Workspace.open(tmp_path / "ws")
    text = _render(run_doctor(recipe, ws, imds_timeout=0.2))
    assert "Recipe:" in text
    assert not _doubled(text), text


def test_doctor_cli_on_a_machine_without_a_recipe(tmp_path):
    env = {"REPRO_HOME": str(tmp_path / "ws"), "REPRO_IMDS_URL": "http://127.0.0.1:9/", "PATH": "/usr/bin:/bin"}
    cli = [sys.executable, "-c", "from repro.cli import main; main()", "doctor"]
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=120, env=env)
    assert "Recipe: (none)" in proc.stdout + proc.stderr
    assert not _doubled(proc.stdout + proc.stderr), proc.stdout + proc.stderr


def _mapped_errors() -> list[BaseException]:
    import urllib.error

    excs: list[BaseException] = [
        KeyboardInterrupt(),
        OSError(errno.ENOSPC, "No space left on device", "/tmp/x"),
        OSError(errno.EACCES, "Permission denied", "/tmp/x"),
        OSError(errno.EIO, "Input/output error."),
        urllib.error.URLError("refused."),
    ]
    for message in ("The run stopped.", "The run stopped", "Bad folder (see the log.)"):
        for hint in ("check the path, then `repro verify RUN` again.", "free space, then `repro doctor`", None):
            excs.append(ReproError(message, hint))
    return excs


@pytest.mark.parametrize("exc", _mapped_errors(), ids=repr)
def test_error_lines_have_no_doubled_stop(exc, capsys):
    from repro.ui.output import error

    explained = explain(exc)
    if explained is None:
        pytest.skip("not in the error table: a bug with a traceback")
    error(explained.message, explained.next_command, exit_code=explained.exit_code)
    err = capsys.readouterr().err
    assert err.startswith("error:")
    assert not _doubled(err), err
