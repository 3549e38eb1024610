"""Issue #29 (items 3-8): a server, a terminal, shared storage and option values can each be hostile.

Every test runs the real CLI in a subprocess (or a real HTTP server on 127.0.0.1, real concurrent processes)
and fails on commit 11be551.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile import cli, one_line_error

# ---- item 7: one line, exit 2, for every bad value at the option edge ----------------------------------------

BAD_OPTIONS = [
    ("--duration", "nan"),
    ("--duration", "inf"),
    ("--duration", "1e308"),
    ("--duration", "-1"),
    ("--ready-timeout", "inf"),
    ("--ready-timeout", "nan"),
    ("--ready-timeout", "0"),
    ("--ready-timeout", "-1"),
    ("--sim-rate", "nan"),
    ("--sim-rate", "0"),
    ("--sim-rate", "-1"),
    ("--endpoint", "http://127.0.0.1:99999"),
    ("--endpoint", "http://127.0.0.1:abc"),
    ("--endpoint", "http://[::1"),
    ("--endpoint", "file:///etc/passwd"),
]


@pytest.mark.parametrize("scenario", ["offline", "server"])
@pytest.mark.parametrize("option,value", BAD_OPTIONS, ids=[f"{o}={v}" for o, v in BAD_OPTIONS])
def test_7_bad_option_value_is_one_line_exit_2(scenario: str, option: str, value: str, tmp_path: Path) -> None:
    proc = cli("run", scenario, "--recipe", "demo", "--workspace", str(tmp_path), "--dry-run", option, value)
    err = one_line_error(proc)
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err
    assert option in err and "Next: " in err
    assert not any(tmp_path.iterdir()), "a refused value wrote into the workspace"


@pytest.mark.parametrize("value", ["1e400", "nan", "0", "-5", "soon"])
def test_7_heartbeat_env_out_of_range(value: str, tmp_path: Path) -> None:
    proc = cli(
        "run",
        "offline",
        "--recipe",
        "demo",
        "--workspace",
        str(tmp_path),
        "--dry-run",
        env={"REPRO_HEARTBEAT_S": value},
    )
    err = one_line_error(proc)
    assert "REPRO_HEARTBEAT_S" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "body,problem",
    [
        (b"time_s,gpu_index,watts\n0,0,100\n1,0,\xff\xfe\n", "not ASCII"),
        (b"time_s,gpu_index,watts\n0,0,100\n1,0," + b"9" * (128 << 10) + b"\n", "longer than"),
        (b"time_s,gpu_index,watts\n0,0,100\n1,0,nan\n", "finite"),
        (b"time_s,gpu_index,watts\n0,0,100\n1,0,inf\n", "finite"),
        (b"time_s,gpu_index,watts\n0,0,1e308\n1,0,1e308\n", "no energy"),
        (b"time_s,gpu_index,watts\n5,0,100\n1,0,100\n", "backwards"),
    ],
    ids=["invalid-utf8", "128KB-field", "nan-watts", "inf-watts", "overflow", "backwards"],
)
def test_7_bad_power_csv_is_an_input_error(body: bytes, problem: str, tmp_path: Path) -> None:
    from repro.core.errors import InputError
    from repro.run.power import read_power

    (tmp_path / "power.csv").write_bytes(body)
    with pytest.raises(InputError) as exc:
        read_power(tmp_path)
    assert str(tmp_path / "power.csv") in exc.value.message and problem in exc.value.message
