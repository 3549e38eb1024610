"""A toy launcher, the whole of it in this one module (issue 46: adding a launcher is one module): each instance of
a one-vm plan is the stand-in trtllm-serve as a plain process on this host, no container. Registered by the test
with `repro.run.launchers.register("toy_launcher")`."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from repro.core.launchers import LauncherSpec
from repro.run.launchers import FleetContext
from repro.run.launchers.plan import LaunchPlan
from repro.run.servers import ServerDied

SPEC = LauncherSpec("toy", "each server a plain process on this host", __name__, shapes=("one-vm",), runtimes=("host",))
STANDIN = Path(__file__).resolve().parents[1] / "repro" / "rehearse" / "standin" / "trtllm_serve.py"


def _argv(plan: LaunchPlan, i: int, ctx: FleetContext) -> list[str]:
    """The plan's own command, with the container's /workspace read as the workspace and trtllm-serve the stand-in."""
    inst = plan.instances[i]
    argv = [a.replace("/workspace", str(ctx.workspace.root)) for a in inst.argv]
    if argv[:2] == ["exec", "--"]:
        argv = argv[2:]
    assert argv[0] == "trtllm-serve", argv
    return [sys.executable, str(STANDIN), *argv[1:]]


class ToyFleet:
    def __init__(self, plan: LaunchPlan, ctx: FleetContext) -> None:
        self.plan, self.ctx = plan, ctx
        self.procs: list[subprocess.Popen[bytes]] = []
        self.image_ids: dict[str, str] = {}
        self._log_dir: Path | None = None
        self.started: list[list[str]] = []

    @property
    def urls(self) -> list[str]:
        return list(self.plan.endpoints())

    @property
    def log_dir(self) -> Path | None:
        return self._log_dir

    def start(self, log_dir: Path | None = None) -> None:
        assert log_dir is not None
        self._log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        for i, inst in enumerate(self.plan.instances):
            argv = _argv(self.plan, i, self.ctx)
            self.started.append(argv)
            with open(log_dir / f"{inst.name}.log", "wb") as out:
                self.procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT))

    def alive(self, grace_s: float = 0.0) -> None:
        deadline = time.monotonic() + grace_s
        while True:
            for inst, p in zip(self.plan.instances, self.procs, strict=True):
                if p.poll() is not None:
                    raise ServerDied(f"{inst.name} exited with code {p.returncode}", "see its log")
            if time.monotonic() >= deadline:
                return
            time.sleep(0.1)

    def tails(self) -> list[tuple[str, list[str]]]:
        return []

    def where(self, url: str) -> str | None:
        return None

    def system(self) -> None:
        return None

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(10)

    def to_json(self) -> dict[str, Any]:
        return {"launcher": "toy", "servers": [{"argv": a} for a in self.started]}


class ToyLauncher:
    spec = SPEC

    def fleet(self, plan: LaunchPlan, ctx: FleetContext) -> ToyFleet:
        return ToyFleet(plan, ctx)

    def describe(self, plan: LaunchPlan, ctx: FleetContext) -> dict[str, Any]:
        return {"launcher": "toy", "commands": [_argv(plan, i, ctx) for i in range(len(plan.instances))]}


def create() -> ToyLauncher:
    return ToyLauncher()
