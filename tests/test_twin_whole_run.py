"""What no short run here can show: the twin of the recipe's engine through the published run's whole schedule
(repro/rehearse/twin_judge.py whole_run, at the real run's count, Target.real_queries). Two recipes' Server engines
fell behind the published rate within minutes of the real run, while every 460-query rehearsal of them said VALID:
nd-gb200-v6 served Server from its Offline engine (FP16 KV cache, half the FP8 pool of Azure's Server config), and
nd-h100-v5 with the Offline config's 896 slots per server (NVIDIA's Server config has 1,024). The plan now judges
the whole run, says when it fails, and pre-rolls the twin to the real run's end so the rehearsal's own LoadGen run
fails as the real one would; the recipes' Server blocks follow the published configs and pass."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from standin_util import LocalStandin, standin_ws

from repro.core.recipes import Recipe, get_recipe
from repro.rehearse import twin as T
from repro.rehearse.pace import plan_pace, twin_env
from repro.rehearse.twin_control import twin_backend
from repro.results.logs import parse_run
from repro.run.backends import create_backend
from repro.run.harness import run_benchmark
from repro.run.options import RunHooks, RunOptions
from repro.run.servers import ServerOptions


def _without_server_block(name: str) -> Recipe:
    """The recipe as it was before its Server block: Server served by the base (Offline) engine."""
    recipe = get_recipe(name)
    assert "Server" in recipe.scenarios
    return recipe.model_copy(update={"scenarios": {}})


def test_the_real_run_issues_whole_permutations_of_the_sample_count() -> None:
    """LoadGen with sample_concatenate_permutation rounds a Server run's count up to whole permutations of the
    performance sample count: Azure's 405B Server log (0.89/s for 600 s, 534 due, 8,313 samples) issued 8,313;
    Azure's GB200 70B Server (170/s for 600 s, 102,000 due, 24,576 samples) 122,880 over its 4 servers."""
    cal = T.calibrate("nd-gb200-v6-405b").scenarios["Server"]
    assert cal.target.real_queries == 8313
    assert T.calibrate("nd-gb200-v6").scenarios["Server"].target.real_queries == 122_880 // 4


@pytest.mark.parametrize("name", ["nd-gb200-v6", "nd-h100-v5"])
def test_a_server_engine_that_falls_behind_over_the_whole_run_is_said_and_preruns_to_its_end(name: str) -> None:
    old = plan_pace(_without_server_block(name), 1 / 400)["Server"]
    new = plan_pace(get_recipe(name), 1 / 400)["Server"]
    assert old.whole_run is not None and new.whole_run is not None
    assert not old.whole_run["passes"] and old.whole_run["ttft_p99_s"] > 2.0, old.whole_run
    assert new.whole_run["passes"] and new.whole_run["ttft_p99_s"] < 1.0, new.whole_run
    (note,) = [n for n in old.notes if "whole schedule" in n]
    assert "early stopping fails: the real run would be INVALID" in note, note
    assert not [n for n in new.notes if "whole schedule" in n]
    # the old engine's run meets the end of the real run's schedule; the passing one its steady state
    assert old.twin.preroll_s > 0.8 * old.whole_run["seconds"]
    assert new.twin.preroll_s < 0.5 * new.whole_run["seconds"]


def _server_run(tmp_path: Path, recipe: Recipe, tag: str) -> str:
    """One Server run as the rehearsal runs it: a stand-in twin per server of the VM, LoadGen's count and rate
    from the plan, the pre-roll once the backend has started."""
    pace = plan_pace(recipe, 1 / 400)["Server"]
    ws, tok = standin_ws(tmp_path / f"ws-{tag}", recipe.name)
    servers = recipe.deployment("Server").trtllm.servers_per_vm  # type: ignore[union-attr]
    with ExitStack() as stack:
        srvs = [
            stack.enter_context(LocalStandin(tok, env=twin_env({"Server": pace}), log=tmp_path / f"{tag}-{i}.log"))
            for i in range(servers)
        ]
        for srv in srvs:
            srv.wait_bound()
        time.sleep(0.5)
        out = run_benchmark(
            RunOptions.build(
                get_recipe(recipe.name),
                ws,
                scenario="Server",
                endpoints=[srv.url for srv in srvs],
                detect=False,
                settings_override=pace.settings,
                rehearsal=True,
                time_scale=pace.time_scale,
                servers=ServerOptions(stall_timeout_s=pace.stall_timeout_s, client_concurrency=pace.client_concurrency),
            ),
            RunHooks(backend_factory=twin_backend("Server", create_backend, 30.0)),
        )
    return parse_run(Path(out.details["log_dir"])).validity


@pytest.mark.slow
@pytest.mark.machine
def test_the_rehearsals_server_run_fails_where_the_whole_real_run_would(tmp_path: Path) -> None:
    """Through LoadGen, the real harness and client and the stand-in twin: nd-gb200-v6's Server run on its old
    engine (FP16 KV) is INVALID here, as the real 600 s run would be; on the recipe's Server engine, VALID."""
    assert _server_run(tmp_path, _without_server_block("nd-gb200-v6"), "old") == "INVALID"
    assert _server_run(tmp_path, get_recipe("nd-gb200-v6"), "new") == "VALID"
