"""Rack scale through Slurm (issue #7): real job arrays on the local one-node cluster (`.ci/start-slurm.sh`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import cli

from repro.core.errors import InputError, StepFailed
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.run.rack import (
    check,
    collect,
    follow,
    launch_offline,
    plan_rack,
    render_script,
    rerun_failed,
    submit,
)
from repro.run.rack_folder import RACK_JSON, load_manifest, task_rows
from repro.run.slurm import _indices
from repro.setup.dataset import save_prepared

RECIPE = "nd-gb300-v6"
SIM = dict(backend="sim", duration_s=2, samples=700)


@pytest.fixture
def ws(_isolated_home: Path) -> Workspace:
    """A workspace with a small prepared dataset, which the simulated VMs replay."""
    w = Workspace.open(None).ensure()
    rng = np.random.default_rng(7)
    prompts = [rng.integers(3, 32000, size=int(rng.integers(20, 200))).tolist() for _ in range(64)]
    dataset = get_recipe(RECIPE).dataset.name
    save_prepared(w.preprocessed / dataset, dataset, prompts, rng.integers(10, 400, size=64).tolist(), source="test")
    return w


def test_array_notation() -> None:
    assert _indices("3") == [3]
    assert _indices("0-5%2") == [0, 1, 2, 3, 4, 5]
    assert _indices("1,3,6-7") == [1, 3, 6, 7]
    assert _indices("[0-4:2]") == [0, 2, 4]


def test_dry_run_prints_the_script_and_submits_nothing(ws: Workspace) -> None:
    res = cli(
        "run",
        "offline",
        "--launcher",
        "slurm",
        "--nodes",
        "3",
        "--recipe",
        RECIPE,
        "--backend",
        "sim",
        "--duration",
        "2",
        "--samples",
        "700",
        "--partition",
        "gpu",
        "--dry-run",
        "--json",
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    script = doc["script"]
    for line in ("#SBATCH --array=0-2", "#SBATCH --exclusive", "#SBATCH --partition=gpu", "#SBATCH --nodes=1"):
        assert line in script
    assert "--backend sim --duration 2 --samples 700 --sim-rate 60800" in script
    assert doc["label"] == "simulated" and "[simulated]" in script
    assert doc["submit_command"][:2] == ["sbatch", "--parsable"]
    assert not (ws.root / "racks").exists()
    syntax = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert syntax.returncode == 0, syntax.stderr
    rich = cli(
        "run", "offline", "--launcher", "slurm", "--nodes", "2", "--recipe", RECIPE, "--backend", "sim", "--dry-run"
    )
    assert rich.exit_code == 0 and "#SBATCH --array=0-1" in rich.output and "dry run [simulated]" in rich.output
    assert not (ws.root / "racks").exists()


def test_rack_runs_repro_on_each_host_with_the_image_build_engine_builds(ws: Workspace) -> None:
    """Before: the dry run exited 2 without --container-image, then each task ran `docker run IMAGE repro`, which
    the image's entrypoint rejects, with no Docker inside to start trtllm-serve, from a tag no other node has."""
    from repro.engine.plan import plan_build

    built = plan_build(get_recipe(RECIPE), ws).image.tag
    res = cli("run", "offline", "--launcher", "slurm", "--nodes", "2", "--recipe", RECIPE, "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    script = doc["script"]
    assert doc["container_image"] == built and doc["image_source"] == "archive"
    assert f"--server-image {built}" in script and 'LAUNCH=("$REPRO_BIN" "${ARGS[@]}")' in script
    assert "docker run" not in script and "--container-image=" not in script
    assert 'docker load -i "$IMAGE_ARCHIVE"' in script and "IMAGE_ARCHIVE=" in script
    assert doc["next_command"].startswith("repro run offline --launcher slurm --nodes 2 --recipe nd-gb300-v6")
    assert "--dry-run" not in doc["next_command"] and "\n" not in doc["next_command"]
    lint = subprocess.run(["shellcheck", "-"], input=script, text=True, capture_output=True)
    assert lint.returncode == 0, lint.stdout
    assert not (ws.root / "racks").exists()
    rich = cli("run", "offline", "--launcher", "slurm", "--nodes", "2", "--recipe", RECIPE, "--dry-run")
    assert "docker save" in rich.output and "docker load" in rich.output
    assert rich.output.rstrip().splitlines()[-1].startswith("Next: repro run offline --launcher slurm")

    pulled = plan_rack(RECIPE, ws, 18, container_image="registry.example/repro:gb300")
    assert pulled.image_source == "registry" and pulled.image_archive is None
    assert 'docker pull "$IMAGE"' in render_script(pulled) and "IMAGE=registry.example/repro:gb300" in render_script(
        pulled
    )
    pushed = plan_rack(RECIPE, ws, 2, image_registry="myacr.azurecr.io/team")
    assert pushed.container_image == f"myacr.azurecr.io/team/{built}" and pushed.push_from == built


def test_the_image_reaches_a_node_through_the_shared_rack_folder(ws: Workspace, base_image: str) -> None:
    """docker save into the rack folder on the submitting side; a node without the image loads it from there."""
    from repro.run.rack import distribute_image

    plan = plan_rack(RECIPE, ws, 2, container_image=base_image)
    assert plan.image_source == "archive" and plan.image_archive is not None
    ran = distribute_image(plan)
    assert ran[0][:2] == ["docker", "save"] and plan.image_archive.stat().st_size > 0
    assert distribute_image(plan) == []  # saved once per rack
    loaded = subprocess.run(["docker", "load", "-i", str(plan.image_archive)], capture_output=True, text=True)
    assert loaded.returncode == 0 and base_image.split(":")[0] in loaded.stdout, loaded.stderr


def test_bad_input_is_one_clear_line(ws: Workspace, tmp_path: Path) -> None:
    res = cli("run", "offline", "--launcher", "slurm", "--nodes", "2", "--recipe", RECIPE, "--image-registry", "-x")
    assert res.exit_code == 2 and "Traceback" not in res.output
    with pytest.raises(InputError, match="reference-only"):
        plan_rack("dgx-h100", ws, 2, backend="sim")
    with pytest.raises(InputError, match="rack.json"):
        rerun_failed(tmp_path)
    shutil.rmtree(ws.preprocessed)
    with pytest.raises(InputError, match="no prepared dataset"):
        plan_rack(RECIPE, ws, 2, backend="sim")
    assert not (ws.root / "racks").exists()


def test_array_with_a_failed_vm_then_rerun_only_it(slurm: None, ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPRO_FAIL_TASKS", "1")
    first = launch_offline(RECIPE, None, 3, **SIM, poll_s=0.5, timeout_s=150)
    rack = first.rack_dir
    states = {r.vm: r.state for r in first.rows}
    assert states == {"vm-00": "done", "vm-01": "failed", "vm-02": "done"}
    failed = first.rows[1]
    assert failed.exit_code == 1 and "REPRO_FAIL_TASKS" in failed.reason and failed.tokens_per_s is None
    done = [r.tokens_per_s for r in first.rows if r.state == "done"]
    assert all(t and t > 0 for t in done)
    rep = first.report.to_json()
    counted = [v["vm"] for v in rep["vms"] if v["counted"]]
    assert counted == ["vm-00", "vm-02"]
    assert rep["stats"]["total"] == pytest.approx(sum(done), abs=0.05)
    assert first.exit_code == 1 and first.rerun_command and str(rack) in first.rerun_command
    with pytest.raises(StepFailed, match="vm-01") as failure:
        check(first)
    assert failure.value.next_command == first.rerun_command
    manifest = load_manifest(rack)
    assert manifest["status"] == "partial" and manifest["label"] == "simulated"
    run_info = json.loads((rack / "vm-00" / "performance" / "run_1" / "run.json").read_text())
    assert run_info["label"] == "simulated" and run_info["status"] == "complete"
    assert (rack / "rack-report.md").is_file() and not (rack / "vm-00" / ".started").exists()

    monkeypatch.delenv("REPRO_FAIL_TASKS")
    before = {vm: (rack / vm / "task.json").read_text() for vm in ("vm-00", "vm-02")}
    second = check(rerun_failed(rack, poll_s=0.5, timeout_s=150))
    assert check(second) is second
    assert [r.state for r in second.rows] == ["done"] * 3
    jobs = load_manifest(rack)["jobs"]
    assert len(jobs) == 2 and jobs[1]["tasks"] == [1]
    assert {vm: (rack / vm / "task.json").read_text() for vm in ("vm-00", "vm-02")} == before
    assert second.rows[1].job_id == jobs[1]["job_id"] != jobs[0]["job_id"]
    rep = second.report.to_json()
    assert [v["vm"] for v in rep["vms"] if v["counted"]] == ["vm-00", "vm-01", "vm-02"]
    assert rep["stats"]["total"] == pytest.approx(sum(r.tokens_per_s for r in second.rows), abs=0.05)
    assert load_manifest(rack)["status"] == "complete" and second.rerun_command is None
    assert (rack.with_name(rack.name + ".work") / "attempts" / f"vm-01-{jobs[0]['job_id']}" / "task.json").is_file()

    res = cli("aggregate", str(rack), "--json")
    assert json.loads(res.stdout)["stats"]["vms"] == 3


def test_scancel_mid_run_leaves_a_clear_state(slurm: None, ws: Workspace) -> None:
    plan = plan_rack(RECIPE, ws, 2, backend="sim", duration_s=120, samples=100_000, sim_rate=2000)
    job = submit(plan)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(
            r.state == "running" and (plan.rack_dir / r.vm / "repro.log").exists() for r in task_rows(plan.rack_dir)
        ):
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"tasks never started: {[r.to_json() for r in task_rows(plan.rack_dir)]}")
    time.sleep(3)
    subprocess.run(["scancel", job], check=True)
    rows = follow(plan.rack_dir, poll_s=0.5, timeout_s=60)
    assert [r.state for r in rows] == ["cancelled", "cancelled"]
    assert all("cancel" in r.reason.lower() for r in rows)
    for r in rows:
        kept = plan.rack_dir / r.vm
        assert not (kept / ".started").exists() and not (plan.work_dir / r.vm).exists()
        if (kept / "performance" / "run_1" / "run.json").exists():
            assert json.loads((kept / "performance" / "run_1" / "run.json").read_text())["incomplete"] is True
    result = collect(plan.rack_dir, rows)
    assert load_manifest(plan.rack_dir)["status"] == "cancelled"
    assert result.exit_code == 1 and result.rerun_command and len(result.failed) == 2
    report = result.report.to_json() if result.report is not None else None
    assert report is None or not any(v["counted"] for v in report["vms"])
    doc = result.to_json()
    assert doc["failed"] == ["vm-00", "vm-01"] and json.loads(json.dumps(doc))["status"] == "cancelled"
    assert not (plan.rack_dir / RACK_JSON).with_suffix(".json.tmp").exists()


def test_cli_rack_run_exits_non_zero_and_names_the_rerun(slurm: None, ws: Workspace) -> None:
    env = {**os.environ, "REPRO_FAIL_TASKS": "0"}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from repro.cli import main; main()",
            "run",
            "offline",
            "--launcher",
            "slurm",
            "--nodes",
            "2",
            "--recipe",
            RECIPE,
            "--backend",
            "sim",
            "--duration",
            "2",
            "--samples",
            "700",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=170,
    )
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["failed"] == ["vm-00"] and doc["done"] == 1 and doc["label"] == "simulated"
    assert doc["aggregate"]["excluded"] == ["vm-00"] and doc["aggregate"]["stats"]["vms"] == 1
    assert "--rerun-failed" in proc.stderr and doc["rack_dir"] in proc.stderr and "Traceback" not in proc.stderr


def test_vm_slurm_forgot_is_missing_and_rerun_dry_run_names_it(slurm: None, ws: Workspace) -> None:
    plan = plan_rack(RECIPE, ws, 2, **SIM)
    plan.rack_dir.mkdir(parents=True)
    manifest = plan.manifest() | {"jobs": [{"job_id": "987654", "tasks": [0, 1], "submitted": "2026-01-01T00:00:00Z"}]}
    (plan.rack_dir / RACK_JSON).write_text(json.dumps(manifest))
    rows = task_rows(plan.rack_dir)
    assert [r.state for r in rows] == ["missing", "missing"] and "no longer knows" in rows[0].reason
    res = (
        cli("run", "offline", "--launcher", "slurm", "--rerun-failed", str(plan.rack_dir), "--dry-run", "--json")
        if "--rerun-failed" in cli("run", "offline", "--help").output
        else None
    )
    result = rerun_failed(plan.rack_dir, dry_run=True)
    assert "--array=0,1" in result.submit_command and result.exit_code == 0
    if res is not None:
        assert res.exit_code == 0 and "--array=0,1" in json.loads(res.stdout)["submit_command"]
    assert load_manifest(plan.rack_dir)["jobs"] == manifest["jobs"] and not (plan.rack_dir / "rack.sbatch").exists()


def test_a_rack_whose_vms_are_all_invalid_exits_non_zero(slurm: None, ws: Workspace) -> None:
    """Before: a simulated rack INVALID on every VM summed 0 VMs and exited 0."""
    result = launch_offline(RECIPE, None, 2, backend="sim", duration_s=3, sim_rate=1e9, poll_s=0.5, timeout_s=150)
    assert [r.state for r in result.rows] == ["done", "done"]
    assert not result.rack_dir.with_name(result.rack_dir.name + ".work").exists()  # the VMs' homes went, and it
    assert result.report is not None and not result.report.counted
    with pytest.raises(StepFailed, match="2 of 2 VMs ran but are not in the total") as err:
        check(result)
    assert "INVALID" in err.value.message and err.value.next_command.startswith("repro aggregate ")


def test_a_rack_without_servers_ships_no_image(ws: Workspace) -> None:
    """hf runs in repro's own process on each host: no server image to plan, save or load."""
    plan = plan_rack("demo", ws, 2)
    assert plan.container_image is None and plan.image_source is None
    assert "--server-image" not in render_script(plan)


def test_enroot_rack_imports_once_and_hands_each_node_the_squashfs(ws: Workspace) -> None:
    """Issue #23's third route: the dry run prints the exact `enroot import`; each node gets --server-image X.sqsh
    (its repro runs the servers with enroot) and the script checks enroot and the file instead of docker load."""
    from repro.engine.plan import plan_build

    built = plan_build(get_recipe(RECIPE), ws).image.tag
    base = ["run", "offline", "--launcher", "slurm", "--nodes", "2", "--recipe", RECIPE, "--image-source", "enroot"]
    res = cli(*base, "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    rack = Path(doc["rack_dir"])
    sqsh = rack / "image" / f"{built.replace(':', '_')}.sqsh"
    assert doc["image_source"] == "enroot" and doc["container_image"] == built
    assert doc["image_commands"] == [["enroot", "import", "--output", f"{sqsh}.partial", f"dockerd://{built}"]]
    assert f"--server-image {sqsh}" in doc["script"] and "IMAGE_SOURCE=enroot" in doc["script"]
    assert "--image-source enroot" in doc["next_command"] and isinstance(doc["pyxis"], bool)
    lint = subprocess.run(["shellcheck", "-"], input=doc["script"], text=True, capture_output=True)
    assert lint.returncode == 0, lint.stdout
    rich = cli(*base, "--dry-run")
    assert "enroot create" in rich.output and "enroot start" in rich.output
    assert re.search(
        rf"\n  enroot import --output \S+/image/{re.escape(sqsh.name)}\.partial dockerd://{built}\n", rich.output
    )
    assert not (ws.root / "racks").exists()

    remote = plan_rack(RECIPE, ws, 2, container_image="nvcr.io/nvidia/tritonserver:25.01", image_source="enroot")
    from repro.run.rack import image_commands

    assert image_commands(remote)[0][-1] == "docker://nvcr.io#nvidia/tritonserver:25.01"
    with pytest.raises(InputError, match="pick one"):
        plan_rack(RECIPE, ws, 2, image_source="enroot", image_registry="myacr.azurecr.io/team")
    with pytest.raises(InputError, match="not in a registry"):
        plan_rack(RECIPE, ws, 2, image_source="registry")
    bad = cli(*base[:-1], "podman", "--dry-run")
    assert bad.exit_code == 2 and "archive, registry, enroot" in bad.output


def test_rack_json_with_an_enroot_image_reads_back(ws: Workspace) -> None:
    plan = plan_rack(RECIPE, ws, 2, image_source="enroot")
    plan.rack_dir.mkdir(parents=True)
    (plan.rack_dir / RACK_JSON).write_text(json.dumps(plan.manifest()))
    m = load_manifest(plan.rack_dir)
    from repro.run.rack import RackPlan

    again = RackPlan.from_manifest(plan.rack_dir, m)
    assert again.image_source == "enroot" and again.server_image == plan.server_image
    assert again.server_image is not None and again.server_image.endswith(".sqsh")


def test_image_source_default_follows_what_the_submit_host_has(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """enroot on PATH and no Docker: enroot (a local image then cannot be read: one clear error); neither: archive."""
    from repro.run.rack import resolve_image_source

    bare = tmp_path / "bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", str(bare))
    assert resolve_image_source(None, "repro-trtllm:x", None) == "archive"
    assert resolve_image_source(None, "registry.example/repro:x", None) == "registry"
    real = shutil.which("enroot", path="/usr/local/bin:/usr/bin")
    if real is None:
        pytest.skip("no enroot here to put on PATH")
    (bare / "enroot").symlink_to(real)
    assert resolve_image_source(None, "repro-trtllm:x", None) == "enroot"
    with pytest.raises(InputError, match="no Docker answers here") as err:
        plan_rack(RECIPE, ws, 2)
    assert "--container-image REGISTRY/IMAGE:TAG" in err.value.next_command
    assert plan_rack(RECIPE, ws, 2, container_image="nvcr.io/nvidia/x:1", image_source="enroot").pyxis is False


def test_nodes_sharing_one_workspace_each_keep_their_own_run(
    slurm: None, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real nodes share $WORKSPACE. Before: both made runs/<recipe>/Offline/<stamp> in the same second (one crashed
    with FileExistsError) and each copied "the newest run folder", which could be the other node's."""
    from repro.run.rack import RackPlan, work_dir_of

    monkeypatch.setattr(RackPlan, "per_vm_home", property(lambda self: False))  # the real nodes' setting
    plan = plan_rack(RECIPE, ws, 2, **SIM)
    assert "PER_VM=0" in render_script(plan)
    submit(plan)
    rows = follow(plan.rack_dir, poll_s=0.5, timeout_s=120)
    assert [r.state for r in rows] == ["done", "done"], [r.to_json() for r in rows]
    runs = {}
    for r in rows:
        folder = plan.rack_dir / r.vm
        info = json.loads((folder / "performance" / "run_1" / "run.json").read_text())
        assert info["run_dir"] == str(folder) and info["status"] == "complete"
        assert info["command"][info["command"].index("--into") + 1] == str(folder)
        assert info["command"][info["command"].index("--workspace") + 1] == str(ws.root)
        runs[r.vm] = (folder / "performance" / "run_1" / "mlperf_log_detail.txt").read_bytes()
    assert runs["vm-00"] != runs["vm-01"]
    assert not (ws.runs / RECIPE).exists()  # nothing in the shared runs/ for another node to pick up
    collect(plan.rack_dir, rows)
    assert not work_dir_of(plan.rack_dir).exists()


def test_two_racks_planned_in_the_same_second_get_their_own_folders(ws: Workspace) -> None:
    """Planning creates nothing (a dry run), so two submissions can plan one name; the submitting mkdir decides."""
    from repro.run.rack import _claim_rack_dir

    first, second = plan_rack(RECIPE, ws, 2, **SIM), plan_rack(RECIPE, ws, 2, **SIM)
    assert not (ws.root / "racks").exists()
    planned = second.rack_dir
    _claim_rack_dir(first)
    _claim_rack_dir(second)
    assert first.rack_dir.is_dir() and second.rack_dir.is_dir() and first.rack_dir != second.rack_dir
    assert planned.name in (first.rack_dir.name, second.rack_dir.name)
    assert f"RACK_DIR={shlex.quote(str(second.rack_dir))}\n" in render_script(second)
