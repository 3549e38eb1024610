"""Every command answers --help without touching the machine."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from repro.cli import app

runner = CliRunner()


def _commands(t: typer.Typer, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix + (c.name or c.callback.__name__.replace("_", "-"),) for c in t.registered_commands]
    for group in t.registered_groups:
        found += [prefix + (group.name,)] + _commands(group.typer_instance, prefix + (group.name,))
    return found


ALL = _commands(app)


def test_the_expected_commands_are_registered():
    names = {" ".join(c) for c in ALL}
    assert {
        "doctor",
        "status",
        "guide",
        "setup",
        "build-engine",
        "verify",
        "run",
        "run offline",
        "recipes list",
    } <= names


@pytest.mark.parametrize("argv", ALL, ids=[" ".join(c) for c in ALL])
def test_help(argv):
    res = runner.invoke(app, [*argv, "--help"])
    assert res.exit_code == 0, res.output
    assert "Usage:" in res.output and "Traceback" not in res.output


def test_root_help_and_version():
    assert runner.invoke(app, ["--help"]).exit_code == 0
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.startswith("repro ")
