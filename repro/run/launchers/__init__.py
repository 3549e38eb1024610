"""Launchers: what turns a `LaunchPlan` (plan.py) into processes. Which launchers exist is the registry in
`repro.core.launchers` (as `repro.core.backends` is for backends); each one is a module with `create() -> Launcher`
(a module outside repro defines its `SPEC` too and is added with `register("package.module")`). The pipeline asks
the spec, never the name. Built in: `local` (this VM: Docker or enroot, run/servers.py + run/enroot.py) and
`slurm` (sbatch and srun: the per-VM rack as a job array, run/rack.py; a system's servers as one srun step per
instance, launchers/srun.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from repro.core.errors import InputError
from repro.core.launchers import LauncherSpec, launcher_spec, names, specs, unregister
from repro.core.launchers import register as _register
from repro.run.launchers.plan import LaunchPlan

__all__ = ["Fleet", "FleetContext", "Launcher", "LauncherSpec", "Submission", "launcher", "launcher_spec", "names"]
__all__ += ["register"]
__all__ += ["specs", "unregister", "for_plan"]

if TYPE_CHECKING:
    from repro.core.workspace import Workspace
    from repro.run.servers import ServerOptions


class Fleet(Protocol):
    """The running instances of one run, as the harness uses them (run/servers.py ServerFleet is the one-VM one)."""

    image_ids: dict[str, str]

    @property
    def urls(self) -> list[str]: ...
    def start(self, log_dir: Path | None = None) -> None: ...
    def alive(self, grace_s: float = 0.0) -> None:
        """Raise ServerDied (run/servers.py) naming the instance, node and rank if any has died."""
        ...

    def tails(self) -> list[tuple[str, list[str]]]:
        """(who, last lines of its log) for every instance that printed something, for a failure's message."""
        ...

    def where(self, url: str) -> str | None:
        """The words that name the instance serving `url` (its node, rank and log), for a failure at that URL."""
        ...

    def system(self) -> dict[str, Any] | None:
        """The system a multi-node fleet is (nodes, their GPUs and image digest, endpoints, the LoadGen node), for
        run.json; None on one VM."""
        ...

    @property
    def log_dir(self) -> Path | None: ...
    def stop(self) -> None: ...
    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class FleetContext:
    """What a launcher needs beyond the plan to start it here: the workspace (mounts), the server options (image,
    keep, labels, env), the deployment's readiness wait, and the job it runs in."""

    workspace: Workspace
    servers: ServerOptions
    job_id: str | None = None
    environ: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Submission:
    """What a launcher that submits (spec.submits) is asked on a login node: `repro run`'s rack flags, resolved by
    the launcher into its job (a rack of VMs, or one system over the nodes)."""

    recipe: str | None
    workspace: Path | None
    scenario: str
    nodes: int | None = None
    partition: str | None = None
    container_image: str | None = None
    image_registry: str | None = None
    image_source: str | None = None
    backend: str | None = None
    duration_s: float | None = None
    samples: int | None = None
    sim_rate: float | None = None
    time_limit: str | None = None
    rerun: Path | None = None
    """A rack folder whose failed VMs to submit again."""
    dry_run: bool = False


class Launcher(Protocol):
    spec: LauncherSpec

    def fleet(self, plan: LaunchPlan, ctx: FleetContext) -> Fleet:
        """The plan's instances, not yet started: `start()` starts them where this process runs (the VM, or the
        first node of the allocation)."""
        ...

    def describe(self, plan: LaunchPlan, ctx: FleetContext) -> dict[str, Any]:
        """What it would run, exactly (argv lists), for `--dry-run`; starts and writes nothing."""
        ...

    def submit(self, request: Submission, ui: Any = None) -> Any:
        """spec.submits only: submit the job, follow it, collect its result (a dry run: what it would submit)."""
        ...

    def check(self, result: Any) -> Any:
        """spec.submits only: the result's exit code (a failed job, a run that does not reproduce) as an error."""
        ...


def register(module: str) -> LauncherSpec:
    """Add a launcher from its module (its SPEC, with `module` naming it, and create()). Returns its spec."""
    spec: LauncherSpec = importlib.import_module(module).SPEC
    return _register(spec)


def launcher(name: str) -> Launcher:
    """The launcher registered as `name`, built by its module's `create()`."""
    made: Launcher = importlib.import_module(launcher_spec(name).module).create()
    return made


def for_plan(plan: LaunchPlan, name: str | None = None) -> Launcher:
    """The launcher that carries out `plan` where this process runs: the one named, else the first registered that
    takes the plan's shape (local for one VM). One that cannot take the shape is refused by its spec."""
    if name is None:
        chosen = next((s for s in specs() if plan.shape in s.shapes and not s.submits), None)
        if chosen is None:
            raise InputError(f"no launcher carries out a {plan.shape} plan.", "`repro run offline --launcher slurm`")
        name = chosen.name
    spec = launcher_spec(name)
    if plan.shape not in spec.shapes:
        raise InputError(
            f"--launcher {spec.name} does not run a {plan.shape} plan ({', '.join(spec.shapes)} only).",
            f"`repro run {plan.scenario.lower()} --recipe {plan.recipe} --launcher "
            f"{next((s.name for s in specs() if plan.shape in s.shapes), 'slurm')}`",
        )
    return launcher(name)
