"""Issue 42's first done-when: the twin of Azure's 405B Offline run (5.1-0008) fails in the rehearsal the way the
real run would with the old client settings, and runs VALID with the recipe's.

The stand-in trtllm-serve in twin mode as a process on this host (its scheduler: repro/rehearse/standin/
trtllm_twin.py, fitted to the published logs by repro/rehearse/twin.py), driven by the real harness, LoadGen and
HTTP client at the published pace shrunk 400x (rehearse/pace.py: 1/400 of the time, the thin twin at the share of
the load this machine drives, every deadline x 1/400).

Old settings, the pre-"client" defaults passed explicitly: 2,048 unstreamed requests in flight per server and a
600 s stall deadline. A non-streamed answer sends nothing until it is done; the published server completed 1.298
samples/s, so by 600 s only ~780 of the first 2,048 had their answer and the next one has waited 600 s: the run
ends with a stall about 10 minutes in (1.5 s here). The recipe's settings (256 in flight, the derived 1,278 s
deadline, run/backends/trtllm.py) keep every request's wait under its deadline: VALID at ~the published rate."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from standin_util import LocalStandin, standin_ws

from repro.core.errors import StepFailed
from repro.core.recipes import get_recipe
from repro.rehearse.pace import plan_pace
from repro.results.logs import parse_run
from repro.run.backends import create_backend
from repro.run.harness import run_benchmark
from repro.run.options import RunHooks, RunOptions
from repro.run.servers import ServerOptions

RECIPE = "nd-gb200-v6-405b"


def _run(ws, url: str, pace, concurrency: int, stall_s: float, times: dict[str, float]):
    """One Offline run; `times` gets when LoadGen started and when the backend reported a failure (monotonic)."""

    def factory(name: str, ctx):
        backend = create_backend(name, ctx)
        start = backend.start

        def started(sink) -> None:
            failed = sink.failed

            def noted(exc: BaseException) -> None:
                times.setdefault("failed", time.monotonic())
                failed(exc)

            sink.failed = noted
            start(sink)

        backend.start = started
        return backend

    hooks = RunHooks(backend_factory=factory, on_started=lambda _sut: times.setdefault("started", time.monotonic()))
    return run_benchmark(
        RunOptions.build(
            get_recipe(RECIPE),
            ws,
            endpoints=[url],
            detect=False,
            settings_override=pace.settings,
            rehearsal=True,
            time_scale=pace.time_scale,
            servers=ServerOptions(stall_timeout_s=stall_s, client_concurrency=concurrency),
        ),
        hooks,
    )


@pytest.mark.slow
def test_405b_offline_twin_stalls_with_2048_in_flight_and_runs_valid_with_the_recipes_settings(tmp_path: Path) -> None:
    pace = plan_pace(get_recipe(RECIPE), 1 / 400, tmp_path / "twin")["Offline"]
    k, w = pace.time_scale.factor, pace.width
    assert pace.time_scale.text == "1/400" and pace.stall_timeout_s == 1278  # the recipe's derived deadline
    ws, tok = standin_ws(tmp_path / "ws", RECIPE)
    with LocalStandin(tok, env=pace.standin_env(), log=tmp_path / "standin.log") as srv:
        srv.wait_bound()
        time.sleep(0.5)
        times: dict[str, float] = {}
        with pytest.raises(StepFailed) as failed:
            _run(ws, srv.url, pace, math.ceil(2048 * w), 600.0, times)
        took = times["failed"] - times["started"]
        msg = failed.value.message
        # "sent nothing for ..." (or, when a byte of an answer had just come, "did not finish its status line ...")
        assert "1.5 s here (600 s at the real machine's pace, time x 1/400) (stall timeout)" in msg, msg
        # the first answerless requests were sent as LoadGen started; the stall ends the run 600 s (x 1/400) later
        assert 1.5 <= took < 2.5, took
    # a fresh server: the stalled run's requests would still be generating (trtllm-serve does not abort an unstreamed
    # request whose client went away), and the next run would queue behind them
    with LocalStandin(tok, env=pace.standin_env(), log=tmp_path / "standin-2.log") as srv:
        srv.wait_bound()
        time.sleep(0.5)
        out = _run(ws, srv.url, pace, pace.client_concurrency, pace.stall_timeout_s, {})
    run = parse_run(Path(out.details["log_dir"]))
    assert run.validity == "VALID", out.details
    published = 1.29825  # logs/azure-gb200-405b-offline.txt:7, the twin's calibration target
    here_as_published = run.samples_per_s * k / w
    print(f"stall after {took:.2f} s; VALID at {run.samples_per_s:.2f}/s here = {here_as_published:.3f}/s published")
    assert here_as_published == pytest.approx(published, rel=0.15)  # never kinder: the harness's CPU only slows it
    assert here_as_published <= published * 1.03
