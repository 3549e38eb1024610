"""Every root option works after any command as users type it (issue 37 item 5): `repro run offline --yes`,
`repro rehearse --yes`, `repro status --debug`; the command's own option of that name still wins."""

from __future__ import annotations

import contextlib

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


def _leaf_commands() -> list[list[str]]:
    import typer

    def walk(group: object, path: list[str]) -> list[list[str]]:
        subs = getattr(group, "commands", None)
        if subs is None:
            return [path]
        return [leaf for name, sub in subs.items() for leaf in walk(sub, [*path, name])]

    return walk(typer.main.get_command(app), [])


def test_every_flag_of_the_root_works_after_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 37 item 5 for all of them, not five: `repro COMMAND ... --yes` (and -y, --json, --debug, --dry-run)
    parses for every command the CLI has, as `repro --yes COMMAND` does; `--help` after it shows that command's
    help. In-process through the same hoisting as `main`, so the 100 cases cost no process each."""
    import typer

    from repro.cli import _plain_metavars

    cmd = typer.main.get_command(app)
    _plain_metavars(cmd)
    leaves = _leaf_commands()
    assert {"run offline", "build-engine", "rehearse", "tune server", "recipes list", "attest"} <= {
        " ".join(p) for p in leaves
    }
    for path in leaves:
        for flag in ("--yes", "-y", "--json", "--debug", "--dry-run"):
            argv = _hoist_globals(cmd, [*path, flag, "--help"])
            try:
                code = cmd.main(args=argv, prog_name="repro", standalone_mode=False)
            except SystemExit as exc:
                code = exc.code
            out = capsys.readouterr()
            assert code in (0, None), (path, flag, out.err[-500:])
            assert "No such option" not in out.out + out.err and "Usage: repro " + " ".join(path) in out.out, (
                path, flag, out.out[-500:],
            )  # fmt: skip


def test_tune_help_puts_every_search_option_under_search(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 37 item 4: `repro tune server --help` listed --run-samples (as RUN_SAMPLES) under "Other options"."""
    import typer

    from repro.cli import _plain_metavars

    cmd = typer.main.get_command(app)
    _plain_metavars(cmd)  # as main does: words for metavars, the option groups
    for scenario in ("server", "interactive"):
        with contextlib.suppress(SystemExit):
            cmd.main(args=["tune", scenario, "--help"], prog_name="repro", standalone_mode=False)
        out = capsys.readouterr().out
        search = out.split("Search options")[1].split("Server options")[0]
        assert "--run-samples N " in search and "--margin FRACTION" in search, out
        assert "Other options" not in out and "RUN_SAMPLES" not in out, out
        # the rehearsal's tune margin is the one --help names, with its reason (it said 0.05 and no why)
        from repro.rehearse.rehearsal import TUNE_MARGIN

        margin = " ".join(search.split("--margin FRACTION")[1].split("--start-qps")[0].split())
        assert f"{TUNE_MARGIN:g} for the CPU demo and rehearsals, whose stand-ins share this machine's cores" in margin
