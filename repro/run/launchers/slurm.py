"""The Slurm launcher: sbatch and srun. Two plans over it:
- per-vm (Azure's Llama-2 rack): a job array, one task per VM, each running this VM's `repro run` with the local
  launcher on its node, the runs summed by `repro aggregate` (run/rack.py, run/templates/sbatch.sh);
- one-system (MLPerf's rack systems): one job of N nodes; its batch step (node 0) runs `repro run ... --inside-job`,
  which starts every instance as an srun step (launchers/srun.py) and one LoadGen over every front end.
"""

from __future__ import annotations

import shlex
from typing import Any

from repro.core.errors import InputError
from repro.core.launchers import launcher_spec
from repro.run.launchers import FleetContext, Submission
from repro.run.launchers.plan import LaunchPlan
from repro.run.launchers.srun import SrunFleet, StepOptions, srun_argv, step_env

SPEC = launcher_spec("slurm")


class SlurmLauncher:
    spec = SPEC

    def __init__(self, opts: StepOptions | None = None) -> None:
        self.opts = opts or StepOptions()

    def fleet(self, plan: LaunchPlan, ctx: FleetContext) -> SrunFleet:
        """A system's servers as steps of the job this process runs in (a per-vm plan's nodes each start their own
        servers with the local launcher, inside their array task)."""
        if plan.shape != "one-system":
            raise ValueError("the Slurm launcher starts servers itself only for a one-system plan")
        from dataclasses import replace

        opts = replace(self.opts, env={**dict(self.opts.env), **ctx.servers.env}, check_gpus=ctx.servers.gpus)
        return SrunFleet(plan, job_id=ctx.job_id, opts=opts, environ=ctx.environ or None, workspace=ctx.workspace.root)

    def describe(self, plan: LaunchPlan, ctx: FleetContext) -> dict[str, Any]:
        from pathlib import Path

        log_dir = Path("RUN_DIR") / "servers"
        steps = []
        for inst in plan.instances:
            cfg = log_dir / inst.config_file if inst.config_file else None
            argv = srun_argv(plan, inst, log_dir, self.opts, job_id=ctx.job_id, config_path=cfg)
            steps.append(
                {
                    "instance": inst.name,
                    "argv": argv,
                    "command": shlex.join(argv),
                    "env": step_env(plan, inst, self.opts),
                }
            )
        return {"launcher": SPEC.name, "steps": steps}

    def submit(self, request: Submission, ui: Any = None) -> Any:
        """The job a login node submits: again the failed VMs of a rack (--rerun-failed); one system's job when the
        recipe lays the scenario out as one system (rack_system.py); else a rack of one-VM Offline runs as a job
        array (rack.py)."""
        from repro.core.recipes import get_recipe
        from repro.run import rack, rack_system

        r = request
        if r.rerun is not None:
            return rack.rerun_failed(r.rerun, dry_run=r.dry_run, ui=ui)
        rec = get_recipe(r.recipe) if r.recipe else None
        if rec is not None and rack_system.is_system(rec, r.scenario):
            return rack_system.launch_system(
                r.recipe,
                r.workspace,
                r.scenario,
                None if r.nodes in (None, 1) else r.nodes,
                dry_run=r.dry_run,
                ui=ui,
                partition=r.partition,
                container_image=r.container_image,
                image_registry=r.image_registry,
                image_source=r.image_source,
                duration_s=r.duration_s,
                samples=r.samples,
                time_limit=r.time_limit,
            )
        if r.scenario != "Offline":
            raise InputError(
                f"--launcher slurm runs {r.scenario} only for a recipe that lays it out as one system over many "
                f"nodes ({rec.name if rec else 'no --recipe'} does not); a rack of one-VM runs is Offline.",
                "`repro run offline --launcher slurm --nodes N --recipe RECIPE`",
            )
        if r.time_limit is not None:
            raise InputError("--time-limit is for a system's one job.", "drop --time-limit for a rack of VMs")
        return rack.launch_offline(
            recipe=r.recipe,
            workspace=r.workspace,
            nodes=r.nodes or 1,
            partition=r.partition,
            container_image=r.container_image,
            image_registry=r.image_registry,
            image_source=r.image_source,
            backend=r.backend,
            duration_s=r.duration_s,
            samples=r.samples,
            dry_run=r.dry_run,
            sim_rate=r.sim_rate,
            ui=ui,
        )

    def check(self, result: Any) -> Any:
        from repro.run import rack, rack_system

        if result.manifest.get("shape") == "one-system":
            return rack_system.check_system(result)
        return rack.check(result)


def create() -> SlurmLauncher:
    return SlurmLauncher()
