"""Issue 25 items 1-7: every `Next:` line is one pasteable command, and the ledger tells the truth about the flow."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import CLI, run_in_pty
from typer.testing import CliRunner

from repro.cli import app
from repro.core.hints import is_command, split_hint
from repro.core.ledger import Artifact, Ledger
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace

runner = CliRunner()


def _next_lines(text: str) -> list[str]:
    return [line.removeprefix("Next: ") for line in text.splitlines() if line.startswith("Next: ")]


def _ledger_with_run(ws: Workspace, run_dir: Path, recipe: str) -> None:
    ws.ensure()
    led = Ledger.load(ws.ledger_path)
    summary = next(run_dir.rglob("mlperf_log_summary.txt"))
    for step in ("setup", "build-engine"):
        led.start(step, get_recipe(recipe).hash(), recipe=recipe, recipe_hash=get_recipe(recipe).hash())
        led.finish(step)
    led.start("run-offline", get_recipe(recipe).hash(), recipe=recipe, run_dir=str(run_dir))
    led.finish("run-offline", [Artifact.of(summary)], run_dir=str(run_dir))
    led.facts["recipe"] = recipe
    led.save()


# --- item 2: one command, no backticks, no prose, no placeholders -------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "prose", "command"),
    [
        ("`repro status`", None, "repro status"),
        ("`repro setup` again", None, "repro setup"),
        ("check the path, then `repro verify` again", "check the path, then repro verify again", None),
        ("`repro verify /r --gpus N --against REF`", "repro verify /r --gpus N --against REF", None),
        ("repro verify <run folder> --recipe demo", "repro verify <run folder> --recipe demo", None),
        (
            "pick one with `--recipe NAME` (see `repro recipes list`)",
            "pick one with --recipe NAME (see repro recipes list)",
            "repro recipes list",
        ),
        (
            "fix the FAIL rows, then `repro doctor --recipe demo`",
            "fix the FAIL rows, then repro doctor --recipe demo",
            "repro doctor --recipe demo",
        ),
    ],
)
def test_a_hint_splits_into_prose_and_at_most_one_pasteable_command(hint, prose, command):
    got = split_hint(hint)
    assert (got.prose, got.command) == (prose, command)
    assert got.command is None or is_command(got.command)


def test_error_and_status_json_give_next_command_the_same_shape(tmp_path):
    err = runner.invoke(app, ["verify", str(tmp_path / "nothing"), "--json"])
    status = runner.invoke(app, ["status", "--recipe", "demo", "--json"])
    edoc, sdoc = json.loads(err.stdout)["error"], json.loads(status.stdout)
    for doc in (edoc, sdoc):
        assert {"hint", "next_command"} <= set(doc)
        assert doc["next_command"] is None or ("`" not in doc["next_command"] and is_command(doc["next_command"]))
    assert edoc["next_command"] == "repro status" and sdoc["next_command"] == "repro setup --recipe demo"


def test_the_error_line_holds_the_prose_and_next_holds_only_the_command(tmp_path):
    proc = subprocess.run([*CLI, "verify", str(tmp_path / "gone")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and "Check the path" in lines[0]
    assert _next_lines(proc.stderr) == ["repro status"] and "`" not in proc.stderr


# --- item 1: verify records itself; status -> verify -> status ends ----------------------------------------------


def test_verify_of_the_workspace_run_is_recorded_and_status_moves_to_the_report(tmp_path, fixtures):
    ws = Workspace.open()
    run_dir = ws.runs / "nd-gb200-v6" / "Offline" / "20260101-000000"
    shutil.copytree(fixtures / "azure-nd-gb200-v6-v5.1", run_dir)
    _ledger_with_run(ws, run_dir, "nd-gb200-v6")
    before = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert before["next_command"] == shlex.join(["repro", "verify", str(run_dir), "--recipe", "nd-gb200-v6"])

    verified = runner.invoke(app, shlex.split(before["next_command"])[1:])
    assert verified.exit_code in (0, 1), verified.output
    report = shlex.join(["repro", "report", str(run_dir), "--html", "report.html", "--recipe", "nd-gb200-v6"])
    assert _next_lines(verified.stdout) == [report]

    after = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert {s["step"]: s["state"] for s in after["steps"]}["verify"] == "done"
    assert after["next_command"] == report  # verify and status name the same command, word for word
    assert Ledger.load(ws.ledger_path).steps["verify"].details["verdict"] in ("PASS", "FAIL")


def test_verifying_some_other_folder_leaves_the_ledger_alone(fixtures):
    ws = Workspace.open()
    ws.ensure()
    runner.invoke(app, ["verify", str(fixtures / "azure-nd-gb200-v6-v5.1"), "--recipe", "nd-gb200-v6"])
    assert "verify" not in Ledger.load(ws.ledger_path).steps


# --- item 5: no GPU and no recipe; flags kept --------------------------------------------------------------------


def test_status_in_an_empty_folder_without_a_gpu_offers_the_demo_and_keeps_the_workspace(tmp_path):
    other = tmp_path / "elsewhere"
    res = runner.invoke(app, ["status", "--workspace", str(other), "--json"])
    doc = json.loads(res.stdout)
    assert doc["recipe"] is None
    assert doc["next_command"] == shlex.join(["repro", "run", "offline", "--recipe", "demo", "--workspace", str(other)])
    human = runner.invoke(app, ["status", "--workspace", str(other)])
    assert "repro setup" not in human.output and "CPU demo" in human.output


def test_status_keeps_workspace_and_recipe_in_every_step_command(tmp_path):
    other = tmp_path / "my ws"
    doc = json.loads(runner.invoke(app, ["status", "-w", str(other), "--recipe", "demo", "--json"]).stdout)
    assert shlex.split(doc["next_command"]) == ["repro", "setup", "--recipe", "demo", "--workspace", str(other)]


# --- items 3 and 7: accuracy is its own step; other runs are shown -----------------------------------------------


def test_status_shows_server_runs_and_an_interrupted_one():
    ws = Workspace.open()
    ws.ensure()
    led = Ledger.load(ws.ledger_path)
    led.start("run-server", "h", recipe="demo", run_dir=str(ws.runs / "x"))
    led.fail("run-server", "interrupted by the user (Ctrl-C, SIGINT)", signal="SIGINT")
    led.start("run-offline-accuracy", "h", recipe="demo", run_dir=str(ws.runs / "y"))
    led.finish("run-offline-accuracy")
    doc = json.loads(runner.invoke(app, ["status", "--recipe", "demo", "--json"]).stdout)
    others = {s["step"]: s["state"] for s in doc["other_runs"]}
    assert others == {"run-offline-accuracy": "done", "run-server": "interrupted"}
    assert {s["step"]: s["state"] for s in doc["steps"]}["run-offline"] == "to do"
    human = runner.invoke(app, ["status", "--recipe", "demo"], env={"COLUMNS": "120"})
    assert "run-server" in human.output and "interrupted" in human.output


@pytest.mark.slow
def test_an_accuracy_run_in_a_fresh_folder_points_at_the_performance_run_not_verify():
    proc = subprocess.run(
        [*CLI, "run", "offline", "--recipe", "demo", "--accuracy", "--backend", "sim"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _next_lines(proc.stdout) == ["repro run offline --recipe demo"]
    led = Ledger.load(Workspace.open().ledger_path)
    assert "run-offline" not in led.steps and led.steps["run-offline-accuracy"].status == "done"
    status = json.loads(subprocess.run([*CLI, "status", "--json"], capture_output=True, text=True).stdout)
    assert status["next_command"] == "repro setup --recipe demo"


# --- item 5: Ctrl-C keeps every flag in the hint -----------------------------------------------------------------


@pytest.mark.slow
def test_ctrl_c_of_a_server_run_hints_the_same_command_with_its_duration():
    argv = ["run", "server", "--recipe", "demo", "--backend", "sim", "--duration", "60", "--sim-rate", "200"]
    proc = subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ledger = Workspace.open().ledger_path
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and '"run-server"' not in (ledger.read_text() if ledger.exists() else ""):
        time.sleep(0.1)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert _next_lines(err) == [shlex.join(["repro", *argv])]


# --- item 6: a Next: line never wraps, even in a narrow terminal --------------------------------------------------


def test_next_line_runs_past_the_edge_of_a_narrow_terminal_instead_of_wrapping(tmp_path):
    deep = tmp_path / ("a-long-folder-name-" * 4) / "workspace"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    argv = [*CLI, "status", "--recipe", "demo", "--workspace", str(deep)]
    text = run_in_pty(argv, {**env, "TERM": "xterm"}, size=(24, 40))
    expected = shlex.join(["repro", "setup", "--recipe", "demo", "--workspace", str(deep)])
    assert len(expected) > 40
    assert f"Next: {expected}\n" in text, text


# --- Done when: the README flow and the guided flow, every Next: pasted into a shell ------------------------------


def _shell_with_repro(tmp_path: Path) -> dict[str, str]:
    """A `repro` on PATH that runs this checkout, so a pasted line runs exactly as a user's shell would run it."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    shim = bindir / "repro"
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c 'from repro.cli import main; main()' \"$@\"\n")
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


def _paste_every_hint(first: str, env: dict[str, str], cwd: Path) -> list[str]:
    """Paste each Next: line into bash, then the Next: lines those print, until no new one appears."""
    queue, seen = _next_lines(first), []
    while queue and len(seen) < 15:
        line = queue.pop(0)
        if line in seen:
            continue
        seen.append(line)
        assert "`" not in line and is_command(line), f"not one pasteable command: {line!r}"
        proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
        assert proc.returncode in (0, 1), f"`{line}` exited {proc.returncode}: {proc.stderr[-1500:]}"
        assert "Traceback" not in proc.stderr and "Usage:" not in proc.stderr, line
        queue += _next_lines(proc.stdout + proc.stderr)
    return seen


def _all_done(env: dict[str, str], cwd: Path) -> dict:
    doc = json.loads(
        subprocess.run(["repro", "status", "--json"], capture_output=True, text=True, env=env, cwd=cwd).stdout
    )
    assert {s["state"] for s in doc["steps"]} <= {"done", "not needed"}, doc["steps"]
    return doc


@pytest.mark.slow
def test_the_readme_flow_pasting_every_next_line_ends_with_every_step_done(tmp_path):
    env = _shell_with_repro(tmp_path)
    first = subprocess.run(
        ["bash", "-c", "repro run offline --recipe demo"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert first.returncode == 0, first.stderr[-2000:]
    status = subprocess.run(["bash", "-c", "repro status"], capture_output=True, text=True, env=env, cwd=tmp_path)
    pasted = _paste_every_hint(first.stdout + first.stderr + status.stdout, env, tmp_path)
    # one story (issue #37): the verdict the run printed counts as verify, so no hint asks to verify it again
    assert any(p.startswith("repro report ") for p in pasted), pasted
    assert not any(p.startswith("repro verify ") for p in pasted), pasted
    doc = _all_done(env, tmp_path)
    assert doc["next_command"].startswith("repro report ") and (tmp_path / "report.html").is_file()


@pytest.mark.slow
def test_the_guided_flow_pasting_every_next_line_ends_with_every_step_done(tmp_path):
    env = _shell_with_repro(tmp_path)
    guided = subprocess.run(
        ["bash", "-c", "repro --recipe demo --yes"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )
    assert guided.returncode == 0, guided.stderr[-2000:]
    pasted = _paste_every_hint(guided.stdout + guided.stderr, env, tmp_path)
    assert pasted and pasted[0].startswith("repro report ")
    _all_done(env, tmp_path)


# --- item 4: verify --against takes the count plain verify takes, and its hint keeps the ID ------------------------


def test_verify_against_assumes_the_recipe_count_and_its_hint_keeps_the_id(tmp_path, fixtures):
    src = fixtures / "azure-nd-gb200-v6-v5.1" / "llama2-70b-99" / "Offline" / "performance" / "run_1"
    bare = tmp_path / "bare" / "performance" / "run_1"
    shutil.copytree(src, bare)
    summary = bare / "mlperf_log_summary.txt"  # another figure, so the run is not recognised as the published one
    summary.write_text(summary.read_text().replace("Tokens per second: 52061.6", "Tokens per second: 50000.0"))
    res = runner.invoke(app, ["verify", str(bare.parent.parent), "--against", "5.1-0008", "--json"])
    err = json.loads(res.stdout)["error"]
    assert res.exit_code == 2 and "no run.json" in err["message"]
    assert "--against 5.1-0008" in err["message"] and err["next_command"] == "repro verify --help"

    (bare / "run.json").write_text(json.dumps({"recipe": "nd-gb200-v6", "gpus": []}))
    res = runner.invoke(app, ["verify", str(bare.parent.parent), "--against", "5.1-0008", "--json"])
    doc = json.loads(res.stdout)
    assert doc["run"]["accelerators"] == 4 and doc["run"]["accelerators_source"] == "recipe nd-gb200-v6"
    assert any("assumed 4 from recipe nd-gb200-v6" in n for n in doc["run"]["notes"])


# --- item 20: verify of an interrupted run says so once and judges nothing else -----------------------------------


def test_verify_of_an_interrupted_run_says_so_once_and_hints_the_same_run(tmp_path, fixtures):
    src = fixtures / "azure-nd-gb200-v6-v5.1" / "llama2-70b-99" / "Offline" / "performance" / "run_1"
    run = tmp_path / "stopped" / "performance" / "run_1"
    shutil.copytree(src, run)
    argv = ["repro", "run", "offline", "--recipe", "nd-gb200-v6", "--duration", "60"]
    info = {"recipe": "nd-gb200-v6", "status": "interrupted", "signal": "SIGINT", "incomplete": True, "command": argv}
    (run / "run.json").write_text(json.dumps(info))
    res = runner.invoke(app, ["verify", str(run.parent.parent), "--recipe", "nd-gb200-v6"])
    assert res.exit_code == 1
    assert res.stdout.count("was stopped by SIGINT") == 1 and "ERRORS" not in res.stdout and "┃" not in res.stdout
    assert _next_lines(res.stdout) == [shlex.join(argv)]
    doc = json.loads(runner.invoke(app, ["verify", str(run.parent.parent), "--recipe", "nd-gb200-v6", "--json"]).stdout)
    assert doc["interrupted"] is True and len(doc["reasons"]) == 1 and doc["next_command"] == shlex.join(argv)
