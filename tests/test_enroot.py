"""The servers through the real enroot: the recipe image (stand-in trtllm-serve on the FROM-scratch base, the
recipe's own Dockerfile and entrypoint) imported from the real Docker engine into a squashfs file with the argv the
rack uses, then `repro run` starts, waits for, drives and stops its four servers under enroot, and leaves no enroot
container and no process behind, on success, a crash while loading, and SIGTERM.

enroot is built from github.com/NVIDIA/enroot (no Debian package); where it is absent these tests skip
(REPRO_REQUIRE_ENROOT=1 makes that a failure). docs/BENCHMARKS.md records how and where they ran.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from container_base import SERVE_RECIPE as RECIPE
from standin_util import free_port_range, standin_workspace, start_interruptible_run

from repro.core.errors import InputError
from repro.core.workspace import Workspace
from repro.run import enroot
from repro.run.harness import run_benchmark
from repro.run.options import RunOptions
from repro.run.servers import ServerDied, ServerOptions

REQUIRED = os.environ.get("REPRO_REQUIRE_ENROOT") == "1"
# Skipped before any fixture runs, so a machine without enroot builds no image for nothing.
pytestmark = [
    pytest.mark.enroot,
    pytest.mark.docker,
    pytest.mark.skipif(
        shutil.which("enroot") is None and not REQUIRED,
        reason="no enroot on PATH (build it from github.com/NVIDIA/enroot; see docs/BENCHMARKS.md)",
    ),
]


@pytest.fixture(scope="module")
def sqsh(serve_image: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The serve image as the rack's submit host writes it: `enroot import --output X.sqsh dockerd://IMAGE`."""
    if shutil.which("enroot") is None:
        pytest.fail("REPRO_REQUIRE_ENROOT=1 but `enroot` is not on PATH")
    dest = tmp_path_factory.mktemp("enroot") / "serve.sqsh"
    done = subprocess.run(enroot.import_argv(serve_image, dest, in_registry=False), capture_output=True, text=True)
    assert done.returncode == 0 and dest.is_file(), done.stderr[-2000:]
    return dest


@pytest.fixture
def ws() -> Workspace:
    return standin_workspace(RECIPE)


def _options(image: Path, tag: str, **kw) -> ServerOptions:
    base = {"image": str(image), "gpus": False, "base_port": free_port_range(4), "name_prefix": f"repro-test-{tag}"}
    return ServerOptions(**{**base, "ready_timeout_s": 60, **kw})


def _left(tag: str) -> dict[str, list[str]]:
    """What a run could leave: enroot containers and `enroot start` processes of this test's servers."""
    ps = subprocess.run(["ps", "-ww", "-eo", "args="], capture_output=True, text=True).stdout.splitlines()
    return {
        "containers": [c for c in enroot.containers() if tag in c],
        "processes": [p for p in ps if "enroot" in p and tag in p and "ps -eo" not in p],
    }


def _ports_free(base: int) -> bool:
    for port in range(base, base + 4):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return False
    return True


def test_run_starts_waits_drives_and_removes_enroot_servers(sqsh: Path, ws: Workspace) -> None:
    """start (one enroot container, four `enroot start`) -> wait (they load for 3 s) -> LoadGen -> stop -> remove."""
    tag = uuid.uuid4().hex[:8]
    opts = _options(sqsh, tag, env={"STANDIN_LOAD_S": "3"})
    out = run_benchmark(RunOptions.build(RECIPE, ws, samples=8, detect=False, servers=opts))
    info = json.loads((Path(out.details["log_dir"]) / "run.json").read_text())
    assert info["status"] == "complete", info.get("status")
    servers = info["servers"]["servers"]
    assert [s["runtime"] for s in servers] == ["enroot"] * 4 and len(info["servers"]["removed"]) == 4
    assert len({s["enroot_container"] for s in servers}) == 1
    cli = servers[1]["enroot_cli"]
    assert cli.startswith("enroot start --root --rw --pid --mount ") and "NVIDIA_VISIBLE_DEVICES=void" in cli
    assert f"--port {opts.base_port + 1}" in cli and " exec -- trtllm-serve " in cli
    assert info["backend_stats"]["ready_retries"] > 0
    for rank in range(4):
        log = (Path(out.details["run_dir"]) / "servers" / f"trtllm_serve_{rank}.log").read_text()
        assert "--tp_size 2" in log and "Uvicorn running" in log
    assert _left(tag) == {"containers": [], "processes": []} and _ports_free(opts.base_port)


def test_server_crashing_under_enroot_is_one_clear_error(sqsh: Path, ws: Workspace) -> None:
    tag = uuid.uuid4().hex[:8]
    with pytest.raises(ServerDied) as err:
        run_benchmark(
            RunOptions.build(
                RECIPE, ws, samples=8, detect=False, servers=_options(sqsh, tag, env={"STANDIN_CRASH": "load"})
            )
        )
    assert "exited with code 1" in err.value.message and "simulated CUDA out of memory" in err.value.message
    assert _left(tag) == {"containers": [], "processes": []}


def test_missing_squashfs_names_the_import_command(tmp_path: Path, ws: Workspace) -> None:
    tag = uuid.uuid4().hex[:8]
    with pytest.raises(InputError, match="not on this node") as err:
        run_benchmark(
            RunOptions.build(RECIPE, ws, samples=8, detect=False, servers=_options(tmp_path / "gone.sqsh", tag))
        )
    assert err.value.next_command.startswith(f"`enroot import --output {tmp_path / 'gone.sqsh'} dockerd://")


def test_sigterm_stops_and_removes_every_enroot_server(sqsh: Path, ws: Workspace, tmp_path: Path) -> None:
    """scancel sends SIGTERM: the run stops as for Ctrl-C; no enroot container, process or bound port is left."""
    tag = uuid.uuid4().hex[:8]
    opts = _options(sqsh, tag, env={"STANDIN_HANG": "load"}, ready_timeout_s=300)
    proc = start_interruptible_run(tmp_path, RECIPE, ws.root, opts)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_left(tag)["processes"]) < 4 and proc.poll() is None:
        time.sleep(0.3)
    time.sleep(1.0)
    left = _left(tag)
    assert len(left["containers"]) == 1 and len(left["processes"]) >= 4, proc.stdout.read() if proc.poll() else left
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "INTERRUPTED" in out, out
    assert _left(tag) == {"containers": [], "processes": []} and _ports_free(opts.base_port)


def test_the_rack_imports_the_image_once_into_its_folder(serve_image: str, sqsh: Path, ws: Workspace) -> None:
    """The submit host's side of --image-source enroot: the real `enroot import`, under a .partial name renamed
    when whole; a second submission (a re-run of failed VMs) imports nothing."""
    from repro.run.rack import distribute_image, plan_rack

    plan = plan_rack("nd-gb300-v6", ws, 2, container_image=serve_image, image_source="enroot")
    ran = distribute_image(plan)
    assert ran == [enroot.import_argv(serve_image, Path(f"{plan.server_image}.partial"), in_registry=False)]
    assert plan.server_image is not None and Path(plan.server_image).stat().st_size > 1 << 20
    assert sorted(p.name for p in Path(plan.server_image).parent.iterdir()) == [Path(plan.server_image).name]
    assert distribute_image(plan) == []


@pytest.mark.slow
def test_rack_rehearsal_runs_each_node_with_enroot_through_slurm(client, slurm: None, tmp_path: Path) -> None:
    """`repro rehearse --nodes 2 --image-source enroot`: the real Slurm runs each node's repro on the host, which
    starts its four servers with enroot from the rack folder's squashfs; both VALID and summed; nothing left."""
    from repro.rehearse.rehearsal import rehearse

    result = rehearse("nd-gb300-v6", tmp_path / "rack", nodes=2, client=client, image_source="enroot")
    assert result.rack is not None and result.rack["image_source"] == "enroot"
    assert result.rack["tasks"] == {"vm-00": "done", "vm-01": "done"} and result.rack["counted"] == 2
    for run in result.runs:
        assert run["validity"] == "VALID" and run["label"] == "rehearsal"
        servers = json.loads((Path(run["run_dir"]) / "run.json").read_text())["servers"]
        assert [s["runtime"] for s in servers["servers"]] == ["enroot"] * 4 and len(servers["removed"]) == 4
        assert all(s["image"].endswith(".sqsh") and f"-{run['node']}-" in s["container"] for s in servers["servers"])
    assert result.ok and result.left_containers == [] and result.rack["left_jobs"] == []
    assert [c for c in enroot.containers() if c.startswith("repro-rehearse-")] == []
