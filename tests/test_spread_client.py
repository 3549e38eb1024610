"""The client spread over processes (run/backends/spread.py, issue 46 item 6), through real LoadGen and real
stand-in trtllm-serve processes over HTTP: each worker takes its share of the servers, the run's counts and verdict
are one run's, a server that dies fails the run naming it, and no worker outlives the run."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers import cli_process
from standin_util import LocalStandin, standin_ws

from repro.core.errors import StepFailed
from repro.core.recipes import get_recipe
from repro.run.backends.spread import split_endpoints
from repro.run.backends.trtllm import CLIENT_TOKENS_PER_PROCESS_S, client_processes
from repro.run.harness import run_benchmark
from repro.run.options import RunOptions
from repro.run.servers import ServerOptions

RECIPE = "nd-h100-v5"


def _workers_of(tag: str) -> list[str]:
    """Processes still alive whose environment carries `tag` (a run's spawned client workers inherit it), but for
    multiprocessing's resource tracker: one per parent process, which ends with it."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            env = (proc / "environ").read_bytes()
        except OSError:
            continue
        cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        if tag.encode() in env and "multiprocessing.resource_tracker" not in cmd:
            out.append(f"{proc.name}: {cmd[:160]}")
    return out


def test_the_servers_are_shared_out_so_the_round_robin_visits_each_in_turn() -> None:
    urls = [f"http://h:{p}" for p in range(5)]
    assert split_endpoints(urls, 2) == [urls[0::2], urls[1::2]]
    assert split_endpoints(urls, 9) == [[u] for u in urls]  # never more workers than servers
    assert split_endpoints(urls, 1) == [urls]


def test_the_process_count_follows_the_recipes_rate_the_servers_and_the_cores() -> None:
    """--client-processes wins (at most one per server); else the recipe's expected tokens/s over the per-process
    rate, at most one per server and one fewer than the host's cores."""
    recipe = get_recipe("nd-gb300-v6")
    expected = recipe.loadgen.offline_expected_qps * recipe.bench.accuracy.tokens_per_sample.reference
    need = -(-expected // CLIENT_TOKENS_PER_PROCESS_S)
    assert need >= 2  # a GB300 VM streams more than one process reads
    assert client_processes(recipe, 64, cores=128)[0] == need
    assert client_processes(recipe, 64, cores=2)[0] == 1  # LoadGen's process keeps the other core
    assert client_processes(recipe, 1, cores=128)[0] == 1
    n, why = client_processes(recipe, 4, override=8)
    assert n == 4 and why.startswith("--client-processes")


def test_dry_run_shows_the_client_processes(tmp_path: Path) -> None:
    res = cli_process(
        *["run", "server", "--recipe", RECIPE, "--endpoint", "http://127.0.0.1:9", "--endpoint", "http://127.0.0.1:10"],
        *["--client-processes", "2", "--dry-run", "-w", str(tmp_path / "ws")],
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "client processes: 2 (--client-processes)" in res.stdout, res.stdout


def test_client_processes_is_refused_for_a_slurm_submission(tmp_path: Path) -> None:
    res = cli_process(
        *["run", "server", "--recipe", "nd-gb300-v6", "--launcher", "slurm", "--nodes", "2"],
        *["--client-processes", "4", "--dry-run", "-w", str(tmp_path / "ws")],
    )
    assert res.returncode == 2 and "--client-processes sizes the client of a run on this VM" in res.stderr


def test_a_streamed_run_over_two_client_processes_is_one_valid_run(tmp_path: Path, monkeypatch) -> None:
    """Server at 100 q/s (500 queries: LoadGen's early stopping needs 459 to call a p99 met) against two
    stand-ins, the client in two processes: LoadGen's VALID, every sample answered and counted once (the workers'
    token counts merged), each server sent its share, streamed (TTFT well under the answer), and no worker left once
    the run returns."""
    tag = f"REPRO_SPREAD_TEST_{os.getpid()}_{time.monotonic_ns()}"
    ws, tok = standin_ws(tmp_path / "ws", RECIPE)
    env = {"STANDIN_TOKENS_PER_S": "100", "STANDIN_OUT_LEN": "20", "STANDIN_LOG_REQUESTS": "1"}
    with (
        LocalStandin(tok, env=env, log=tmp_path / "a.log") as a,
        LocalStandin(tok, env=env, log=tmp_path / "b.log") as b,
    ):
        a.wait_bound()
        b.wait_bound()
        monkeypatch.setenv(tag, "1")  # the workers inherit it; the stand-ins started without it
        out = run_benchmark(
            RunOptions.build(
                RECIPE,
                ws,
                scenario="Server",
                endpoints=[a.url, b.url],
                servers=ServerOptions(client_processes=2),
                target_qps=100.0,
                settings_override={"min_duration": 2000, "min_query_count": 500},
                detect=False,
            )
        )
        assert _workers_of(tag) == []
    log_dir = Path(out.details["log_dir"])
    info = json.loads((log_dir / "run.json").read_text())
    assert info["backend_details"]["client_processes"] == 2
    assert info["backend_details"]["endpoints"] == [a.url, b.url] and info["backend_details"]["stream"] is True
    stats = info["backend_stats"]
    assert stats["spread"] == {"processes": 2, "answered": 2, "endpoints_per_process": [1, 1]}
    summary = (log_dir / "mlperf_log_summary.txt").read_text()
    assert "Result is : VALID" in summary, summary
    issued = info["measured_by_harness"]["samples"]
    assert stats["tokens"]["samples"] == issued >= 500
    assert stats["tokens"]["loadgen_tokens"] == info["measured_by_harness"]["tokens"]
    sent = [sum(1 for line in (tmp_path / f).read_text().splitlines() if "stream" in line) for f in ("a.log", "b.log")]
    assert abs(sent[0] - sent[1]) <= 2 and sum(sent) >= issued, sent
    ttft = int(summary.split("50.00 percentile first token latency (ns)")[1].split(":")[1].split()[0])
    latency = int(summary.split("50.00 percentile latency (ns)")[1].split(":")[1].split()[0])
    assert ttft < latency / 2, (ttft, latency)  # 10 ms of 210 on a quiet machine


def test_a_server_that_dies_mid_run_fails_it_naming_the_server(tmp_path: Path, monkeypatch) -> None:
    """One of two stand-ins exits after 30 answers (its 10 warm-up queries and 20 of the run): the worker that
    reads it reports the broken connection, the run fails (exit 1) naming that server's URL, and both workers are
    gone."""
    tag = f"REPRO_SPREAD_TEST_{os.getpid()}_{time.monotonic_ns()}"
    ws, tok = standin_ws(tmp_path / "ws", RECIPE)
    env = {"STANDIN_TOKENS_PER_S": "200", "STANDIN_OUT_LEN": "12"}
    with (
        LocalStandin(tok, env=env) as good,
        LocalStandin(tok, env={**env, "STANDIN_CRASH": "after:30"}) as bad,
    ):
        good.wait_bound()
        bad.wait_bound()
        monkeypatch.setenv(tag, "1")
        with pytest.raises(StepFailed) as err:
            run_benchmark(
                RunOptions.build(
                    RECIPE,
                    ws,
                    scenario="Server",
                    endpoints=[good.url, bad.url],
                    servers=ServerOptions(client_processes=2, stall_timeout_s=5),
                    target_qps=20.0,
                    settings_override={"min_duration": 3000, "min_query_count": 60},
                    detect=False,
                )
            )
        assert bad.url in err.value.message and good.url not in err.value.message, err.value.message
        assert _workers_of(tag) == []


def test_ctrl_c_ends_the_run_and_every_client_process(tmp_path: Path) -> None:
    """`repro run server --client-processes 2`, Ctrl-C at the terminal (SIGINT to the whole process group, workers
    included) once LoadGen has started: the run ends as interrupted (exit 130) and no worker is left."""
    import signal
    import subprocess

    from helpers import CLI

    tag = f"REPRO_SPREAD_TEST_{os.getpid()}_{time.monotonic_ns()}"
    ws, tok = standin_ws(tmp_path / "ws", RECIPE)
    env = {"STANDIN_TOKENS_PER_S": "100", "STANDIN_OUT_LEN": "20"}
    with LocalStandin(tok, env=env) as a, LocalStandin(tok, env=env) as b:
        a.wait_bound()
        b.wait_bound()
        proc = subprocess.Popen(
            [*CLI, "run", "server", "--recipe", RECIPE, "--endpoint", a.url, "--endpoint", b.url, "-w", str(ws.root)]
            + ["--client-processes", "2", "--target-qps", "20", "--duration", "60"],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            env={**os.environ, tag: "1"},
        )
        assert proc.stderr is not None
        for line in proc.stderr:
            if "LoadGen Server: started" in line:
                break
        time.sleep(1.0)
        assert len(_workers_of(tag)) == 3  # the run's process and its two workers
        os.killpg(proc.pid, signal.SIGINT)
        rest = proc.stderr.read()
        assert proc.wait(60) == 130, rest[-2000:]
    assert _workers_of(tag) == []
