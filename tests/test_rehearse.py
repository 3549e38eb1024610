"""`repro rehearse`: a GPU recipe's image (containers/Dockerfile on the stand-in TensorRT-LLM base), its servers on
the real Docker engine, the real LoadGen Offline and Server runs and verify, all labelled a rehearsal.

Each rehearsal builds the image (cached after the first), prepares its own workspace and runs about 30 s of LoadGen.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from helpers import cli

from repro.core.errors import InputError
from repro.core.hints import split_hint
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.engine.container import managed_containers
from repro.rehearse.rehearsal import doctor_step, plan, rehearse
from repro.rehearse.result import Scaling

STEPS = ["doctor", "setup", "build-engine", "run offline", "tune server", "run server", "verify", "report"]
RACK_STEPS = ["doctor", "setup", "build-engine", "rack offline", "verify", "report"]


def assert_no_invalid_config(root: Path) -> None:
    """Each run step and each of `repro tune`'s probes ran in its own process, as a user runs `repro run`: no LoadGen
    log under runs/ or tuned/ says error_invalid_config ("Multiple conf files are used": a second LoadGen run in one
    process, which went without mlperf.conf)."""
    logs = [p for top in ("runs", "tuned") for p in (root / top).rglob("mlperf_log_detail.txt")]
    assert any("tuned" in p.parts for p in logs) or not (root / "tuned").exists(), logs
    assert logs
    bad = [str(p) for p in logs if "error_invalid_config" in p.read_text(encoding="utf-8", errors="replace")]
    assert bad == [], bad


def assert_own_servers_gone(client, runs: list[dict]) -> None:
    """None of the servers this rehearsal's runs recorded (run.json) is still a container. Only its own: other
    rehearsals and tests on this shared Docker hold theirs while it runs (a check of every rehearsal container
    failed whenever one ran beside it)."""
    mine = set()
    for run in runs:
        info = json.loads(next(Path(run["run_dir"]).rglob("run.json")).read_text())
        mine |= {s["container"] for s in info["servers"]["servers"]}
    live = {c.name for c in managed_containers("org.repro.rehearsal", client=client)}
    assert mine and not mine & live, (sorted(mine), sorted(live))


def attested_statement(path: Path) -> dict:
    """The in-toto statement inside a `repro attest` envelope (read back without checking it)."""
    import base64

    return json.loads(base64.b64decode(json.loads(path.read_text())["payload"]))


GPU_RECIPES = ["nd-gb300-v6", "nd-gb200-v6", "nd-gb200-v6-405b", "nd-h100-v5", "nd-h200-v5", "nc-h100-v5"]


def test_scaling_is_printed_and_keeps_the_recipe_shape() -> None:
    """One time factor for durations and counts; Server stays below the stand-in's capacity; early stopping met."""
    for name in GPU_RECIPES:
        recipe = get_recipe(name)
        s = Scaling.for_recipe(recipe)
        off, srv = s.settings(recipe, "Offline"), s.settings(recipe, "Server")
        assert off["min_duration"] == recipe.loadgen.min_duration_ms / 400 and off["target_qps"] == s.capacity_qps
        assert srv["min_query_count"] >= 460 and srv["target_qps"] <= s.capacity_qps / 2 + 1e-9
        assert f"{s.time:g}" in s.text() and "latency limits are the recipe's" in s.text()


def test_dry_run_plans_without_building(tmp_path: Path) -> None:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "repro"), "rehearse", "--dry-run", "--json", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["label"] == "rehearsal" and doc["reproduction"] is False and doc["dry_run"] is True
    assert doc["recipe"] == "nd-gb300-v6" and not (tmp_path / "rehearsal").exists()
    assert doc["steps"] == STEPS and doc["next_command"] == "repro rehearse --recipe nd-gb300-v6"
    assert plan("nd-h100-v5", tmp_path).image.startswith("repro-trtllm:nd-h100-v5-")
    assert plan("nd-gb300-v6", tmp_path, nodes=2).steps == RACK_STEPS


def test_verify_and_report_steps_run_the_users_commands(tmp_path: Path) -> None:
    """The verify step is `repro verify` in its own process: a published run (PASS against its recipe, no label) is
    not a rehearsal's verdict, so the rehearsal does not hold and its Next line is that run's verify; the report step
    says why it wrote nothing."""
    from repro.core.hints import is_command
    from repro.rehearse.rehearsal import report_html, verify_run
    from repro.rehearse.result import RehearsalResult

    bundle = REPO / "tests/fixtures/published/azure-nd-gb200-v6-v5.1"
    recipe = get_recipe("nd-gb200-v6")
    seen = verify_run(recipe, Workspace.open(tmp_path / "ws"), str(bundle))
    assert seen["verdict"] in ("PASS", "FAIL") and seen["label"] is None and not seen["as_rehearsal"], seen
    assert seen["next_command"].startswith("repro report ") and is_command(seen["next_command"])
    missing = report_html(str(tmp_path / "no-run"), tmp_path / "r.html")
    assert not missing["written"] and "no-run" in missing["error"] and not (tmp_path / "r.html").exists()

    result = RehearsalResult(recipe.name, tmp_path, Scaling.for_recipe(recipe), "img")
    result.runs = [{"run_dir": str(bundle), "valid": True, "scenario": "Offline"}]
    result.verify = [{**seen, "as_rehearsal": True}]
    result.report = [{"written": True}]
    assert result.ok and split_hint(result.next_command).command == "repro rehearse --recipe nd-gb200-v6 --nodes 2"
    result.nodes = 2
    result.rack = {"counted": 2, "left_jobs": [], "rack_dir": str(tmp_path / "rack")}
    assert result.ok and split_hint(result.next_command).command == "repro guide --recipe nd-gb200-v6"
    result.nodes, result.rack = 1, None
    result.report = [{"written": False}]
    assert not result.ok
    result.verify, result.report = [seen], []
    assert (
        not result.ok
        and result.next_command == f"repro verify {bundle} --recipe nd-gb200-v6"
        and is_command(result.next_command)
    )


def test_rack_node_reads_the_shared_workspaces_files(tmp_path: Path) -> None:
    """A rehearsal node's home gets setup's model and dataset and build-engine's output as hard links to the shared
    workspace's files (the same inodes, seen inside the servers' mount too); its runs and ledger stay its own."""
    import os

    from repro.rehearse.rehearsal import link_shared_inputs

    shared, home = Workspace.open(tmp_path / "shared").ensure(), Workspace.open(tmp_path / "home")
    files = [shared.models / "m/config.json", shared.preprocessed / "d/manifest.json", shared.engines / "r/c/x.bin"]
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f.name)
    (shared.runs / "other").mkdir()
    assert link_shared_inputs(shared, home) == ["models", "preprocessed", "engines"]
    for f in files:
        mine = home.root / f.relative_to(shared.root)
        assert os.stat(mine).st_ino == os.stat(f).st_ino and not mine.is_symlink()
    assert not (home.root / "runs").exists() and not (home.root / "ledger.json").exists()


def test_a_node_run_records_the_shared_inputs_not_its_passing_home(tmp_path: Path) -> None:
    """A node's home (removed when its Slurm task ends) holds links to the shared workspace's dataset and model;
    run.json names the shared files, so `repro explain` and `repro report` still find them afterwards."""
    import shutil

    from helpers import write_prepared

    from repro.rehearse.rehearsal import link_shared_inputs
    from repro.report.explain import explain
    from repro.run.harness import run_benchmark
    from repro.run.options import RunOptions

    shared, home = Workspace.open(tmp_path / "shared").ensure(), Workspace.open(tmp_path / "home").ensure()
    data = write_prepared(shared.preprocessed / get_recipe("nd-h100-v5").dataset.name, 32, name="mlperf-openorca")
    link_shared_inputs(shared, home)
    out = run_benchmark(
        RunOptions.build("nd-h100-v5", home, backend="sim", samples=32, detect=False, inputs_from=shared)
    )
    run = Path(shutil.copytree(out.details["log_dir"], tmp_path / "rack" / "vm-00"))
    assert json.loads((run / "run.json").read_text())["dataset_path"] == str(data)
    shutil.rmtree(home.root)
    assert explain(run).tokens.input_source == f"measured: mean of 32 prompts in {data}"


def test_device_requests_are_the_recipes_gpus_per_server(tmp_path: Path) -> None:
    """Recorded though this machine has no NVIDIA runtime: each server asks Docker for its own tp x pp GPUs, and
    together they are the VM's GPUs, each once."""
    for name in GPU_RECIPES:
        recipe = get_recipe(name)
        assert recipe.trtllm is not None
        servers = plan(name, tmp_path).device_requests
        assert len(servers) == recipe.trtllm.servers_per_vm
        ids = []
        for server in servers:
            (req,) = server["device_requests"]
            assert req["Capabilities"] == [["gpu"]] and req["Count"] == 0
            assert len(req["DeviceIDs"]) == recipe.trtllm.tp_size * recipe.trtllm.pp_size
            ids += req["DeviceIDs"]
        assert sorted(ids, key=int) == [str(i) for i in range(recipe.system.gpus_per_vm)], name
    assert not any(tmp_path.iterdir())


def test_doctor_sees_the_recipes_gpus_through_the_standins(tmp_path: Path) -> None:
    """The doctor step runs the real `repro doctor` with the stand-in NVML bindings and nvidia-smi first on its own
    paths: it reports the recipe's GPUs and driver, and this process keeps its own PATH and NVML."""
    import os

    path = os.environ["PATH"]
    recipe = get_recipe("nd-gb300-v6")
    doc = doctor_step(recipe, Workspace.open(tmp_path))
    assert doc["label"] == "stand-in GPUs" and doc["gpus_as_recipe"], doc
    assert [g["name"] for g in doc["gpus"]] == [recipe.system.gpu_name] * recipe.system.gpus_per_vm
    assert {g["arch"] for g in doc["gpus"]} == {recipe.system.gpu_arch} and doc["driver"] == "580.65.06"
    assert doc["gpus"][0]["memory_mib"] == int(float(recipe.system.gpu_memory_gb) * 1024)
    nvidia_runtime = next(c for c in doc["checks"] if c["name"] == "NVIDIA container runtime")
    assert nvidia_runtime["status"] == "FAIL"  # not stood in: this machine's Docker has no NVIDIA runtime
    assert os.environ["PATH"] == path and "STANDIN_GPUS" not in os.environ
    smi = subprocess.run(
        [str(Path(__file__).parents[1] / "repro/rehearse/standin/bin/nvidia-smi"), "--query-gpu=name,bogus"],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "STANDIN_GPUS": json.dumps(
                {"name": "x", "count": 1, "memory_mib": 1, "driver": "1", "compute_capability": "9.0"}
            ),
        },
    )
    assert smi.returncode == 2 and "not a valid field" in smi.stderr


def test_setup_meets_the_gate_as_on_the_hub(tmp_path: Path) -> None:
    """repro setup's own download code against the local hub with the recipe's repo id and revision: 401 without a
    token (the message says to log in), 403 before the license is accepted, then the tiny model and the dataset under
    their real file names; this process's hub settings come back and the token is stored nowhere."""
    import os

    from repro.rehearse.rehearsal import OUT_LEN, VOCAB, tiny_prompts
    from repro.rehearse.setup_step import TOKEN, gated_setup

    recipe = get_recipe("nd-gb200-v6")
    ws = Workspace.open(tmp_path / "ws")
    before = {k: os.environ.get(k) for k in ("HF_ENDPOINT", "HF_TOKEN")}
    out = gated_setup(recipe, ws, tiny_prompts(), OUT_LEN, VOCAB)
    assert [a["http"] for a in out["attempts"]] == [401, 403, 200] and out["status"] == "done"
    assert "no Hugging Face token was sent" in out["attempts"][0]["message"]
    assert "has no access yet" in out["attempts"][1]["message"]
    assert (out["repo_id"], out["revision"]) == (recipe.model.repo_id, recipe.model.revision)
    # the recipe pins the sampled set (MLCommons' published SHA-256), so the stand-in's sampled file is pinned and
    # fetched; the calibration file has no published checksum, so it is derived from the sampled set, not fetched
    assert out["dataset_files"] == [recipe.dataset.files["sampled"]]
    assert out["derived_from_sampled"] == ["calibration"]
    assert "model-00001-of-00001.safetensors" in out["model_files"] and "README.md" not in out["model_files"]
    assert (ws.data / recipe.dataset.name / recipe.dataset.files["sampled"]).is_file()
    assert not (ws.data / recipe.dataset.name / recipe.dataset.files["calibration"]).exists()
    assert (Path(out["prepared_dir"]) / "manifest.json").is_file()
    assert (Path(out["prepared_dir"]) / "mlperf_llama2_openorca_calibration_1k" / "data.parquet").is_file()
    assert {k: os.environ.get(k) for k in ("HF_ENDPOINT", "HF_TOKEN")} == before
    assert TOKEN not in json.dumps(out)
    assert not [p for p in ws.root.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]


def test_405b_setup_takes_the_pinned_r2_path(tmp_path: Path) -> None:
    """nd-gb200-v6-405b: the gated Llama-3.1-405B repo id and MLCommons' revision on the stand-in hub; its dataset
    has no direct URL, so the stand-in places the R2 downloader's two files in the data folder and its mirror serves
    MLCommons' .md5 list beside each .uri. Setup checks the published MD5 (here the stand-in's own), the list and the
    bytes, records the SHA-256 of the verified bytes, says once that the calibration file has no independent
    checksum, unpickles both, and the prepared set keeps each sample's metric for the 405B accuracy evaluation."""
    from repro.core.ledger import Ledger
    from repro.rehearse.rehearsal import OUT_LEN, VOCAB, tiny_prompts
    from repro.rehearse.setup_step import gated_setup
    from repro.setup.dataset import load_prepared

    recipe = get_recipe("nd-gb200-v6-405b")
    ws = Workspace.open(tmp_path / "ws")
    prompts = tiny_prompts()
    out = gated_setup(recipe, ws, prompts, OUT_LEN, VOCAB)
    assert [a["http"] for a in out["attempts"]] == [401, 403, 200] and out["status"] == "done"
    assert (out["repo_id"], out["revision"]) == (
        "meta-llama/Llama-3.1-405B-Instruct",
        "be673f326cab4cd22ccfef76109faf68e41aa5f1",
    )
    lists = sorted(p.list_url.rsplit("/", 1)[-1] for p in recipe.dataset.md5.values() if p.list_url)
    assert lists == ["llama3-1-405b-calibration-dataset-512.md5", "llama3-1-405b-dataset-8313.md5"]
    assert out["dataset_files"] == lists and out["dataset_placed"] == sorted(recipe.dataset.files.values())
    assert out["derived_from_sampled"] == []
    pins = out["dataset_pins"]
    assert pins["sampled"]["md5"] == pins["sampled"]["published_md5"] == pins["sampled"]["list_md5"]
    assert pins["sampled"]["published_by"] == recipe.dataset.md5["sampled"].sources
    assert pins["calibration"]["published_md5"] is None and pins["calibration"]["list_from"] == "https"
    assert out["notes"] == [
        f"dataset calibration ({recipe.dataset.files['calibration']}): " + recipe.dataset.md5["calibration"].note
    ]
    data = ws.data / recipe.dataset.name
    outputs = {a.path: a.sha256 for a in Ledger.load(ws.ledger_path).get("setup").outputs}  # type: ignore[union-attr]
    for role, fname in recipe.dataset.files.items():
        assert outputs[str(data / fname)] == pins[role]["sha256"]
    prepared = load_prepared(Path(out["prepared_dir"]))
    assert prepared.manifest["source_sha256"] == pins["sampled"]["sha256"]
    assert len(prepared) == len(prompts) and prepared.metrics is not None
    assert set(prepared.metrics) == {"rouge", "niah_em", "qa_em"}
    calib = Path(out["prepared_dir"]) / "mlperf_llama3.1_405b_dataset_512_processed_fp16_calibration" / "data.parquet"
    assert calib.is_file()


def test_standin_trtllm_tools_take_the_build_plans_flags_and_refuse_others(tmp_path: Path) -> None:
    """The stand-in quantize.py and trtllm-build parse with the pinned release's contract: every command repro's build
    plan runs through them writes the files the real tools write; an unknown flag exits 2 as argparse does."""
    import os
    from pathlib import PurePosixPath

    from repro.engine import quantize as q
    from repro.rehearse.rehearsal import STANDIN_DIR

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("trtllm-build", "quantize.py"):
        (bin_dir / name).symlink_to(STANDIN_DIR / "trtllm_tools.py")
    ran = 0
    for name in GPU_RECIPES:
        recipe = get_recipe(name)
        assert recipe.trtllm is not None
        root = tmp_path / name
        p = q.paths_for(recipe, root=PurePosixPath(root))
        (Path(p.model_dir) / "config.json").parent.mkdir(parents=True)
        (Path(p.model_dir) / "config.json").write_text("{}")
        env = {**os.environ, "STANDIN_TRTLLM_VERSION": recipe.trtllm.version}
        quantize = q.quantize_command(recipe, p)
        build = q.build_command(recipe, p)
        world = recipe.trtllm.tp_size * recipe.trtllm.pp_size
        if quantize[1] == q.TRTLLM_QUANTIZE:
            done = subprocess.run(
                [str(bin_dir / "quantize.py"), *quantize[2:]], capture_output=True, text=True, env=env
            )
            assert done.returncode == 0, done.stderr
            assert {f.name for f in Path(p.checkpoint_dir).iterdir()} == {"config.json"} | {
                f"rank{r}.safetensors" for r in range(world)
            }
            ran += 1
        else:
            Path(p.checkpoint_dir).mkdir(parents=True)
            (Path(p.checkpoint_dir) / "config.json").write_text(json.dumps({"mapping": {"world_size": world}}))
        if build is not None:
            done = subprocess.run([str(bin_dir / "trtllm-build"), *build[1:]], capture_output=True, text=True, env=env)
            assert done.returncode == 0, done.stderr
            engine = json.loads((Path(str(p.engine_dir)) / "config.json").read_text())
            assert engine["version"] == recipe.trtllm.version and "stand-in" in engine["repro"]
            assert sorted(f.name for f in Path(str(p.engine_dir)).glob("rank*.engine")) == [
                f"rank{r}.engine" for r in range(world)
            ]
            refused = subprocess.run(
                [str(bin_dir / "trtllm-build"), *build[1:], "--no_such_flag=1"], capture_output=True, text=True, env=env
            )
            assert refused.returncode == 2 and "unrecognized arguments: --no_such_flag=1" in refused.stderr
            ran += 1
    assert ran == 4  # both gb200 recipes' quantize.py and trtllm-build; the PyTorch recipes quantize with ModelOpt
    refused = subprocess.run([str(bin_dir / "quantize.py"), "--qformat=fp8", "--bogus"], capture_output=True, text=True)
    assert refused.returncode == 2 and "unrecognized arguments: --bogus" in refused.stderr


def test_reference_only_and_demo_recipes_are_refused_before_building(tmp_path: Path) -> None:
    """dgx-h100 is reference-only (repro does not run it); the demo has no TensorRT-LLM image."""
    for name, why in (("dgx-h100", "reference-only"), ("demo", "no TensorRT-LLM image")):
        with pytest.raises(InputError, match=why):
            plan(name, tmp_path)
        with pytest.raises(InputError, match=why):
            rehearse(name, tmp_path, client=object())
    assert not any(tmp_path.iterdir())


FULL_WALK = "nd-gb200-v6-405b"
"""The recipe the fixed-pace rehearsal walks in full: the TensorRT-LLM engine path with two engines (Offline's and
Server's own), the 405B dataset and one server. The other recipes' differences (their GPUs, servers, backends and
twins) are held by the cheaper tests around it; benchmarks/rehearsal_time.py walks every recipe."""
PACE_WALK = "nd-gb300-v6"
"""The recipe the published-pace rehearsal walks in full: the PyTorch path, four servers, and all three scenarios
(Interactive streamed too)."""


@pytest.mark.parametrize("name", GPU_RECIPES)
def test_each_recipes_rehearsal_plans_its_steps_and_doctor_sees_its_gpus(name: str, tmp_path: Path) -> None:
    """What a rehearsal does differently per recipe before its runs, without Docker: its steps, and `repro doctor`
    through the stand-in NVML and nvidia-smi reports the recipe's GPUs, each of the recipe's count."""
    recipe = get_recipe(name)
    assert plan(name, tmp_path / "plan").steps == STEPS
    doc = doctor_step(recipe, Workspace.open(tmp_path / "ws"))
    assert doc["label"] == "stand-in GPUs" and doc["gpus_as_recipe"], doc
    assert [g["name"] for g in doc["gpus"]] == [recipe.system.gpu_name] * recipe.system.gpus_per_vm


@pytest.mark.docker
@pytest.mark.slow
def test_rehearsal_runs_offline_and_server_valid_and_leaves_nothing(client, tmp_path: Path) -> None:
    name = FULL_WALK
    result = rehearse(name, tmp_path / name, client=client)
    assert result.steps == STEPS
    assert result.doctor is not None and result.doctor["gpus_as_recipe"] and result.doctor["label"] == "stand-in GPUs"
    assert len(result.doctor["gpus"]) == get_recipe(name).system.gpus_per_vm
    assert result.device_requests == plan(name, tmp_path / "plan").device_requests
    assert result.setup is not None and result.setup["gate_as_hub"] and result.setup["label"] == "stand-in hub"
    assert result.build is not None and result.build["ok"] and result.build["label"] == "stand-in TensorRT-LLM tools"
    if get_recipe(name).backend == "trtllm-engine":  # gb200: quantize.py and trtllm-build ran in the image
        # once for each engine the recipe builds (405B: Offline's TP2xPP2 and Server's own TP4xPP1)
        engines = [d.engine_scenario for d in get_recipe(name).deployments()]
        assert [(s["engine"], s["step"]) for s in result.build["ran"]] == [
            (e, step) for e in engines for step in ("quantize", "engine")
        ]
    else:  # the PyTorch path quantizes with ModelOpt, which needs the GPU
        assert result.build["ran"] == []
        assert [s["step"] for s in result.build["not_stood_in"]] == ["prepare-calib", "quantize"]
    assert [r["scenario"] for r in result.runs] == ["Offline", "Server"]
    for run in result.runs:
        assert run["validity"] == "VALID", run
        assert run["verdict"] == "NOT A REPRODUCTION" and run["label"] == "rehearsal"
        info = json.loads(next(Path(run["run_dir"]).rglob("run.json")).read_text())
        assert info["label"] == "rehearsal"
        assert info["servers"]["servers"] and all(s["image"] == result.image for s in info["servers"]["servers"])
    assert_no_invalid_config(tmp_path / name)
    # the Server run is at the rate `repro tune server` found against the stand-in servers, and says so
    tuned, server = result.tune, result.runs[1]
    assert tuned is not None and tuned["chosen_qps"] and tuned["label"] == "rehearsal"
    assert server["target_qps"] == tuned["chosen_qps"] and server["target_qps_source"]["from"] == "repro tune"
    # `repro verify RUN` and `repro report RUN --html FILE`, as a user runs them, on each run
    assert [v["run_dir"] for v in result.verify] == [r["run_dir"] for r in result.runs]
    for v, run in zip(result.verify, result.runs, strict=True):
        assert v["verdict"] == "NOT A REPRODUCTION" and v["label"] == "rehearsal" and v["reproduction"] is False
        assert v["exit_code"] == 1 and v["as_rehearsal"] and v["scenario"] == run["scenario"]
        # the hint keeps the flags the verify step was given (recipe, workspace), as every Next line does
        want = f"repro report {run['run_dir']} --html report.html --recipe {name} --workspace "
        assert v["next_command"].startswith(want), v["next_command"]
    assert [r["result_dir"] for r in result.report] == [r["run_dir"] for r in result.runs]
    for rep in result.report:
        assert rep["written"] and rep["label"] == "rehearsal" and rep["reproduction"] is False
        assert "REHEARSAL" in Path(rep["html"]).read_text() and Path(rep["html"]).parent == tmp_path / name / "reports"
    assert split_hint(result.next_command).command == f"repro rehearse --recipe {name} --nodes 2"
    # `repro attest`, then `repro attest verify`, on each rehearsal run (issue #38): the server image's digest
    for run in result.runs:
        made = cli("attest", run["run_dir"], "--json")
        assert made.exit_code == 0 and json.loads(made.stdout)["label"] == "rehearsal", made.output
        statement = attested_statement(Path(run["run_dir"]) / "attestation.intoto.json")
        image = statement["predicate"]["software"]["container_image"]
        assert image["digest"].startswith("sha256:") and image["recorded"] == result.image, image
        checked = cli("attest", "verify", str(Path(run["run_dir"]) / "attestation.intoto.json"), "--json")
        assert checked.exit_code == 0 and json.loads(checked.stdout)["verified"], checked.output
    assert result.ok and result.left_containers == []
    assert_own_servers_gone(client, result.runs)


@pytest.mark.docker
@pytest.mark.slow
def test_rack_rehearsal_runs_each_node_through_slurm(client, slurm: None, tmp_path: Path) -> None:
    """`--nodes 2`: doctor, setup into the shared workspace, build-engine, then each Slurm task runs repro on the host,
    which reads setup's dataset and starts that node's servers through Docker (own names, labels and ports); the image
    goes through the rack folder (docker save); both VALID, summed; `repro aggregate` and `repro report` of the rack
    folder as a user runs them; nothing left."""
    result = rehearse("nd-gb300-v6", tmp_path / "rack", nodes=2, client=client)
    assert result.steps == RACK_STEPS and result.rack is not None
    assert result.doctor is not None and result.doctor["gpus_as_recipe"]
    assert result.setup is not None and result.setup["gate_as_hub"] and result.build is not None
    setup_sha = json.loads((Path(result.setup["prepared_dir"]) / "manifest.json").read_text())["dataset_sha256"]
    assert [r["node"] for r in result.runs] == ["vm-00", "vm-01"]
    for run in result.runs:
        assert run["validity"] == "VALID" and run["verdict"] == "NOT A REPRODUCTION" and run["label"] == "rehearsal"
        info = json.loads((Path(run["run_dir"]) / "run.json").read_text())
        assert info["label"] == "rehearsal" and info["dataset_sha256"] == setup_sha
        # the shared workspace's files, not the node's home (gone when its task ends)
        assert info["dataset_path"] == result.setup["prepared_dir"] and info["model_path"] == result.setup["model_dir"]
        names = [s["container"] for s in info["servers"]["servers"]]
        assert (
            names
            and all(f"-{run['node']}-" in n for n in names)
            and all(s["image"] == result.image for s in info["servers"]["servers"])
        )
    rack = result.rack
    assert rack["tasks"] == {"vm-00": "done", "vm-01": "done"} and rack["counted"] == 2 and rack["left_jobs"] == []
    assert rack["total_tokens_per_s"] == pytest.approx(sum(r["tokens_per_s"] for r in result.runs), abs=0.05)
    assert rack["image_source"] == "archive" and next((Path(rack["rack_dir"]) / "image").glob("*.tar")).stat().st_size
    assert json.loads((Path(rack["rack_dir"]) / "rack.json").read_text())["label"] == "rehearsal"
    for run in result.runs:  # each node's repro wrote its own run into its folder (--into), not a copy of "the newest"
        info = json.loads((Path(run["run_dir"]) / "run.json").read_text())
        assert info["run_dir"] == str(Path(rack["rack_dir"]) / run["node"]) == str(Path(run["run_dir"]).parents[1])
    assert not Path(rack["rack_dir"] + ".work").exists()  # the nodes' homes went, and their folder with them
    (verified,) = result.verify
    assert verified["command"] == f"repro aggregate {rack['rack_dir']} --recipe nd-gb300-v6"
    assert verified["verdict"] == {"vm-00": "NOT A REPRODUCTION", "vm-01": "NOT A REPRODUCTION"}
    assert verified["label"] == "rehearsal" and verified["exit_code"] == 1 and verified["as_rehearsal"]
    assert verified["total_tokens_per_s"] == pytest.approx(rack["total_tokens_per_s"], abs=0.01)
    (report,) = result.report
    assert report["result_dir"] == rack["rack_dir"] and report["written"] and report["label"] == "rehearsal"
    assert split_hint(result.next_command).command == "repro guide --recipe nd-gb300-v6"
    assert result.ok and result.left_containers == []
    assert_own_servers_gone(client, result.runs)


PUBLISHED_STEPS = {
    "nd-gb200-v6-405b": ["run offline", "run server"],
    "nd-gb200-v6": ["run offline", "run server", "run interactive"],
    "nd-gb300-v6": ["run offline", "run server", "run interactive"],
    "nd-h100-v5": ["run offline", "run server"],
    "nd-h200-v5": ["run offline", "run server", "run interactive"],
    "nc-h100-v5": ["run offline", "run server"],
}


@pytest.mark.slow  # each recipe's twin is fitted first (10-30 s; once per process, shared with tests/test_twin.py)
@pytest.mark.parametrize("name", GPU_RECIPES)
def test_each_recipes_published_pace_fits_this_host_and_cites_its_logs(name: str, tmp_path: Path) -> None:
    """The part of a published-pace rehearsal that differs per recipe, its twin and each run's pace, as planned:
    every latency-bound run keeps the published p99 TTFT at least this host's own delay under its scaled limit
    where a scale can (at time x 1 none can shrink the host's delay) and issues the queries LoadGen's early
    stopping needs; each run's LoadGen time here is bounded (Offline's cut query, a latency run's queries at its
    rate), so the rehearsal fits its 3 minutes (benchmarks/rehearsal_time.py times it); the client's stall deadline
    is the real one times the scale; each twin parameter names its log line."""
    from repro.rehearse import pace as P
    from repro.rehearse.twin import calibrate

    recipe = get_recipe(name)
    paced = plan(name, tmp_path / "plan", pace="published")  # the published one runs each scenario, no tune
    assert paced.steps == ["doctor", "setup", "build-engine", *PUBLISHED_STEPS[name], "verify", "report"]
    assert not (tmp_path / "plan").exists()  # a dry run writes nothing, not even the twin's fit
    paces = P.plan_pace(recipe, 1 / 400)
    assert set(paces) == {s.split()[1].capitalize() for s in PUBLISHED_STEPS[name]}
    cal = calibrate(name)
    loadgen_s = 0.0
    for scenario, pace in paces.items():
        k, s = pace.time_scale.factor, pace.settings
        assert 0 < k <= 1 or scenario != "Offline" and k <= 10, (scenario, k)  # a latency run may stretch
        assert pace.twin.time_scale == k
        assert 0 < pace.width <= 1 and pace.twin.replicas == 1 or pace.width == pace.twin.replicas >= 2
        assert pace.stall_timeout_s > 0 and pace.to_json()["stall_timeout_s"]["here"] == pytest.approx(
            pace.stall_timeout_s * k
        )
        seconds = int(s["min_query_count"]) / float(s["target_qps"])
        if scenario == "Offline":
            assert seconds <= P.OFFLINE_RUN_S * 1.1 or s["min_duration"] <= P.OFFLINE_RUN_S * 1000, (scenario, s)
        else:
            limit_s = recipe.bench.rules(scenario).ttft_ms / 1000
            assert s["ttft_latency_ns"] == round(limit_s * 1e9 * k)
            # the scale keeps this host's delay under the margin of the p99 TTFT the run's twin should give: its own
            # on the recipe's engine where that is under the limit, else the published log's
            published, p99 = cal.scenarios[scenario].figures["ttft_p99"].value, pace.expected_ttft_p99_s
            assert p99 is not None and (p99 < limit_s or p99 == published), (scenario, p99, published)
            assert (limit_s - p99) * k >= P.TTFT_OVERHEAD_S - 1e-9, (scenario, k, p99)  # the host's delay fits
            assert s["min_query_count"] >= P.EARLY_STOPPING_QUERIES and seconds <= P.LATENCY_RUN_S + 1, s
        loadgen_s += max(seconds, int(s["min_duration"]) / 1000)
        sources = cal.to_json()["scenarios"][scenario]["sources"]
        assert any("logs/" in x["how"] and ".txt:" in x["how"] for x in sources), sources
    assert loadgen_s <= P.OFFLINE_RUN_S + 2 * P.LATENCY_RUN_S + 5, loadgen_s


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.soak  # about 3 minutes; what differs per recipe is checked by the test above, in seconds
def test_rehearsal_at_the_published_pace_runs_the_twin_valid(client, tmp_path: Path) -> None:
    """`repro rehearse --pace published` (issue 42's second done-when), walked in full on PACE_WALK: every scenario
    the recipe's twin has runs against it, each run in its own process at its own stated time scale (Offline at
    --time-scale, latency-bound runs where this host's own delay stays under the published TTFT margin), Server and
    Interactive streamed (TTFT well under the whole answer), VALID by LoadGen's own verdict; the JSON names the
    twin's parameters with their log lines; no run's log holds error_invalid_config. How long it takes is
    benchmarks/rehearsal_time.py's to say (docs/BENCHMARKS.md), not a timed test's."""
    name = PACE_WALK
    result = rehearse(name, tmp_path / name, pace="published", client=client)
    doc = result.to_json()
    assert result.steps == ["doctor", "setup", "build-engine", *PUBLISHED_STEPS[name], "verify", "report"]
    assert doc["scaling"]["pace"] == "published" and set(doc["scaling"]["runs"]) == {
        s.split()[1].capitalize() for s in PUBLISHED_STEPS[name]
    }
    for scenario, paced in doc["scaling"]["runs"].items():
        # a thin twin is sent a share of the published load; a wide one, whole copies of the published server
        width, replicas = paced["width"], paced["replicas"]
        assert paced["time_scale"]["factor"] <= 1 or scenario != "Offline"  # only a latency run stretches time
        assert 0 < width <= 1 and replicas == 1 or width == replicas >= 2
        twin = doc["twin"]["scenarios"][scenario]
        assert any("logs/" in s["how"] and ".txt:" in s["how"] for s in twin["sources"]), twin["sources"]
    for run in result.runs:
        print(name, run["scenario"], run["validity"], run.get("error"), run.get("time_scale"))
        summary = (Path(run["run_dir"]) / "performance/run_1/mlperf_log_summary.txt").read_text()
        if run["scenario"] != "Offline":  # streamed: the first token long before the answer ends
            ttft = int(summary.split("50.00 percentile first token latency (ns)")[1].split(":")[1].split()[0])
            latency = int(summary.split("50.00 percentile latency (ns)")[1].split(":")[1].split()[0])
            assert ttft < latency / 4, (ttft, latency)
    assert_no_invalid_config(tmp_path / name)
    assert [r["validity"] for r in result.runs] == ["VALID"] * len(result.runs), result.runs
    assert result.build is not None  # the PyTorch path: ModelOpt's steps need the GPU, so none is stood in
    assert [x["step"] for x in result.build["not_stood_in"]] == ["prepare-calib", "quantize"]
    assert result.ok and result.left_containers == []
