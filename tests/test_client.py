"""The HTTP client's side of a GPU run (issue 42 item 4), against the stand-in trtllm-serve run as a process here.

- LoadGen's Server scenario streams: Interactive too (TTFT is the first streamed token, not the whole answer), in
  `repro run interactive` and in `repro tune interactive`'s probes.
- Offline keeps the recipe's client concurrency in flight, unstreamed, against a stall deadline derived from the
  recipe: more in flight than the server answers within the deadline (C > X x tau, C > slots) stalls the run, as the
  405B recipe's 2,048 did against 600 s; the recipe's own concurrency runs.
- `stream_options` is negotiated per server: a 400 naming it drops it, once, for that server.
- NVIDIA's warm-up burst (10 random 90-299-token queries per server) goes before LoadGen starts, labelled, untimed,
  bounded by the stall deadline.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from standin_util import LocalStandin, standin_ws

from repro.core.errors import StepFailed
from repro.core.recipes import Recipe, get_recipe
from repro.core.scenarios import SCENARIOS, scenario_spec
from repro.results.logs import parse_run
from repro.run.backends.trtllm import client_concurrency, client_plan, stall_timeout_s
from repro.run.harness import run_benchmark
from repro.run.options import RunOptions
from repro.run.plan import plan_run
from repro.run.servers import ServerOptions

RECIPE = "nd-h100-v5"


# ------------------------------------------------------------------ LoadGen's Server scenario streams
def test_each_scenario_is_resolved_to_its_loadgen_scenario() -> None:
    assert [(s.name, s.loadgen, s.streams, s.one_query) for s in SCENARIOS] == [
        ("Offline", "Offline", False, True),
        ("Server", "Server", True, False),
        ("Interactive", "Server", True, False),
    ]
    with pytest.raises(Exception, match="Unknown scenario 'Batch'"):
        scenario_spec("Batch")


def test_interactive_streams_so_ttft_is_the_first_token_not_the_answer(tmp_path: Path) -> None:
    """16-token answers at 40 tokens/s: each lasts ~425 ms, its first token comes after ~25 ms. Streamed, LoadGen's
    detail log has a TTFT a small part of the latency; posted unstreamed (the bug), TTFT was the whole latency."""
    ws, tok = standin_ws(tmp_path / "ws", RECIPE)
    env = {"STANDIN_TOKENS_PER_S": "40", "STANDIN_OUT_LEN": "16"}
    with LocalStandin(tok, env=env) as srv:
        srv.wait_bound()
        out = run_benchmark(
            RunOptions.build(
                RECIPE, ws, scenario="Interactive", endpoints=[srv.url], samples=24, target_qps=8.0, detect=False
            )
        )
    log_dir = Path(out.details["log_dir"])
    info = json.loads((log_dir / "run.json").read_text())
    assert info["scenario"] == "Interactive" and info["backend_details"]["stream"] is True
    run = parse_run(log_dir)
    assert run.scenario == "Server" and run.detail_path is not None
    ttft, latency = run.ttft_ns["mean"], run.latency_ns["mean"]
    assert latency > 0.3e9  # the whole answer: 17 ids at 40/s
    assert ttft < latency / 4, (ttft, latency)


def test_tune_interactive_probes_stream(tmp_path: Path) -> None:
    """`repro tune interactive` probes through the same harness: its warm-up and probe stream as the run does."""
    from repro.run.tune import tune
    from repro.run.tune_options import TuneOptions

    ws, tok = standin_ws(tmp_path / "ws", RECIPE)
    env = {"STANDIN_TOKENS_PER_S": "20", "STANDIN_MAX_BATCH": "1", "STANDIN_OUT_LEN": "9"}
    with LocalStandin(tok, env=env) as srv:
        srv.wait_bound()
        time.sleep(0.5)
        with pytest.raises(StepFailed):
            tune(
                TuneOptions.build(
                    get_recipe(RECIPE),
                    ws,
                    scenario="Interactive",
                    endpoints=[srv.url],
                    start_qps=50,
                    probe_s=1,
                    probe_queries=40,
                    max_minutes=0.05,
                    detect=False,
                )
            )
    runs = sorted(ws.tuned.glob(f"{RECIPE}/interactive-search/*/*/**/run.json"))
    assert len(runs) >= 2  # the warm-up and the first probe
    for path in runs:
        info = json.loads(path.read_text())
        assert info["scenario"] == "Interactive" and info["backend_details"]["stream"] is True, path


# ------------------------------------------------------------------ client concurrency and the stall deadline
def with_concurrency(name: str, n: int | None) -> Recipe:
    """A copy of a shipped recipe whose trtllm.client_concurrency is n (what a user's recipe copy says)."""
    recipe = get_recipe(name)
    assert recipe.trtllm is not None
    return recipe.model_copy(update={"trtllm": recipe.trtllm.model_copy(update={"client_concurrency": n})})


def test_the_stall_deadline_is_derived_from_the_recipe() -> None:
    """2 x C x servers / offline_expected_qps x max_tokens / tokens_per_sample, never below 600 s: the 405B recipe's
    256 in flight gives 1,278 s; the Llama-2-70B GB300 recipe (2,048 over 4 servers at 400 q/s) keeps 600 s."""
    r405 = get_recipe("nd-gb200-v6-405b")
    assert client_concurrency(r405) == 256 and stall_timeout_s(r405) == 1278.0
    assert round(2 * 256 * 1 / 1.17 * 2000 / 684.68) == 1278
    # the 405B recipe at its batch size (the old default) would have needed 10,226 s, not 600
    assert stall_timeout_s(with_concurrency("nd-gb200-v6-405b", None)) == 10226.0
    gb300 = get_recipe("nd-gb300-v6")
    assert client_concurrency(gb300) == gb300.trtllm.gpu_batch_size == 2048 and stall_timeout_s(gb300) == 600.0
    assert client_plan(r405, 3600.0)["stall_timeout_s"] == 3600.0
    assert client_plan(r405)["stall_timeout_source"].startswith("derived from the recipe")


def test_the_dry_run_names_the_concurrency_and_the_deadline(tmp_path: Path) -> None:
    from repro.core.workspace import Workspace

    ws = Workspace.open(tmp_path / "ws")
    plan = plan_run(RunOptions.build("nd-gb200-v6-405b", ws, detect=False, dry_run=True))
    client = plan.to_json()["client"]
    assert client["requests_in_flight_per_server"] == 256 and client["stall_timeout_s"] == 1278.0
    assert client["requests_in_flight_source"] == "recipe trtllm.client_concurrency"
    given = plan_run(
        RunOptions.build("nd-gb200-v6-405b", ws, detect=False, servers=ServerOptions(stall_timeout_s=3600))
    )
    assert given.to_json()["client"]["stall_timeout_s"] == 3600.0


def _offline(ws, recipe: Recipe, url: str, stall_s: float) -> Path:
    out = run_benchmark(
        RunOptions.build(
            recipe, ws, endpoints=[url], samples=64, detect=False, servers=ServerOptions(stall_timeout_s=stall_s)
        )
    )
    return Path(out.details["log_dir"])


def test_more_in_flight_than_the_server_answers_within_the_deadline_stalls(tmp_path: Path) -> None:
    """The stand-in answers with 2 slots, 10 ids at 100 tokens/s: 0.1 s each, X = 20 answers/s, unstreamed answers
    sent whole when done. With all 64 samples in flight and a 2 s deadline, about X x 2 = 40 answer in time and the
    rest send no byte for 2 s: the run stops as stalled (C > X x tau and C > slots), as 2,048 did against 600 s on the
    405B server. With the recipe at 4 in flight each waits at most two services (0.2 s) and the run completes."""
    ws, tok = standin_ws(tmp_path / "ws", RECIPE)
    env = {"STANDIN_TOKENS_PER_S": "100", "STANDIN_MAX_BATCH": "2", "STANDIN_OUT_LEN": "9"}
    with LocalStandin(tok, env=env) as srv:
        srv.wait_bound()
        with pytest.raises(StepFailed) as err:
            _offline(ws, with_concurrency(RECIPE, 64), srv.url, 2.0)
        assert "sent nothing for 2 s (stall timeout)" in err.value.message
        log_dir = _offline(ws, with_concurrency(RECIPE, 4), srv.url, 2.0)
    info = json.loads((log_dir / "run.json").read_text())
    assert info["status"] == "complete" and info["measured_by_harness"]["samples"] == 64
    assert info["backend_details"]["max_concurrency_per_endpoint"] == 4
    assert info["backend_details"]["stall_timeout_s"] == 2.0 and info["backend_details"]["stream"] is False


# ------------------------------------------------------------------ stream_options, negotiated per server
@pytest.mark.parametrize("forbid", [False, True])
def test_stream_options_are_negotiated_at_readiness(tmp_path: Path, forbid: bool) -> None:
    """A streamed run asks for the usage event (`stream_options`) so the server's own count is compared with the ids
    LoadGen gets. A release whose request model lacks the field answers 400 naming it (extra="forbid"): the request
    goes again without it, the field is dropped for that server, once, with a warning, and the run streams on
    (counted from the text, as NVIDIA's client counts); no sample fails."""
    ws, tok = standin_ws(tmp_path / "ws", RECIPE)
    env = {"STANDIN_FORBID": "stream_options"} if forbid else {}
    with LocalStandin(tok, env=env, log=tmp_path / "standin.log") as srv:
        srv.wait_bound()
        out = run_benchmark(
            RunOptions.build(
                RECIPE, ws, scenario="Server", endpoints=[srv.url], samples=16, target_qps=20.0, detect=False
            )
        )
    info = json.loads((Path(out.details["log_dir"]) / "run.json").read_text())
    tokens = info["backend_stats"]["tokens"]
    assert info["status"] == "complete" and info["backend_details"]["stream"] is True
    assert info["backend_stats"]["stream_options"] == {srv.url: "refused" if forbid else "sent"}
    assert tokens["ids_from_tokenizer"] == 16 and tokens["loadgen_tokens"] > 0
    if forbid:
        assert "Extra inputs are not permitted" in info["backend_stats"]["request_fallbacks"]["stream_options"]
        assert tokens["samples_without_server_count"] == 16 and tokens["compared_samples"] == 0
        assert any("refused stream_options" in w for w in info["backend_stats"]["warnings"])
    else:
        assert "stream_options" not in info["backend_stats"]["request_fallbacks"]
        assert tokens["compared_samples"] == 16 and tokens["samples_without_server_count"] == 0


# ------------------------------------------------------------------ NVIDIA's warm-up burst
def _requests_seen(log: Path) -> list[dict[str, int | bool]]:
    """The stand-in's own record of the requests it accepted, in order (STANDIN_LOG_REQUESTS=1)."""
    pat = re.compile(r"prompt_tokens=(\d+) ids=(\d+)-(\d+) max_tokens=(\d+) stream=(True|False)")
    out = []
    for m in pat.finditer(log.read_text()):
        out.append(
            {"len": int(m[1]), "lo": int(m[2]), "hi": int(m[3]), "max_tokens": int(m[4]), "stream": m[5] == "True"}
        )
    return out


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_the_warm_up_burst_goes_before_loadgen_and_is_not_counted(
    tmp_path: Path, scenario: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """As NVIDIA's harness: after the readiness probe, 10 queries per server of random ids 1-99 and 90-299 tokens,
    with the run's max_tokens, streamed exactly when the run streams, all before LoadGen's first sample, and none of
    it timed: prefill at 5 ms a prompt token makes the burst last ~1.5 s while the run's own prompts (4-30 tokens)
    answer in ~0.2 s, and LoadGen's longest latency stays far under the burst's time. run.json and the log say it
    was the warm-up; the run's token count holds only the run's samples."""
    from repro.run.backends.warmup import WARMUP_QUERIES

    ws, tok = standin_ws(tmp_path / "ws", RECIPE)
    log = tmp_path / "standin.log"
    max_tokens = get_recipe(RECIPE).loadgen.max_tokens
    env = {"STANDIN_LOG_REQUESTS": "1", "STANDIN_TOKENS_PER_S": "1000", "STANDIN_PREFILL_S_PER_TOKEN": "0.005"}
    with LocalStandin(tok, env=env, log=log) as srv:
        srv.wait_bound()
        rate = {"target_qps": 20.0} if scenario == "Server" else {}
        out = run_benchmark(
            RunOptions.build(RECIPE, ws, scenario=scenario, endpoints=[srv.url], samples=16, detect=False, **rate)
        )
    seen = _requests_seen(log)
    stream = scenario == "Server"
    assert seen[0] == {"len": 3, "lo": 1, "hi": 3, "max_tokens": 10, "stream": False}  # the readiness probe
    burst, run = seen[1 : 1 + WARMUP_QUERIES], seen[1 + WARMUP_QUERIES :]
    assert all(90 <= q["len"] <= 299 and q["lo"] >= 1 and q["hi"] <= 99 for q in burst)
    assert all(q["max_tokens"] == max_tokens and q["stream"] is stream for q in burst)
    assert len({q["len"] for q in burst}) > 1  # random lengths, not one fixed prompt
    assert len(run) == 16 and all(q["len"] <= 30 and q["stream"] is stream for q in run)  # the dataset's prompts
    log_dir = Path(out.details["log_dir"])
    info = json.loads((log_dir / "run.json").read_text())
    warm = info["backend_stats"]["warmup"]
    assert warm["seconds"] > 0.9  # the longest prompt's prefill alone is 299 x 5 ms
    assert parse_run(log_dir).latency_ns["max"] / 1e9 < warm["seconds"] / 2
    assert warm["label"].startswith("warm-up") and "not timed by LoadGen" in warm["label"]
    assert warm["answered"] == WARMUP_QUERIES and warm["servers"] == 1 and warm["stream"] is stream
    assert warm["input_tokens"] == [90, 299] and "warmup.py" in warm["source"]
    assert info["measured_by_harness"]["samples"] == 16
    assert info["backend_stats"]["tokens"]["samples"] == 16  # no warm-up answer in the run's token count
    err = capfd.readouterr().err
    assert "[repro] warm-up (NVIDIA's burst; not timed by LoadGen): 10 random queries of 90-299 tokens" in err


def test_a_warm_up_the_server_cannot_answer_within_the_deadline_stops_the_run_before_loadgen(tmp_path: Path) -> None:
    """Prefill at 20 ms a prompt token: the 3-token readiness probe takes 0.06 s, each 90-299-token warm-up query
    1.8-6 s, past a 1 s stall deadline: the run stops in the warm-up, naming it, before LoadGen issued anything."""
    ws, tok = standin_ws(tmp_path / "ws", RECIPE)
    env = {"STANDIN_TOKENS_PER_S": "1000", "STANDIN_PREFILL_S_PER_TOKEN": "0.02", "STANDIN_OUT_LEN": "3"}
    with LocalStandin(tok, env=env) as srv:
        srv.wait_bound()
        t0 = time.monotonic()
        with pytest.raises(Exception, match=r"warm-up") as err:
            _offline(ws, with_concurrency(RECIPE, None), srv.url, 1.0)
        took = time.monotonic() - t0
    assert "stall timeout" in str(err.value) and "before LoadGen started" in str(err.value) and took < 30
    (run_json,) = (ws.root / "runs").rglob("run.json")
    info = json.loads(run_json.read_text())
    assert info["status"] == "failed" and "warm-up" in info["error"]
    assert not list(run_json.parent.glob("mlperf_log_*"))  # LoadGen never started
