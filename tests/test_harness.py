"""The LoadGen harness end to end: real mlperf_loadgen runs driven by the sim and hf backends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import write_prepared
from typer.testing import CliRunner

from repro.cli import app
from repro.core.errors import InputError, Interrupted, StepFailed
from repro.core.ledger import Ledger
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.results.logs import parse_run
from repro.run.backends.sim import SimBackend
from repro.run.harness import run_benchmark
from repro.run.options import RunHooks, RunOptions
from repro.run.settings import expected_samples, loadgen_settings, user_conf_text
from repro.setup.dataset import load_prepared, save_prepared

RECIPE = "nd-h100-v5"


def _prepare(ws: Workspace, n: int = 96, seed: int = 0) -> Path:
    return write_prepared(ws.preprocessed / get_recipe(RECIPE).dataset.name, n, name="mlperf-openorca", seed=seed)


@pytest.fixture
def ws() -> Workspace:
    return Workspace.open().ensure()


def _only_run(ws: Workspace, recipe: str = RECIPE, scenario: str = "Offline") -> Path:
    runs = sorted((ws.runs / recipe / scenario).iterdir())
    assert len(runs) == 1
    return runs[0]


def test_prepared_dataset_roundtrip_and_damage(ws: Workspace) -> None:
    folder = _prepare(ws, n=10)
    data = load_prepared(folder)
    assert len(data) == 10 and data.sha256
    assert data.prompt(3).tolist() == np.load(folder / "input_ids.npy")[data.offsets[3] : data.offsets[4]].tolist()
    with pytest.raises(InputError, match="does not match"):
        load_prepared(folder, expected_sha256="0" * 64)
    ids = folder / "input_lens.npy"
    ids.write_bytes(ids.read_bytes()[:-4] + b"\x00\x00\x00\x07")
    with pytest.raises(InputError, match="checksum mismatch"):
        load_prepared(folder)
    (folder / "output_lens.npy").unlink()
    with pytest.raises(InputError, match="missing"):
        load_prepared(folder, verify=False)
    with pytest.raises(InputError, match="zero samples"):
        save_prepared(ws.preprocessed / "empty", "empty", [], [])


def test_settings_and_user_conf_for_smoke_runs() -> None:
    recipe = get_recipe(RECIPE)
    full = loadgen_settings(recipe, "Offline")
    assert full["min_duration"] == 2400000 and full["target_qps"] == 80 and "max_query_count" not in full
    smoke = loadgen_settings(recipe, "Offline", samples=100)
    assert smoke["min_query_count"] == smoke["max_query_count"] == 100 and smoke["min_duration"] == 0
    assert expected_samples(smoke, "Offline") == 100
    timed = loadgen_settings(recipe, "Server", duration_s=3)
    assert timed["min_duration"] == timed["max_duration"] == 3000 and timed["tpot_latency"] == 200
    assert "llama2-70b.Server.max_duration = 3000" in user_conf_text(timed, "Server", get_recipe("nd-h100-v5").bench)


def test_sim_offline_run_writes_logs_and_provenance(ws: Workspace) -> None:
    folder = _prepare(ws)
    outcome = run_benchmark(
        RunOptions.build(RECIPE, ws, backend="sim", samples=96, detect=False, argv=["repro", "run", "offline"])
    )
    run_dir = Path(outcome.details["log_dir"])
    assert Path(outcome.details["run_dir"]) == _only_run(ws) and run_dir == _only_run(ws) / "performance" / "run_1"
    assert _only_run(ws).parent.name == "Offline" and _only_run(ws).parent.parent.name == RECIPE
    info = json.loads((run_dir / "run.json").read_text())
    assert info["label"] == "simulated" and info["status"] == "complete" and info["incomplete"] is False
    assert info["dataset_sha256"] == load_prepared(folder).sha256
    assert info["recipe_hash"] == get_recipe(RECIPE).hash() and info["command"] == ["repro", "run", "offline"]
    assert info["loadgen_version"] and info["backend"] == "sim" and info["model_path"] is None
    assert "llama2-70b.Offline.max_query_count = 96" in (run_dir / "user.conf").read_text()
    run = parse_run(run_dir)
    assert run.scenario == "Offline" and run.mode == "PerformanceOnly" and run.label == "simulated"
    assert run.tokens_per_s and run.tokens_per_s > 0 and run.valid
    olens = np.load(folder / "output_lens.npy")
    sent = info["measured_by_harness"]
    assert sent["samples"] == 96 and sent["tokens"] == int(np.minimum(olens, 1024).sum())
    assert run.tokens_per_s == pytest.approx(run.samples_per_s * sent["tokens"] / sent["samples"], rel=1e-3)
    assert Ledger.load(ws.ledger_path).get("run-offline").status == "done"


def test_sim_server_run_reports_token_latencies(ws: Workspace) -> None:
    _prepare(ws, n=40)
    outcome = run_benchmark(
        RunOptions.build(RECIPE, ws, scenario="Server", backend="sim", samples=40, detect=False, sim_rate=2_000_000)
    )
    run = parse_run(Path(outcome.details["log_dir"]))
    assert run.scenario == "Server" and run.label == "simulated"
    assert run.ttft_ns["p99"] > 0 and run.tpot_ns["p99"] > 0
    assert (
        json.loads((Path(outcome.details["log_dir"]) / "run.json").read_text())["measured_by_harness"]["samples"] == 40
    )


def _detail_keys(run_dir: Path) -> dict[str, object]:
    """LoadGen's own record of the settings it ran with, from mlperf_log_detail.txt (one :::MLLOG JSON per line)."""
    out: dict[str, object] = {}
    for line in (run_dir / "mlperf_log_detail.txt").read_text().splitlines():
        if line.startswith(":::MLLOG "):
            doc = json.loads(line[len(":::MLLOG ") :])
            out[doc["key"]] = doc["value"]
    return out


def test_server_latency_limits_reach_loadgen_in_its_units(ws: Workspace) -> None:
    """The recipe's 2,000 ms TTFT / 200 ms TPOT must read 2e9 / 2e8 ns in LoadGen's detail log (issue 12 item 5)."""
    _prepare(ws, n=16)
    recipe = get_recipe(RECIPE)
    outcome = run_benchmark(
        RunOptions.build(RECIPE, ws, scenario="Server", backend="sim", samples=16, detect=False, sim_rate=2_000_000)
    )
    keys = _detail_keys(Path(outcome.details["log_dir"]))
    assert keys["requested_server_ttft_latency"] == recipe.bench.rules("Server").ttft_ms * 1_000_000 == 2_000_000_000
    assert keys["requested_server_tpot_latency"] == recipe.bench.rules("Server").tpot_ms * 1_000_000 == 200_000_000
    assert keys["requested_use_token_latencies"] is True or keys["requested_use_token_latencies"] == 1


_LONE_LOADGEN = """
import json, sys
import mlperf_loadgen as lg
ts = lg.TestSettings()
ts.scenario = lg.TestScenario.Server
assert ts.FromConfig(sys.argv[1], "llama2-70b", "Server") == 0
print(json.dumps({k: getattr(ts, k) for k in sys.argv[2:]}))
"""
# detail log key -> TestSettings attribute; the seeds and token-latency keys come only from LoadGen's mlperf.conf
_FROM_MLPERF_CONF = {
    "requested_qsl_rng_seed": "qsl_rng_seed",
    "requested_sample_index_rng_seed": "sample_index_rng_seed",
    "requested_schedule_rng_seed": "schedule_rng_seed",
    "requested_performance_sample_count_override": "performance_sample_count_override",
    "requested_use_token_latencies": "use_token_latencies",
    "requested_server_ttft_latency": "ttft_latency",
    "requested_server_tpot_latency": "tpot_latency",
    "requested_server_target_qps": "server_target_qps",
}


@pytest.mark.xfail(
    strict=True,
    reason="LoadGen 6.0.17 loads mlperf.conf only on a process's first FromConfig; the separate conf_type 0/2 loads "
    "that avoid it crashed LoadGen on an Interactive run, so later runs in one process still skip mlperf.conf",
)
def test_second_loadgen_run_in_one_process_is_a_lone_run(ws: Workspace) -> None:
    """Tune probes and the rehearsal run LoadGen several times in one process: each later run's detail log must
    carry no error_invalid_config ("Multiple conf files are used") and the settings LoadGen's own FromConfig gives
    in a fresh process, mlperf.conf's seeds included."""
    _prepare(ws, n=16)
    logs = []
    for _ in range(2):
        out = run_benchmark(
            RunOptions.build(RECIPE, ws, scenario="Server", backend="sim", samples=16, detect=False, sim_rate=2_000_000)
        )
        logs.append(Path(out.details["log_dir"]))
    assert logs[0] != logs[1]
    for log in logs:
        assert "error_invalid_config" not in (log / "mlperf_log_detail.txt").read_text()
    lone = subprocess.run(
        [sys.executable, "-c", _LONE_LOADGEN, str(logs[1] / "user.conf"), *_FROM_MLPERF_CONF.values()],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    expected = json.loads(lone.stdout)
    assert expected["qsl_rng_seed"] != 0 and expected["use_token_latencies"] is True
    for log in logs:
        keys = _detail_keys(log)
        assert {k: keys[k] for k in _FROM_MLPERF_CONF} == {k: expected[a] for k, a in _FROM_MLPERF_CONF.items()}


def test_backend_dying_mid_run_keeps_partial_logs(ws: Workspace) -> None:
    _prepare(ws)

    def factory(name, ctx):
        return SimBackend(ctx.dataset.output_lens, fail_after=30)

    with pytest.raises(StepFailed, match="failed mid-run") as err:
        run_benchmark(
            RunOptions.build(RECIPE, ws, backend="sim", samples=96, detect=False), RunHooks(backend_factory=factory)
        )
    run_dir = _only_run(ws) / "performance" / "run_1"
    assert str(run_dir) in err.value.message
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "failed" and info["incomplete"] is True and "simulated backend failure" in info["error"]
    assert (run_dir / "mlperf_log_summary.txt").exists() and (run_dir / "mlperf_log_detail.txt").exists()
    assert info["measured_by_harness"]["samples"] == 96
    assert Ledger.load(ws.ledger_path).get("run-offline").status == "failed"


def test_ctrl_c_stops_loadgen_cleanly(ws: Workspace) -> None:
    _prepare(ws)

    def interrupt_soon(sut) -> None:
        def fire() -> None:
            while sut.samples_done < 5:
                threading.Event().wait(0.01)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=fire, daemon=True).start()

    with pytest.raises(Interrupted) as err:
        run_benchmark(
            RunOptions.build(RECIPE, ws, backend="sim", samples=96, detect=False, sim_rate=2000),
            RunHooks(on_started=interrupt_soon),
        )
    assert err.value.exit_code == 130
    run_dir = _only_run(ws) / "performance" / "run_1"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "interrupted" and info["incomplete"] is True
    summary = (run_dir / "mlperf_log_summary.txt").read_text()
    assert "Result is : VALID" not in summary and "Run interrupted by SIGINT" in summary
    assert 5 <= info["measured_by_harness"]["samples"] <= 96
    assert parse_run(run_dir).incomplete is True
    assert Ledger.load(ws.ledger_path).get("run-offline").status == "interrupted"


def test_missing_dataset_fails_with_run_folder(ws: Workspace) -> None:
    with pytest.raises(InputError, match="no prepared dataset") as err:
        run_benchmark(RunOptions.build(RECIPE, ws, backend="sim", samples=8, detect=False))
    info = json.loads((_only_run(ws) / "performance" / "run_1" / "run.json").read_text())
    assert info["status"] == "failed" and "no prepared dataset" in info["error"]
    assert "repro setup" in err.value.next_command


def test_model_folder_without_weights(ws: Workspace) -> None:
    _prepare(ws, n=8)
    model = ws.models / "empty-model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    with pytest.raises(InputError, match="no weights"):
        run_benchmark(RunOptions.build(RECIPE, ws, backend="hf", samples=8, detect=False, model_dir=model))
    assert json.loads((_only_run(ws) / "performance" / "run_1" / "run.json").read_text())["status"] == "failed"


def test_cli_bad_input_is_one_line(ws: Workspace) -> None:
    result = CliRunner().invoke(app, ["run", "offline", "--recipe", RECIPE, "--backend", "sim", "--samples", "0"])
    assert result.exit_code == 2 and "zero samples" in result.output and "Traceback" not in result.output
    assert not (ws.runs / RECIPE).exists()
    result = CliRunner().invoke(app, ["run", "offline", "--recipe", RECIPE, "--backend", "nope"])
    assert result.exit_code == 2 and "Unknown backend" in result.output


def test_cli_dry_run_changes_nothing(ws: Workspace) -> None:
    result = CliRunner().invoke(
        app, ["run", "offline", "--recipe", RECIPE, "--backend", "sim", "--duration", "30", "--dry-run", "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["status"] == "dry-run" and doc["details"]["label"] == "simulated"
    assert "llama2-70b.Offline.min_duration = 30000" in doc["details"]["user_conf"]
    assert not ws.runs.exists() or not any(ws.runs.iterdir())


def test_cli_demo_default_runs_real_loadgen_on_cpu(ws: Workspace) -> None:
    result = CliRunner().invoke(app, ["run", "offline", "--recipe", "demo", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    run_dir = Path(doc["details"]["log_dir"])
    assert doc["details"]["label"] == "demo" and doc["details"]["backend"] == "numpy"
    assert (ws.models / "tiny-llama" / "model.safetensors").exists()
    run = parse_run(run_dir)
    assert run.label == "demo" and run.tokens_per_s > 0
    assert doc["verdict"]["status"] == "NOT A REPRODUCTION"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["model_path"].endswith("tiny-llama") and info["status"] == "complete"
    assert info["provenance"]["cpu"]["logical_cpus"] >= 1
    checks = {c["name"]: c for c in doc["verdict"]["checks"]}
    assert checks["accelerator"]["ok"] is True and "ran on the CPU" in checks["accelerator"]["detail"], checks
    assert not any("unknown" in c["detail"] or "assumed" in c["detail"] for c in checks.values()), checks


def test_demo_accuracy_mode_writes_accuracy_txt(ws: Workspace) -> None:
    outcome = run_benchmark(RunOptions.build("demo", ws, accuracy=True, detect=False))
    run_dir = Path(outcome.details["log_dir"])
    assert run_dir == Path(outcome.details["run_dir"]) / "accuracy" and outcome.details["paired_with"] is None
    assert '"effective_test_mode", "value": "AccuracyOnly"' in (run_dir / "mlperf_log_detail.txt").read_text()
    assert json.loads((run_dir / "run.json").read_text())["label"] == "demo"
    log = json.loads((run_dir / "mlperf_log_accuracy.json").read_text())
    assert sorted({e["qsl_idx"] for e in log}) == list(range(64))
    scores = outcome.details["accuracy"]
    assert scores["gen_num"] == 64 and "'gen_num': 64" in (run_dir / "accuracy.txt").read_text()
    assert scores["gen_tok_len"] == sum(len(bytes.fromhex(e["data"])) // 4 for e in log)


def test_dry_run_prints_each_server_its_gpus_and_the_readiness_wait() -> None:
    """GB300: 4 servers x 1 GPU; H100 (TP2): 4 servers x 2 GPUs; each with its container, port and command."""
    runner = CliRunner()
    for recipe, gpus in (
        ("nd-gb300-v6", [["0"], ["1"], ["2"], ["3"]]),
        ("nd-h100-v5", [["0", "1"], ["2", "3"], ["4", "5"], ["6", "7"]]),
    ):
        res = runner.invoke(app, ["run", "offline", "--recipe", recipe, "--dry-run", "--json"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)["details"]
        assert [s["gpus"] for s in doc["servers"]] == gpus
        assert [s["port"] for s in doc["servers"]] == [30000, 30001, 30002, 30003]
        assert all(s["command"][:3] == ["exec", "--", "trtllm-serve"] for s in doc["servers"])
        assert doc["readiness"]["timeout_s"] >= 1800 and doc["keep_servers"] is False
        text = runner.invoke(app, ["run", "offline", "--recipe", recipe, "--dry-run"]).output
        assert f"server 3: container repro-serve-{recipe}-3" in " ".join(text.split()) and "readiness:" in text


def test_endpoint_is_validated_and_skips_the_lifecycle() -> None:
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "run",
            "offline",
            "--recipe",
            RECIPE,
            "--endpoint",
            "http://10.0.0.5:8000",
            "--endpoint",
            "http://10.0.0.6:8000",
            "--dry-run",
            "--json",
        ],
    )
    doc = json.loads(res.stdout)["details"]
    assert doc["endpoints"] == ["http://10.0.0.5:8000", "http://10.0.0.6:8000"] and doc["servers"] == []
    res = runner.invoke(app, ["run", "offline", "--recipe", RECIPE, "--endpoint", "http://x:1", "--backend", "sim"])
    assert res.exit_code == 2 and "cannot be combined with --backend sim" in res.output


def test_endpoint_accuracy_run_logs_real_token_ids(ws: Workspace, tmp_path: Path) -> None:
    """`--endpoint` against a running server (the stand-in): AccuracyOnly writes the re-tokenized ids, never zeros."""
    from standin_util import LocalStandin, prompts, write_tokenizer

    recipe = get_recipe("nd-gb300-v6")
    tok = write_tokenizer(ws.models / recipe.model.repo_id.split("/")[-1])
    ps = prompts(12)
    write_prepared(
        ws.preprocessed / recipe.dataset.name, name="x", prompts=ps, out_len=10, outputs="w{p[0]} w{p[1]}", source=""
    )
    with LocalStandin(tok) as srv:
        srv.wait_bound()
        res = CliRunner().invoke(
            app, ["run", "offline", "--recipe", recipe.name, "--endpoint", srv.url, "--accuracy", "--json"]
        )
    assert res.exit_code == 0, res.output
    run_dir = Path(json.loads(res.stdout)["details"]["log_dir"])
    logged = json.loads((run_dir / "mlperf_log_accuracy.json").read_text())
    ids = [np.frombuffer(bytes.fromhex(e["data"]), dtype=np.int32) for e in logged]
    assert len(ids) == 12 and all(len(a) and (a >= 3).all() for a in ids)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["backend_details"]["endpoints"] == [srv.url] and "servers" not in info
    assert info["backend_stats"]["tokens"]["ids_from_tokenizer"] == 12
    assert (run_dir / "accuracy.txt").exists()
