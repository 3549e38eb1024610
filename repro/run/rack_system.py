"""One system over N nodes through Slurm: `repro run offline|server|interactive --launcher slurm --nodes N` for a
recipe whose scenario is laid out as one system (trtllm.system: servers spanning nodes, one LoadGen).

From the login node: one job of N exclusive nodes (templates/system.sbatch) whose batch step, on node 0, runs
`repro run SCENARIO --launcher slurm --inside-job --into RACK_DIR/system`: that run places the plan on the job's nodes,
checks every node (launchers/preflight.py, one srun step), starts each server as an srun step, drives one LoadGen over
every front end and stops every step when it ends. The login side follows the job, then verifies the one run as the
one system it is. The rack folder is the per-VM rack's (rack.json, slurm/, image/), with one task, `system`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro import __version__
from repro.core.errors import InputError, ReproError, StepFailed
from repro.core.fsutil import atomic_write_json, atomic_write_text
from repro.core.recipes import Recipe, get_recipe, is_registry_recipe
from repro.core.textsafe import sh_quote
from repro.core.workspace import Workspace
from repro.run.launchers.layout import Allocation, resolve, serving_layout
from repro.run.launchers.plan import LaunchPlan
from repro.run.launchers.srun import srun_argv, step_env
from repro.run.rack import (
    QuietRack,
    RackPlan,
    RackUI,
    _claim_rack_dir,
    _header_safe,
    _new_rack_dir,
    _plan_image,
    distribute_image,
    follow,
    image_commands,
)
from repro.run.rack_folder import MAX_NODES, RACK_JSON, RECIPE_DIR, SYSTEM_DIR, RackResult, TaskRow, load_manifest
from repro.run.slurm import sbatch, sbatch_argv

TEMPLATE = Path(__file__).with_name("templates") / "system.sbatch"
SYSTEM_SCRIPT = "system.sbatch"
_TIME = re.compile(r"\d{1,4}(:\d{2}){0,2}|\d{1,3}-\d{1,2}(:\d{2}){0,2}")


@dataclass
class SystemRackPlan(RackPlan):
    """A one-system run's submission: the rack plan's image and folder, plus the scenario and the placed plan."""

    scenario: str = "Offline"
    time_limit: str | None = None
    launch: LaunchPlan | None = None
    """The plan on N nodes named node-00.. (the job names them when it runs): what a dry run shows."""
    slurm_nodes: int | None = None
    """Nodes to ask Slurm for when fewer than the plan's (a rehearsal's tasks on one machine); None: nodes."""
    run_flags: list[str] = field(default_factory=list)
    """More flags for the run inside the job (a rehearsal's time scale, ...)."""
    job_args: list[str] | None = None
    """The repro command the job runs instead of `repro run SCENARIO --inside-job ...` (a rehearsal's own step), whole:
    its run must still go into RACK_DIR/system."""

    def validate(self) -> None:
        super().validate()
        if self.time_limit is not None and not _TIME.fullmatch(self.time_limit):
            raise InputError(
                f"--time-limit {ascii(self.time_limit)}: a Slurm time (MINUTES, HH:MM:SS or D-HH).",
                "`--time-limit 04:00:00`",
            )

    def run_args(self) -> list[str]:
        """The command node 0 runs, whole: `repro run SCENARIO --inside-job ... --into RACK_DIR/system`."""
        if self.job_args is not None:
            return list(self.job_args)
        recipe = str(self.rack_dir / self.recipe_file) if self.recipe_file else self.recipe.name
        args = ["run", self.scenario.lower(), "--recipe", recipe, "--launcher", "slurm", "--inside-job"]
        args += ["--nodes", str(self.nodes), *self._run_flags(), *self.run_flags]
        if self.server_image:
            args += ["--server-image", self.server_image]
        return [*args, "--workspace", str(self.workspace), "--into", str(self.rack_dir / SYSTEM_DIR)]

    def command(self, image_registry: str | None = None) -> str:
        argv = ["repro", "run", self.scenario.lower(), "--launcher", "slurm", "--nodes", str(self.nodes)]
        argv += ["--recipe", self.recipe_file and str(self.rack_dir / self.recipe_file) or self.recipe.name]
        argv += self._run_flags()
        argv += ["--partition", self.partition] if self.partition else []
        argv += ["--time-limit", self.time_limit] if self.time_limit else []
        if self.push_from:
            argv += ["--container-image", self.push_from, "--image-registry", image_registry or ""]
        elif self.container_image:
            argv += ["--container-image", self.container_image]
        argv += ["--image-source", self.image_source] if self.image_source else []
        return shlex.join([*argv, "--workspace", str(self.workspace)])

    def manifest(self) -> dict[str, Any]:
        return {
            **super().manifest(),
            "shape": "one-system",
            "scenario": self.scenario,
            "script": SYSTEM_SCRIPT,
            "plan": self.launch.to_json() if self.launch is not None else None,
        }


def render_system_script(plan: SystemRackPlan) -> str:
    """system.sbatch with every value validated and quoted for bash; no raw newline."""
    plan.validate()
    label = f"[{plan.label}] " if plan.label else ""
    nodes = plan.slurm_nodes or plan.nodes
    values = {
        "JOB_NAME": _header_safe(f"repro-{plan.recipe.name}-{plan.scenario.lower()}"),
        "NODES": str(nodes),
        "PARTITION_LINE": f"#SBATCH --partition={_header_safe(plan.partition)}" if plan.partition else "",
        "TIME_LINE": f"#SBATCH --time={_header_safe(plan.time_limit)}" if plan.time_limit else "",
        "COMMENT": _header_safe(
            f"{label}repro {__version__} system run of {plan.recipe.name} {plan.scenario}: one system of "
            f"{plan.nodes} nodes, one LoadGen."
        ),
        "RACK_DIR": sh_quote(str(plan.rack_dir)),
        "LABEL": sh_quote(plan.label or ""),
        "REPRO_BIN": sh_quote(plan.repro_bin),
        "ARGS": " ".join(sh_quote(a) for a in plan.run_args()),
    }
    text = TEMPLATE.read_text(encoding="utf-8")
    for key in ("PARTITION_LINE", "TIME_LINE"):
        if not values[key]:
            text = text.replace(f"@{key}@\n", "")
    return re.sub(r"@([A-Z_]+)@", lambda m: values[m[1]], text)


def is_system(recipe: Recipe, scenario: str) -> bool:
    """The recipe lays this scenario out as one system over many nodes (trtllm.system)."""
    return recipe.trtllm is not None and serving_layout(recipe.deployment(scenario)).shape == "one-system"


def plan_system(
    recipe: str | Recipe | None,
    ws: Workspace,
    scenario: str,
    nodes: int | None,
    *,
    partition: str | None = None,
    container_image: str | None = None,
    image_registry: str | None = None,
    image_source: str | None = None,
    duration_s: float | None = None,
    samples: int | None = None,
    time_limit: str | None = None,
    slurm_nodes: int | None = None,
    run_flags: list[str] | None = None,
    job_args: list[str] | None = None,
) -> SystemRackPlan:
    """The submission of one system run: the recipe's layout placed on N planned nodes (its published node count
    when --nodes is not given), the rack folder, the image route (a squashfs in the rack folder, or a registry:
    pyxis starts containers from either, never from a `docker save` archive; or none: `host`). A rehearsal asks
    Slurm for fewer nodes than the plan's (`slurm_nodes`: its nodes are tasks sharing one machine) and passes the
    run inside the job its own flags (`run_flags`) or runs its own command there (`job_args`)."""
    if recipe is None:
        raise InputError(
            "a system run needs --recipe: the login node is not one of the nodes, so it cannot detect it.",
            f"`repro run {scenario.lower()} --launcher slurm --recipe RECIPE`",
        )
    rec = get_recipe(recipe) if isinstance(recipe, str) else recipe
    dep = rec.deployment(scenario)
    layout = serving_layout(dep)
    if layout.shape != "one-system":
        raise InputError(
            f"{rec.name} {scenario} runs on one VM; a rack of such VMs is N independent Offline runs.",
            f"`repro run offline --launcher slurm --nodes N --recipe {rec.name}`",
        )
    want = nodes if nodes not in (None, 1) else (layout.nodes or layout.nodes_needed)
    assert want is not None
    if not 1 <= want <= MAX_NODES:
        raise InputError(f"--nodes must be 1 to {MAX_NODES} (got {want}).", "`--nodes 18`")
    if image_source == "archive":
        raise InputError(
            "--image-source archive: a system's servers start through pyxis, from a squashfs file or a registry, "
            "never from a `docker save` archive.",
            f"`repro run {scenario.lower()} --launcher slurm --image-source enroot ...`",
        )
    plan = SystemRackPlan(
        rec,
        _new_rack_dir(ws, rec),
        want,
        ws.root,
        partition=partition,
        container_image=container_image,
        duration_s=duration_s,
        samples=samples,
        scenario=scenario,
        time_limit=time_limit,
    )
    if not is_registry_recipe(rec):
        plan.recipe_file = f"{RECIPE_DIR}/{rec.name}.yaml"
    plan.validate()
    if image_source == "host":
        if container_image or image_registry:
            raise InputError(
                "--image-source host runs the servers on each node's host, without a container image.",
                "drop --container-image/--image-registry, or use --image-source enroot",
            )
        plan.image_source = "host"
    else:
        _plan_image(plan, ws, container_image, image_registry, image_source or _default_source(image_registry))
    plan.slurm_nodes, plan.run_flags, plan.job_args = slurm_nodes, list(run_flags or []), job_args
    plan.launch = resolve(
        dep, ws, Allocation.planned(want, rec.system.gpus_per_vm), layout=layout, image=plan.server_image
    )
    return plan


def _default_source(registry: str | None) -> str | None:
    """pyxis reads a squashfs file or a registry: enroot unless a registry is named."""
    return None if registry else "enroot"


def dry_steps(plan: SystemRackPlan) -> list[dict[str, Any]]:
    """Each server's srun step as the job will start it (hosts named once the job runs)."""
    if plan.launch is None:
        return []
    servers = plan.rack_dir / SYSTEM_DIR / "servers"
    out = []
    for inst in plan.launch.instances:
        cfg = servers / inst.config_file if inst.config_file else None
        argv = srun_argv(plan.launch, inst, servers, config_path=cfg)
        out.append({"instance": inst.name, "argv": argv, "env": step_env(plan.launch, inst)})
    return out


def submit_system(plan: SystemRackPlan) -> str:
    rack = plan.rack_dir
    (rack / "slurm").mkdir(parents=True, exist_ok=True)
    if plan.recipe_file and not (rack / plan.recipe_file).exists():
        import yaml

        (rack / plan.recipe_file).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(rack / plan.recipe_file, yaml.safe_dump(plan.recipe.model_dump(mode="json"), sort_keys=False))
    script = rack / SYSTEM_SCRIPT
    atomic_write_text(script, render_system_script(plan))
    script.chmod(0o755)
    distribute_image(plan)
    m = load_manifest(rack) if (rack / RACK_JSON).exists() else plan.manifest()
    job_id = sbatch(script, None, rack, one_job=True)
    m["jobs"].append({"job_id": job_id, "tasks": [0], "submitted": _now()})
    m["status"] = "submitted"
    atomic_write_json(rack / RACK_JSON, m)
    return job_id


def _now() -> str:
    from repro.core.clock import now_iso

    return now_iso()


def collect_system(rack_dir: Path, rows: list[TaskRow]) -> RackResult:
    """The job's end recorded in rack.json, and the one run verified as the system it is."""
    from repro.results.verify import verify_dir

    m = load_manifest(rack_dir)
    result = RackResult(rack_dir, m, rows)
    run = rack_dir / SYSTEM_DIR
    if (run / "performance").is_dir():
        try:
            recipe = get_recipe(str(rack_dir / m["recipe_file"])) if m.get("recipe_file") else m["recipe"]
            result.report = verify_dir(run, recipe=recipe, scenario=m.get("scenario"))
        except ReproError as exc:
            result.report_error = exc.message
    else:
        result.report_error = "the job wrote no run folder"
    m["status"] = "complete" if rows and rows[0].state == "done" else rows[0].state if rows else "missing"
    m["tasks"] = {r.vm: r.state for r in rows}
    m["collected"] = _now()
    atomic_write_json(rack_dir / RACK_JSON, m)
    return result


def launch_system(
    recipe: str | None,
    workspace: Path | None,
    scenario: str,
    nodes: int | None,
    *,
    dry_run: bool = False,
    ui: RackUI | None = None,
    poll_s: float = 2.0,
    timeout_s: float | None = None,
    **kw: Any,
) -> RackResult:
    """`repro run SCENARIO --launcher slurm` for a one-system recipe: submit, follow, verify."""
    ui = ui or QuietRack()
    ws = Workspace.open(workspace)
    plan = plan_system(recipe, ws, scenario, nodes, **kw)
    if dry_run:
        return RackResult(
            plan.rack_dir,
            plan.manifest(),
            script=render_system_script(plan),
            dry_run=True,
            submit_command=sbatch_argv(plan.rack_dir / SYSTEM_SCRIPT, plan.rack_dir, one_job=True),
            next_command=plan.command(kw.get("image_registry")),
            image_commands=image_commands(plan),
            plan_lines=plan.launch.lines() if plan.launch else [],
            steps=dry_steps(plan),
        )
    _claim_rack_dir(plan)
    job_id = submit_system(plan)
    ui.note(f"submitted Slurm job {job_id} ({plan.nodes} nodes, one system); its run goes to {plan.rack_dir}/system")
    rows = follow(plan.rack_dir, poll_s=poll_s, ui=ui, timeout_s=timeout_s)
    return collect_system(plan.rack_dir, rows)


def check_system(result: RackResult) -> RackResult:
    """A job that did not finish, or a run that is not VALID/PASS, into its exit code and next command."""
    if result.dry_run:
        return result
    row = result.rows[0] if result.rows else None
    if row is None or row.state != "done":
        why = row.reason if row is not None else "never submitted"
        raise StepFailed(
            f"the system run did not finish ({row.state if row else 'missing'}: {why}).",
            f"see {result.rack_dir / SYSTEM_DIR / 'repro.log'} and the rank logs in "
            f"{result.rack_dir / SYSTEM_DIR / 'servers'}",
        )
    if result.report is None:
        raise StepFailed(
            f"no verdict for {result.rack_dir / SYSTEM_DIR}: {result.report_error}.",
            f"`repro verify {result.rack_dir / SYSTEM_DIR}`",
        )
    code = int(result.report.exit_code)
    if code and not result.manifest.get("label"):
        raise ReproError(
            "the system's run does not reproduce the published number; see its verdict.",
            f"`repro explain {result.rack_dir / SYSTEM_DIR}`",
            exit_code=code,
        )
    return result
