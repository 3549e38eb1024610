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
    has no direct URL and no published checksum, so the stand-in does what setup's refusal tells a user: the R2
    downloader's two files placed in the data folder, pinned in the recipe copy. Setup checks and unpickles them,
    and the prepared set keeps each sample's metric for the 405B accuracy evaluation."""
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
    assert out["dataset_files"] == [] and out["dataset_placed"] == sorted(recipe.dataset.files.values())
    assert out["derived_from_sampled"] == []
    prepared = load_prepared(Path(out["prepared_dir"]))
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


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("name", GPU_RECIPES)
def test_rehearsal_runs_offline_and_server_valid_and_leaves_nothing(client, name: str, tmp_path: Path) -> None:
    result = rehearse(name, tmp_path / name, client=client)
    assert result.steps == STEPS
    assert result.doctor is not None and result.doctor["gpus_as_recipe"] and result.doctor["label"] == "stand-in GPUs"
    assert len(result.doctor["gpus"]) == get_recipe(name).system.gpus_per_vm
    assert result.device_requests == plan(name, tmp_path / "plan").device_requests
    assert result.setup is not None and result.setup["gate_as_hub"] and result.setup["label"] == "stand-in hub"
    assert result.build is not None and result.build["ok"] and result.build["label"] == "stand-in TensorRT-LLM tools"
    if get_recipe(name).backend == "trtllm-engine":  # gb200: quantize.py and trtllm-build ran in the image
        assert [s["step"] for s in result.build["ran"]] == ["quantize", "engine"]
    else:  # the PyTorch path quantizes with ModelOpt, which needs the GPU
        assert result.build["ran"] == []
        assert [s["step"] for s in result.build["not_stood_in"]] == ["prepare-calib", "quantize"]
    assert [r["scenario"] for r in result.runs] == ["Offline", "Server"]
    for run in result.runs:
        assert run["validity"] == "VALID", run
        assert run["verdict"] == "NOT A REPRODUCTION" and run["label"] == "rehearsal"
        info = json.loads(next(Path(run["run_dir"]).rglob("run.json")).read_text())
        assert info["label"] == "rehearsal"
        # tune's probes ran LoadGen in this process first; a lone `repro run` has no such error
        assert info["servers"]["servers"] and all(s["image"] == result.image for s in info["servers"]["servers"])
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
    assert managed_containers("org.repro.rehearsal", client=client) == []


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
    assert managed_containers("org.repro.rehearsal", client=client) == []
