"""Issue 25 items 9, 13, 14, 15: words, numbers and defaults a user meets outside the main flow."""

from __future__ import annotations

import os
import socket
import subprocess

from helpers import CLI
from typer.testing import CliRunner

from repro.cli import app
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.engine.container import _stage_context, image_spec_for
from repro.flow.doctor import check_hf, check_server_ports
from repro.run.servers import ServerOptions, plan_servers

runner = CliRunner()


# --- item 14: servers listen on this VM only unless asked; doctor sees a port open to the network -----------------


def test_servers_bind_loopback_unless_listen_says_otherwise():
    recipe, ws = get_recipe("nd-gb200-v6"), Workspace.open()
    for plan in plan_servers(recipe, ws, ServerOptions(gpus=False)):
        assert plan.argv[plan.argv.index("--host") + 1] == "127.0.0.1"
    for plan in plan_servers(recipe, ws, ServerOptions(gpus=False, listen="0.0.0.0")):
        assert plan.argv[plan.argv.index("--host") + 1] == "0.0.0.0"


def test_run_dry_run_shows_the_listen_address_and_refuses_a_name():
    res = runner.invoke(app, ["run", "offline", "--recipe", "nd-gb200-v6", "--dry-run", "--listen", "0.0.0.0"])
    assert "--host 0.0.0.0" in res.output, res.output
    default = runner.invoke(app, ["run", "offline", "--recipe", "nd-gb200-v6", "--dry-run"])
    assert "--host 127.0.0.1" in default.output and "0.0.0.0" not in default.output
    bad = subprocess.run(
        [*CLI, "run", "offline", "--recipe", "nd-gb200-v6", "--listen", "everywhere"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "not an IP address" in bad.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_doctor_warns_when_a_server_port_is_reachable_from_outside():
    port = _free_port()
    with socket.socket() as wide:
        wide.bind(("0.0.0.0", port))
        wide.listen()
        check = check_server_ports(None, [port])
    assert check.level == "WARN" and f"{port} on 0.0.0.0" in check.detail and "--listen 127.0.0.1" in check.fix
    port = _free_port()
    with socket.socket() as local:
        local.bind(("127.0.0.1", port))
        local.listen()
        check = check_server_ports(None, [port])
    assert check.level == "PASS" and str(port) in check.detail


# --- item 13: the dry run's docker build runs as printed ---------------------------------------------------------


def test_build_dry_run_stages_the_same_context_as_the_build(tmp_path):
    res = runner.invoke(app, ["build-engine", "--recipe", "nd-gb200-v6", "--dry-run"])
    assert res.exit_code == 0 and "<context>" not in res.output
    lines = res.output.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('ctx="$(mktemp -d)"'))
    build = next(i for i, ln in enumerate(lines) if ln.startswith("docker build "))
    script = (
        "\n".join(lines[start:build])
        + '\nfind "$ctx" -path "*__pycache__*" -prune -o -print | sed "s|^$ctx||" | sort\n'
    )
    printed = subprocess.run(["bash", "-ec", script], capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    staged = tmp_path / "ctx"
    staged.mkdir()
    _stage_context(image_spec_for(get_recipe("nd-gb200-v6")), staged)
    expected = sorted(
        {"", *("/" + str(p.relative_to(staged)) for p in staged.rglob("*") if "__pycache__" not in p.parts)}
    )
    assert printed.stdout.splitlines() == expected
    assert lines[build].endswith('"$ctx"')


# --- item 9: doctor without a recipe; item 15: help words --------------------------------------------------------


def test_doctor_without_a_recipe_does_not_say_the_model_is_built_locally():
    (check,) = check_hf(None)
    assert "built locally" not in check.detail and "no recipe" in check.detail


def test_help_shows_words_a_user_types_and_whole_summaries():
    top = subprocess.run(
        [*CLI, "--help"], capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "80"}
    )
    assert "..." not in top.stdout.split("Commands:")[1]
    assert "Offline, Server, Interactive" in " ".join(top.stdout.split())
    pub = subprocess.run([*CLI, "published", "--help"], capture_output=True, text=True, timeout=60)
    assert "--round ROUND " in pub.stdout and "ROUND_" not in pub.stdout
    ver = subprocess.run([*CLI, "verify", "--help"], capture_output=True, text=True, timeout=60)
    assert "Usage: repro verify [OPTIONS] RESULT_DIR" in ver.stdout and "{" not in ver.stdout.splitlines()[0]


def test_a_mistyped_recipe_gets_did_you_mean():
    for typo, meant in (("nd-gb300", "nd-gb300-v6"), ("demoo", "demo")):
        res = subprocess.run([*CLI, "status", "--recipe", typo], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and f"Did you mean '{meant}'?" in res.stderr
        assert f"Next: repro recipes show {meant}" in res.stderr


def test_setup_dry_run_that_would_run_out_of_disk_exits_1_and_units_agree_with_doctor(tmp_path):
    import json

    import yaml

    from repro.core.recipes import recipes_dir

    raw = yaml.safe_load((recipes_dir() / "nd-gb200-v6.yaml").read_text())
    raw["name"], raw["disk_needed_gb"] = "huge-disk", 10**9
    path = tmp_path / "huge-disk.yaml"
    path.write_text(yaml.safe_dump(raw))
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "1"}
    setup = subprocess.run(
        [*CLI, "setup", "--recipe", str(path), "--dry-run", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert setup.returncode == 1, setup.stderr
    free_setup = json.loads(setup.stdout)["details"]["free_bytes"] / 1e9
    doctor = subprocess.run(
        [*CLI, "doctor", "--recipe", str(path), "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    disk = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "disk")
    free_doctor = float(disk["detail"].split(" GB free")[0].replace(",", ""))
    # GB against GiB would differ by 7.4%; 2% (at least 0.5 GB) leaves room for files other processes write meanwhile
    assert abs(free_doctor - free_setup) <= max(0.5, 0.02 * free_setup), (free_doctor, free_setup)
    assert "10^9 bytes" in disk["detail"]


def test_run_offline_help_groups_its_options():
    out = subprocess.run([*CLI, "run", "offline", "--help"], capture_output=True, text=True, timeout=60).stdout
    sections = [line for line in out.splitlines() if line.endswith("options:")]
    assert sections == ["Run options:", "Server options:", "Rack (--launcher slurm) options:", "Output options:"]
    assert out.index("--listen ADDRESS") > out.index("Server options:") > out.index("--duration SECONDS")
    assert "SERVER_IMAGE" not in out and "READY_TIMEOUT" not in out
