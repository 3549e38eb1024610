"""`repro explain` on real LoadGen runs of the sim backend with one planted cause each (issue 27).

Every run here is a real mlperf_loadgen run (labelled simulated), each in its own `repro run offline` process as a
user runs them. The cause is planted in what the run does, never in its files, and explain must name it
first. A run with nothing planted must name nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import CLI, write_prepared

from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.report.explain import explain

RECIPE = "nd-h100-v5"
RATE = 6_000.0
SAMPLES = 160


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workspace, Path]:
    """One workspace and one run with nothing planted, the reference every planted run is explained against: the
    same real run each test made for itself before (a sim run of 160 samples is ~8 s), made once."""
    ws = Workspace.open(tmp_path_factory.mktemp("planted") / "home").ensure()
    folder = ws.preprocessed / get_recipe(RECIPE).dataset.name
    write_prepared(
        folder, SAMPLES, name="mlperf-openorca", seed=7, prompt_len=(100, 900), out_len=(150, 450), outputs="r{i}"
    )
    with pytest.MonkeyPatch.context() as mp:  # conftest's isolation is per test: this run needs it too
        mp.setenv("REPRO_IMDS_URL", "http://127.0.0.1:9/metadata/instance")
        mp.delenv("HF_TOKEN", raising=False)
        mp.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        return ws, _run(ws)


@pytest.fixture
def ws(planted: tuple[Workspace, Path]) -> Workspace:
    return planted[0]


@pytest.fixture
def base(planted: tuple[Workspace, Path]) -> Path:
    return planted[1]


def _run(ws: Workspace, recipe: str = RECIPE, rate: float = RATE, *extra: str) -> Path:
    before = set((ws.runs / RECIPE / "Offline").glob("*")) if (ws.runs / RECIPE / "Offline").is_dir() else set()
    argv = [*CLI, "run", "offline", "--recipe", recipe, "--backend", "sim", "--samples", str(SAMPLES)]
    argv += ["--sim-rate", str(rate), *extra]
    env = {**os.environ, "REPRO_HOME": str(ws.root)}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    if "--into" in extra:
        return Path(extra[extra.index("--into") + 1])
    (new,) = set((ws.runs / RECIPE / "Offline").glob("*")) - before
    return new


def test_nothing_planted_names_nothing(ws: Workspace, base: Path) -> None:
    again = _run(ws)
    e = explain(again, against=str(base))
    assert e.causes == [], [c.title for c in e.causes]
    assert e.label == "simulated" and e.to_json()["reproduction"] is False
    assert e.tokens.input_source.startswith("measured") and e.tokens.input_per_sample == pytest.approx(
        e.tokens.input_per_sample
    )


def test_a_slower_server_is_the_top_cause(ws: Workspace, base: Path) -> None:
    slow = _run(ws, rate=RATE * 0.7)
    e = explain(slow, against=str(base))
    assert e.deviation_pct is not None and e.deviation_pct < -20
    assert e.causes[0].area == "server" and e.causes[0].title.startswith("the server or its GPUs are slower")
    assert any("the answers did not change" in x for x in e.causes[0].evidence)


def test_early_stopping_outputs_are_the_top_cause(ws: Workspace, base: Path) -> None:
    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "recipes" / f"{RECIPE}.yaml").read_text())
    doc["loadgen"]["max_tokens"] = 120  # a server configured to stop at 120 tokens
    doc["waive_rules"] = ["max-output-length"]  # which MLPerf forbids: the recipe says it breaks that rule
    edited = ws.root / f"{RECIPE}.yaml"
    edited.write_text(yaml.safe_dump(doc))
    short = _run(ws, str(edited))
    _run(ws, str(edited), RATE, "--accuracy", "--into", str(short))  # its accuracy log: every sample's length
    e = explain(short, against=str(base))
    top = e.causes[0]
    assert top.area == "tokens" and top.title == "output length: the server stops early"
    assert top.impact_pct is not None and top.impact_pct < 0
    assert e.run.tokens_per_sample is not None and e.run.tokens_per_sample <= 121
    assert e.tokens.share_at_max == 1.0 and e.tokens.max_tokens == 120  # every reference answer is >= 150 tokens
    assert any("100.0% of samples hit max_tokens 120" in x for x in top.evidence)
    assert {d.key: (d.yours, d.reference) for d in e.diffs}["max_tokens"] == (120, 1024)


def test_a_lower_batch_is_the_top_cause(tmp_path: Path) -> None:
    """Through --endpoint to the stand-in trtllm-serve at a fixed per-sequence speed: a recipe whose batch is 4
    keeps 4 requests in flight instead of 2,048, and explain names the serving configuration first."""
    from standin_util import LocalStandin, prompts, write_tokenizer

    ws = Workspace.open(tmp_path / "home").ensure()
    recipe = get_recipe(RECIPE)
    ps = prompts(64)
    write_prepared(ws.preprocessed / recipe.dataset.name, name="x", prompts=ps, out_len=40, outputs="r{i}", source="")
    tok = write_tokenizer(ws.models / recipe.model.repo_id.split("/")[-1])
    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "recipes" / f"{RECIPE}.yaml").read_text())
    doc["trtllm"]["gpu_batch_size"] = 4
    edited = tmp_path / f"{RECIPE}.yaml"
    edited.write_text(yaml.safe_dump(doc))
    env = {"STANDIN_TOKENS_PER_S": "400", "STANDIN_OUT_LEN": "40"}
    with LocalStandin(tok, env=env, log=tmp_path / "standin.log") as server:
        server.wait_bound()
        runs = []
        for which in (RECIPE, str(edited)):
            before = set((ws.runs / RECIPE / "Offline").glob("*")) if (ws.runs / RECIPE / "Offline").is_dir() else set()
            argv = [*CLI, "run", "offline", "--recipe", which, "--endpoint", server.url, "--samples", "64"]
            done = subprocess.run(
                argv, capture_output=True, text=True, env={**os.environ, "REPRO_HOME": str(ws.root)}, timeout=300
            )
            assert done.returncode == 0, done.stdout + done.stderr
            (new,) = set((ws.runs / RECIPE / "Offline").glob("*")) - before
            runs.append(new)
    e = explain(runs[1], against=str(runs[0]))
    assert e.deviation_pct is not None and e.deviation_pct < -50
    top = e.causes[0]
    assert top.area == "serving" and top.title.startswith("serving: client_concurrency is 4 here")
    assert e.reference.name.startswith(f"{RECIPE}/Offline/")


THROTTLE = """
import sys, threading
from pathlib import Path
from repro.core.workspace import Workspace
from repro.run.harness import run_benchmark
from repro.run.options import RunHooks, RunOptions

def hog(sut):
    def spin():
        while not sut.finished.is_set():
            sum(i * i for i in range(2000))
    threading.Thread(target=spin, name="hog", daemon=True).start()

options = RunOptions.build("nd-h100-v5", Workspace.open(), backend="sim", samples=int(sys.argv[1]), detect=False,
                          sim_rate=float(sys.argv[2]))
out = run_benchmark(options, RunHooks(on_started=hog, progress=False))
print(out.details["run_dir"])
"""


def test_a_client_throttle_is_the_top_cause(ws: Workspace, base: Path) -> None:
    """The harness process shares its interpreter with a thread that never sleeps: the client falls behind."""
    env = {**os.environ, "REPRO_HOME": str(ws.root)}
    done = subprocess.run(
        [sys.executable, "-c", THROTTLE, str(SAMPLES), str(RATE)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    throttled = Path(done.stdout.strip().splitlines()[-1])
    e = explain(throttled, against=str(base))
    top = e.causes[0]
    assert top.area == "machine" and top.title == "client-bound: the harness could not keep up", e.causes
    assert e.run.machine["harness_thread_runnable_share"] >= 0.85
