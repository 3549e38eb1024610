"""A dress rehearsal of a GPU recipe on a machine without its GPUs: the recipe's image and servers, LoadGen and
verify run through the same code as on the VM; only the TensorRT-LLM base image (a stand-in trtllm-serve at a fixed
speed), the model (a word-level tiny model under the recipe's repo name) and time (one printed factor) are stood in.

Everything it writes lives in its own workspace and is labelled `rehearsal`: verify never calls it a reproduction.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from repro.core.recipes import Recipe, get_recipe
from repro.core.workspace import Workspace
from repro.rehearse.result import (
    DEFAULT_TIME_SCALE,
    LABEL,
    OUT_LEN,
    PROMPTS,
    RehearsalResult,
    Scaling,
    free_ports,
    run_row,
    standin_env,
)
from repro.rehearse.setup_step import VOCAB, write_tokenizer
from repro.rehearse.step_process import TUNE_MARGIN  # noqa: F401 - where `repro tune --help` reads it from

STANDIN_DIR = Path(__file__).resolve().parent / "standin"
STANDIN = STANDIN_DIR / "trtllm_serve.py"


def tiny_prompts() -> list[list[int]]:
    """The tiny dataset's prompts (token ids of the word-level vocabulary), the same in every rehearsal."""
    rng = np.random.default_rng(3)
    return [rng.integers(3, VOCAB, size=int(rng.integers(4, 30))).tolist() for _ in range(PROMPTS)]


def checkpoint_tokenizer(recipe: Recipe, ws: Workspace) -> None:
    """The tokenizer and config.json a checkpoint carries for trtllm-serve, which ModelOpt quantization (the PyTorch
    path, not stood in) would write: the tiny model's (a scenario's own checkpoint is served only once its
    config.json is there, run/servers.py check_engine_built)."""
    import shutil

    from repro.engine.quantize import paths_for

    ws.ensure()
    for dep in recipe.deployments():
        p = paths_for(dep)
        folder = ws.root / p.checkpoint_dir.relative_to("/workspace")
        write_tokenizer(folder)
        config = ws.root / p.model_dir.relative_to("/workspace") / "config.json"
        if config.is_file() and not (folder / "config.json").exists():
            shutil.copyfile(config, folder / "config.json")


def base_tag() -> str:
    from repro.rehearse.baseimage import rootfs_key

    return f"repro-rehearse-base:{rootfs_key()}"


def standin_tag(base: str, version: str) -> str:
    """The stand-in TensorRT-LLM base of one release: named by its files, its base and the release, so a second
    rehearsal reuses it."""
    digest = hashlib.sha256(f"{base}\n{version}\n".encode())
    for f in sorted(STANDIN_DIR.iterdir()):
        if f.is_file():
            digest.update(f.name.encode() + f.read_bytes())
    return f"repro-rehearse-standin:{version}-{digest.hexdigest()[:12]}"


def build_images(recipe: Recipe, client: Any = None) -> str:
    """The stand-in base (host Python FROM scratch + the stand-in TensorRT-LLM tools of the recipe's release), then
    containers/Dockerfile on it."""
    from repro.engine.container import ImageSpec, build_image, image_spec_for
    from repro.rehearse.baseimage import base_dockerfile_dir

    ctx = Path(__import__("tempfile").mkdtemp(prefix="repro-rehearse-base-"))
    try:
        base = build_image(
            ImageSpec(
                base_dockerfile_dir(ctx) / "Dockerfile",
                base_tag(),
                {},
                with_repro_source=False,
            ),
            client=client,
        ).tag
    finally:
        import shutil

        shutil.rmtree(ctx, ignore_errors=True)
    assert recipe.trtllm is not None
    version = recipe.trtllm.version
    standin = build_image(
        ImageSpec(
            STANDIN_DIR / "Dockerfile",
            standin_tag(base, version),
            {"BASE_IMAGE": base, "TRTLLM_VERSION": version},
            with_repro_source=False,
        ),
        client=client,
    ).tag
    return build_image(image_spec_for(recipe, base_image=standin, install="none"), client=client).tag


def rehearsal_root(ws: Workspace, recipe: str) -> Path:
    """A rehearsal's own workspace, beside the real one's folders: its tiny model never stands where setup's goes
    (named by the recipe's name, also when --recipe is a file)."""
    return ws.root / "rehearsal" / (get_recipe(recipe).name if recipe.endswith((".yaml", ".yml")) else recipe)


def gpu_recipe(name: str) -> Recipe:
    """Only a recipe that runs on GPUs through a TensorRT-LLM image can be rehearsed."""
    from repro.core.errors import InputError

    recipe = get_recipe(name)
    if recipe.reference_only or recipe.demo or recipe.trtllm is None:
        why = "is reference-only (repro does not run it)" if recipe.reference_only else "has no TensorRT-LLM image"
        raise InputError(
            f"Recipe '{recipe.name}' {why}: a rehearsal stands in the GPUs of a recipe repro runs.",
            "repro rehearse --recipe nd-gb300-v6",
        )
    return recipe


def plan(
    recipe_name: str,
    root: Path,
    *,
    time_scale: float = DEFAULT_TIME_SCALE,
    pace: str = "fixed",
    nodes: int = 1,
    image_source: str | None = None,
) -> RehearsalResult:
    """What `rehearse` would do (--dry-run): the scaling, the image tag and the steps, nothing built or written."""
    from repro.engine.container import image_spec_for

    recipe = gpu_recipe(recipe_name)
    _check_nodes(nodes)
    runs = _paced(recipe, pace, time_scale, nodes, None)  # a dry run writes nothing, not even the fit's cache
    assert recipe.trtllm is not None
    spec = image_spec_for(recipe, base_image=standin_tag(base_tag(), recipe.trtllm.version), install="none")
    result = RehearsalResult(
        recipe.name,
        root,
        Scaling.for_recipe(recipe, time_scale, pace=runs),
        spec.tag,
        dry_run=True,
        nodes=nodes,
        image_source=image_source,
    )
    result.steps = [name for name, _ in default_steps(nodes, runs, _system(recipe, nodes))]
    result.device_requests = planned_device_requests(recipe, Workspace.open(root))
    return result


def _paced(recipe: Recipe, pace: str, time_scale: float, nodes: int, root: Path | None) -> dict[str, Any] | None:
    """--pace published: each scenario's run against the recipe's twin (None: the fixed-speed stand-in)."""
    from repro.core.errors import InputError

    if pace == "fixed":
        return None
    from repro.rehearse.twin import has_twin

    if pace != "published" or nodes > 1 or not has_twin(recipe.name):
        why = (
            f"--pace is fixed or published (got {pace!r})"
            if pace not in ("fixed", "published")
            else "--pace published rehearses one VM (the rack rehearsal runs at the fixed pace)"
            if nodes > 1
            else f"recipe '{recipe.name}' has no server twin (repro/data/twin/twins.yaml)"
        )
        raise InputError(f"{why}.", f"repro rehearse --recipe {recipe.name}")
    from repro.rehearse.pace import plan_pace

    return plan_pace(recipe, time_scale, cache_dir=root / "twin" if root is not None else None)


def _check_nodes(nodes: int) -> None:
    from repro.core.errors import InputError

    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= 8:
        raise InputError(
            f"--nodes must be 1 to 8 for a rehearsal (got {nodes!r}): every node runs on this machine.",
            "repro rehearse --recipe nd-gb300-v6 --nodes 2",
        )


@dataclass
class Rehearsal:
    """What the steps of one rehearsal share; a step reads it and adds to `result`."""

    recipe: Recipe
    ws: Workspace
    scaling: Scaling
    client: Any
    result: RehearsalResult
    say: Callable[[str], None]
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    servers: Any = None
    """The ServerOptions every run starts its servers with (stand-in speed, rehearsal names and labels)."""
    shared: Workspace | None = None
    """A rack node's shared workspace, whose inputs `ws` holds links to (RunOptions.inputs_from)."""
    bar: Callable[[str], Any] | None = None
    """Makes each run's progress bar in a terminal (the CLI lends the one `repro run` draws)."""

    pace: dict[str, Any] | None = None
    """--pace published: each scenario's RunPace (rehearse/pace.py): time scale, width, settings, twin, client."""
    in_process: bool = False
    """Run LoadGen here (a rack node, already its own Slurm task) rather than in a process of its own."""
    ref: str | None = None
    """The recipe as --recipe gave it: a name, or a file's path, which the steps' own commands are given."""

    def run(self, scenario: str, into: Path | None = None) -> None:
        """One LoadGen run through the recipe's servers, then verify, in its own process as `repro run` is (a rack
        node in this one: it is that process); its row goes into result.runs."""
        from dataclasses import replace

        from repro.core.timescale import REAL_TIME

        self.say(f"run {scenario.lower()} through the recipe's servers")
        servers, settings, scale, target = self.servers, self.scaling.settings(self.recipe, scenario), REAL_TIME, None
        pace = (self.pace or {}).get(scenario)
        if pace is not None:
            from repro.rehearse.pace import twin_env

            # every scenario's twin in one environment: the servers one run starts, the next keeps (and picks its own)
            servers = replace(servers, env=twin_env(self.pace or {}), client_concurrency=pace.client_concurrency)
            settings, scale = pace.settings, pace.time_scale
            if scenario != "Offline":
                target = {"from": "the published rate (rehearsal at the published pace)", **_rate(settings)}
        if self.in_process:
            from repro.rehearse.step_process import run_once

            row = run_once(
                self.recipe,
                self.ws,
                scenario,
                servers,
                settings,
                scale,
                into=into,
                inputs_from=self.shared,
                bar=self.bar,
            )
        else:
            from repro.rehearse.step_process import run_step, servers_state

            state = {
                "kind": "run",
                "recipe": self.recipe.name,
                "workspace": str(self.ws.root),
                "scenario": scenario,
                "servers": servers_state(servers),
                "settings": settings,
                "time_scale": scale.to_json(),
                "target_qps": target,
                "twin_scenario": scenario if pace is not None else None,
                "into": str(into) if into else None,
                "inputs_from": str(self.shared.root) if self.shared else None,
            }
            row = run_step(state, self.ws.root / "steps" / f"{self.tag}-run-{scenario.lower()}.json")
        if pace is not None:
            row["time_scale"], row["width"] = scale.to_json(), pace.width
        self.result.runs.append(row)
        said = row.get("error") or f"{row['validity']}, verdict {row['verdict']} [{row['label']}]"
        self.say(f"{scenario}: {said}")


def _rate(settings: dict[str, Any]) -> dict[str, Any]:
    return {"target_qps": float(settings["target_qps"])}


Step = tuple[str, Callable[[Rehearsal], None]]


GPU_CHECKS = ("GPU model", "GPU count", "GPU architecture", "driver/CUDA")


def standin_gpus(recipe: Recipe) -> dict[str, Any]:
    """The recipe's GPUs as the stand-in NVML and nvidia-smi report them ($STANDIN_GPUS); the driver is an R580 one
    (CUDA 13.0), new enough for every recipe (Blackwell needs 12.8)."""
    arch = recipe.system.gpu_arch.removeprefix("sm_")
    return {
        "name": recipe.system.gpu_name,
        "count": recipe.system.gpus_per_vm,
        "memory_mib": int(float(recipe.system.gpu_memory_gb) * 1024),
        "compute_capability": f"{arch[:-1]}.{arch[-1]}",
        "driver": "580.65.06",
        "cuda": 13000,
    }


def doctor_env(recipe: Recipe) -> dict[str, str]:
    """The doctor step's environment: the stand-in `nvidia-smi` first on PATH and the stand-in NVML bindings first
    on PYTHONPATH, for that one process only."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(STANDIN_DIR / "bin"), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(STANDIN_DIR / "nvml"), env.get("PYTHONPATH", "")) if p)
    env["STANDIN_GPUS"] = json.dumps(standin_gpus(recipe))
    return env


def repro_json(args: list[str], env: dict[str, str] | None = None) -> tuple[dict[str, Any] | None, int, str]:
    """A `repro ... --json` command in its own process, as a user types it: its JSON document (None for an error or
    none), its exit code, and the error's message (else the end of its stderr)."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "repro", *args, "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):  # the error table's document: its message
        return None, done.returncode, str(doc["error"].get("message"))[:300]
    return doc if isinstance(doc, dict) else None, done.returncode, done.stderr.strip()[-300:]


def doctor_step(recipe: Recipe, ws: Workspace, ref: str | None = None) -> dict[str, Any]:
    """`repro doctor --recipe` in its own process, its NVML and nvidia-smi stood in by the recipe's GPUs. Checks
    that need the VM (NVIDIA runtime, disk, token) may fail here; the GPU checks must pass. `ref`: the recipe as
    --recipe gave it (a file's path)."""
    found, code, err = repro_json(
        ["doctor", "--recipe", ref or recipe.name, "--workspace", str(ws.root)], env=doctor_env(recipe)
    )
    doc = found or {"status": "ERROR", "system": {"gpus": []}, "checks": [], "error": err}
    gpu_checks = {c["name"]: c["status"] for c in doc.get("checks", []) if c["name"] in GPU_CHECKS}
    return {
        "label": "stand-in GPUs",
        "status": doc.get("status"),
        "exit_code": code,
        "gpus": doc.get("system", {}).get("gpus", []),
        "driver": doc.get("system", {}).get("driver"),
        "gpu_checks": gpu_checks,
        "gpus_as_recipe": len(gpu_checks) == len(GPU_CHECKS) and set(gpu_checks.values()) == {"PASS"},
        "checks": doc.get("checks", []),
    }


def _doctor(r: Rehearsal) -> None:
    r.say("doctor: repro doctor against stand-in GPUs (NVML and nvidia-smi report the recipe's)")
    r.result.doctor = doctor_step(r.recipe, r.ws, r.ref)
    checks = r.result.doctor["gpu_checks"]
    r.say(f"doctor [stand-in GPUs]: {', '.join(f'{k} {v}' for k, v in checks.items())}")


def build_engine_steps(recipe: Recipe, ws: Workspace, client: Any = None) -> dict[str, Any]:
    """Run the steps of repro's build plan that are TensorRT-LLM's own tools (quantize.py, trtllm-build) in the
    recipe's image on the stand-in base, where they are the contract-bound stand-ins, for each of the recipe's
    deployments (a scenario with its own engine, 405B Server, builds it as `build-engine --scenario` does); report
    what each wrote."""
    from repro.engine import quantize as q
    from repro.engine.container import run_container
    from repro.engine.plan import plan_build

    assert recipe.trtllm is not None
    base = standin_tag(base_tag(), recipe.trtllm.version)
    logs = ws.root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    ran: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for dep in recipe.deployments():
        plan = plan_build(dep, ws, base_image=base, install="none", gpus=False)
        for step in plan.steps:
            cmd = step.argv[2:] if step.argv[:2] == ["exec", "--"] else step.argv  # the image's entrypoint runs it
            trtllm_tool = cmd[:1] == ["trtllm-build"] or cmd[1:2] == [q.TRTLLM_QUANTIZE]
            if not trtllm_tool:
                why = (
                    "repro's own step; setup already wrote its calibration parquet"
                    if step.name == "prepare-calib"
                    else "ModelOpt quantization in repro's entry point needs torch, ModelOpt and the GPU"
                )
                skipped.append({"step": step.name, "why": why, "engine": dep.engine_scenario})
                continue
            log = logs / f"{plan.step}-{step.name}.log"
            run_container(step.run, step=step.name, log_path=log, client=client)
            ran.append(
                {
                    "step": step.name,
                    "engine": dep.engine_scenario,
                    "command": cmd,
                    "outputs": [str(p) for p in step.outputs],
                    "missing": [str(p) for p in step.outputs if not p.exists()],
                }
            )
    return {
        "label": "stand-in TensorRT-LLM tools",
        "version": recipe.trtllm.version,
        "ran": ran,
        "not_stood_in": skipped,
        "ok": all(not r["missing"] for r in ran),
    }


def _build(r: Rehearsal) -> None:
    from repro.run.servers import ServerOptions, plan_servers

    assert r.recipe.trtllm is not None
    r.say(
        f"build-engine: stand-in TensorRT-LLM {r.recipe.trtllm.version} base, containers/Dockerfile on it, then the "
        "build plan's TensorRT-LLM steps"
    )
    r.result.image = build_images(r.recipe, r.client)
    r.result.build = build_engine_steps(r.recipe, r.ws, r.client)
    checkpoint_tokenizer(r.recipe, r.ws)
    ran = ", ".join(x["step"] for x in r.result.build["ran"]) or "none (ModelOpt path)"
    r.say(f"build-engine [stand-in TensorRT-LLM tools]: ran {ran}")
    # One VM's runs (Offline, tune's probes, Server) reuse the servers the first one started, as `--keep-servers`
    # does; `rehearse` removes them after the last step (a rack's nodes start their own).
    r.servers = ServerOptions(
        image=r.result.image,
        gpus=False,
        name_prefix=f"repro-rehearse-{r.tag}",
        labels={"org.repro.rehearsal": r.tag},
        keep=r.result.nodes == 1,
        base_port=free_ports(r.recipe.trtllm.base_port, r.recipe.trtllm.servers_per_vm)
        if r.result.nodes == 1
        else None,
    )
    r.servers.env = standin_env(r.scaling, len(plan_servers(r.recipe, r.ws, r.servers)))
    r.result.device_requests = planned_device_requests(r.recipe, r.ws)


def release_servers(r: Rehearsal) -> None:
    """Remove the servers the runs kept between them (see `_build`); nothing to do before they were planned."""
    from repro.run.servers import ServerFleet, plan_servers

    if r.servers is not None and r.servers.keep:
        ServerFleet(plan_servers(r.recipe, r.ws, r.servers), keep=False, client=r.client).stop()


def _tune(r: Rehearsal) -> None:
    """`repro tune server` against the stand-in servers, in its own process as a user runs it, with the rehearsal's
    scaling (its Server run's duration and query count judge early stopping); the Server run after it reads the
    saved rate and records it in run.json."""
    from repro.rehearse.step_process import run_step, servers_state

    run = r.scaling.settings(r.recipe, "Server")
    r.say(f"tune server: LoadGen probes against the stand-in servers from {run['target_qps']:.3g} queries/s")
    state = {
        "kind": "tune",
        "recipe": r.recipe.name,
        "workspace": str(r.ws.root),
        "scenario": "Server",
        "servers": servers_state(r.servers),
        "settings": run,
    }
    r.result.tune = run_step(state, r.ws.root / "steps" / f"{r.tag}-tune-server.json")
    r.say(f"tune server [{LABEL}]: {r.result.tune.get('summary') or r.result.tune.get('error')}")


def _setup(r: Rehearsal) -> None:
    from repro.rehearse.setup_step import gated_setup

    r.say(f"setup: repro setup against a local gated hub ({r.recipe.model.repo_id} @ {r.recipe.model.revision[:12]})")
    setup = gated_setup(r.recipe, r.ws, tiny_prompts(), OUT_LEN, VOCAB)
    setup["gate_as_hub"] = [a["http"] for a in setup["attempts"]] == [401, 403, 200] and setup["status"] == "done"
    r.result.setup = setup
    r.say("setup [stand-in hub]: " + "; ".join(f"{a['attempt']}: HTTP {a['http']}" for a in setup["attempts"]))


def planned_device_requests(recipe: Recipe, ws: Workspace) -> list[dict[str, Any]]:
    """Per server, the Docker device request `repro run` sends on the VM (the stood-in servers get none here)."""
    from repro.run.servers import ServerOptions, device_requests, plan_servers

    return [
        {"server": p.rank, "container": p.name, "device_requests": [dict(d) for d in device_requests(p.gpus)]}
        for p in plan_servers(recipe, ws, ServerOptions(gpus=True))
    ]


def _rack(r: Rehearsal) -> None:
    """The rack through the real Slurm: each task runs `repro rehearse --rack-node` on its host, which starts that
    node's servers through the host's Docker; the image reaches it from the rack folder (docker save/load)."""
    from repro.results.aggregate import VMRow
    from repro.run.rack import launch_offline
    from repro.run.slurm import live_jobs

    nodes = r.result.nodes
    r.say(f"rack: {nodes} nodes through Slurm, each `repro rehearse --rack-node` with its own servers")
    rack = launch_offline(
        r.recipe.name,
        r.ws.root,
        nodes,
        container_image=r.result.image,
        image_source=r.result.image_source,
        rehearsal_time_scale=r.scaling.time,
        poll_s=1.0,
        timeout_s=600,
    )
    rows: list[VMRow] = rack.report.rows if rack.report is not None else []
    for vm in rows:
        r.result.runs.append(run_row("Offline", vm.folder, vm.verdict, no_verdict=vm.status, node=vm.name))
    jobs = [j["job_id"] for j in rack.manifest.get("jobs", [])]
    r.tag = rack.rack_dir.name
    report = rack.report.to_json() if rack.report is not None else None
    r.result.rack = {
        "rack_dir": str(rack.rack_dir),
        "jobs": jobs,
        "tasks": {row.vm: row.state for row in rack.rows},
        "counted": len(rack.report.counted) if rack.report is not None else 0,
        "total_tokens_per_s": report["stats"]["total"] if report else None,
        "image_source": rack.manifest.get("image_source"),
        "left_jobs": live_jobs(jobs),
        "error": rack.report_error,
    }
    total = r.result.rack["total_tokens_per_s"]
    summed = f"{total:,.2f} tokens/s [rehearsal]" if isinstance(total, (int, float)) else "none"
    r.say(f"rack: {r.result.rack['counted']} of {nodes} nodes counted, total {summed}")


def verify_run(recipe: Recipe, ws: Workspace, run_dir: str, recipe_ref: str | None = None) -> dict[str, Any]:
    """`repro verify RUN --recipe` as a user runs it, in its own process: a rehearsal run must come out NOT A
    REPRODUCTION under the rehearsal label, with exit code 1 as every verdict short of PASS (`recipe_ref`: the recipe
    file a system rehearsal's runs are held to, its layout shrunk to the rehearsal's nodes)."""
    import shlex

    ref = recipe_ref or recipe.name
    doc, code, err = repro_json(["verify", run_dir, "--recipe", ref, "--workspace", str(ws.root)])
    doc = doc or {}
    return {
        "run_dir": run_dir,
        "command": shlex.join(["repro", "verify", run_dir, "--recipe", ref]),
        "scenario": doc.get("scenario"),
        "verdict": doc.get("status", "ERROR"),
        "label": doc.get("label"),
        "reproduction": doc.get("reproduction"),
        "exit_code": code,
        "reasons": doc.get("reasons") or [err],
        "next_command": doc.get("next_command"),
        "as_rehearsal": doc.get("status") == "NOT A REPRODUCTION"
        and doc.get("label") == LABEL
        and doc.get("reproduction") is False
        and code == 1,
    }


def verify_rack(recipe: Recipe, rack_dir: str) -> dict[str, Any]:
    """`repro aggregate RACK_DIR --recipe`, the rack's verify, in its own process: every node's verdict NOT A
    REPRODUCTION under the rehearsal label, all of them summed."""
    import shlex

    doc, code, err = repro_json(["aggregate", rack_dir, "--recipe", recipe.name])
    doc = doc or {}
    vms = doc.get("vms") or []
    return {
        "run_dir": rack_dir,
        "command": shlex.join(["repro", "aggregate", rack_dir, "--recipe", recipe.name]),
        "scenario": doc.get("scenario"),
        "verdict": {vm["vm"]: vm["verdict"] for vm in vms} or "ERROR",
        "label": LABEL if vms and all(vm["label"] == LABEL for vm in vms) else None,
        "reproduction": False if vms else None,
        "exit_code": code,
        "reasons": [r for vm in vms for r in vm["reasons"][:1]] or [err],
        "total_tokens_per_s": (doc.get("stats") or {}).get("total"),
        "next_command": doc.get("next_command"),
        "as_rehearsal": bool(vms)
        and all(vm["verdict"] == "NOT A REPRODUCTION" and vm["label"] == LABEL and vm["counted"] for vm in vms)
        and not doc.get("all_pass")
        and code == 1,
    }


def report_html(result_dir: str, html: Path, recipe_ref: str | None = None) -> dict[str, Any]:
    """`repro report RESULT_DIR --html FILE`, the command verify's Next line gives, in its own process: the file it
    wrote, the label the report carries, and its exit code (the verdict's: 1, as a rehearsal is never a PASS)."""
    import shlex

    args = ["report", result_dir, "--html", str(html), *(["--recipe", recipe_ref] if recipe_ref else [])]
    doc, code, err = repro_json(args)
    doc = doc or {}
    return {
        "result_dir": result_dir,
        "command": shlex.join(["repro", *args]),
        "html": str(html),
        "label": doc.get("label"),
        "reproduction": doc.get("reproduction"),
        "exit_code": code,
        "error": None if doc else err,
        # report exits as verify does: 1 for a rehearsal, never a reproduction (0 would mean it claimed one)
        "written": code == 1 and html.is_file() and doc.get("label") == LABEL and doc.get("reproduction") is False,
    }


def each_at_once(step: Callable[[Any], dict[str, Any]], items: list[Any]) -> list[dict[str, Any]]:
    """One user command per item, each its own process as a user runs it, side by side (they read what the runs
    wrote and time nothing: one after another, a three-run rehearsal spent a minute and a half on them here)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        return list(pool.map(step, items))


def _verify(r: Rehearsal) -> None:
    if r.result.rack:
        r.say(f"verify: repro aggregate {r.result.rack['rack_dir']} (each node's verdict, the rack summed)")
        r.result.verify = [verify_rack(r.recipe, r.result.rack["rack_dir"])]
    else:
        r.say("verify: repro verify on each run")
        folders = [run["run_dir"] for run in r.result.runs if run.get("run_dir")]
        ref = r.result.system["recipe_file"] if r.result.system else None
        r.result.verify = each_at_once(lambda d: verify_run(r.recipe, r.ws, d, ref), folders)
    for v in r.result.verify:
        verdict = (
            v["verdict"] if isinstance(v["verdict"], str) else ", ".join(f"{k} {s}" for k, s in v["verdict"].items())
        )
        r.say(f"verify [{v['label']}]: {verdict} (exit {v['exit_code']}) {v['run_dir']}")


def _report(r: Rehearsal) -> None:
    """One HTML report per run (a report compares one VM, or a rack, with the published results), under the
    rehearsal's reports/ folder, never inside the folder it reads."""
    reports = r.ws.root / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    if r.result.rack:
        rack_dir = Path(r.result.rack["rack_dir"])
        targets = [(str(rack_dir), reports / f"{r.recipe.name}-rack-{rack_dir.name}.html")]
    else:
        targets = [
            (run["run_dir"], reports / f"{r.recipe.name}-{run['scenario'].lower()}-{Path(run['run_dir']).name}.html")
            for run in r.result.runs
            if run.get("run_dir")
        ]
    r.say(f"report: repro report --html into {reports}")
    ref = r.result.system["recipe_file"] if r.result.system else None
    r.result.report = each_at_once(lambda t: report_html(t[0], t[1], ref), targets)
    for rep in r.result.report:
        r.say(f"report [{rep['label']}]: {'wrote ' + rep['html'] if rep['written'] else rep['error']}")


def default_steps(nodes: int = 1, pace: Any = None, system: list[str] | None = None) -> list[Step]:
    """A rehearsal's steps in order, by name, so a later step (a tune before `run server`) slots in by position.
    At the published pace (`pace`: its scenarios' RunPace) each scenario the twin has runs at the published rate,
    without a tune (the rate is the published one). With --nodes, a recipe's `system` scenarios each run as one
    system through Slurm (rehearse/system.py); any other recipe's rack is Offline on every node."""
    first: list[Step] = [("doctor", _doctor), ("setup", _setup), ("build-engine", _build)]
    last: list[Step] = [("verify", _verify), ("report", _report)]
    if nodes > 1 and system:
        from repro.rehearse.system import run_system

        return [*first, *[(f"run {s.lower()}", _system_runner(s, run_system)) for s in system], *last]
    if nodes > 1:
        return [*first, ("rack offline", _rack), *last]
    if pace:
        runs: list[Step] = [(f"run {s.lower()}", _runner(s)) for s in ("Offline", "Server", "Interactive") if s in pace]
        return [*first, *runs, *last]
    return [
        *first,
        ("run offline", lambda r: r.run("Offline")),
        ("tune server", _tune),
        ("run server", lambda r: r.run("Server")),
        *last,
    ]


def _runner(scenario: str) -> Callable[[Rehearsal], None]:
    return lambda r: r.run(scenario)


def _system_runner(scenario: str, run: Callable[[Rehearsal, str], None]) -> Callable[[Rehearsal], None]:
    return lambda r: run(r, scenario)


def _system(recipe: Recipe, nodes: int) -> list[str] | None:
    from repro.rehearse.system import system_scenarios

    return system_scenarios(recipe) if nodes > 1 else None


def rehearse(
    recipe_name: str,
    root: Path,
    *,
    time_scale: float = DEFAULT_TIME_SCALE,
    pace: str = "fixed",
    nodes: int = 1,
    steps: list[Step] | None = None,
    client: Any = None,
    on_step: Any = None,
    image_source: str | None = None,
    bar: Callable[[str], Any] | None = None,
) -> RehearsalResult:
    """Run each step (build, setup, runs, or the Slurm rack), then check nothing is left behind; `bar` draws each
    run's progress in a terminal."""
    import docker

    from repro.engine.container import managed_containers

    recipe = gpu_recipe(recipe_name)
    _check_nodes(nodes)
    runs = _paced(recipe, pace, time_scale, nodes, root)
    client = client or docker.from_env(timeout=300)
    scaling = Scaling.for_recipe(recipe, time_scale, pace=runs)
    ws = Workspace.open(root)
    say = on_step or (lambda _msg: None)
    say(f"rehearsal of {recipe.name} in {ws.root}: {scaling.text(('Offline',) if nodes > 1 else None)}")
    result = RehearsalResult(recipe.name, ws.root, scaling, "", nodes=nodes, image_source=image_source)
    r = Rehearsal(recipe, ws, scaling, client, result, say, bar=bar, pace=runs, ref=recipe_name)
    try:
        for name, step in steps if steps is not None else default_steps(nodes, runs, _system(recipe, nodes)):
            step(r)
            r.result.steps.append(name)
    finally:
        release_servers(r)
    r.result.left_containers = [c.name for c in managed_containers(f"org.repro.rehearsal={r.tag}", client=client)]
    return r.result


SHARED_INPUTS = ("models", "preprocessed", "engines")
"""What a rack node reads from the shared workspace: setup's model and prepared dataset, build-engine's output."""


def link_shared_inputs(shared: Workspace, home: Workspace) -> list[str]:
    """Hard-link the shared workspace's inputs into a rehearsal node's own home, so the node reads the very files the
    rack's setup and build-engine wrote (a real node works in the shared workspace itself; the nodes of a rehearsal
    share one machine, so each writes its runs, ledger and rates apart). Links, not symlinks: a symlink out of the
    home would dangle in the servers' /workspace mount."""
    import shutil

    linked = []
    for name in SHARED_INPUTS:
        src = shared.root / name
        if src.is_dir():
            shutil.copytree(src, home.root / name, copy_function=os.link, symlinks=True, dirs_exist_ok=True)
            linked.append(name)
    return linked


def rack_node(recipe_name: str, root: Path, *, image: str, rack: str, time_scale: float, into: Path) -> RehearsalResult:
    """One node of a rehearsal rack (a Slurm task on its host): its own home and servers, one Offline run into the
    node's folder of the rack (`into`, as a real node's `repro run --into`), reading the model, dataset and
    checkpoint the rack's setup and build-engine left in the shared workspace.

    The nodes of a rehearsal share this machine, and other tests with it, so each takes free ports of its own
    (the real nodes are hosts)."""
    import docker

    from repro.engine.container import managed_containers
    from repro.run import enroot
    from repro.run.rack_folder import load_manifest, vm_name
    from repro.run.servers import ServerOptions, plan_servers

    recipe = gpu_recipe(recipe_name)
    index = int(os.environ.get("SLURM_ARRAY_TASK_ID", "0"))
    node = vm_name(index)
    rack_dir = Path(rack)
    tag = rack_dir.name
    shared = Workspace.open(Path(load_manifest(rack_dir)["workspace"]))
    client = docker.from_env(timeout=300)
    scaling = Scaling.for_recipe(recipe, time_scale)
    ws = Workspace.open(root).ensure()
    result = RehearsalResult(recipe.name, ws.root, scaling, image, node_of=str(rack_dir))
    r = Rehearsal(recipe, ws, scaling, client, result, lambda _msg: None, tag=tag, shared=shared, in_process=True)
    result.steps = [f"read {name} from {shared.root}" for name in link_shared_inputs(shared, ws)]
    assert recipe.trtllm is not None
    r.servers = ServerOptions(
        image=image,
        gpus=False,
        name_prefix=f"repro-rehearse-{tag}-{node}",
        labels={"org.repro.rehearsal": tag, "org.repro.rack-node": node},
        # free ones from its own range up: another rehearsal's servers may hold the recipe's ports on this host
        base_port=free_ports(recipe.trtllm.base_port + 100 * index, recipe.trtllm.servers_per_vm),
    )
    r.servers.env = standin_env(scaling, len(plan_servers(recipe, ws, r.servers)))
    r.run("Offline", into=into)
    result.steps.append("run offline")
    mine = managed_containers(f"org.repro.rehearsal={tag}", client=client)
    result.left_containers = [c.name for c in mine if c.labels.get("org.repro.rack-node") == node]
    if enroot.is_enroot_image(image):
        result.left_containers += [c for c in enroot.containers() if c.startswith(r.servers.name_prefix)]
    return result
