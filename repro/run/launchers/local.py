"""The one-VM launcher: each instance of a one-vm plan is a trtllm-serve container on this VM, through Docker, or
through enroot when the image is a squashfs file (run/servers.py ServerFleet, run/enroot.py); the instance's
ranks are its GPUs, which the server's own MPI workers use (one container per instance, as NVIDIA's
launch_server.py starts one trtllm-serve per data-parallel rank)."""

from __future__ import annotations

import shlex
from typing import Any

from repro.core.launchers import launcher_spec
from repro.run import enroot
from repro.run.launchers import FleetContext
from repro.run.launchers.plan import LaunchPlan
from repro.run.servers import ServerFleet, ServerPlan

SPEC = launcher_spec("local")


def server_plans(plan: LaunchPlan) -> list[ServerPlan]:
    """Each instance as the container ServerFleet starts: the plan's argv, GPUs, port, mounts and labels."""
    if plan.image is None:
        raise ValueError("a one-vm plan with servers names their image")
    return [
        ServerPlan(
            inst.index,
            inst.container or f"repro-serve-{plan.recipe}-{inst.index}",
            plan.image,
            list(inst.argv),
            [str(g) for g in inst.gpus],
            inst.port,
            list(plan.mounts),
            dict(inst.env),
            plan.shm_size,
            dict(inst.labels),
        )
        for inst in plan.instances
    ]


class LocalLauncher:
    spec = SPEC

    def fleet(self, plan: LaunchPlan, ctx: FleetContext) -> ServerFleet:
        return ServerFleet(server_plans(plan), keep=ctx.servers.keep)

    def describe(self, plan: LaunchPlan, ctx: FleetContext) -> dict[str, Any]:
        out = []
        for p in server_plans(plan):
            if enroot.is_enroot_image(p.image):
                out.append(p.enroot_argv())
            else:
                out.append(shlex.split(p.docker_cli()))
        return {"launcher": SPEC.name, "commands": out}


def create() -> LocalLauncher:
    return LocalLauncher()
