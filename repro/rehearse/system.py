"""A rehearsal of one system over N nodes through the local Slurm (issue 46 item 5): `repro rehearse --recipe R
--nodes N` for a recipe whose Offline or Server is laid out as one system (trtllm.system).

The recipe's layout is shrunk to N nodes (as many of its instances as fit, each of its own size, so a Server instance
of 8 GPUs still spans two 4-GPU nodes) and every scenario runs as the real one does: one Slurm job through the slurm
launcher (run/rack_system.py), whose batch step runs `repro rehearse --system-node` (this module's `system_node`):
the run inside the job with the plan on the job's nodes (a rehearsal's nodes are tasks of this machine's one Slurm
node), each server one srun step of one task per GPU running the stand-in `trtllm-llmapi-launch` and `trtllm-serve`
(standin/trtllm_llmapi_launch.py: rank 0 serves once every rank has joined, one death ends the world), and one
LoadGen over every server. The login side follows the job, reads the verdict of one system, and checks that no Slurm
job and no stand-in process is left, after success, failure or Ctrl-C (the job is cancelled, then waited for).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro.core.errors import Interrupted
from repro.core.recipes import Recipe, get_recipe
from repro.core.workspace import Workspace
from repro.rehearse.result import LABEL, RehearsalResult, Scaling, free_ports, run_row, standin_env

if TYPE_CHECKING:
    from repro.run.launchers.layout import ServingLayout

SCENARIOS = ("Offline", "Server")
"""What a system rehearsal runs (Done-when 1 of issue 46); Interactive's disaggregated layout runs through the same
launcher in tests/test_launch_slurm.py."""
STANDIN_DIR = Path(__file__).resolve().parent / "standin"
BIN = "standin-bin"
CANCEL_WAIT_S = 60.0


def system_scenarios(recipe: Recipe) -> list[str]:
    """The scenarios of SCENARIOS the recipe lays out as one system (empty: a per-VM recipe)."""
    out = []
    for s in SCENARIOS:
        with contextlib.suppress(Exception):
            if _layout(recipe, s).shape == "one-system":
                out.append(s)
    return out


def shrink(recipe: Recipe, layouts: dict[str, ServingLayout], nodes: int, folder: Path, base_port: int) -> Path:
    """The recipe with each system scenario (`layouts`: its layout) on `nodes` nodes: as many of its instances as fit
    there, each its own size (a Server instance spanning two nodes still spans two), written as a file (its own hash,
    so the job reads it from the rack folder, never the shipped one by name). Its ports start at `base_port` (free
    on this host)."""
    import yaml

    from repro.core.errors import InputError

    doc = recipe.model_dump(mode="json")
    doc["trtllm"]["base_port"] = base_port
    gpn = recipe.system.gpus_per_vm
    for s, lay in layouts.items():
        if len(lay.groups) != 1 or lay.groups[0].role != "server":
            raise InputError(
                f"{recipe.name} {s} is disaggregated; a system rehearsal runs aggregated Offline and Server.",
                "rehearse a recipe whose Offline and Server are aggregated servers",
            )
        size = lay.groups[0].gpus
        fit = nodes * gpn // size
        if fit < 1:
            raise InputError(
                f"{recipe.name} {s}: one server is {size} GPUs, more than {nodes} nodes of {gpn}.",
                f"repro rehearse --recipe {recipe.name} --nodes {-(-size // gpn)}",
            )
        scen = doc["scenarios"].get(s) or {"source": f"{LABEL}: the recipe's layout on {nodes} nodes"}
        doc["scenarios"][s] = scen
        trt = scen.setdefault("trtllm", {}) or {}
        scen["trtllm"] = trt
        system = trt.get("system") or {}
        trt["system"] = {**system, "nodes": nodes, "instances": min(fit, lay.groups[0].count)}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{recipe.name}.yaml"  # a recipe file is named by its recipe
    path.write_text(
        f"# {LABEL}: {recipe.name} with each system scenario shrunk to {nodes} nodes (repro rehearse --nodes)\n"
        + yaml.safe_dump(doc, sort_keys=False)
    )
    return path


def standin_bin(folder: Path) -> Path:
    """`trtllm-llmapi-launch` and `trtllm-serve` on the nodes' PATH: the stand-ins, run by this Python."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, script in (("trtllm-llmapi-launch", "trtllm_llmapi_launch.py"), ("trtllm-serve", "trtllm_serve.py")):
        path = folder / name
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN_DIR / script}" "$@"\n')
        path.chmod(0o755)
    return folder


def standin_processes() -> list[str]:
    """Stand-in ranks or servers still alive anywhere on this host (a rehearsal's nodes are all here)."""
    out = []
    mark = str(STANDIN_DIR).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == str(os.getpid()):
            continue
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if mark in cmd and (b"trtllm_llmapi_launch" in cmd or b"trtllm_serve" in cmd):
            text = cmd.replace(b"\0", b" ").decode(errors="replace")
            out.append(f"{proc.name}: {text[:160]}")
    return out


def listed(jobs: list[str]) -> list[str]:
    """The jobs squeue still lists in any state (completing included: its steps may still be stopping)."""
    from repro.run.slurm import SlurmError, run_tool

    if not jobs:
        return []
    try:
        proc = run_tool(["squeue", "-h", "-j", ",".join(jobs), "-o", "%i"], timeout=20)
    except SlurmError:
        return list(jobs)
    if proc.returncode != 0:  # a job Slurm no longer knows: "Invalid job id specified"
        return []
    return [j for j in proc.stdout.split() if j in jobs]


def _cancel(jobs: list[str]) -> list[str]:
    """scancel the jobs, then wait (bounded) until Slurm lists none of them; the ones still listed."""
    from repro.run.slurm import SlurmError, run_tool

    if jobs:
        with contextlib.suppress(SlurmError):
            run_tool(["scancel", *jobs], timeout=30)
    return _wait_gone(jobs)


def run_system(r: Any, scenario: str) -> None:
    """One scenario of the system as one Slurm job (its batch step `repro rehearse --system-node`); its verdict of
    one system into r.result.runs, what is left on the host into r.result.system."""
    from repro.run.rack import follow
    from repro.run.rack_folder import SYSTEM_DIR, load_manifest
    from repro.run.rack_system import _claim_rack_dir, collect_system, plan_system, submit_system

    if r.result.system is None:
        prepare(r)
    info = r.result.system
    plan = plan_system(info["recipe_file"], r.ws, scenario, r.result.nodes, image_source="host", slurm_nodes=1)
    plan.rehearsal_time_scale = r.scaling.time
    plan.job_args = [
        "rehearse",
        "--recipe",
        str(plan.rack_dir / (plan.recipe_file or "")),
        "--system-node",
        str(plan.rack_dir),
        "--scenario",
        scenario,
        "--time-scale",
        repr(r.scaling.time),
        "--workspace",
        str(r.ws.root),
    ]
    assert plan.launch is not None
    r.say(f"run {scenario.lower()}: one system of {plan.nodes} nodes through Slurm ({len(plan.launch.instances)} "
          f"servers, {plan.launch.ranks} ranks, LoadGen on node-00)")  # fmt: skip
    _claim_rack_dir(plan)
    job = submit_system(plan)
    info["jobs"].append(job)
    try:
        rows = follow(plan.rack_dir, poll_s=1.0, timeout_s=info["timeout_s"])
    except (Interrupted, KeyboardInterrupt):
        info["left_jobs"] = _cancel([job])
        info["left_processes"] = _left_processes()
        raise
    except BaseException:
        info["left_jobs"] = _cancel([job])
        raise
    result = collect_system(plan.rack_dir, rows)
    info["left_jobs"] = _cancel([job]) if rows and rows[0].state == "running" else _wait_gone([job])
    info["left_processes"] = _left_processes()
    run_dir = plan.rack_dir / SYSTEM_DIR
    state = rows[0].state if rows else "missing"
    verdict = result.report if state == "done" else None  # a failed job's partial logs are no run's verdict
    row = run_row(scenario, run_dir, verdict, no_verdict=state, rack_dir=str(plan.rack_dir), job=job)
    if result.report is None or state != "done":
        row["error"] = f"job {job} {state}: " + (_said(run_dir) or (rows[0].reason if rows else "no task row"))
    row["system"] = load_manifest(plan.rack_dir).get("status")
    r.result.runs.append(row)
    said = row.get("error") or f"{row['validity']}, verdict {row['verdict']} [{row['label']}]"
    r.say(f"{scenario}: {said}")


def _said(run_dir: Path) -> str:
    """The error and Next lines the job's repro printed (its repro.log: the first and the last 64 KiB, as what an
    interpreter prints while it exits may follow them), one line."""
    from repro.core.textsafe import one_line

    try:
        with open(run_dir / "repro.log", "rb") as f:
            head = f.read(64 << 10)
            f.seek(max(len(head), f.seek(0, 2) - (64 << 10)))
            lines = (head + b"\n" + f.read(64 << 10)).decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    errors = [ln for ln in lines if ln.startswith("error:")][-1:]
    nexts = [ln for ln in lines if ln.startswith("Next:")][-1:]
    return one_line(" ".join(errors + nexts))[:1000]


def _wait_gone(jobs: list[str]) -> list[str]:
    deadline = time.monotonic() + CANCEL_WAIT_S
    while (left := listed(jobs)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def _left_processes() -> list[str]:
    deadline = time.monotonic() + 15
    while (left := standin_processes()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def prepare(r: Any, timeout_s: float = 600.0) -> None:
    """The shrunk recipe (in the rehearsal's own folder) and what the system steps record."""
    assert r.recipe.trtllm is not None
    layouts = {s: _layout(r.recipe, s) for s in system_scenarios(r.recipe)}
    n = sum(g.count for lay in layouts.values() for g in lay.groups)
    ports = free_ports(r.recipe.trtllm.base_port + 300, n)
    path = shrink(r.recipe, layouts, r.result.nodes, r.ws.root / "system", ports)
    r.result.system = {
        "recipe_file": str(path),
        "scenarios": list(layouts),
        "jobs": [],
        "left_jobs": [],
        "left_processes": [],
        "timeout_s": timeout_s,
    }


def _layout(recipe: Recipe, scenario: str) -> ServingLayout:
    from repro.run.launchers.layout import serving_layout

    return serving_layout(recipe.deployment(scenario))


def system_node(recipe_ref: str, rack: Path, scenario: str, time_scale: float, workspace: Path) -> RehearsalResult:
    """The batch step of a system rehearsal's job: `repro run SCENARIO --launcher slurm --inside-job` through the
    stand-in ranks (on this host's PATH for every srun step), into RACK/system."""
    from repro.results.verify import verify_dir
    from repro.run.harness import run_benchmark
    from repro.run.options import RunHooks, RunOptions
    from repro.run.rack_folder import SYSTEM_DIR, load_manifest
    from repro.run.servers import ServerOptions

    recipe = get_recipe(recipe_ref)
    m = load_manifest(rack)
    ws = Workspace.open(workspace)
    scaling = Scaling.for_recipe(recipe, time_scale)
    bindir = standin_bin(rack / BIN)
    servers = sum(g.count for g in _layout(recipe, scenario).groups)
    env = {**standin_env(scaling, servers), "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    into = rack / SYSTEM_DIR
    result = RehearsalResult(recipe.name, ws.root, scaling, "", node_of=str(rack))
    out = run_benchmark(
        RunOptions.build(
            recipe,
            ws,
            scenario=scenario,
            launcher="slurm",
            inside_job=True,
            nodes=int(m["nodes"]),
            rehearsal=True,
            detect=False,
            servers=ServerOptions(gpus=False, env=env),
            settings_override=scaling.settings(recipe, scenario),
            into=into,
        ),
        RunHooks(progress=False),
    )
    verdict = verify_dir(Path(out.details["run_dir"]), recipe=recipe, scenario=scenario)
    result.runs.append(run_row(scenario, out.details["run_dir"], verdict))
    result.steps.append(f"run {scenario.lower()}")
    return result
