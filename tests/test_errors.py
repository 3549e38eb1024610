"""The error table and the ledger's bad-input cases: one line naming the next command, never a traceback."""

from __future__ import annotations

import errno
import json

import pytest
from typer.testing import CliRunner

from repro.cli import app
from repro.core.errors import Interrupted, LedgerError, StepFailed, explain
from repro.core.ledger import SCHEMA_VERSION, Ledger

runner = CliRunner()


def test_table_names_the_next_command():
    e = explain(StepFailed("build broke", "`repro build-engine --force`"))
    assert (e.message, e.next_command, e.exit_code) == ("build broke", "`repro build-engine --force`", 1)
    assert explain(Interrupted("stop")).exit_code == 130
    assert explain(KeyboardInterrupt()).next_command == "repro status"
    full = explain(OSError(errno.ENOSPC, "No space left on device", "/ws/models/x"))
    assert "disk is full" in full.message and "/ws/models/x" in full.message and "repro doctor" in full.next_command
    assert explain(ValueError("a bug")) is None


def test_docker_exception_is_explained():
    from docker.errors import DockerException

    e = explain(DockerException("Error while fetching server API version"))
    assert "not reachable" in e.message and "repro doctor" in e.next_command


def test_debug_shows_the_traceback_for_expected_errors(monkeypatch):
    from repro import cli

    monkeypatch.setitem(cli._state, "debug", False)
    plain = runner.invoke(app, ["doctor", "--recipe", "no-such"])
    assert plain.exit_code == 2 and "Next:" in plain.output and plain.exception is not None
    debug = runner.invoke(app, ["--debug", "doctor", "--recipe", "no-such"])
    assert debug.exit_code == plain.exit_code == 2, "--debug adds the traceback, never changes the exit code"
    assert "Traceback" in debug.stderr and "RecipeError" in debug.stderr and "Next:" in debug.stderr


def test_json_error_is_one_document_on_stdout_and_a_line_on_stderr():
    """Through a real pipe: the exit code, stdout's one JSON object and stderr's line agree, with or without --debug."""
    import subprocess
    import sys

    for extra in ([], ["--debug"]):
        proc = subprocess.run(
            [sys.executable, "-c", "from repro.cli import main; main()", *extra, "verify", "/no/such/run", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        doc = json.loads(proc.stdout)
        assert proc.returncode == 2 == doc["error"]["exit_code"]
        assert doc["schema_version"] == 1 and doc["ok"] is False
        assert "/no/such/run" in doc["error"]["message"] and doc["error"]["next_command"] == "repro status"
        assert "check the path" in doc["error"]["hint"]
        assert "error: /no/such/run" in proc.stderr
    usage = subprocess.run(
        [sys.executable, "-c", "from repro.cli import main; main()", "status", "--bogus", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(usage.stdout)
    assert usage.returncode == 2 == doc["error"]["exit_code"] and "--bogus" in doc["error"]["message"]
    assert doc["error"]["next_command"] == "repro status --help"


def test_v1_ledger_is_migrated(tmp_path):
    path = tmp_path / "ledger.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "steps": [
                    {"name": "setup", "status": "done", "inputs_hash": "abc", "started": "2026-01-01T00:00:00+00:00"}
                ],
            }
        )
    )
    led = Ledger.load(path)
    assert led.schema_version == SCHEMA_VERSION and led.steps["setup"].outputs == []
    led.save()
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize(
    "content",
    ["{broken", "[]", '{"schema_version": "x"}', '{"schema_version": 2, "steps": {"setup": {"status": "exploded"}}}'],
)
def test_corrupt_ledger_is_kept_aside_never_overwritten(tmp_path, content):
    path = tmp_path / "ledger.json"
    path.write_text(content)
    with pytest.raises(LedgerError) as exc:
        Ledger.load(path)
    assert "corrupt" in exc.value.message and "repro status" in exc.value.next_command
    kept = list(tmp_path.glob("ledger.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text() == content and not path.exists()
    path.write_text(content)
    with pytest.raises(LedgerError):
        Ledger.load(path)
    assert sorted(p.read_text() for p in tmp_path.glob("ledger.json.corrupt-*")) == [content, content]


def test_newer_ledger_is_refused_and_untouched(tmp_path):
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(LedgerError) as exc:
        Ledger.load(path)
    assert "newer repro" in exc.value.message and "pip install -U repro" in exc.value.next_command
    assert path.exists() and not list(tmp_path.glob("*.corrupt-*"))


def test_ledger_error_never_stores_the_token(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_SecretValue12345678")
    led = Ledger.load(tmp_path / "ledger.json")
    led.start("setup", "h")
    led.fail("setup", "401 for token hf_SecretValue12345678")
    assert "hf_SecretValue12345678" not in (tmp_path / "ledger.json").read_text()
