"""`repro rehearse --recipe nd-gb300-v6-dsr1 --nodes 4` (issue 46 Done-when 1 and 2) through the real local Slurm.

The recipe is Azure's v6.1 GB300 x72 DeepSeek-R1 system (recipes/nd-gb300-v6-dsr1.yaml): Offline 18 single-node
servers of tp 4, Server 9 servers of tp 8, each spanning two 4-GPU nodes. On 4 nodes the rehearsal runs 4 Offline
servers and 2 Server servers of 8 ranks, each rank a task of its srun step running the stand-in
trtllm-llmapi-launch. The local cluster is one node: the 4 nodes are tasks of this machine (rehearse/system.py). The
failure tests run the same layout on nd-gb300-v6's file (a recipe of their own name, so their Slurm jobs and stand-in
ranks are told apart), with setup's and build-engine's files written directly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from standin_util import LAUNCH, standin_processes

REPRO = str(Path(sys.executable).parent / "repro")


def system_recipe(folder: Path, name: str) -> Path:
    """nd-gb300-v6 laid out as Azure's GB300 DeepSeek-R1 system (intel-ai-tce/inference_results_v6.1 @ 5174fca8
    closed/Azure/configs/deepseek_r1/GB300-NVL72_GB300-288GB_aarch64x72/TRTLLM, as recipes/nd-gb300-v6-dsr1.yaml)."""
    doc = yaml.safe_load((REPO / "recipes" / "nd-gb300-v6.yaml").read_text())
    doc["name"] = name
    src = "intel-ai-tce/inference_results_v6.1 @ 5174fca8 closed/Azure/configs/deepseek_r1/GB300-NVL72 (test copy)"
    doc["trtllm"].update(tp_size=4, servers_per_vm=1, system={"nodes": 18, "instances": 18, "source": src})
    doc["scenarios"] = {"Server": {"source": src, "trtllm": {"tp_size": 8, "system": {"instances": 9}}}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def slurm_left(recipe: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-s", "-o", "%i %j"], capture_output=True, text=True).stdout
    jobs = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True).stdout
    return [ln for ln in (out + jobs).splitlines() if recipe in ln or "repro-rack" in ln]


@pytest.mark.docker
@pytest.mark.slow
def test_rehearse_the_gb300_deepseek_r1_system_on_four_nodes(slurm: None, tmp_path: Path, _isolated_home) -> None:
    """Doctor, setup, build-engine, then Offline and Server each one Slurm job of 4 nodes: every server an srun step
    of one task per GPU (Server's 8-rank instances over two nodes each), one LoadGen on node-00; both VALID,
    verified and reported as a rehearsal; no Slurm job or step, stand-in rank or container left."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [REPRO, "rehearse", "--recipe", "nd-gb300-v6-dsr1", "--nodes", "4", "-w", str(tmp_path / "ws"), "--json"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    took = time.monotonic() - t0
    doc = json.loads(proc.stdout) if proc.stdout.startswith("{") else {}
    held = {k: doc.get(k) for k in ("system", "left_containers", "steps")}
    held["runs"] = [(r["scenario"], r["validity"], r.get("error")) for r in doc.get("runs", [])]
    held["steps_ok"] = [(doc.get(k) or {}).get(f) for k, f in (("doctor", "gpus_as_recipe"), ("setup", "gate_as_hub"))]
    held["build_ok"] = (doc.get("build") or {}).get("ok")
    held["verify"] = [(v["verdict"], v["as_rehearsal"]) for v in doc.get("verify", [])]
    held["report"] = [(r["written"], r.get("error")) for r in doc.get("report", [])]
    assert proc.returncode == 0, json.dumps(held)[:4000] + proc.stderr[-2000:]
    assert doc["label"] == "rehearsal" and doc["reproduction"] is False and doc["ok"], doc
    assert doc["steps"] == ["doctor", "setup", "build-engine", "run offline", "run server", "verify", "report"]
    assert doc["doctor"]["gpus_as_recipe"] and doc["setup"]["gate_as_hub"] and doc["build"]["ok"]
    expect = {"Offline": (4, 4, 1), "Server": (2, 8, 2)}  # servers, ranks each, nodes each
    for run in doc["runs"]:
        assert run["validity"] == "VALID" and run["verdict"] == "NOT A REPRODUCTION", run
        assert run["label"] == "rehearsal"
        record = json.loads(next(Path(run["run_dir"]).glob("performance/run_1/run.json")).read_text())
        system = record["system"]
        servers, ranks, spans = expect[run["scenario"]]
        assert system["number_of_nodes"] == 4 and system["ranks"] == 16 and system["accelerators"] == 16
        assert system["loadgen"]["node"].startswith("node-00") and len(system["loadgen"]["endpoints"]) == servers
        assert [(i["ranks"], len(i["nodes"])) for i in system["instances"]] == [(ranks, spans)] * servers
        first = system["instances"][0]["name"]
        logs = sorted(p.name for p in (Path(record["run_dir"]) / "servers" / first).glob("rank-*.log"))
        assert (
            len(logs) == ranks
            and f"all {ranks} ranks up" in (Path(record["run_dir"]) / "servers" / first / "rank-0.log").read_text()
        )
        assert record["label"] == "rehearsal"
    assert [r["scenario"] for r in doc["runs"]] == ["Offline", "Server"]
    assert all(v["as_rehearsal"] for v in doc["verify"]) and all(r["written"] for r in doc["report"])
    assert doc["system"]["left_jobs"] == [] and doc["system"]["left_processes"] == []
    assert standin_processes() == [] and slurm_left("nd-gb300-v6-dsr1") == []
    assert doc["left_containers"] == []
    print(f"rehearsal of a 4-node system: {took:.0f} s")


DRIVER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from repro.core.errors import ReproError
    from repro.rehearse.rehearsal import rehearse
    from repro.rehearse.system import run_system

    recipe, root, out = sys.argv[1:4]
    doc = {}
    try:
        step = [("run offline", lambda r: run_system(r, "Offline"))]
        result = rehearse(recipe, Path(root), nodes=4, steps=step, time_scale=0.02)  # 12 s of Offline: time to fail in
        doc = {"runs": result.runs, "system": result.system, "ok": result.ok}
    except ReproError as exc:
        doc = {"error": type(exc).__name__, "message": exc.message}
    Path(out).write_text(json.dumps(doc, default=str))
    """
)


def _ranks_up(root: Path) -> dict[int, int]:
    """{rank: pid} of the stand-in ranks now running under `root` (their environment names the rank)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes()
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(LAUNCH).encode() in cmd and str(root).encode() in cmd:  # its trtllm-serve's model is under root
            for kv in env:
                if kv.startswith(b"SLURM_PROCID="):
                    found.setdefault(int(kv.split(b"=")[1]), int(proc.name))
    return found


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["kill", "interrupt"])
def test_a_killed_rank_or_ctrl_c_leaves_nothing_on_any_task(
    slurm: None, tmp_path: Path, _isolated_home, mode: str
) -> None:
    """The rehearsal's Offline job of 4 nodes (4 servers of 4 ranks); once every rank is up, kill -9 rank 2 of a
    server (the run fails naming its node and rank) or SIGINT the rehearsal (it cancels its job): either way no job,
    step or stand-in rank is left."""
    from standin_util import standin_workspace

    from repro.core.recipes import load_recipe_file
    from repro.engine.quantize import paths_for
    from repro.rehearse.rehearsal import checkpoint_tokenizer

    recipe = system_recipe(tmp_path, name=f"gb300-rack-{mode}")
    ws = standin_workspace(str(recipe))  # setup's dataset; build-engine's checkpoint as the rehearsal leaves it
    checkpoint_tokenizer(load_recipe_file(recipe), ws)
    for dep in load_recipe_file(recipe).deployments():
        (ws.root / paths_for(dep).checkpoint_dir.relative_to("/workspace") / "config.json").write_text("{}")
    (tmp_path / "driver.py").write_text(DRIVER)
    out = tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(tmp_path / "driver.py"), str(recipe), str(ws.root), str(out)], env=env)
    ranks: dict[int, int] = {}
    while len(ranks) < 4 and time.monotonic() - t0 < 120 and proc.poll() is None:
        time.sleep(0.5)
        ranks = _ranks_up(ws.root)
    assert sorted(ranks) == [0, 1, 2, 3], ranks
    time.sleep(2.0)  # LoadGen under way
    hit = time.monotonic()
    if mode == "kill":
        os.kill(ranks[2], signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGINT)
    proc.wait(timeout=180)
    took, after = time.monotonic() - t0, time.monotonic() - hit
    doc = json.loads(out.read_text())
    if mode == "kill":
        (run,) = doc["runs"]
        assert run["validity"] == "ERROR" and "rank 2 on node-0" in run["error"] and "ended (killed)" in run["error"]
        assert not doc["ok"]
    else:
        assert doc.get("error") == "Interrupted", doc
    assert standin_processes() == [] and slurm_left(f"gb300-rack-{mode}") == []
    assert after < 45 and took < 150, (after, took)  # srun reports a dead task within seconds
