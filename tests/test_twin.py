"""The server twin (repro/rehearse/standin/trtllm_twin.py) and its calibration from published logs
(repro/rehearse/twin.py): the scheduler's rules by hand, the record's logs as published, the fitted twin against the
published figures, the thin twin against the whole one, and the live stand-in's wire behaviour."""

from __future__ import annotations

import random
import socket
import time
from pathlib import Path

import pytest
from conftest import REPO
from standin_util import LocalStandin, write_tokenizer

from repro.core.recipes import get_recipe
from repro.rehearse import twin as T
from repro.rehearse import twin_crowd as C
from repro.rehearse.standin.trtllm_twin import Engine, TwinParams, simulate

TWIN_RECIPES = ["nd-gb200-v6-405b", "nd-gb200-v6", "nd-gb300-v6", "nd-h100-v5", "nd-h200-v5", "nc-h100-v5"]


def _params(**kw) -> TwinParams:
    base = dict(a=0.01, b=0.001, c=0.0001, max_batch=8, max_num_tokens=100, kv_tokens=10_000, max_seq_len=1000)
    base.update(isl_table=[50], osl_table=[4], seed=1)
    base.update(kw)
    return TwinParams(**base)  # type: ignore[arg-type]


def test_steps_price_decoders_and_prefill_once_and_fifo_admission_waits_for_kv() -> None:
    """GUARANTEED_NO_EVICT: a request starts only if input + reserved output fits; the queue's head blocks the rest
    (strict FIFO). A step costs a + b x decoders + c x prefill tokens; the budget left after decoders goes to prefill
    chunks in admission order; the last chunk's step gives the first token."""
    p = _params(kv_tokens=130, max_num_tokens=60)  # each request: 50 in + 10 reserved (max_tokens 10) = 60
    eng = Engine(p, random.Random(1))
    jobs = [eng.job(50, 3, 10, 0.0) for _ in range(3)]
    for j in jobs:
        eng.submit(j)
    eng.advance(0.0)  # begins the first step: two fit (120 of 130), the third waits
    assert eng.running == 2 and len(eng.queue) == 1
    assert eng.chunks == [(jobs[0], 50), (jobs[1], 10)]  # 60 tokens: the first prompt whole, 10 of the second
    assert eng.step_end == pytest.approx(0.01 + 0.0001 * 60)
    eng.advance(float("inf"))
    a, b, c = p.a, p.b, p.c
    t1 = a + c * 60  # step 1: prefill 50 + 10
    t2 = t1 + a + b * 1 + c * 40  # step 2: job 0 decodes; job 1's last 40 prompt tokens
    assert jobs[0].t_first == pytest.approx(t1) and jobs[1].t_first == pytest.approx(t2)
    # job 0: tokens at steps 1, 2, 3 (3 tokens); job 2 starts only when job 0's 60 KV tokens are free
    assert jobs[0].t_done == pytest.approx(t2 + a + b * 2) and jobs[2].t_first > jobs[0].t_done


def test_max_utilization_pauses_the_newest_and_keeps_every_kv_token_counted() -> None:
    """MAX_UTILIZATION (what the published configs set): admission by the KV held now (input + generated); out of
    KV, the newest request gives its blocks back and waits at the head, to prefill again. The pool is never
    overcommitted and every held token is accounted for, step by step."""
    rng = random.Random(3)
    p = _params(max_batch=500, max_num_tokens=2048, kv_tokens=60_000, max_seq_len=4096, reserve="output")
    p.isl_table, p.osl_table = [100, 300, 600], [5, 200, 600]
    eng = Engine(p, random.Random(1))
    t = 0.0
    for _ in range(3000):
        t += rng.expovariate(60)
        eng.submit(eng.job(rng.choice(p.isl_table), rng.choice(p.osl_table), 1024, t))
    peak = 0
    while not eng.idle:
        eng.advance(eng.now + 0.5)
        assert sum(eng._held(j) for j in eng.order) == eng.kv
        peak = max(peak, eng.kv)
    assert eng.paused > 0 and peak <= p.kv_tokens


def test_the_record_ships_the_published_logs_verbatim_and_cites_them() -> None:
    """Each log in repro/data/twin/logs is the published summary (byte for byte the fixture where the tests have
    one); each recipe's scenarios name a log and its figures carry their line."""
    fixtures = {
        "azure-gb200-405b-offline": "azure-nd-gb200-v6-v5.1-llama3.1-405b/llama3.1-405b/Offline/performance/run_1",
        "azure-gb200-405b-server": "azure-nd-gb200-v6-v5.1-llama3.1-405b/llama3.1-405b/Server/performance/run_1",
        "azure-gb200-70b-offline": "azure-nd-gb200-v6-v5.1/llama2-70b-99/Offline/performance/run_1",
        "azure-gb300-70b-offline": "azure-nd-gb300-v6-rack/ND_GB300_v6_1/llama2-70b-99/Offline",
        "nvidia-dgxh100-70b-offline": "nvidia-dgx-h100-v4.1/llama2-70b-99.9/Offline/performance/run_1",
        "nvidia-dgxh100-70b-server": "nvidia-dgx-h100-v4.1/llama2-70b-99.9/Server/performance/run_1",
        "hpe-h200-70b-offline": "v5.1_HPE_Cray_XD670_H200_SXM_141GBx8_TRT_llama2-70b-99_Offline/performance/run_1",
    }
    rec = T.load_record()
    for name, folder in fixtures.items():
        shipped = (T.TWIN_DIR / "logs" / f"{name}.txt").read_bytes()
        assert shipped == (REPO / "tests/fixtures/published" / folder / "mlperf_log_summary.txt").read_bytes(), name
    assert set(rec.recipes) == set(TWIN_RECIPES)
    for ref in rec.recipes.values():
        for s in ref.scenarios.values():
            assert s.log in rec.logs and (T.TWIN_DIR / "logs" / f"{s.log}.txt").is_file()
    f = T.read_log("azure-gb200-405b-offline")
    assert f["samples_per_s"].value == 1.29825
    assert f["samples_per_s"].source == "logs/azure-gb200-405b-offline.txt:7 Samples per second: 1.29825"
    assert f["latency_mean"].value == pytest.approx(3302.899941836)
    server = T.read_log("nvidia-gb300x72-70b-server")  # v6.0 spells it "Time per Output Token"
    assert server["tpot_mean"].value == pytest.approx(0.027023091)


def test_405b_twin_reproduces_azures_published_offline_and_server_logs() -> None:
    """The fitted twin of 5.1-0008 through the published schedules in full (one server: all 8,313 samples at once;
    Server Poisson at 0.89/s for 600 s): every figure within TOLERANCE of the log's, and each parameter names where
    it came from."""
    recipe = get_recipe("nd-gb200-v6-405b")
    cal = T.calibrate(recipe.name)
    for scenario in ("Offline", "Server"):
        got = T.check(cal.scenarios[scenario], recipe.loadgen.max_tokens)
        for key, row in got.items():
            assert abs(row["error"]) <= row["tolerance"], (scenario, key, row)
    doc = cal.to_json()["scenarios"]
    hows = {s["name"]: s["how"] for s in doc["Server"]["sources"]}
    assert "logs/azure-gb200-405b-server.txt:47 50.00 percentile time to output token (ns)   : 89585964" in hows["a"]
    assert "core/feasibility.memory_fit" in hows["kv_tokens"] and "fp8, tp 4 pp 1" in hows["kv_tokens"]
    assert "Server/llama3_1-405b.py" in hows["max_num_tokens, max_batch, max_seq_len"]
    assert "tok_input_len of the 8,313 samples: mean 9,428.6" in hows["isl_table"] and "sha256" in hows["isl_table"]
    assert "held 29% of the KV pool" in hows["isl_table"]  # Little's law: the published requests fit the pool
    assert doc["Offline"]["params"]["max_num_tokens"] == 1536 and doc["Server"]["params"]["max_num_tokens"] == 2048


@pytest.mark.slow
@pytest.mark.parametrize("name", TWIN_RECIPES)
def test_every_recipes_twin_reproduces_its_own_published_logs(name: str) -> None:
    """Each recipe's twin against its published logs: the recipe's own logs within TOLERANCE; an analog's (another
    system's log, for a scenario the recipe's system never published) only printed, as its error is the analog's."""
    recipe = get_recipe(name)
    cal = T.calibrate(name)
    ref = T.load_record().recipes[name]
    for scenario, sc in cal.scenarios.items():
        got = T.check(sc, recipe.loadgen.max_tokens)
        print(name, scenario, {k: f"{v['error']:+.0%}" for k, v in got.items()})
        if ref.scenarios[scenario].analog:
            continue
        for key, row in got.items():
            assert abs(row["error"]) <= row["tolerance"], (scenario, key, row)


def test_a_thin_twin_keeps_the_whole_servers_rate_and_latencies() -> None:
    """A thin twin (width w beside a crowd standing for the rest) sends w of the load through the whole server's
    scheduler: its samples/s over w, median TPOT and TTFT stay near the whole server's."""
    recipe = get_recipe("nd-gb200-v6-405b")
    cal = T.calibrate(recipe.name)
    mt = recipe.loadgen.max_tokens
    off = cal.scenarios["Offline"]
    base = TwinParams.from_json({**off.params.to_json(), "seed": 3})
    crowd = C.steady_state(off.target, base, mt)
    rng = random.Random(5)
    arrivals = [(0.0, rng.choice(off.target.isl), rng.choice(off.target.osl)) for _ in range(831)]
    jobs, _ = simulate(C.thin_for(base, 0.1, crowd), arrivals, mt)
    rate = T._measured(off.target, jobs, True).samples_per_s / 0.1
    assert rate == pytest.approx(off.figures["samples_per_s"].value, rel=0.05)
    srv = cal.scenarios["Server"]
    base = TwinParams.from_json({**srv.params.to_json(), "seed": 3})
    full = T.measure(srv.target, base, mt, full=True)
    rng, now, arrivals = random.Random(5), 0.0, []
    while now < 3000:
        now += rng.expovariate(srv.target.per_server_qps * 0.2)
        arrivals.append((now, rng.choice(srv.target.isl), rng.choice(srv.target.osl)))
    jobs, _ = simulate(C.thin_for(base, 0.2, C.steady_state(srv.target, base, mt)), arrivals, mt)
    thin = T._measured(srv.target, jobs, True)
    assert thin.pct("tpot", 0.5) == pytest.approx(full.pct("tpot", 0.5), rel=0.1)
    assert thin.pct("ttft", 0.5) == pytest.approx(full.pct("ttft", 0.5), rel=0.3)


def _first_byte_after(port: int, body: bytes) -> tuple[float, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        t0 = time.monotonic()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        first = s.recv(1)
        took = time.monotonic() - t0
        s.settimeout(5)
        rest = b""
        while b"[DONE]" not in rest and b'"usage"' not in rest:
            more = s.recv(65536)
            if not more:
                break
            rest += more
    return took, first + rest


def test_the_live_twin_answers_unstreamed_only_when_done_and_streams_headers_at_once(tmp_path: Path) -> None:
    """trtllm-serve's wire behaviour, which the twin keeps: a non-streamed answer sends nothing, not even its status
    line, until the last token (openai_server.py awaits the whole result); a streamed one sends its headers at once
    (Starlette's StreamingResponse) and then the tokens. One request of 20 steps of 0.1 s at time x 1/2."""
    import json

    tok = write_tokenizer(tmp_path / "tok")
    p = _params(a=0.1, b=0.0, c=0.0, isl_table=[10], osl_table=[20], time_scale=0.5, max_num_tokens=64)
    env = {"STANDIN_TWIN": json.dumps(p.to_json())}
    with LocalStandin(tok, env=env, log=tmp_path / "log") as srv:
        srv.wait_bound()
        time.sleep(0.5)
        body = json.dumps({"model": "m", "prompt_token_ids": [5, 6, 7], "max_tokens": 64}).encode()
        took, answer = _first_byte_after(srv.port, body)
        assert took == pytest.approx(20 * 0.1 * 0.5, abs=0.25) and answer.startswith(b"HTTP/1.1 200")
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["usage"]["completion_tokens"] == 21  # 20 words + EOS
        body = json.dumps({"model": "m", "prompt_token_ids": [5, 6, 7], "max_tokens": 64, "stream": True}).encode()
        took, answer = _first_byte_after(srv.port, body)
        assert took < 0.05 and answer.startswith(b"HTTP/1.1 200") and b"text/event-stream" in answer
    assert "server twin: step 0.1 s" in (tmp_path / "log").read_text()
