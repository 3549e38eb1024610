"""Many `repro` commands, each in a process of its own, for the price of one interpreter start.

Run as a script (`python tests/cli_fork.py`) with the environment a user's shell would give the console script
(PYTHONIOENCODING, LC_ALL: the interpreter picks its streams' encoding from them at start). It imports
`repro.cli` once, then for each case read from stdin (JSON lines: argv, env, cwd, out, err, timeout) forks a child
that takes the case's environment and folder, writes fds 1 and 2 to the case's files, and calls the console
script's own `main()`: the same code, exit codes included (3 is "repro hit a bug"), as `repro ARGV` in a shell.
It prints one JSON line per case: the exit code (negative: killed by that signal; -14 is the time limit).
On a 2-core machine shared by many, a start of the interpreter and repro's imports is ~2-3 s; a fork, ~0.01 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import sys
import time


def _child(case: dict[str, object]) -> None:
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in dict(case["env"]).items()})  # type: ignore[call-overload]
    os.chdir(str(case["cwd"]))
    for fd, path in ((1, case["out"]), (2, case["err"])):
        f = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    signal.alarm(int(case.get("timeout") or 120))  # type: ignore[call-overload]
    argv = [str(a) for a in case["argv"]]  # type: ignore[attr-defined]
    sys.argv = ["repro", *argv]
    code = 0
    try:
        from repro.cli import main

        main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except BaseException:  # noqa: BLE001 - escaped main() itself: the test reports it
        import traceback

        traceback.print_exc()
        code = 99
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a stream the command closed
            stream.flush()
    os._exit(code)


PRELOAD = [
    "numpy",
    "pydantic",
    "rich.console",
    "rich.table",
    "yaml",
    "repro.commands",
    "repro.core.recipes",
    "repro.core.published",
    "repro.core.feasibility",
    "repro.core.ledger",
    "repro.core.families.llama2_70b",
    "repro.core.families.llama3_1_405b",
    "repro.flow.doctor",
    "repro.flow.status",
    "repro.flow.guide",
    "repro.run.plan",
    "repro.run.harness",
    "repro.run.backends.http_client",
    "repro.setup.dataset",
    "repro.setup.download",
    "repro.engine.container",
    "repro.results.verify",
    "repro.results.aggregate",
    "repro.results.series",
    "repro.report.explain",
    "repro.report.tables",
    "repro.ui.output",
    "repro.ui.render",
    "repro.ui.views",
    "repro.ui.results",
    "repro.ui.flow",
]
"""Imported before the forks (what most commands import lazily): a case's own work is then ~0.2-0.9 s, not 2-3."""


def serve() -> None:
    import importlib

    import typer.main

    import repro.cli

    for name in PRELOAD:
        with contextlib.suppress(ImportError):  # a module moved: that case imports it itself
            importlib.import_module(name)
    typer.main.get_command(repro.cli.app)

    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        began = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(case)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status), "s": time.monotonic() - began}), flush=True)


if __name__ == "__main__":
    serve()
