"""The launchers `repro run` can start servers with, as data: one registration per launcher (as backends.py is for
backends).

`--launcher` takes `NAMES`; the pipeline asks a launcher's spec (the plans it carries out, whether an instance may
span nodes, whether it submits a job from a login node), never its name. The code is one module per launcher
(`module`, under repro/run/launchers/ for the built-in ones) with `create()`; `register()` adds another one
(tests/toy_launcher.py is a whole one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from repro.core.errors import InputError

Shape = Literal["one-vm", "per-vm", "one-system"]
"""What a plan is (repro/run/launchers/plan.py): one VM's servers and LoadGen; N VMs each with its own; one system
of N nodes with servers spanning nodes and one LoadGen."""


@dataclass(frozen=True)
class LauncherSpec:
    name: str
    """What `--launcher` takes."""
    help: str
    module: str
    """The module that implements it: `create()` returns its Launcher (repro/run/launchers/__init__.py)."""
    shapes: tuple[Shape, ...]
    """The plans it carries out."""
    spans_nodes: bool = False
    """It can start an instance whose ranks are on several nodes."""
    submits: bool = False
    """Run from a login node: it submits a job and follows it; the servers start inside that job."""
    runtimes: tuple[str, ...] = ()
    """How a rank's process is contained (docker, enroot, pyxis, host), for the dry run."""


_BUILTIN: tuple[LauncherSpec, ...] = (
    LauncherSpec(
        "local",
        "this VM: its servers in Docker (or enroot for a .sqsh image), LoadGen here",
        "repro.run.launchers.local",
        shapes=("one-vm",),
        runtimes=("docker", "enroot"),
    ),
    LauncherSpec(
        "slurm",
        "Slurm: a rack of VMs as a job array (each its own run), or one system's servers as srun steps",
        "repro.run.launchers.slurm",
        shapes=("per-vm", "one-system"),
        spans_nodes=True,
        submits=True,
        runtimes=("pyxis", "host"),
    ),
)
LAUNCHERS: list[LauncherSpec] = list(_BUILTIN)


def register(spec: LauncherSpec) -> LauncherSpec:
    """Add a launcher (its module's SPEC); the same spec twice is a no-op, another with a taken name an error."""
    for other in LAUNCHERS:
        if other.name == spec.name:
            if other != spec:
                raise ValueError(f"launcher {spec.name!r} is registered already (by {other.module})")
            return other
    LAUNCHERS.append(spec)
    return spec


def unregister(name: str) -> None:
    LAUNCHERS[:] = [s for s in LAUNCHERS if s.name != name or s in _BUILTIN]


def names() -> tuple[str, ...]:
    return tuple(s.name for s in LAUNCHERS)


def choices() -> str:
    return "|".join(names())


def launcher_spec(name: str) -> LauncherSpec:
    """The registration for a `--launcher` name; an unknown one is a usage error naming the choices."""
    for s in LAUNCHERS:
        if s.name == name:
            return s
    raise InputError(
        f"--launcher {ascii(name)}: choose one of {', '.join(names())}.", "`repro run offline --launcher local`"
    )


def specs() -> tuple[LauncherSpec, ...]:
    return tuple(LAUNCHERS)
