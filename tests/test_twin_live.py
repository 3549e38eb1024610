"""The live server twin's rehearsal machinery (repro/rehearse/standin/trtllm_twin.py LiveTwin, the stand-in's /twin/
routes, rehearse/twin_control.py): the pre-roll that puts a latency-bound run's first query into the published
steady state, the wide twin's copies of one server, the fitted first-token delay, and the scenario a kept server
serves. Pure and local: an event loop here, or the stand-in as a process on this host."""

from __future__ import annotations

import asyncio
import json
import random
import time
import urllib.request
from pathlib import Path

import pytest
from standin_util import LocalStandin, write_tokenizer

from repro.core.errors import StepFailed
from repro.core.recipes import get_recipe
from repro.rehearse import twin as T
from repro.rehearse import twin_judge as J
from repro.rehearse.pace import plan_pace
from repro.rehearse.standin.trtllm_twin import Engine, LiveTwin, TwinParams, twin_set
from repro.rehearse.twin_control import post


def _params(**kw) -> TwinParams:
    base = dict(a=0.01, b=0.001, c=0.0001, max_batch=64, max_num_tokens=512, kv_tokens=100_000, max_seq_len=2000)
    base.update(isl_table=[50], osl_table=[20], seed=1)
    base.update(kw)
    return TwinParams(**base)  # type: ignore[arg-type]


def test_the_preroll_holds_the_published_steady_state_until_the_first_query() -> None:
    """405B Server's twin as the rehearsal runs it: after the warm-up, the pre-roll runs 3 mean latencies of the
    published schedule at once; the server then holds rate x mean latency requests (Little's law: 0.89/s x 60.5 s =
    54) with its clock stopped, and the first query starts it again from that state, not from an empty server."""
    pace = plan_pace(get_recipe("nd-gb200-v6-405b"), 1 / 400)["Server"]
    p = TwinParams.from_json({**pace.twin.to_json(), "replicas": 1, "seed": 4})
    published = T.calibrate("nd-gb200-v6-405b").scenarios["Server"].figures

    async def go() -> tuple[float, int, float, float]:
        twin = LiveTwin(p)
        done = twin.preroll()
        running = twin.engine.running
        before = twin.vnow()
        await asyncio.sleep(0.3)
        held = twin.vnow()  # frozen: 0.3 s here is 1.5 virtual s at 1/5, none passes
        twin.submit([5, 6, 7], 2000)
        await asyncio.sleep(0.3)
        moved = twin.vnow() - held
        twin.close()
        assert done["virtual_s"] == pytest.approx(3 * published["latency_mean"].value)
        assert held == before
        return running, int(done["phantoms"]), moved, p.time_scale

    running, phantoms, moved, k = asyncio.run(go())
    little = published["scheduled_qps"].value * published["latency_mean"].value
    assert running == pytest.approx(little, rel=0.35), (running, little)
    assert phantoms == pytest.approx(0.89 * 3 * 60.5, rel=0.2)
    assert moved == pytest.approx(0.3 / k, rel=0.5)


def test_without_a_preroll_the_first_queries_meet_an_empty_server() -> None:
    """What the pre-roll is for: the same twin without one starts empty, so the run's first requests see fewer
    decoders than the published run's steady state (shorter steps, a kinder TTFT and TPOT)."""
    pace = plan_pace(get_recipe("nd-gb200-v6-405b"), 1 / 400)["Server"]
    p = TwinParams.from_json({**pace.twin.to_json(), "replicas": 1, "seed": 4, "preroll_s": 0.0})

    async def go() -> int:
        twin = LiveTwin(p)
        assert twin.preroll() == {"phantoms": 0, "virtual_s": 0.0} and not twin.frozen
        running = twin.engine.running
        twin.close()
        return running

    assert asyncio.run(go()) == 0


def test_a_latency_runs_scale_follows_the_twin_of_the_recipes_engine() -> None:
    """nd-h200-v5 Interactive: the recipe's engine takes 1,536 tokens a step where the published one took 256, so its
    twin's p99 TTFT (74 ms) is far under the published log's (291 ms) and the run needs no slower pace than real
    time (the published margin alone asked for x 2); where the recipe's twin is over the limit, the published
    log's sets the pace (the run fails at any pace)."""
    pace = plan_pace(get_recipe("nd-h200-v5"), 1 / 400)["Interactive"]
    published = T.calibrate("nd-h200-v5").scenarios["Interactive"].figures["ttft_p99"].value
    assert pace.expected_ttft_p99_s is not None and pace.expected_ttft_p99_s < 0.5 * published
    assert pace.time_scale.factor <= 1 and "the twin's p99 TTFT on the recipe's engine" in pace.notes[0]
    assert pace.to_json()["expected_ttft_p99_s"] == pace.expected_ttft_p99_s
    from repro.rehearse.pace import expected_ttft_p99

    t = T.calibrate("nd-h200-v5").scenarios["Interactive"]
    slow = TwinParams.from_json({**t.params.to_json(), "a": 1.0})  # one second a step: every TTFT over 450 ms
    assert expected_ttft_p99(t.target, slow, 1024, 0.45) == (published, f"the published p99 TTFT {published:.3g} s")


def test_a_wide_twin_sends_each_request_to_one_of_its_copies_at_random() -> None:
    """replicas n: n independent engines behind one endpoint, each request to one at random (a Poisson stream split
    at random is Poisson at each copy); each copy runs it as the whole published server would."""
    p = _params(replicas=4, time_scale=0.01)

    async def go() -> list[int]:
        twin = LiveTwin(p)
        jobs = [twin.submit([3 + i % 7, 4, 5], 20) for i in range(400)]
        counts = [sum(1 for j in jobs if j.owner is e) for e in twin.engines]
        await asyncio.wait_for(asyncio.gather(*(j.waiters[1] for j in jobs)), 30)
        twin.close()
        return counts

    counts = asyncio.run(go())
    assert sum(counts) == 400 and min(counts) > 60, counts
    with pytest.raises(ValueError, match="replicas"):
        _params(replicas=2, width=0.5)


def test_a_first_token_delay_moves_the_first_token_and_not_the_steps() -> None:
    """first_delay d: the first token reaches the client d after the step that ran the prompt's last chunk (the
    calibration fits it only where the published median TTFT is above the scheduler's); the steps, and so the
    tokens after it, keep their times."""
    d = 0.05
    a = Engine(_params(first_delay=d), random.Random(1))
    b = Engine(_params(), random.Random(1))
    ja, jb = a.job(50, 20, 20, 0.0), b.job(50, 20, 20, 0.0)
    a.submit(ja), b.submit(jb)
    a.advance(float("inf")), b.advance(float("inf"))
    assert ja.t_first == pytest.approx(jb.t_first + d) and ja.t_done == pytest.approx(jb.t_done)


def test_a_first_token_stall_delays_that_token_alone_and_no_step() -> None:
    """first_stall_p, first_stall_s: a stalled first token reaches the client first_stall_s late (the response path),
    and the steps, so every token after it and every other request, keep their times; a request that ends within
    the stall ends when its first token arrives (its TPOT is then shorter, as LoadGen computes it)."""
    s = 0.3
    a = Engine(_params(first_stall_p=1.0, first_stall_s=s), random.Random(1))
    b = Engine(_params(), random.Random(1))
    long_a, long_b = a.job(50, 400, 400, 0.0), b.job(50, 400, 400, 0.0)
    short_a, short_b = a.job(50, 3, 3, 0.0), b.job(50, 3, 3, 0.0)
    for eng, jobs in ((a, (long_a, short_a)), (b, (long_b, short_b))):
        for j in jobs:
            eng.submit(j)
        eng.advance(float("inf"))
    assert a.steps_run == b.steps_run and a.busy_s == pytest.approx(b.busy_s)
    assert long_a.t_first == pytest.approx(long_b.t_first + s) and long_a.t_done == pytest.approx(long_b.t_done)
    assert short_b.t_done < short_b.t_first + s and short_a.t_done == pytest.approx(short_a.t_first)
    with pytest.raises(ValueError, match="first_stall_p"):
        _params(first_stall_p=1.5)


def test_gb200s_ttft_tail_is_fitted_to_first_tokens_where_step_stalls_would_lengthen_its_tpot_tail() -> None:
    """nd-gb200-v6's logs: TTFT p99 2.3x its median, TPOT p99.9 only 1.16x (Interactive). Stalls of whole steps long
    enough for that TTFT tail put the twin's p99.9 TPOT 21% over the log's (40-43 ms against 35.4, a 40 ms limit);
    the fit then stalls first tokens instead, and the twin keeps the log's p99 TTFT with its TPOT tail nearer. A
    recipe whose step stalls keep the TPOT tail (nd-h100-v5 Server) keeps them."""
    for scenario in ("Interactive", "Server"):
        tw = T.calibrate("nd-gb200-v6").scenarios[scenario]
        assert tw.params.stall_p == 0 and tw.params.first_stall_p > 0, tw.params
        t, f = tw.target, tw.figures
        m = T.measure(t, TwinParams.from_json({**tw.params.to_json(), "seed": 7}), 1024, queries=T.STALL_QUERIES)
        assert m.pct("ttft", 0.99) == pytest.approx(f["ttft_p99"].value, rel=0.05)
        assert m.pct("tpot", 0.99) == pytest.approx(f["tpot_p99"].value, rel=0.03)
        assert m.pct("tpot", 0.999) < 1.15 * f["tpot_p99.9"].value  # step stalls: 1.21 (Interactive), 1.27 (Server)
        assert scenario == "Server" or m.pct("tpot", 0.999) < f["tpot_limit"].value
        assert "first_stall_p" in {n for s in tw.sources for n in [s.name.split(",")[0]]}
    h100 = T.calibrate("nd-h100-v5").scenarios["Server"].params
    assert h100.stall_p > 0 and h100.first_stall_p == 0


def test_the_twin_set_a_kept_server_holds_and_the_scenario_it_serves(tmp_path: Path) -> None:
    """STANDIN_TWIN with every scenario's twin: the server serves the active one until POST /twin/scenario picks
    another (afresh); POST /twin/preroll pre-rolls the one serving; an unknown scenario is refused, and the
    rehearsal's call says which server refused what."""
    fast = _params(a=0.001, b=0.0, c=0.0, osl_table=[4], time_scale=0.5)
    slow = _params(a=0.2, b=0.0, c=0.0, osl_table=[4], time_scale=0.5, preroll_qps=5.0, preroll_s=2.0)
    doc = {"scenarios": {"Offline": fast.to_json(), "Server": slow.to_json()}, "active": "Offline"}
    sets, active = twin_set(json.dumps(doc))
    assert set(sets) == {"Offline", "Server"} and active == "Offline"
    tok = write_tokenizer(tmp_path / "tok")
    body = json.dumps({"model": "m", "prompt_token_ids": [5, 6, 7], "max_tokens": 64}).encode()

    def took(url: str) -> float:
        t0 = time.monotonic()
        req = urllib.request.Request(url + "/v1/chat/completions", data=body)
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
        return time.monotonic() - t0

    with LocalStandin(tok, env={"STANDIN_TWIN": json.dumps(doc)}, log=tmp_path / "log") as srv:
        assert post(srv.url, "/twin/scenario", {"scenario": "Offline"}, wait_s=20) == {"scenario": "Offline"}
        assert took(srv.url) < 0.5  # 5 steps of 1 ms at 1/2
        assert post(srv.url, "/twin/scenario", {"scenario": "Server"}, wait_s=5) == {"scenario": "Server"}
        assert post(srv.url, "/twin/preroll", {}, wait_s=5)["phantoms"] > 0
        assert took(srv.url) > 0.4  # 5 steps of 0.2 s at 1/2, behind the pre-rolled requests
        with pytest.raises(StepFailed, match=r"refused /twin/scenario: HTTP 404"):
            post(srv.url, "/twin/scenario", {"scenario": "Interactive"}, wait_s=5)
    log = (tmp_path / "log").read_text()
    assert "server twin: scenario Server" in log and "pre-roll of 2 virtual s" in log


def test_a_latency_run_says_when_the_published_tail_makes_invalid_likely() -> None:
    """Azure's 405B Server log: p99 TTFT 5.12 s, p99.9 7.30 s against 6 s, so about 0.39% of its queries were over
    the limit and early stopping passed it on its full count. A 460-query run of the same server lets none over.
    The rehearsal keeps LoadGen's count and its plan says the odds its own twin's simulated runs have, at that count
    and at the real run's 8,313 (over-limit queries come in clumps: no Poisson count of the average share); a
    recipe whose twin passes its short runs says nothing."""
    from repro.rehearse import pace as P
    from repro.rehearse.pace import _recipe_engine
    from repro.run.latency_bound import allowed_over, poisson_cdf

    cal = T.calibrate("nd-gb200-v6-405b").scenarios["Server"]
    share, lines = P.over_share(cal.figures, "ttft", 6.0)
    assert share == pytest.approx(0.0039, rel=0.05) and "99.90 percentile first token latency" in lines
    assert P.over_share(cal.figures, "tpot", 0.175)[0] == 0.0  # p99.9 TPOT 148 ms: within 175 ms
    recipe = get_recipe("nd-gb200-v6-405b")
    mine = TwinParams.from_json({**cal.params.to_json(), **_recipe_engine(recipe, "Server", cal.params, [])})
    real = cal.target.real_queries  # 8,313: LoadGen rounds the run up to a whole permutation of the samples
    odds = [J.early_stopping_odds(cal.target, mine, recipe.loadgen.max_tokens, n, (6.0, 0.175)) for n in (460, real)]
    # the clumps: a Poisson count of the share promised 95% by ~3,100; the twin's runs need the real run's count
    assert odds[0] < P.TAIL_CONFIDENCE <= odds[1]
    assert poisson_cdf(allowed_over(3131) or 0, share * 3131) >= 0.95
    server = plan_pace(recipe, 1 / 400)["Server"]
    assert server.settings["min_query_count"] == P.EARLY_STOPPING_QUERIES
    (note,) = [x for x in server.notes if "short run's statistics" in x]
    assert f"passed early stopping in {odds[0]:.0%} of its simulated runs of 460 queries" in note, note
    assert f"{odds[1]:.0%} of 8,313 (a server's share of the real run's count" in note, note
    gb300 = plan_pace(get_recipe("nd-gb300-v6"), 1 / 400)["Server"]  # its twin passes every simulated run
    assert not [x for x in gb300.notes if "short run's statistics" in x]
    # none over in the published log's percentiles, yet the twin's own runs of 460 fail often: the note says so
    (note,) = [x for x in plan_pace(get_recipe("nd-gb200-v6"), 1 / 400)["Interactive"].notes if "statistics" in x]
    assert note.startswith("the published log's percentiles put none of its queries over a limit; the twin"), note
