"""`--endpoint` where nothing listens (issue 34 item 5): said at once, with the time left and how to stop, instead of
a silent --ready-timeout (30 min by default) ending in `Next: repro run`."""

from __future__ import annotations

import io
import socket
import subprocess
import sys
import time

import pytest

from repro.run.progress import ReadyWait


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_wait_is_said_at_once_then_at_most_every_interval() -> None:
    out = io.StringIO()
    wait = ReadyWait(out, every_s=30)
    wait("http://127.0.0.1:1", "refused", 1799.2)
    wait("http://127.0.0.1:1", "refused", 1795.0)  # a retry 4 s later: not said again
    wait("http://127.0.0.1:2", "not-ready", 60.0)
    wait("http://admin:S3cretPass@127.0.0.1:3", "refused", 10.0)  # a password in the URL is never printed
    lines = out.getvalue().splitlines()
    assert "S3cretPass" not in out.getvalue() and "http://***@127.0.0.1:3" in lines[-1]
    assert lines[:2] == [
        "[repro] waiting for http://127.0.0.1:1: nothing is listening there yet (connection refused); 0:29:59 left "
        "(--ready-timeout), Ctrl-C stops the run",
        "[repro] waiting for http://127.0.0.1:2: it answers but is not ready yet (still loading?); 0:01:00 left "
        "(--ready-timeout), Ctrl-C stops the run",
    ]


@pytest.mark.slow
def test_an_endpoint_where_nothing_listens_is_said_at_once() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    argv = [sys.executable, "-c", "from repro.cli import main; main()", "run", "offline", "--recipe", "demo"]
    argv += ["--endpoint", url, "--ready-timeout", "8"]
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    said_at = None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if said_at is None and line.startswith(f"[repro] waiting for {url}"):
            said_at = time.monotonic() - start
    proc.wait(timeout=60)
    err = "".join(lines)
    assert proc.returncode == 1 or proc.returncode == 2, err
    assert said_at is not None, err
    took = time.monotonic() - start
    assert said_at < took - 5, (said_at, took)  # said seconds before the 8 s wait ended, not at its end
    wait = next(line for line in lines if line.startswith("[repro] waiting"))
    assert "connection refused" in wait and "left (--ready-timeout)" in wait and "Ctrl-C" in wait
    assert f"{url} did not become ready within 8 s" in err
    assert "Next: repro run\n" not in err  # no command that would only wait again the same way
