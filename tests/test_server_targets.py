"""Server runs are planned to pass: each recipe's own arrival rate, a demo rate measured without headroom (issue 23)."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import write_prepared

from repro.core.errors import InputError, RecipeError
from repro.core.recipes import all_recipes, get_recipe, load_recipe_file
from repro.core.workspace import Workspace
from repro.run.backends.base import Request
from repro.run.settings import loadgen_settings

RUNNABLE_GPU = ["nd-gb300-v6", "nd-gb200-v6", "nd-h100-v5", "nd-h200-v5", "nc-h100-v5"]


def test_gb200_server_run_uses_azures_own_user_conf() -> None:
    """Azure's Server user.conf: target_qps 170, min_duration 600000; it completed 167.73 samples/s VALID."""
    s = loadgen_settings(get_recipe("nd-gb200-v6"), "Server")
    assert s["target_qps"] == 170.0 and s["min_duration"] == 600000
    assert s["ttft_latency"] == 2000 and s["tpot_latency"] == 200
    assert loadgen_settings(get_recipe("nd-gb200-v6"), "Offline")["target_qps"] == 230


@pytest.mark.parametrize("name", RUNNABLE_GPU)
def test_every_gpu_recipe_schedules_server_below_its_offline_rate_with_a_source(name: str) -> None:
    recipe = get_recipe(name)
    server = recipe.loadgen.server
    assert server is not None and server.source
    s = loadgen_settings(recipe, "Server")
    assert s["target_qps"] == server.target_qps < recipe.loadgen.offline_expected_qps
    published = recipe.published_for("Server")
    if published is not None and published.tokens_per_s_per_vm != "unknown":
        # The arrival rate is within a few percent of what the published Server run completed.
        completed = re.search(r"completed ([\d.]+) samples/s", server.source)
        assert completed and abs(server.target_qps / float(completed.group(1)) - 1) < 0.03, server.source


def test_interactive_targets_where_published() -> None:
    have = {r.name for r in all_recipes() if r.loadgen.interactive is not None}
    assert {"nd-gb300-v6", "nd-h200-v5"} <= have
    for r in all_recipes():
        if r.loadgen.interactive is not None:
            assert r.loadgen.server is not None
            assert r.loadgen.interactive.target_qps < r.loadgen.server.target_qps
            assert r.loadgen.interactive.source


def test_a_trtllm_recipe_without_a_server_target_is_refused(tmp_path: Path) -> None:
    src = get_recipe("nd-gb300-v6").model_dump(mode="json")
    del src["loadgen"]["server"]
    path = tmp_path / "no-server.yaml"
    path.write_text(yaml.safe_dump(src))
    with pytest.raises(RecipeError, match="loadgen.server"):
        load_recipe_file(path)


def test_server_settings_never_fall_back_to_the_offline_rate() -> None:
    recipe = get_recipe("nd-h200-v5")
    bare = recipe.model_copy(update={"loadgen": recipe.loadgen.model_copy(update={"server": None})})
    with pytest.raises(InputError, match="no Server target_qps"):
        loadgen_settings(bare, "Server")


@pytest.fixture(scope="module")
def demo_paths(tmp_path_factory) -> dict[str, Path]:
    from repro.setup.demo import prepare_demo

    return prepare_demo(Workspace.open(tmp_path_factory.mktemp("demo")))


def test_demo_server_target_is_the_probe_rate_without_headroom(demo_paths) -> None:
    """The old demo scheduled 6x the Offline probe (1,546.9/s) in Server and completed 48/s: INVALID every time."""
    from repro.run.demo import SERVER_LOAD, calibrate_settings

    recipe = get_recipe("demo")
    settings = loadgen_settings(recipe, "Server")
    cal = calibrate_settings(settings, demo_paths, recipe, recipe.backend, scenario="Server")
    assert cal is not None and cal["scenario"] == "Server"
    assert settings["target_qps"] == cal["target_qps"] <= cal["probe_samples_per_s"] * SERVER_LOAD + 0.01
    assert "headroom" not in cal
    # Enough queries for LoadGen's early stopping to state p99 (0.99^n <= 0.01 needs n >= 459).
    assert settings["min_query_count"] >= 459


def test_demo_duration_run_is_calibrated(demo_paths) -> None:
    """`--duration 60` on the demo used the recipe's fixed 20 q/s: the CPU finished early and LoadGen said INVALID."""
    from repro.run.demo import DURATION_HEADROOM, calibrate_settings

    recipe = get_recipe("demo")
    settings = loadgen_settings(recipe, "Offline", duration_s=3)
    cal = calibrate_settings(settings, demo_paths, recipe, recipe.backend, duration_s=3)
    assert cal is not None and cal["headroom"] == DURATION_HEADROOM
    assert settings["target_qps"] == cal["target_qps"] != 20
    fixed = loadgen_settings(recipe, "Offline", samples=8)
    assert calibrate_settings(fixed, demo_paths, recipe, "hf", samples=8) is None


class _Calls:
    def __init__(self, expect: int) -> None:
        self.calls: list[list[int]] = []
        self.done: dict[int, np.ndarray] = {}
        self.expect = expect
        self.all_done = threading.Event()

    def first_tokens(self, events) -> None:
        pass

    def completed(self, events) -> None:
        self.calls.append([e[0] for e in events])
        self.done.update({e[0]: np.array(e[1]) for e in events})
        if len(self.done) >= self.expect:
            self.all_done.set()

    def failed(self, exc: BaseException) -> None:
        self.all_done.set()


def test_hf_answers_a_sample_at_its_eos_not_at_the_end_of_its_batch(demo_paths) -> None:
    """A 1-token answer reported at the end of a 16-token batch would count the whole batch as its TPOT."""
    from repro.run.backends.hf import HFBackend
    from repro.setup.dataset import load_prepared

    data = load_prepared(demo_paths["dataset"])
    reqs = [Request(100 + i, i, data.prompt(i), 16) for i in range(4)]
    be = HFBackend(demo_paths["model_dir"], batch_size=4)
    sink = _Calls(len(reqs))
    be.start(sink)
    be.submit(reqs)
    assert sink.all_done.wait(120)
    be.close()
    first_run = {i: a.tolist() for i, a in sink.done.items()}
    # Make sample 0's second token the end of sequence (min_new_tokens=1 bans it as the first): sample 0 must come
    # back with two tokens, on its own, before the samples of its batch that never produce that token.
    eos = first_run[100][1]
    be = HFBackend(demo_paths["model_dir"], batch_size=4)
    be.load()
    be.eos_id = eos
    ends_late = [i for i, a in first_run.items() if eos not in a]
    sink = _Calls(len(reqs))
    be.start(sink)
    be.submit(reqs)
    assert sink.all_done.wait(120)
    be.close()
    assert sink.done[100].tolist() == first_run[100][: first_run[100].index(eos, 1) + 1]
    assert ends_late and len(sink.calls) >= 2 and 100 in sink.calls[0]
    assert not set(ends_late) & set(sink.calls[0])


@pytest.mark.parametrize("name", RUNNABLE_GPU)
def test_servers_read_the_tokenizer_from_the_downloaded_checkpoint(name: str) -> None:
    """GB200 servers asked the gated hub for `meta-llama/Llama-2-70b-chat-hf` with no token and no cache mounted."""
    from repro.engine import quantize as q

    recipe = get_recipe(name)
    paths = q.paths_for(recipe)
    for serve in q.serve_commands(recipe, paths):
        tokenizer = serve.argv[serve.argv.index("--tokenizer") + 1]
        assert tokenizer.startswith("/workspace/") and recipe.model.repo_id not in serve.argv


@pytest.mark.parametrize("name", ["nd-gb300-v6", "demo"])
def test_an_unpaced_sim_run_is_paced_to_outlast_min_duration(name: str) -> None:
    """`--backend sim --duration N` without --sim-rate answered the whole query at once: INVALID every time."""
    from repro.results.logs import parse_run
    from repro.run.harness import run_benchmark
    from repro.run.options import RunHooks, RunOptions

    recipe = get_recipe(name)
    ws = Workspace.open().ensure()
    if not recipe.demo:
        write_prepared(ws.preprocessed / recipe.dataset.name, name=recipe.dataset.name, seed=3, outputs=None)
    options = RunOptions.build(recipe, ws, backend="sim", duration_s=2, detect=False)
    outcome = run_benchmark(options, RunHooks(progress=False))
    run = parse_run(Path(outcome.details["log_dir"]))
    assert run.valid, outcome.details
    info = json.loads((Path(outcome.details["log_dir"]) / "run.json").read_text())
    assert ("1.5 x min_duration" if recipe.demo else "published") in info["sim_pace"]
