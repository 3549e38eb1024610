"""Small crashes (issue 36 item 9): inputs that ended in "repro hit a bug" (exit 3) are one-line errors with exit 2,
a closed pipe is a quiet exit, a newline in a folder name never prints a line of its own, and a huge power.csv is
read to a bound (its first MAX_POWER_BYTES, said so) instead of for minutes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import assert_one_error, cli_process, one_line_error

from repro.run.power import MAX_POWER_BYTES, read_power
from repro.ui.safe import CLOSED_PIPE_EXIT

GB200 = "azure-nd-gb200-v6-v5.1"
CLI = [sys.executable, "-c", "from repro.cli import main; main()"]

BAD_OPTIONS = [
    ("run", "server", "--target-qps", "nan"),
    ("run", "server", "--target-qps", "inf"),
    ("run", "server", "--target-qps", "-3"),
    ("run", "offline", "--target-qps", "1e300"),
    ("run", "interactive", "--target-qps", "NaN"),
    ("tune", "server", "--max-minutes", "nan"),
    ("tune", "server", "--max-minutes", "1e400"),
    ("tune", "server", "--margin", "nan"),
    ("tune", "server", "--start-qps", "nan"),
    ("tune", "server", "--start-qps", "inf"),
    ("tune", "server", "--probe-seconds", "inf"),
    ("tune", "server", "--probe-seconds", "nan"),
    ("tune", "server", "--probe-queries", "0"),
    ("tune", "server", "--probe-queries", "99999999999999999999"),
    ("tune", "interactive", "--margin", "-0.5"),
]


@pytest.mark.parametrize("args", BAD_OPTIONS, ids=[" ".join(a) for a in BAD_OPTIONS])
def test_odd_option_values_are_one_line_errors_with_exit_2(args: tuple[str, ...]) -> None:
    proc = cli_process(*args, "--recipe", "demo", "--dry-run")
    err = one_line_error(proc, 2)
    assert "hit a bug" not in err
    assert_one_error(err)
    assert args[2] in err, err  # the error names the option


def test_tune_server_dry_run_says_what_it_would_search() -> None:
    proc = cli_process("tune", "server", "--recipe", "demo", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "would search Server target QPS for demo" in proc.stdout
    assert "probes of 2 s / 662 queries" in proc.stdout


@pytest.mark.parametrize("command", [("status",), ("published",), ("verify", "RUN"), ("report", "RUN")])
def test_a_closed_pipe_is_a_quiet_exit(fixtures: Path, tmp_path: Path, command: tuple[str, ...]) -> None:
    """`repro status | head -1`: the reader leaves after one line; repro stops without a bug report."""
    args = [str(fixtures / GB200) if a == "RUN" else a for a in command]
    env = {**os.environ, "COLUMNS": "200", "REPRO_HOME": str(tmp_path / "ws")}
    # a pipe whose reader is gone before repro writes: every write fails with EPIPE, as after `head -1` exits
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.run([*CLI, *args], stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    os.close(write)
    assert proc.returncode == CLOSED_PIPE_EXIT, proc.stderr
    assert proc.stderr == "", proc.stderr


def test_head_one_of_status_exits_quietly(tmp_path: Path) -> None:
    env = {**os.environ, "REPRO_HOME": str(tmp_path / "ws")}
    cmd = f"{' '.join(CLI[:2])} 'from repro.cli import main; main()' status | head -1"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.startswith("Workspace "), proc.stdout
    assert "hit a bug" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, CLOSED_PIPE_EXIT), proc.stderr


def test_a_newline_in_a_folder_name_never_prints_a_line_of_its_own(fixtures: Path, tmp_path: Path) -> None:
    evil = tmp_path / "evil\nInjected: PASS"
    shutil.copytree(fixtures / GB200, evil)
    for command in (("verify",), ("report",), ("explain",)):
        proc = cli_process(*command, str(evil))
        out = proc.stdout + proc.stderr
        assert proc.returncode in (0, 1), out[-2000:]
        lines = out.splitlines()
        assert not any(line.lstrip(" │[]0123456789").startswith("Injected: PASS") for line in lines), out
        assert "evil\\x0aInjected: PASS" in out, out
    nxt = [line for line in cli_process("verify", str(evil)).stdout.splitlines() if line.startswith("Next: ")]
    if nxt:  # the command still names the real folder: bash's $'...' quoting keeps the newline
        assert "$'" in nxt[0] and "\\x0a" in nxt[0], nxt
        argv = subprocess.run(
            ["bash", "-c", "printf '%s\\0' " + nxt[0].removeprefix("Next: repro ")], capture_output=True, text=True
        ).stdout.split("\0")
        assert str(evil) in argv, argv


def test_a_huge_power_csv_is_read_to_a_bound_and_says_so(tmp_path: Path) -> None:
    with (tmp_path / "power.csv").open("wb") as fh:
        fh.write(b"time_s,gpu_index,watts\n")
        second = 0
        while fh.tell() < MAX_POWER_BYTES * 2:
            fh.write("".join(f"{second + i},{g},{300 + i % 50}.0\n" for i in range(20_000) for g in range(8)).encode())
            second += 20_000
    start = time.monotonic()
    summary = read_power(tmp_path)
    took = time.monotonic() - start
    assert summary is not None and summary.file_bytes == (tmp_path / "power.csv").stat().st_size
    assert summary.note is not None and "only its first 16 MiB" in summary.note
    assert summary.gpus == 8 and 300 <= summary.mean_watts_per_gpu <= 350
    assert summary.to_json()["read_first_bytes_of"] == summary.file_bytes
    assert took < 30, took  # a 1 GB file took 3 minutes read whole; the bound keeps any size to seconds


def test_a_small_power_csv_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "power.csv").write_text("time_s,gpu_index,watts\n0,0,100\n1,0,200\n")
    summary = read_power(tmp_path)
    assert summary is not None and summary.file_bytes is None and summary.note is None
    assert summary.mean_watts_total == pytest.approx(150.0)
