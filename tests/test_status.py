"""`repro status`: the ledger as done / stale / failed / to do, and the next command."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from repro.cli import app
from repro.core.ledger import Artifact, Ledger
from repro.core.recipes import get_recipe, recipes_dir
from repro.core.workspace import Workspace
from repro.flow.status import build_status, record_resume

runner = CliRunner()


def _ledger(ws: Workspace) -> Ledger:
    ws.ensure()
    return Ledger.load(ws.ledger_path)


def test_empty_workspace_is_all_to_do_and_next_is_setup():
    res = runner.invoke(app, ["status", "--recipe", "demo", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    states = {s["step"]: s["state"] for s in doc["steps"]}
    assert states == {"setup": "to do", "build-engine": "not needed", "run-offline": "to do", "verify": "to do"}
    assert doc["next_command"] == "repro setup --recipe demo"


def test_done_failed_and_next_command(tmp_path):
    ws = Workspace.open()
    recipe = get_recipe("nd-h100-v5")
    led = _ledger(ws)
    out = ws.models / "weights.bin"
    out.write_bytes(b"x" * 10)
    led.start("setup", recipe.hash(), recipe=recipe.name)
    led.finish("setup", [Artifact.of(out)])
    led.start("build-engine", recipe.hash(), recipe=recipe.name)
    led.fail("build-engine", "trtllm-build exited 1")
    res = runner.invoke(app, ["status", "--recipe", "nd-h100-v5", "--json"])
    doc = json.loads(res.stdout)
    by = {s["step"]: s for s in doc["steps"]}
    assert by["setup"]["state"] == "done"
    assert by["build-engine"]["state"] == "failed" and "trtllm-build exited 1" in by["build-engine"]["error"]
    assert doc["next_command"] == "repro build-engine --recipe nd-h100-v5"
    human = runner.invoke(app, ["status", "--recipe", "nd-h100-v5"])
    assert "failed" in human.output and "Next: repro build-engine --recipe nd-h100-v5" in human.output


def test_changed_recipe_makes_step_stale(tmp_path):
    raw = yaml.safe_load((recipes_dir() / "demo.yaml").read_text())
    raw["name"] = "mydemo"
    path = tmp_path / "mydemo.yaml"
    path.write_text(yaml.safe_dump(raw))
    from repro.core.recipes import load_recipe_file

    before = load_recipe_file(path)
    ws = Workspace.open()
    led = _ledger(ws)
    led.start("setup", "whatever", recipe="mydemo", recipe_hash=before.hash())
    led.finish("setup")
    assert build_status(ws, Ledger.load(ws.ledger_path), before, "x").states[0].state == "done"
    raw["loadgen"]["max_tokens"] = 64
    path.write_text(yaml.safe_dump(raw))
    res = runner.invoke(app, ["status", "--recipe", str(path), "--json"])
    setup = json.loads(res.stdout)["steps"][0]
    assert setup["state"] == "stale" and "inputs changed" in setup["why"]


def test_missing_output_and_redone_upstream_are_stale():
    ws = Workspace.open()
    recipe = get_recipe("demo")
    led = _ledger(ws)
    f = ws.data / "sample.jsonl"
    f.write_text("{}\n")
    led.start("setup", recipe.hash(), recipe="demo")
    led.finish("setup", [Artifact.of(f)])
    led.start("run-offline", recipe.hash(), recipe="demo", run_dir="/somewhere")
    led.finish("run-offline")
    led.steps["setup"].finished = "9999-01-01T00:00:00+00:00"
    led.save()
    report = build_status(ws, Ledger.load(ws.ledger_path), recipe, "x")
    by = {s.step: s for s in report.states}
    assert by["run-offline"].state == "stale" and "setup was redone" in by["run-offline"].why
    assert report.next_command == "repro run offline --recipe demo"
    f.unlink()
    by = {s.step: s for s in build_status(ws, Ledger.load(ws.ledger_path), recipe, "x").states}
    assert by["setup"].state == "stale" and "missing" in by["setup"].why


def test_recipe_remembered_from_ledger_and_interrupted_shown():
    ws = Workspace.open()
    led = _ledger(ws)
    led.start("setup", get_recipe("demo").hash(), recipe="demo")
    led.fail("setup", "Ctrl-C", interrupted=True)
    doc = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert doc["recipe"] == "demo" and doc["recipe_reason"] == "recorded in the workspace ledger"
    assert doc["steps"][0]["state"] == "interrupted"
    assert doc["next_command"] == "repro setup --recipe demo"


def test_corrupt_ledger_is_kept_aside_and_status_still_answers():
    ws = Workspace.open().ensure()
    ws.ledger_path.write_text('{"schema_version": 2, "steps": ')
    res = runner.invoke(app, ["status", "--recipe", "demo", "--json"])
    assert res.exit_code == 0
    assert "corrupt" in res.stderr
    kept = list(ws.root.glob("ledger.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text() == '{"schema_version": 2, "steps": '
    assert json.loads(res.stdout)["steps"][0]["state"] == "to do"


def test_newer_ledger_is_refused_with_upgrade_hint():
    ws = Workspace.open().ensure()
    ws.ledger_path.write_text(json.dumps({"schema_version": 7, "steps": {}}))
    res = runner.invoke(app, ["status", "--recipe", "demo"])
    assert res.exit_code == 2
    assert "newer repro" in res.output and "pip install -U repro" in res.output and "Traceback" not in res.output
    assert json.loads(ws.ledger_path.read_text())["schema_version"] == 7


def test_status_after_a_run_knows_its_recipe_without_the_flag() -> None:
    """`repro status` right after `repro run offline --recipe demo` resumes from the run, not from `repro setup`."""
    run = runner.invoke(app, ["run", "offline", "--recipe", "demo", "--samples", "8", "--json"])
    assert run.exit_code in (0, 1), run.output
    doc = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert doc["recipe"] == "demo" and doc["recipe_reason"] == "recorded in the workspace ledger"
    # the verdict the run printed is verify's: status moves on to the same report command the run named
    assert doc["next_command"].startswith("repro report ")
    assert doc["next_command"] == json.loads(run.stdout)["next_command"]
    assert [s["state"] for s in doc["steps"] if s["step"] == "verify"] == ["done"]
    assert Ledger.load(Workspace.open().ledger_path).recipe_name() == "demo"


def test_a_server_run_stopped_after_the_main_flow_is_what_status_resumes() -> None:
    """Ctrl-C on a Server run after the Offline run and its verdict: the run said `Next: repro run server ...`, so
    status names that command too, not the Offline run's report (#37 item 3: one story)."""
    ws = Workspace.open()
    led = _ledger(ws)
    recipe = get_recipe("demo")
    led.start("run-offline", recipe.hash(), recipe="demo", run_dir="/runs/offline")
    led.finish("run-offline")
    led.start("verify", recipe.hash(), recipe="demo", recipe_hash=recipe.hash(), run_dir="/runs/offline")
    led.finish("verify", verdict="NOT A REPRODUCTION", exit_code=1)
    before = build_status(ws, Ledger.load(ws.ledger_path), recipe, "x").next_command
    assert before.startswith("repro report /runs/offline")
    led.start("run-server", recipe.hash(), recipe="demo")
    led.fail("run-server", "Ctrl-C", interrupted=True, signal="SIGINT")
    record_resume(ws, "repro run server --recipe demo --target-qps 40")
    report = build_status(ws, Ledger.load(ws.ledger_path), recipe, "x")
    assert [s.state for s in report.other_runs] == ["interrupted"]
    assert report.next_command == "repro run server --recipe demo --target-qps 40"
    # the Offline run made again afterwards: the main flow is newest again, and its report comes next
    led = Ledger.load(ws.ledger_path)
    led.start("run-offline", recipe.hash(), recipe="demo", run_dir="/runs/offline2")
    led.finish("run-offline")
    led.steps["run-offline"].finished = "9999-01-01T00:00:00+00:00"
    led.save()
    assert build_status(ws, Ledger.load(ws.ledger_path), recipe, "x").next_command != report.next_command
