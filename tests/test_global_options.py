"""Every root option works after any command as users type it (issue 37 item 5): `repro run offline --yes`,
`repro rehearse --yes`, `repro status --debug`; the command's own option of that name still wins."""

from __future__ import annotations

import pytest
from helpers import cli_process

from repro.cli import _hoist_globals, app


@pytest.mark.parametrize(
    "args",
    [
        ("run", "offline", "--recipe", "demo", "--dry-run", "--yes"),
        ("build-engine", "--recipe", "demo", "--dry-run", "-y"),
        ("tune", "server", "--recipe", "demo", "--dry-run", "--yes", "--debug"),
        ("rehearse", "--recipe", "nd-gb200-v6", "--dry-run", "--yes"),
        ("status", "--yes", "--debug"),
    ],
    ids=lambda a: " ".join(a),
)
def test_root_options_after_a_command_are_accepted(args: tuple[str, ...]) -> None:
    proc = cli_process(*args, debug="--debug" in args)
    assert "No such option" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_hoisting_moves_only_what_the_command_lacks() -> None:
    import typer

    cmd = typer.main.get_command(app)
    # run offline has --json and --recipe of its own: they stay; --yes moves before the command
    assert _hoist_globals(cmd, ["run", "offline", "--yes", "--json", "--recipe", "demo"]) == [
        "--yes", "run", "offline", "--json", "--recipe", "demo",
    ]  # fmt: skip
    # a value that looks like an option stays with its option; after `--` nothing moves
    assert _hoist_globals(cmd, ["setup", "--yes", "--", "--debug"]) == ["setup", "--yes", "--", "--debug"]
    assert _hoist_globals(cmd, ["status", "--debug"]) == ["--debug", "status"]
    assert _hoist_globals(cmd, ["--json", "status"]) == ["--json", "status"]
