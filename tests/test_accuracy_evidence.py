"""No evidence, no PASS: a result without its accuracy run is one MLPerf's submission checker rejects, so no path
that prints a verdict (verify, verify --against, the series, report, aggregate) PASSes it. Each test takes a real
published bundle (Azure ND GB200 v6, MLPerf v5.1, which PASSes with its accuracy/ folder) and removes that folder.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from golden_util import render
from helpers import add_accuracy, cli_process, copy_bundle
from typer.testing import CliRunner

from repro.cli import app
from repro.commands.run import RunView
from repro.core.recipes import get_recipe
from repro.core.steps import StepOutcome
from repro.core.workspace import Workspace
from repro.flow.guide import DEFAULT_STEPS, run_guide
from repro.results.aggregate import aggregate
from repro.results.compare import verify_against
from repro.results.series import verify_series
from repro.results.verify import verify_dir

runner = CliRunner()
GB200 = "azure-nd-gb200-v6-v5.1"
SCENARIO = "llama2-70b-99/Offline"
PERF = f"{SCENARIO}/performance/run_1"


def _without_accuracy(fixtures: Path, tmp_path: Path) -> Path:
    bundle = copy_bundle(fixtures, GB200, tmp_path / "gb200")
    assert verify_dir(bundle).status == "PASS"  # the guard: with its accuracy run the copy PASSes
    shutil.rmtree(bundle / SCENARIO / "accuracy")
    return bundle


def test_a_published_bundle_without_its_accuracy_folder_is_not_a_pass(fixtures: Path, tmp_path: Path) -> None:
    bundle = _without_accuracy(fixtures, tmp_path)
    v = verify_dir(bundle)
    expected = bundle / SCENARIO / "accuracy" / "accuracy.txt"
    # everything else holds: inside the band, +0.0% of its published record, valid, long enough
    assert v.deviation_pct == pytest.approx(0.0) and not [c for c in v.checks if c.ok is False and c.fails]
    assert v.status == "NOT A REPRODUCTION" and v.exit_code == 1 and v.to_json()["reproduction"] is False
    assert v.reasons == [
        f"no accuracy run: {expected} is missing (MLPerf's submission checker rejects a result without one); copy "
        "the result's accuracy.txt and mlperf_log_accuracy.json there, then "
        f"`{shlex.join(['repro', 'verify', str(bundle / PERF)])}`"
    ]
    assert v.to_json()["accuracy_verdict"] == "not shown"
    res = runner.invoke(app, ["verify", str(bundle)])
    assert res.exit_code == 1 and "Verdict: NOT A REPRODUCTION" in res.output
    # Next is never the verify just run (#44 item 7): the prose says what to copy, Next names the published record
    assert "Next: repro verify" not in res.output and "Next: repro published show 5.1-0008/99/Offline" in res.output
    assert "Copy the result's accuracy.txt and mlperf_log_accuracy.json into" in res.output


def test_verify_against_a_published_result_says_the_same(fixtures: Path, tmp_path: Path) -> None:
    bundle = _without_accuracy(fixtures, tmp_path)
    result = verify_against(bundle, ["5.1-0008"])
    assert result.status == "NOT A REPRODUCTION" and result.exit_code == 1
    assert any(r.startswith("no accuracy run: ") for r in result.reasons), result.reasons
    res = runner.invoke(app, ["verify", str(bundle), "--against", "5.1-0008", "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["status"] == "NOT A REPRODUCTION"
    ok = runner.invoke(app, ["verify", str(fixtures / GB200), "--against", "5.1-0008", "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["status"] == "PASS"


def test_report_and_aggregate_exit_as_verify_does(fixtures: Path, tmp_path: Path) -> None:
    bundle = _without_accuracy(fixtures, tmp_path)
    report = cli_process("report", str(bundle), "--json")
    doc = json.loads(report.stdout)
    assert report.returncode == 1 and doc["reproduction"] is False
    assert [r["status"] for r in doc["vms"]] == ["NOT A REPRODUCTION"]
    assert doc["vms"][0]["reasons"][0].startswith("no accuracy run: ")
    assert cli_process("report", str(fixtures / GB200), "--json").returncode == 0  # with it: PASS, exit 0
    rack = aggregate([bundle])
    # its throughput is measured, so it is summed; the rack is still not a PASS
    assert rack.exit_code == 1 and [r.counted for r in rack.rows] == [True]
    assert rack.verdict_line == "not all PASS: NOT A REPRODUCTION: gb200"
    assert aggregate([fixtures / GB200]).exit_code == 0


def test_repeated_runs_without_accuracy_are_not_a_pass(fixtures: Path, tmp_path: Path) -> None:
    runs = [_without_accuracy(fixtures, tmp_path / str(i)) for i in range(2)]
    assert verify_series(runs).status == "NOT A REPRODUCTION"


def test_our_own_run_is_told_the_accuracy_run_that_pairs_with_it(fixtures: Path, tmp_path: Path) -> None:
    """repro's own run folder (run.json): the reason and the `Next:` line name the `repro run ... --accuracy --into`
    that writes RUN_DIR/accuracy/, with the performance run's own servers and workspace."""
    bundle = _without_accuracy(fixtures, tmp_path)
    run_dir = bundle / SCENARIO
    command = ["repro", "run", "offline", "--recipe", "nd-gb200-v6", "--endpoint", "http://10.0.0.4:8000"]
    record = {
        "recipe": "nd-gb200-v6",
        "recipe_hash": get_recipe("nd-gb200-v6").hash(),
        "backend": "trtllm",
        "scenario": "Offline",
        "status": "complete",
        "command": command,
    }
    (run_dir / "performance" / "run_1" / "run.json").write_text(json.dumps(record))
    v = verify_dir(run_dir)
    want = shlex.join(
        ["repro", "run", "offline", "--accuracy", "--into", str(run_dir), "--recipe", "nd-gb200-v6"]
        + ["--endpoint", "http://10.0.0.4:8000"]
    )
    assert v.status == "NOT A REPRODUCTION" and v.accuracy_command == want
    assert v.reasons[-1].endswith(f"`{want}` writes it") and str(run_dir / "accuracy" / "accuracy.txt") in v.reasons[-1]
    res = runner.invoke(app, ["verify", str(run_dir), "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["accuracy_run_command"] == want and doc["next_command"] == want
    done = StepOutcome(step="run-offline", status="done", summary="", details={"run_dir": str(run_dir)})
    assert RunView(done, v).next_command == want  # the run's own verdict names the same next step
    planned = runner.invoke(app, [*shlex.split(want)[1:], "--dry-run"])  # the command is one `repro run` takes
    assert planned.exit_code == 0 and "AccuracyOnly" in planned.output, planned.output
    assert f"paired with the performance run in {run_dir / 'performance' / 'run_1'}" in planned.output
    add_accuracy(fixtures, run_dir / "performance" / "run_1")  # what that run writes: then it PASSes
    assert verify_dir(run_dir).status == "PASS"


def test_a_labelled_run_keeps_its_one_reason(fixtures: Path, tmp_path: Path) -> None:
    """A demo is never a reproduction whatever its evidence: its verdict and Next line are as they were."""
    bundle = _without_accuracy(fixtures, tmp_path)
    v = verify_dir(bundle, recipe="demo")
    assert v.status == "NOT A REPRODUCTION" and v.reasons == [
        "demo run: it rehearses the flow and is never a reproduction"
    ]
    assert v.accuracy_command is None


def test_a_demo_verdict_has_no_row_against_a_published_system_it_has_not(fixtures: Path, tmp_path: Path) -> None:
    """The demo's own run is no published result: no 'system, not compared' row about a published system."""
    vm = copy_bundle(fixtures, "azure-nd-gb300-v6-rack", tmp_path / "rack") / "ND_GB300_v6_1"  # in no index
    demo = verify_dir(vm, recipe="demo")
    assert not [c for c in demo.checks if c.name.startswith("system")] and demo.system == []
    assert "published system does not state" not in render(demo) and "system, not compared" not in render(demo)
    gb300 = verify_dir(vm)  # a recipe whose published result the index does not hold: said in one row
    rows = [c.detail for c in gb300.checks if c.name.startswith("system")]
    assert rows == ["the shipped index holds no published system for recipe nd-gb300-v6's result"]


@pytest.mark.slow
def test_the_demo_run_ends_as_before(tmp_path: Path) -> None:
    """The real demo run (about 20 s here): NOT A REPRODUCTION for being a demo alone, no row against a published
    system it does not have, and `Next:` the report, as before the accuracy rule."""
    run = cli_process("run", "offline", "--recipe", "demo", "--json", timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]  # the run succeeded; its verdict says what it is
    doc = json.loads(run.stdout)
    verdict = doc["verdict"]
    assert verdict["status"] == "NOT A REPRODUCTION" and verdict["accuracy_run_command"] is None
    assert verdict["reasons"][0] == "demo run: it rehearses the flow and is never a reproduction"
    assert not [r for r in verdict["reasons"] if r.startswith("no accuracy run")]
    assert not [c for c in verdict["checks"] if c["name"].startswith("system")] and verdict["system_diff"] == []
    assert doc["next_command"].startswith("repro report ")


def test_the_guided_flow_ends_naming_the_accuracy_run(fixtures: Path, tmp_path: Path) -> None:
    """`repro` alone (the guided flow) through its real verify step: a run that lacks only its accuracy run ends
    with exit 1 and `Next:` the command that writes it, as verify's and the run's own Next lines do."""
    recipe = get_recipe("nd-gb200-v6")
    bundle = _without_accuracy(fixtures, tmp_path)
    run_dir = bundle / SCENARIO
    record = {"recipe": recipe.name, "recipe_hash": recipe.hash(), "backend": "trtllm", "command": ["repro"]}
    (run_dir / "performance" / "run_1" / "run.json").write_text(json.dumps(record))

    def done(step: str, **details: str):  # type: ignore[no-untyped-def]
        return lambda *_: StepOutcome(step=step, status="done", summary="stand-in", details=details)

    steps = {
        "setup": done("setup"),
        "build-engine": done("build-engine"),
        "run-offline": done("run-offline", run_dir=str(run_dir)),
        "verify": DEFAULT_STEPS["verify"],
    }
    healthy = SimpleNamespace(exit_code=0, verdict="PASS", failed=[])
    result = run_guide(recipe, "test", Workspace.open(tmp_path / "ws"), yes=True, steps=steps, doctor=lambda: healthy)
    want = shlex.join(["repro", "run", "offline", "--accuracy", "--into", str(run_dir), "--recipe", recipe.name])
    assert result.exit_code == 1 and result.next_command == want
