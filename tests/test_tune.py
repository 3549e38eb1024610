"""`repro tune` and the runs that use its rate (issue 28).

The search's rules are checked on their own first (LoadGen's early-stopping numbers, the bracketing, how one probe is
judged); then end to end against the stand-in trtllm-serve at a fixed speed, whose capacity is computed from its
queueing model (repro/rehearse/standin/trtllm_serve.py docstring), through the real LoadGen and the real HTTP client.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import cli_process
from standin_util import LocalStandin, prompts, standin_ws, write_tokenizer
from typer.testing import CliRunner

from repro.cli import app
from repro.core.errors import InputError
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.run.tune import (
    Probe,
    TuneResult,
    early_stopping_met,
    early_stopping_min_passing,
    early_stopping_queries,
    judge,
    search,
    settle,
)
from repro.setup.dataset import save_prepared

runner = CliRunner()


# ------------------------------------------------------------------ LoadGen's early-stopping rule
def test_early_stopping_numbers_are_loadgens() -> None:
    """No over-limit query: ceil(log(0.01)/log(0.99)) = 459, the first guess LoadGen's MinPassingQueriesFinder makes."""
    assert early_stopping_min_passing(0) == math.ceil(math.log(0.01) / math.log(0.99)) == 459
    hs = [early_stopping_min_passing(t) for t in range(6)]
    assert hs == sorted(hs) and hs[1] == 661 and hs[3] == 998
    assert early_stopping_queries(3) == 1001
    assert early_stopping_met(459, 0) and not early_stopping_met(458, 0)
    assert not early_stopping_met(1000, 3) and early_stopping_met(1001, 3)


def test_early_stopping_agrees_with_loadgen_on_a_real_log(tmp_path: Path) -> None:
    """LoadGen's own summary of a Server run says how many more queries it needs; the port predicts the same."""
    from repro.run.harness import run_benchmark
    from repro.run.options import RunOptions

    ws = Workspace.open(tmp_path / "ws").ensure()
    recipe = get_recipe("nd-h100-v5")
    tok = write_tokenizer(ws.models / recipe.model.repo_id.split("/")[-1])
    ps = prompts(32)
    save_prepared(ws.preprocessed / recipe.dataset.name, "x", ps, [10] * len(ps), [f"w{p[0]}" for p in ps])
    with LocalStandin(tok, env={"STANDIN_TOKENS_PER_S": "200", "STANDIN_OUT_LEN": "3"}) as srv:
        srv.wait_bound()
        options = RunOptions.build(
            recipe, ws, scenario="Server", endpoints=[srv.url], samples=100, target_qps=50.0, detect=False
        )
        out = run_benchmark(options)
    text = (Path(out.details["log_dir"]) / "mlperf_log_summary.txt").read_text()
    assert "Processed 100 queries" in text
    # zero queries over 2,000 ms TTFT: LoadGen asks for 459 - 100 more, as the port says
    assert f"at least {early_stopping_min_passing(0) - 100} more queries" in text


# ------------------------------------------------------------------ judging one probe
def _samples(n: int, rate: float, ttft: float, growth: float = 0.0, tpot: float = 0.01) -> list:
    return [(i / rate, ttft + growth * (i / rate), tpot) for i in range(n)]


def test_a_flat_queue_within_the_limits_passes() -> None:
    p = judge(10, _samples(300, 10, 0.2), (2000, 200), full_queries=24576)
    assert p.passed and p.ttft_p99_ms == pytest.approx(200, abs=1) and p.over_ttft == 0


def test_a_growing_queue_fails_though_its_percentiles_pass() -> None:
    """5% overload: TTFT grows 50 ms a second; p99 after 30 s is 1.7 s, under 2 s, but the long run would not be."""
    p = judge(10, _samples(300, 10, 0.2, growth=0.05), (2000, 200), full_queries=24576)
    assert p.ttft_p99_ms < 2000 and not p.passed and "the queue grows" in p.reason


def test_over_the_limits_fails_naming_the_limit() -> None:
    p = judge(10, _samples(300, 10, 0.2, tpot=0.05), (450, 40), full_queries=24576)
    assert not p.passed and "p99 TPOT 50.0 ms > 40 ms" in p.reason


def test_a_few_slow_first_tokens_fail_by_early_stopping_for_a_short_run() -> None:
    """2 of 1,001 over the limit: the p99 bound (the 4th largest) is under it, so a 24,576-query run passes; scaled to
    a 662-query run that is 2 over, which needs 1,302 + 2 queries."""
    s = _samples(1001, 10, 0.2)
    s[100] = (s[100][0], 3.0, 0.01)
    s[200] = (s[200][0], 3.0, 0.01)
    short = judge(10, s, (2000, 200), full_queries=662)
    assert not short.passed and "early stopping" in short.reason
    long = judge(10, s, (2000, 200), full_queries=24576)
    assert long.passed and long.ttft_p99_bound_ms == pytest.approx(200, abs=1) and long.bound_rank == 4


def test_a_p99_from_few_queries_is_bounded_by_their_largest_with_the_confidence_said() -> None:
    """300 queries, 2 slow: the point p99 is under the limit, but 300 queries bound the p99 only by their largest
    (95.1% confidence), 3 s: the probe fails, saying so (the 200-query probes of issue 34 passed such rates)."""
    s = _samples(300, 10, 0.2)
    s[100] = (s[100][0], 3.0, 0.01)
    s[200] = (s[200][0], 3.0, 0.01)
    p = judge(10, s, (2000, 200), full_queries=24576)
    assert p.ttft_p99_ms < 2000 and not p.passed
    assert "upper bound 3,000.0 ms (the largest of 300, 95.1% confidence) > 2,000 ms" in p.reason


def test_the_bound_is_loadgens_early_stopping_read_as_an_order_statistic() -> None:
    """The bound is the (t+1)-th largest where t is the most over-limit queries LoadGen's rule allows n queries: so a
    latency limit at the bound passes early stopping and one just under it does not."""
    from repro.run.latency_bound import allowed_over, upper_bound

    for n in (459, 662, 1001, 5000):
        values = [float(i) for i in range(n)]
        b = upper_bound(values)
        assert b is not None and b.confidence == 0.99
        t = allowed_over(n)
        assert t is not None and b.rank == t + 1
        over_at_bound = sum(1 for v in values if v > b.value)
        assert early_stopping_met(n, over_at_bound) and not early_stopping_met(n, over_at_bound + 1)
    assert upper_bound([1.0] * 458) is not None and upper_bound([1.0] * 458).confidence < 0.99  # type: ignore[union-attr]


# ------------------------------------------------------------------ the search
def _capacity_probe(capacity: float, calls: list[float]):
    def probe(rate: float) -> Probe:
        calls.append(rate)
        return Probe(rate, rate <= capacity, "model")

    return probe


@pytest.mark.parametrize("start", [5.0, 37.0, 400.0])
def test_search_brackets_then_bisects_to_the_resolution(start: float) -> None:
    calls: list[float] = []
    probes, lo, hi, why = search(
        _capacity_probe(37.0, calls), start, resolution=0.03, budget_s=1e9, probe_cost_s=lambda r: 1
    )
    assert lo is not None and hi is not None and lo <= 37.0 < hi and hi / lo <= 1.03
    assert "within 3%" in why and len(probes) == len(calls) <= 12


def test_search_stops_at_the_time_limit_with_the_best_rate_so_far() -> None:
    now = [0.0]

    def probe(rate: float) -> Probe:
        now[0] += 100
        return Probe(rate, rate <= 37, "model")

    probes, lo, hi, why = search(
        probe, 10, resolution=0.01, budget_s=350, probe_cost_s=lambda r: 100, clock=lambda: now[0]
    )
    assert len(probes) == 3 and lo == 20 and hi == 40 and "time limit" in why


# ------------------------------------------------------------------ the time plan and the step-down (issue 34)
class _NoisyServer:
    """A scripted server on a fake clock, judged by the real `judge`: TTFT 3 s (over the 2 s limit) at 20 q/s and up;
    below, `stalls(kind, rate)` answers with a 0.5 s TPOT stall among the probe's queries. A probe takes
    queries / rate + 10 s, as tune's time plan assumes."""

    def __init__(self, result: object, full_queries: int, stalls: Callable[[str, float], int]) -> None:
        self.now, self.result, self.full, self.stalls = 0.0, result, full_queries, stalls

    def clock(self) -> float:
        return self.now

    def one(self, rate: float, queries: int = 1001, kind: str = "search", min_s: float = 0.0) -> Probe:
        self.now += queries / rate + 10
        s = _samples(queries, rate, 3.0 if rate >= 20 else 0.1, tpot=0.05)
        for i in range(self.stalls(kind, rate)):
            k = 50 + 300 * i
            s[k] = (s[k][0], s[k][1], 0.5)
        p = judge(rate, s, (2000, 200), full_queries=self.full)
        p.kind = kind
        self.result.probes.append(p)  # type: ignore[attr-defined]
        return p


def _result(max_minutes: float, full_queries: int) -> TuneResult:
    return TuneResult(
        recipe="nd-h100-v5",
        scenario="Server",
        backend="trtllm",
        endpoints=["http://127.0.0.1:1"],
        limits_ms={"ttft": 2000, "tpot": 200},
        start_qps=30,
        start_source="--start-qps",
        probe_settings={},
        margin=0.0,
        resolution=0.03,
        max_minutes=max_minutes,
        full_run={"min_duration_s": 0, "min_query_count": full_queries},
    )


def _settle(srv: _NoisyServer, result: TuneResult, budget_s: float, lines: list[str]) -> tuple:
    return settle(
        srv.one,
        30.0,
        result,
        budget_s=budget_s,
        probe_cost_s=lambda r: 1001 / r + 10,
        full_queries=srv.full,
        say=lines.append,
        clock=srv.clock,
    )


def test_the_issue_34_shape_steps_down_below_the_lowest_failing_rate_and_holds() -> None:
    """The lead's rerun on the noisy stand-in: 30 q/s failed, 15 q/s failed on 3 stalled answers of 1,001 ('would
    pass 83%' for a 1,500-query run), and the search's half of 6 minutes was spent before a lower rate was probed:
    no rate. Now the search keeps the time to confirm and step down, so it steps 15% below 15 q/s and confirms
    12.75 q/s with the run's 1,500 queries, within the 6 minutes."""
    result = _result(6, 1500)
    srv = _NoisyServer(result, 1500, lambda kind, rate: 3 if (kind, rate) == ("search", 15.0) else 1)
    lines: list[str] = []
    lo, hi, stopped = _settle(srv, result, 360, lines)
    assert [(p.kind, p.target_qps, p.passed) for p in result.probes] == [
        ("search", 30.0, False),
        ("search", 15.0, False),
        ("confirm", 12.75, True),
    ]
    assert "it would pass 83% of the time" in result.probes[1].reason
    assert (lo, hi, stopped) == (12.75, 15.0, "time limit (--max-minutes)") and result.confirmed is True
    assert result.probes[-1].queries == 1500 and srv.now <= 360
    assert "no rate passed in the search: stepping down 15% below 15 q/s, the lowest failing rate, to 12.75" in lines[0]


def test_a_confirmation_that_fails_at_the_lowest_passing_rate_steps_down_until_one_holds() -> None:
    """Every confirmation above 12 q/s has 5 of 1,500 over (a 76% run): the search's best (19.88) fails it, then
    each rate that passed the search, down to 15, then, nothing lower having passed, 15% down each time until one
    holds; the saved rate is that confirmed one."""
    result = _result(30, 1500)
    srv = _NoisyServer(result, 1500, lambda kind, rate: 5 if kind == "confirm" and rate > 12 else 1)
    lo, hi, _ = _settle(srv, result, 1800, [])
    passed = sorted({p.target_qps for p in result.probes if p.kind == "search" and p.passed}, reverse=True)
    confirms = [(p.target_qps, p.passed) for p in result.probes if p.kind == "confirm"]
    assert passed[0] == 19.88 and passed[-1] == 15.0
    assert confirms == [(r, False) for r in passed] + [(12.75, False), (10.84, True)]
    assert (lo, hi) == (10.84, 12.75) and result.confirmed is True and srv.now <= 1800


def test_the_search_leaves_the_time_to_confirm_and_step_down() -> None:
    """Whatever the budget, the search starts no probe after which the confirmation of its best rate and one step
    down would no longer fit: the total stays within --max-minutes, and from 4 minutes a rate holds though the first
    confirmation at 15 q/s fails (3 minutes fit that one 1,500-query confirmation and no other)."""
    for minutes in (3, 4, 6, 10, 20, 60):
        result = _result(minutes, 1500)
        srv = _NoisyServer(result, 1500, lambda kind, rate: 5 if (kind, rate) == ("confirm", 15.0) else 1)
        lo, _hi, _ = _settle(srv, result, minutes * 60, [])
        assert srv.now <= minutes * 60, (minutes, [(p.kind, p.target_qps) for p in result.probes])
        assert (lo is not None and result.confirmed is True) is (minutes > 3), minutes


def test_no_rate_held_in_the_time_given_names_a_longer_max_minutes(tmp_path: Path) -> None:
    """Too little time to step down after every probe failed: one sentence, exit 1, naming the tune command with a
    longer --max-minutes (the endpoint kept)."""
    from repro.core.errors import StepFailed
    from repro.run.tune import _none_held

    result = _result(1, 1500)
    srv = _NoisyServer(result, 1500, lambda kind, rate: 1)
    lines: list[str] = []
    lo, hi, stopped = _settle(srv, result, 60, lines)
    assert lo is None and hi == 30.0 and stopped == "time limit (--max-minutes)"
    assert lines == [
        "  no rate passed in the search: stepping down 50% below 30 q/s, the lowest failing rate, to 15 q/s",
        "  no time left to confirm 15 q/s with 459 queries: not probed",
    ]
    result.lowest_failing_qps, result.stopped = hi, stopped
    err = _none_held(result, get_recipe("nd-h100-v5"), tmp_path)
    assert isinstance(err, StepFailed) and err.exit_code == 1
    assert err.message.startswith("No Server rate held for nd-h100-v5 within --max-minutes 1 (the lowest tried, 30 q/s")
    assert (
        err.next_command
        == "`repro tune server --recipe nd-h100-v5 --endpoint http://127.0.0.1:1 --max-minutes 2` to step down further"
    )


def test_bad_tune_options_are_one_line_errors(tmp_path: Path) -> None:
    from repro.run.tune import tune
    from repro.run.tune_options import TuneOptions

    ws = Workspace.open(tmp_path)
    with pytest.raises(InputError, match="--margin"):
        tune(TuneOptions.build(get_recipe("demo"), ws, margin=0.9))
    res = runner.invoke(app, ["tune", "server", "--recipe", "demo", "--start-qps", "-1", "-w", str(tmp_path)])
    assert res.exit_code == 2 and "'--start-qps': must be a finite number > 0" in res.output
    res = runner.invoke(app, ["run", "server", "--recipe", "demo", "--target-qps", "auto", "-w", str(tmp_path)])
    assert res.exit_code == 2 and "repro tune server" in res.output


# ------------------------------------------------------------------ end to end against the fixed-speed stand-in
# Few tokens per request keep the CPU cost per query small (the client and the stand-in share 2 busy cores).
SPEED = {"STANDIN_TOKENS_PER_S": "50", "STANDIN_MAX_BATCH": "4", "STANDIN_OUT_LEN": "4"}
CAPACITY = 4 / (5 / 50)  # 4 slots / (4 tokens + EOS at 50 tokens/s) = 40 queries/s


def _summary(doc: dict) -> str:
    return (Path(doc["details"]["log_dir"]) / "mlperf_log_summary.txt").read_text()


@pytest.fixture(scope="module")
def tuned_standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], dict]]:
    """One `repro tune server` against the fixed-speed stand-in, shared by the tests that check what it found; the
    stand-in stays up for their runs. Yields the common CLI arguments (recipe, workspace, endpoint) and tune's JSON."""
    ws, tok = standin_ws(tmp_path_factory.mktemp("tuned") / "ws")
    with LocalStandin(tok, env=SPEED) as srv:
        srv.wait_bound()
        time.sleep(0.5)
        w = ["--recipe", "nd-h100-v5", "-w", str(ws.root), "--endpoint", srv.url]
        res = runner.invoke(
            app,
            ["tune", "server", *w, "--start-qps", "30", "--probe-seconds", "6", "--probe-queries", "240", "--json"]
            + ["--run-samples", str(early_stopping_queries(0)), "--max-minutes", "4"],
        )
        assert res.exit_code == 0, res.output
        yield w, json.loads(res.stdout)


@pytest.mark.slow
@pytest.mark.soak  # the shared search against the fixed-speed stand-in: about 3 minutes with its runs
def test_tuned_rate_is_just_under_the_computed_capacity(tuned_standin: tuple[list[str], dict]) -> None:
    """tune -> within 20% below 40 q/s, saved for the recipe it was tuned with. No fixed margin now: what keeps the
    rate under capacity is the queue-growth test, whose point estimate over 6 s probes fails a rate whose wait
    rises by more than 10 ms a second; near saturation (M/D/4 at 90%+ load) the wait wanders by that much, so the
    rate lands 10-20% below capacity (the old 5% margin on a 25 ms/s threshold landed within 10%)."""
    _w, tuned = tuned_standin
    rate = tuned["chosen_qps"]
    assert 0.8 * CAPACITY <= rate <= CAPACITY, tuned["probes"]
    assert tuned["confirmed"] is True and tuned["warmup"]
    assert tuned["lowest_failing_qps"] > tuned["highest_passing_qps"] >= rate
    saved = json.loads(Path(tuned["file"]).read_text())
    assert saved["chosen_qps"] == rate and saved["recipe_hash"] == get_recipe("nd-h100-v5").hash()


@pytest.mark.slow
@pytest.mark.soak  # the shared search against the fixed-speed stand-in: about 3 minutes with its runs
def test_five_server_runs_at_the_tuned_rate_are_valid(tuned_standin: tuple[list[str], dict], tmp_path: Path) -> None:
    """Five Server runs at the tuned rate, each as short as LoadGen's early stopping allows (459 queries, none over a
    limit), are VALID by LoadGen's own verdict, record where the rate came from, and the report draws the search."""
    w, tuned = tuned_standin
    rate = tuned["chosen_qps"]
    queries = early_stopping_queries(0)
    for _ in range(5):
        res = runner.invoke(app, ["run", "server", *w, "--samples", str(queries), "--json"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        assert "Result is : VALID" in _summary(doc), _summary(doc)
        detail = (Path(doc["details"]["log_dir"]) / "mlperf_log_detail.txt").read_text()
        assert f'"key": "effective_max_query_count", "value": {queries},' in detail
        assert doc["details"]["target_qps"] == rate
        info = json.loads((Path(doc["details"]["log_dir"]) / "run.json").read_text())
        assert info["target_qps_source"]["from"] == "repro tune"
        assert f"target_qps = {rate}" in (Path(doc["details"]["log_dir"]) / "user.conf").read_text()
    md = tmp_path / "report.md"
    res = runner.invoke(app, ["report", doc["details"]["run_dir"], "--markdown", str(md), "--json"])
    assert res.exit_code == 1, res.output  # a --samples run is a smoke run: never a reproduction, as verify says
    search = json.loads(res.stdout)["tune_search"]
    assert search["target_qps"] == rate and len(search["search"]) == len(tuned["probes"])
    chart = md.read_text().split("## Tuned rate", 1)[1]
    assert f"{tuned['lowest_failing_qps']:,.2f}" in chart and "FAIL" in chart and "pass" in chart
    assert "the highest rate whose p99 upper bounds are within the limits" in " ".join(chart.split())
    assert info["target_qps_source"]["confirmed"] is True


@pytest.mark.slow
@pytest.mark.soak  # the shared search against the fixed-speed stand-in: about 3 minutes with its runs
def test_at_1_3x_the_tuned_rate_the_run_is_invalid(tuned_standin: tuple[list[str], dict]) -> None:
    """1.3x a rate within 10% below capacity overloads the stand-in by 17-30%: the wait grows 0.17-0.3 s every second,
    past the 2 s TTFT limit after 7-12 s of a 20 s run."""
    w, tuned = tuned_standin
    over = round(1.3 * tuned["chosen_qps"], 2)
    res = runner.invoke(app, ["run", "server", *w, "--duration", "20", "--target-qps", str(over), "--json"])
    doc = json.loads(res.stdout)
    assert "Result is : INVALID" in _summary(doc)
    assert doc["details"]["target_qps_source"] == {"from": "--target-qps", "target_qps": over}


def test_run_interactive_uses_the_interactive_limits_and_verify_judges_it_so(tmp_path: Path) -> None:
    """`repro run interactive` is LoadGen's Server scenario keyed llama2-70b-interactive at 450/40 ms; verify says
    Interactive. The stand-in answers 3 tokens at 200 tokens/s (TTFT 5 ms, TPOT 5 ms), well inside both. LoadGen's
    VALID is not asserted here: its 540 queries allow no query over 450 ms, which one stall of this shared CPU breaks
    (seen under a load of 8 on 2 cores); the demo's tune-then-run test asserts an Interactive VALID."""
    ws, tok = standin_ws(tmp_path / "ws")
    with LocalStandin(tok, env={"STANDIN_TOKENS_PER_S": "200", "STANDIN_OUT_LEN": "3"}) as srv:
        srv.wait_bound()
        time.sleep(0.5)
        res = runner.invoke(
            app,
            ["run", "interactive", "--recipe", "nd-h100-v5", "-w", str(ws.root), "--endpoint", srv.url]
            + ["--duration", "6", "--target-qps", "90", "--json"],
        )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    log_dir = Path(doc["details"]["log_dir"])
    assert log_dir.parts[-4] == "Interactive"
    conf = (log_dir / "user.conf").read_text()
    assert "llama2-70b-interactive.Server.ttft_latency = 450" in conf
    assert "llama2-70b-interactive.Server.tpot_latency = 40" in conf
    summary = (log_dir / "mlperf_log_summary.txt").read_text()
    assert "Scenario : Server" in summary and "ttft_latency (ns): 450000000" in summary
    verdict = doc["verdict"]
    assert verdict["scenario"] == "Interactive"
    checks = {c["name"]: c for c in verdict["checks"]}
    assert "(Interactive)" in checks["TTFT p99"]["detail"] and checks["TTFT p99"]["ok"]
    res = runner.invoke(app, ["verify", str(doc["details"]["run_dir"]), "--json"])
    assert json.loads(res.stdout)["scenario"] == "Interactive"


def test_a_probe_far_above_capacity_is_stopped_and_fails(tmp_path: Path) -> None:
    """1 slot at 0.5 s a query (2 q/s) offered 50 q/s under the Interactive limits: the probe stops once a query has
    waited 3 x 450 ms for its first token (the placeholders the harness then answers with never count as a pass),
    and a search with no passing rate says so (exit 1) with the probe kept."""
    from repro.core.errors import StepFailed
    from repro.run.tune import tune
    from repro.run.tune_options import TuneOptions

    ws, tok = standin_ws(tmp_path / "ws")
    env = {"STANDIN_TOKENS_PER_S": "20", "STANDIN_MAX_BATCH": "1", "STANDIN_OUT_LEN": "9"}
    with LocalStandin(tok, env=env) as srv:
        srv.wait_bound()
        time.sleep(0.5)
        with pytest.raises(StepFailed, match="No Interactive rate held for nd-h100-v5 within --max-minutes 0.05"):
            tune(
                TuneOptions.build(
                    get_recipe("nd-h100-v5"),
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
    (doc,) = [json.loads(p.read_text()) for p in ws.tuned.glob("nd-h100-v5/interactive-search/*/tune.json")]
    assert doc["probes"][0]["passed"] is False and "stopped early" in doc["probes"][0]["reason"]
    assert doc["chosen_qps"] is None and not (ws.tuned / "nd-h100-v5" / "interactive.json").exists()
    assert_probes_ran_alone(ws.tuned, at_least=2)


def assert_probes_ran_alone(tuned: Path, at_least: int) -> None:
    """Each probe (the warm-up included) ran in its own process, as each `repro run` does: LoadGen loads
    mlperf.conf only on a process's first FromConfig, so a second probe in one process logged error_invalid_config
    "Multiple conf files are used" and went without mlperf.conf's seeds (issue 42 item 5)."""
    logs = sorted(tuned.rglob("mlperf_log_detail.txt"))
    assert len(logs) >= at_least, logs
    for log in logs:
        text = log.read_text(encoding="utf-8")
        assert "error_invalid_config" not in text, log
        assert '"key": "effective_qsl_rng_seed"' in text and '"key": "effective_qsl_rng_seed", "value": 0,' not in text


@pytest.mark.slow
@pytest.mark.parametrize("scenario", [pytest.param("server", marks=pytest.mark.soak), "interactive"])
def test_demo_tune_then_run(scenario: str, tmp_path: Path) -> None:
    """`repro tune <scenario> --recipe demo` then `repro run <scenario> --recipe demo`: the run takes the tuned rate,
    verify judges it by the scenario's own rules, and LoadGen calls it VALID.

    Why it holds: LoadGen's Server schedule is seeded (the same arrivals each run at a given rate), so what varies is
    the CPU the demo gets. The demo batches statically, so its capacity is a cliff (~380-470 q/s here) with TTFT about
    one batch below it. Interactive leaves a 2 s run ~10% of overload (450 ms limit) and one slow query of 662; at the
    old 20% margin a run slowed 1.25x from the search was INVALID (2 of 3 VALID). Its margin is now 60%: the run fails
    only if it gets under 1/2.5 of the CPU the search had, which takes a busy loop and a load of ~8 on 2 cores here
    (measured: INVALID at every rate then, the search included) and never happens in the serial CI suite. Server's
    2,000 ms limit absorbs 80% of overload over the run, so 20% margin covers it. The search starts from the demo's
    measured rate, so it takes ~6 probes of 2-4 s, not 12 starting at 10 q/s."""
    w = ["--recipe", "demo", "-w", str(tmp_path / "ws")]
    res = runner.invoke(app, ["tune", scenario, *w, "--max-minutes", "3", "--json"])
    assert res.exit_code == 0, res.output
    tuned = json.loads(res.stdout)
    assert tuned["margin"] == (0.6 if scenario == "interactive" else 0.2) and tuned["chosen_qps"] > 0
    assert tuned["start_source"].startswith("the demo's measured rate")
    assert_probes_ran_alone(tmp_path / "ws" / "tuned", at_least=3)
    res = runner.invoke(app, ["run", scenario, *w, "--json"])
    doc = json.loads(res.stdout)
    assert doc["details"]["target_qps"] == tuned["chosen_qps"]
    verdict = doc["verdict"]
    assert verdict["scenario"] == scenario.capitalize()
    limit = "450 ms (Interactive)" if scenario == "interactive" else "2,000 ms (Server)"
    assert limit in {c["name"]: c["detail"] for c in verdict["checks"]}["TTFT p99"]
    assert "Result is : VALID" in _summary(doc), _summary(doc)


def test_offline_target_qps_auto_sizes_the_run_from_the_probe(tmp_path: Path) -> None:
    """`repro run offline --target-qps auto` on the paced sim (2,000 tokens/s): the 64-sample probe measures samples/s,
    LoadGen's expected QPS is 1.2x that (user.conf and run.json agree), so the demo's 2 s min_duration is met with
    1.1 x 1.2 x 2 s = 2.6 s of work, not overshot, and the query count is LoadGen's 1.1 x qps x min_duration."""
    ws = tmp_path / "ws"
    res = cli_process(
        *["run", "offline", "--recipe", "demo", "--backend", "sim", "--sim-rate", "2000", "--target-qps", "auto"],
        *["-w", str(ws), "--json"],
    )
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    log_dir = Path(doc["details"]["log_dir"])
    # the probe ran in its own process, so the run is this one's first LoadGen run: mlperf.conf's seeds, no
    # "Multiple conf files are used" (which verify FAILs)
    detail = (log_dir / "mlperf_log_detail.txt").read_text()
    assert "error_invalid_config" not in detail and '"key": "effective_qsl_rng_seed", "value": 0,' not in detail
    assert '"key": "effective_qsl_rng_seed"' in detail
    source = json.loads((log_dir / "run.json").read_text())["target_qps_source"]
    assert source["from"] == "--target-qps auto" and source["headroom"] == 1.2
    qps = source["target_qps"]
    assert qps == pytest.approx(1.2 * source["probe_samples_per_s"], rel=1e-3)
    assert f"llama2-70b.Offline.target_qps = {qps}\n" in (log_dir / "user.conf").read_text()
    summary = (log_dir / "mlperf_log_summary.txt").read_text()
    assert "Result is : VALID" in summary and "Min duration satisfied : Yes" in summary
    issued = int(summary.split("samples_per_query : ")[1].split()[0])
    assert issued == int(1.1 * qps * 2)
    # the probe and the run are paced alike, so the run lasts 1.1 x 1.2 x min_duration (up to the harness's overhead)
    seconds = issued / float(summary.split("Samples per second: ")[1].split()[0])
    assert 2.0 <= seconds <= 1.32 * 2 * 1.25, seconds
