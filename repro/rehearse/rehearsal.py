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
from repro.rehearse.result import DEFAULT_TIME_SCALE, LABEL, PROMPTS, RehearsalResult, Scaling
from repro.rehearse.setup_step import VOCAB, write_tokenizer

STANDIN_DIR = Path(__file__).resolve().parent / "standin"
STANDIN = STANDIN_DIR / "trtllm_serve.py"
OUT_LEN = 8  # answer length of the stand-in (STANDIN_OUT_LEN): 9 ids with EOS
# `repro tune server` in a rehearsal: probes of 2 s / 100 queries from the rehearsal's Server rate, a 50% bracket (the
# step shows the search and that the run uses its rate; a 3% bracket costs minutes of probes per recipe), and the
# demo's 20% margin (the stand-ins share this machine's CPU, as the demo does).
TUNE_PROBE_S = 2.0
TUNE_PROBE_QUERIES = 100
TUNE_RESOLUTION = 0.5
TUNE_MARGIN = 0.2
TUNE_MAX_MINUTES = 2.0
# The warm-up lasts one probe (tune's default is 10 s: a GPU server builds CUDA graphs on its first batches; the
# stand-in has nothing to warm, and 10 s was a quarter of the tune step).


def tiny_prompts() -> list[list[int]]:
    """The tiny dataset's prompts (token ids of the word-level vocabulary), the same in every rehearsal."""
    rng = np.random.default_rng(3)
    return [rng.integers(3, VOCAB, size=int(rng.integers(4, 30))).tolist() for _ in range(PROMPTS)]


def checkpoint_tokenizer(recipe: Recipe, ws: Workspace) -> None:
    """The tokenizer a checkpoint carries for trtllm-serve, which ModelOpt quantization (the PyTorch path, not stood
    in) would write: the tiny model's."""
    from repro.engine.quantize import paths_for

    ws.ensure()
    write_tokenizer(ws.root / paths_for(recipe).checkpoint_dir.relative_to("/workspace"))


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


def standin_env(scaling: Scaling, servers: int) -> dict[str, str]:
    """A fixed speed (one slot per server) whose total capacity is `scaling.capacity_qps`."""
    per_server = scaling.capacity_qps / max(1, servers)
    return {
        "STANDIN_OUT_LEN": str(OUT_LEN),
        "STANDIN_MAX_BATCH": "1",
        "STANDIN_TOKENS_PER_S": f"{per_server * (OUT_LEN + 1):.6g}",
    }


def rehearsal_root(ws: Workspace, recipe: str) -> Path:
    """A rehearsal's own workspace, beside the real one's folders: its tiny model never stands where setup's goes."""
    return ws.root / "rehearsal" / recipe


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
    nodes: int = 1,
    image_source: str | None = None,
) -> RehearsalResult:
    """What `rehearse` would do (--dry-run): the scaling, the image tag and the steps, nothing built or written."""
    from repro.engine.container import image_spec_for

    recipe = gpu_recipe(recipe_name)
    _check_nodes(nodes)
    assert recipe.trtllm is not None
    spec = image_spec_for(recipe, base_image=standin_tag(base_tag(), recipe.trtllm.version), install="none")
    result = RehearsalResult(
        recipe.name,
        root,
        Scaling.for_recipe(recipe, time_scale),
        spec.tag,
        dry_run=True,
        nodes=nodes,
        image_source=image_source,
    )
    result.steps = [name for name, _ in default_steps(nodes)]
    result.device_requests = planned_device_requests(recipe, Workspace.open(root))
    return result


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

    def run(self, scenario: str, into: Path | None = None) -> None:
        """One LoadGen run through the recipe's servers, then verify; its row goes into result.runs."""
        from repro.results.verify import verify_dir
        from repro.run.harness import run_benchmark
        from repro.run.options import RunHooks, RunOptions

        self.say(f"run {scenario.lower()} through the recipe's servers")
        out = run_benchmark(
            RunOptions.build(
                self.recipe,
                self.ws,
                scenario=scenario,
                detect=False,
                servers=self.servers,
                settings_override=self.scaling.settings(self.recipe, scenario),
                rehearsal=True,
                into=into,
                inputs_from=self.shared,
            ),
            RunHooks(bar=self.bar),
        )
        verdict = verify_dir(Path(out.details["run_dir"]), recipe=self.recipe)
        self.result.runs.append(
            run_row(
                scenario,
                out.details["run_dir"],
                verdict,
                target_qps=out.details.get("target_qps"),
                target_qps_source=out.details.get("target_qps_source"),
            )
        )
        self.say(f"{scenario}: {verdict.run.validity}, verdict {verdict.status} [{verdict.run.label}]")


def run_row(
    scenario: str, run_dir: str | Path, verdict: Any, no_verdict: str = "ERROR", **extra: Any
) -> dict[str, Any]:
    """One run of a rehearsal as its result lists it (a rack node without a verdict: `no_verdict` as its status)."""
    run = verdict.run if verdict is not None else None
    return {
        "scenario": scenario,
        "run_dir": str(run_dir),
        "valid": bool(run and run.valid),
        "validity": run.validity if run else "ERROR",
        "verdict": verdict.status if verdict is not None else no_verdict,
        "label": run.label if run else None,
        "samples_per_s": run.samples_per_s if run else None,
        "tokens_per_s": run.tokens_per_s if run else None,
        **extra,
    }


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


def doctor_step(recipe: Recipe, ws: Workspace) -> dict[str, Any]:
    """`repro doctor --recipe` in its own process, its NVML and nvidia-smi stood in by the recipe's GPUs. Checks
    that need the VM (NVIDIA runtime, disk, token) may fail here; the GPU checks must pass."""
    found, code, err = repro_json(
        ["doctor", "--recipe", recipe.name, "--workspace", str(ws.root)], env=doctor_env(recipe)
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
    r.result.doctor = doctor_step(r.recipe, r.ws)
    checks = r.result.doctor["gpu_checks"]
    r.say(f"doctor [stand-in GPUs]: {', '.join(f'{k} {v}' for k, v in checks.items())}")


def build_engine_steps(recipe: Recipe, ws: Workspace, client: Any = None) -> dict[str, Any]:
    """Run the steps of repro's build plan that are TensorRT-LLM's own tools (quantize.py, trtllm-build) in the
    recipe's image on the stand-in base, where they are the contract-bound stand-ins; report what each wrote."""
    from repro.engine import quantize as q
    from repro.engine.container import run_container
    from repro.engine.plan import plan_build

    assert recipe.trtllm is not None
    base = standin_tag(base_tag(), recipe.trtllm.version)
    plan = plan_build(recipe, ws, base_image=base, install="none", gpus=False)
    logs = ws.root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    ran: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for step in plan.steps:
        cmd = step.argv[2:] if step.argv[:2] == ["exec", "--"] else step.argv  # the image's entrypoint runs it
        trtllm_tool = cmd[:1] == ["trtllm-build"] or cmd[1:2] == [q.TRTLLM_QUANTIZE]
        if not trtllm_tool:
            why = (
                "repro's own step; setup already wrote its calibration parquet"
                if step.name == "prepare-calib"
                else "ModelOpt quantization in repro's entry point needs torch, ModelOpt and the GPU"
            )
            skipped.append({"step": step.name, "why": why})
            continue
        run_container(step.run, step=step.name, log_path=logs / f"build-engine-{step.name}.log", client=client)
        ran.append(
            {
                "step": step.name,
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
    )
    r.servers.env = standin_env(r.scaling, len(plan_servers(r.recipe, r.ws, r.servers)))
    r.result.device_requests = planned_device_requests(r.recipe, r.ws)


def release_servers(r: Rehearsal) -> None:
    """Remove the servers the runs kept between them (see `_build`); nothing to do before they were planned."""
    from repro.run.servers import ServerFleet, plan_servers

    if r.servers is not None and r.servers.keep:
        ServerFleet(plan_servers(r.recipe, r.ws, r.servers), keep=False, client=r.client).stop()


def _tune(r: Rehearsal) -> None:
    """`repro tune server` against the stand-in servers with the rehearsal's scaling (its Server run's duration and
    query count judge early stopping); the Server run after it reads the saved rate and records it in run.json."""
    from repro.run.tune import tune

    run = r.scaling.settings(r.recipe, "Server")
    r.say(f"tune server: LoadGen probes against the stand-in servers from {run['target_qps']:.3g} queries/s")
    found = tune(
        r.recipe,
        r.ws,
        scenario="Server",
        servers=r.servers,
        start_qps=float(f"{run['target_qps']:.4g}"),
        margin=TUNE_MARGIN,
        resolution=TUNE_RESOLUTION,
        max_minutes=TUNE_MAX_MINUTES,
        probe_s=TUNE_PROBE_S,
        probe_queries=TUNE_PROBE_QUERIES,
        run_settings={k: run[k] for k in ("min_duration", "min_query_count")},
        rehearsal=True,
        detect=False,
        warmup_s=TUNE_PROBE_S,
    )
    r.result.tune = {
        "label": LABEL,
        "chosen_qps": found.chosen_qps,
        "highest_passing_qps": found.highest_passing_qps,
        "lowest_failing_qps": found.lowest_failing_qps,
        "margin": found.margin,
        "stopped": found.stopped,
        "file": found.file,
        "search": [(p.target_qps, p.passed) for p in found.probes],
    }
    r.say(f"tune server [{LABEL}]: {found.summary}")


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


def verify_run(recipe: Recipe, ws: Workspace, run_dir: str) -> dict[str, Any]:
    """`repro verify RUN --recipe` as a user runs it, in its own process: a rehearsal run must come out NOT A
    REPRODUCTION under the rehearsal label, with exit code 1 as every verdict short of PASS."""
    import shlex

    doc, code, err = repro_json(["verify", run_dir, "--recipe", recipe.name, "--workspace", str(ws.root)])
    doc = doc or {}
    return {
        "run_dir": run_dir,
        "command": shlex.join(["repro", "verify", run_dir, "--recipe", recipe.name]),
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


def report_html(result_dir: str, html: Path) -> dict[str, Any]:
    """`repro report RESULT_DIR --html FILE`, the command verify's Next line gives, in its own process: the file it
    wrote, the label the report carries, and its exit code (the verdict's: 1, as a rehearsal is never a PASS)."""
    import shlex

    doc, code, err = repro_json(["report", result_dir, "--html", str(html)])
    doc = doc or {}
    return {
        "result_dir": result_dir,
        "command": shlex.join(["repro", "report", result_dir, "--html", str(html)]),
        "html": str(html),
        "label": doc.get("label"),
        "reproduction": doc.get("reproduction"),
        "exit_code": code,
        "error": None if doc else err,
        # report exits as verify does: 1 for a rehearsal, never a reproduction (0 would mean it claimed one)
        "written": code == 1 and html.is_file() and doc.get("label") == LABEL and doc.get("reproduction") is False,
    }


def _verify(r: Rehearsal) -> None:
    if r.result.rack:
        r.say(f"verify: repro aggregate {r.result.rack['rack_dir']} (each node's verdict, the rack summed)")
        r.result.verify = [verify_rack(r.recipe, r.result.rack["rack_dir"])]
    else:
        r.say("verify: repro verify on each run")
        r.result.verify = [verify_run(r.recipe, r.ws, run["run_dir"]) for run in r.result.runs]
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
        ]
    r.say(f"report: repro report --html into {reports}")
    r.result.report = [report_html(folder, html) for folder, html in targets]
    for rep in r.result.report:
        r.say(f"report [{rep['label']}]: {'wrote ' + rep['html'] if rep['written'] else rep['error']}")


def default_steps(nodes: int = 1) -> list[Step]:
    """A rehearsal's steps in order, by name, so a later step (a tune before `run server`) slots in by position."""
    first: list[Step] = [("doctor", _doctor), ("setup", _setup), ("build-engine", _build)]
    last: list[Step] = [("verify", _verify), ("report", _report)]
    if nodes > 1:
        return [*first, ("rack offline", _rack), *last]
    return [
        *first,
        ("run offline", lambda r: r.run("Offline")),
        ("tune server", _tune),
        ("run server", lambda r: r.run("Server")),
        *last,
    ]


def rehearse(
    recipe_name: str,
    root: Path,
    *,
    time_scale: float = DEFAULT_TIME_SCALE,
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
    client = client or docker.from_env(timeout=300)
    scaling = Scaling.for_recipe(recipe, time_scale)
    ws = Workspace.open(root)
    say = on_step or (lambda _msg: None)
    say(f"rehearsal of {recipe.name} in {ws.root}: {scaling.text(('Offline',) if nodes > 1 else None)}")
    result = RehearsalResult(recipe.name, ws.root, scaling, "", nodes=nodes, image_source=image_source)
    r = Rehearsal(recipe, ws, scaling, client, result, say, bar=bar)
    try:
        for name, step in steps if steps is not None else default_steps(nodes):
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

    The nodes of a rehearsal share this machine, so each takes its own port range (the real nodes are hosts)."""
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
    r = Rehearsal(recipe, ws, scaling, client, result, lambda _msg: None, tag=tag, shared=shared)
    result.steps = [f"read {name} from {shared.root}" for name in link_shared_inputs(shared, ws)]
    assert recipe.trtllm is not None
    r.servers = ServerOptions(
        image=image,
        gpus=False,
        name_prefix=f"repro-rehearse-{tag}-{node}",
        labels={"org.repro.rehearsal": tag, "org.repro.rack-node": node},
        base_port=recipe.trtllm.base_port + 100 * index,
    )
    r.servers.env = standin_env(scaling, len(plan_servers(recipe, ws, r.servers)))
    r.run("Offline", into=into)
    result.steps.append("run offline")
    mine = managed_containers(f"org.repro.rehearsal={tag}", client=client)
    result.left_containers = [c.name for c in mine if c.labels.get("org.repro.rack-node") == node]
    if enroot.is_enroot_image(image):
        result.left_containers += [c for c in enroot.containers() if c.startswith(r.servers.name_prefix)]
    return result
