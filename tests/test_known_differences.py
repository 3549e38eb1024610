"""verify and explain name every known difference between a run's stack and the published one (the recipe's own
list, the TensorRT-LLM release, the engine layout per scenario, the GPU boost slider, LoadGen), and a Server run on
another engine than the published one is never called a reproduction.

The run folders are the real published Azure logs (tests/fixtures/published) with the run.json repro writes beside
them; the boost slider is read from real processes on PATH (a missing nvidia-smi, one that refuses, hangs or
floods). No sample of `nvidia-smi boost-slider -l` could be read for this code, so the table one test prints is
invented and says so: the reader claims a value only where a header names its Current column."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import cli, cli_process, write_prepared

from repro.core.recipes import get_recipe
from repro.core.record import RunRecord
from repro.results.stack import engine_check, run_engine_layout, stack_differences
from repro.results.verify import verify_dir
from repro.run.host_state import parse_boost_slider, read_boost_slider

R405 = "azure-nd-gb200-v6-v5.1-llama3.1-405b"
GB300 = "azure-nd-gb300-v6-rack"


def _server_run(fixtures: Path, tmp_path: Path, **record: Any) -> Path:
    """Azure's published 405B Server logs as the folder of a repro run that wrote this run.json."""
    dst = tmp_path / "run"
    shutil.copytree(fixtures / R405 / "llama3.1-405b" / "Server", dst)
    doc = {
        "recipe": "nd-gb200-v6-405b",
        "scenario": "Server",
        "mode": "PerformanceOnly",
        "status": "complete",
        "gpus": {"count": 4, "names": ["NVIDIA GB200"] * 4},
        "loadgen_version": "6.0.17",
        **record,
    }
    (dst / "performance" / "run_1" / "run.json").write_text(json.dumps(doc))
    return dst


OFFLINE_ENGINE = {"max_tokens": 2000, "tp_size": 2, "pp_size": 2, "max_num_tokens": 1536, "gpu_batch_size": 2048}
SERVER_ENGINE = {
    "max_tokens": 2000,
    "tp_size": 4,
    "pp_size": 1,
    "max_num_tokens": 2048,
    "engine": {"tp_size": 4, "pp_size": 1, "max_num_tokens": 2048, "gpu_batch_size": 2048, "scenario": "Server"},
}


def test_a_server_run_on_the_offline_engine_is_not_a_reproduction(fixtures: Path, tmp_path: Path) -> None:
    """The serving block an older repro recorded for its Server run (the Offline TP2xPP2 engine)."""
    v = verify_dir(_server_run(fixtures, tmp_path, serving=OFFLINE_ENGINE), recipe="nd-gb200-v6-405b")
    assert v.status == "NOT A REPRODUCTION"
    assert v.reasons[0].startswith("engine TP2xPP2, max_num_tokens 1,536 is not the published Server engine TP4xPP1")
    assert "never a reproduction" in v.reasons[0]
    assert v.engine is not None and v.engine.state == "differs"
    row = next(c for c in v.checks if c.name == "engine")
    assert row.ok is False and "Server/llama3_1-405b.py" in row.detail
    doc = v.to_json()
    assert doc["engine"]["state"] == "differs" and doc["reproduction"] is False
    keys = [d["key"] for d in doc["known_differences"]]
    assert keys[:3] == ["engine", "TensorRT-LLM", "LoadGen"] and "serving stack" in keys and "base image" in keys


def test_a_server_run_on_the_published_engine_says_so(fixtures: Path, tmp_path: Path) -> None:
    v = verify_dir(_server_run(fixtures, tmp_path, serving=SERVER_ENGINE), recipe="nd-gb200-v6-405b")
    row = next(c for c in v.checks if c.name == "engine")
    assert row.ok is True and "engine TP4xPP1, max_num_tokens 2,048, as the published Server engine" in row.detail
    assert not any("engine" in r for r in v.reasons)
    assert "engine" not in [d.key for d in v.differences]
    # the stack still differs, and verify says how (the CLI prints the list)
    res = cli("verify", str(tmp_path / "run"), "--recipe", "nd-gb200-v6-405b")
    assert "known differences from the published run" in res.output
    assert "serving stack: trtllm-serve over HTTP" in res.output and "in-process executor" in res.output
    assert "TensorRT-LLM: 1.0.0" in res.output and "1.0-mlpinf branch 270a6b24" in res.output
    assert "LoadGen: 6.0.17; published: 5.0.25" in res.output


def test_a_run_that_records_no_engine_is_compared_with_nothing_and_says_so(fixtures: Path, tmp_path: Path) -> None:
    """Servers the user started (--endpoint): the engine is not known, which the row says; it does not judge."""
    v = verify_dir(_server_run(fixtures, tmp_path, serving={"max_tokens": 2000}), recipe="nd-gb200-v6-405b")
    row = next(c for c in v.checks if c.name == "engine")
    assert row.ok is None and "records no engine layout" in row.detail and "TP4xPP1" in row.detail
    assert v.engine is not None and v.engine.state == "not recorded"


def test_a_published_bundle_is_not_held_to_repros_stack(fixtures: Path) -> None:
    """Someone else's logs (no run.json) are what they are: no engine row, no differences."""
    v = verify_dir(fixtures / R405 / "llama3.1-405b" / "Server", recipe="nd-gb200-v6-405b")
    assert v.engine is None and v.differences == [] and not any(c.name == "engine" for c in v.checks)


def test_explain_names_the_known_differences(fixtures: Path, tmp_path: Path) -> None:
    _server_run(fixtures, tmp_path, serving=OFFLINE_ENGINE)
    res = cli("explain", str(tmp_path / "run"), "--recipe", "nd-gb200-v6-405b", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    stack = {d["key"]: d for d in doc["diffs"] if d["area"] == "stack"}
    assert stack["engine"]["yours"] == "TP2xPP2, max_num_tokens 1,536" and stack["engine"]["effect"] == "moves"
    assert stack["engine"]["reference"] == "TP4xPP1, max_num_tokens 2,048"
    assert "in-process executor" in stack["serving stack"]["reference"]
    assert {"TensorRT-LLM", "base image"} <= set(stack) and "warm-up" not in stack  # repro warms up as NVIDIA does
    assert doc["causes"][0]["title"].startswith("stack: engine is TP2xPP2")


def test_recipe_side_differences_without_a_run() -> None:
    """What each recipe would run differs from the published stack in these ways, before any run."""
    r405 = get_recipe("nd-gb200-v6-405b")
    keys = [d.key for d in stack_differences(r405, "Server")]
    assert "engine" not in keys  # the Server engine is the published one now
    assert keys[0] == "TensorRT-LLM" and {"serving stack", "base image"} <= set(keys)
    gb300 = [d for d in stack_differences(get_recipe("nd-gb300-v6"), "Offline") if d.key == "vboost"]
    assert gb300 and "Offline/llama2-70b.py:50" in gb300[0].source
    assert "repro never sets it" in gb300[0].here
    calib = next(d for d in stack_differences(get_recipe("nd-gb300-v6"), "Offline") if d.key == "calibration set")
    assert "calibration_1000.pkl" in calib.published


def test_engine_layouts_are_read_from_every_run_json_shape() -> None:
    assert run_engine_layout(RunRecord.parse({"serving": SERVER_ENGINE})).text() == "TP4xPP1, max_num_tokens 2,048"
    assert run_engine_layout(RunRecord.parse({"serving": OFFLINE_ENGINE})).text() == "TP2xPP2, max_num_tokens 1,536"
    argv = ["exec", "--", "trtllm-serve", "/e", "--tp_size", "4", "--pp_size", "1", "--max_num_tokens", "2048"]
    old = RunRecord.parse({"servers": {"servers": [{"command": argv}]}})
    assert run_engine_layout(old).text() == "TP4xPP1, max_num_tokens 2,048"
    assert run_engine_layout(RunRecord.parse({"serving": {"max_tokens": 2000}})) is None
    assert run_engine_layout(RunRecord.parse({"serving": {"tp_size": "4", "pp_size": True}})) is None
    assert engine_check(get_recipe("nd-gb200-v6"), "Offline", None).state == "not stated"


# ---------------------------------------------------------------- the boost slider, read and never set


def _fake_smi(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    def put(body: str | None) -> None:
        folder = tmp_path / "bin"
        if body is not None:
            _fake_smi(folder, body)
        else:
            folder.mkdir(exist_ok=True)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}/usr/bin{os.pathsep}/bin")

    return put


def test_no_nvidia_smi_is_unknown(on_path: Any) -> None:
    on_path(None)
    state = read_boost_slider()
    assert state["state"] == "unknown" and state["vboost"] is None and "not found" in state["why"]


def test_a_refusing_nvidia_smi_is_unsupported_with_its_words(on_path: Any) -> None:
    on_path('echo "Boost slider is not supported on this GPU" >&2\nexit 3\n')
    state = read_boost_slider()
    assert state["state"] == "unsupported" and "not supported" in state["why"] and state["vboost"] is None


def test_a_hanging_nvidia_smi_is_bounded_in_time(on_path: Any) -> None:
    on_path("sleep 30\n")
    start = time.monotonic()
    state = read_boost_slider(timeout_s=1.0)
    assert time.monotonic() - start < 5 and state["state"] == "unknown" and "within 1 s" in state["why"]


def test_a_flooding_nvidia_smi_is_bounded_in_bytes(on_path: Any) -> None:
    on_path("yes vboost 1 2 3\n")
    state = read_boost_slider(timeout_s=2.0)
    assert state["vboost"] is None and len(state.get("raw", "")) <= 2000


def test_the_value_is_claimed_only_where_the_output_says_which_number_it_is(on_path: Any) -> None:
    # An invented table (no real sample could be read): a header naming Current, one row per GPU.
    on_path("printf 'GPU  Slider  Current  Max\\n0  vboost  1  4\\n1  vboost  1  4\\n'\n")
    state = read_boost_slider()
    assert state["state"] == "read" and state["vboost"] == 1 and "2 vboost row(s)" in state["why"]
    assert parse_boost_slider("0  vboost  1  4\n")[0] is None  # which of 0, 1, 4? not guessed
    assert parse_boost_slider("vboost 2\n") == (2, "1 vboost row(s) of `nvidia-smi boost-slider -l`")
    assert parse_boost_slider("Current\nvboost 1\nvboost 0\n")[0] is None  # the GPUs differ
    assert "no vboost row" in parse_boost_slider("NVIDIA-SMI 580.82\n")[1]
    assert "\x1b" not in str(parse_boost_slider("\x1b[2Jvboost 1\n"))


def test_a_run_records_the_boost_slider_and_names_the_host_command(tmp_path: Path) -> None:
    """A real (simulated-backend) run of the GB300 recipe, whose published harness set vboost 1, on a host whose
    nvidia-smi refuses: run.json records what the host said, the run warns with the command, verify names it."""
    from repro.core.workspace import Workspace

    home = tmp_path / "repro-home"
    ws = Workspace(home).ensure()
    recipe = get_recipe("nd-gb300-v6")
    write_prepared(ws.preprocessed / recipe.dataset.name, name="x", prompts=[[1, 2, 3]] * 16, out_len=10)
    fake = _fake_smi(tmp_path / "bin", 'echo "Boost slider: Not Supported" >&2\nexit 3\n')
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "REPRO_HOME": str(home)}
    proc = cli_process("run", "offline", "--recipe", recipe.name, "--backend", "sim", "--samples", "8", env=env)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "sudo nvidia-smi boost-slider --vboost 1" in proc.stdout + proc.stderr
    info = json.loads(next(home.rglob("run.json")).read_text())
    assert info["boost_slider"]["state"] == "unsupported" and "Not Supported" in info["boost_slider"]["why"]
    assert any("--vboost 1" in w for w in info["warnings"])
    folder = next(home.rglob("run.json")).parent
    v = verify_dir(folder, recipe=recipe.name)
    vboost = next(d for d in v.differences if d.key == "vboost")
    assert "unsupported" in vboost.here and vboost.published.startswith("vboost 1")


def test_doctor_names_the_command_and_never_sets_it(on_path: Any) -> None:
    from repro.flow.doctor import check_vboost

    on_path("printf 'GPU  Slider  Current  Max\\n0  vboost  0  4\\n'\n")
    row = check_vboost(get_recipe("nd-gb300-v6"))
    assert row.level == "WARN" and "vboost 0" in row.detail and "vboost 1 around the run" in row.detail
    assert row.fix is not None and row.fix.startswith("`sudo nvidia-smi boost-slider --vboost 1` before the run")
    on_path("printf 'GPU  Slider  Current  Max\\n0  vboost  1  4\\n'\n")
    assert check_vboost(get_recipe("nd-gb300-v6")).level == "PASS"
    assert check_vboost(get_recipe("nd-gb200-v6-405b")).level == "SKIP"  # its published configs set none
