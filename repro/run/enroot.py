"""enroot as a node's container runtime: Slurm GPU clusters (CycleCloud HPC images, DGX Cloud) ship enroot (and
pyxis) and often no Docker daemon on the compute nodes.

The image is a squashfs file (`enroot import` writes it once, into the shared rack folder); each node unpacks it
once into a per-node container (`enroot create`) and runs one `enroot start` per server, with the mounts,
environment and argv the Docker path uses. GPUs go through NVIDIA_VISIBLE_DEVICES, which enroot's 98-nvidia hook
hands to nvidia-container-cli, as Docker's device requests do. Written against enroot 4.1.2
(github.com/NVIDIA/enroot, doc/cmd/{import,create,start,remove}.md).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from repro.core.errors import InputError, StepFailed
from repro.engine.container import Mount

SQUASHFS_SUFFIX = ".sqsh"
STOP_GRACE_S = 10.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
# Values in enroot's colon-separated --mount and its fstab: a colon or white space would split a field.
_FSTAB_SAFE = re.compile(r"[^\s:]+")


def is_enroot_image(image: str | None) -> bool:
    """The one rule that picks the runtime: a squashfs file (what `enroot import` writes) runs under enroot, any
    other image name under Docker."""
    return bool(image) and str(image).endswith(SQUASHFS_SUFFIX)


def enroot_on_path() -> bool:
    return shutil.which("enroot") is not None


def import_uri(image: str, in_registry: bool) -> str:
    """enroot's source for a Docker image: the local daemon (`dockerd://`), or the registry it is in
    (`docker://REGISTRY#PATH:TAG`, enroot's spelling of a registry host)."""
    if not in_registry:
        return f"dockerd://{image}"
    host, _, path = image.partition("/")
    return f"docker://{host}#{path}"


def import_argv(image: str, dest: Path, in_registry: bool) -> list[str]:
    return ["enroot", "import", "--output", str(dest), import_uri(image, in_registry)]


def _fstab_field(value: str, what: str) -> str:
    if not _FSTAB_SAFE.fullmatch(value):
        raise InputError(
            f"{what} {ascii(value)}: enroot cannot mount a path holding ':' or white space.",
            "move the workspace to a path without them (--workspace DIR)",
        )
    return value


def mount_arg(m: Mount) -> str:
    """`enroot start --mount`: fstab fields joined by colons; x-create makes the target as Docker's -v does."""
    flags = "x-create=dir,rbind" + (",ro" if m.read_only else "")
    return f"{_fstab_field(str(m.host), 'mount')}:{_fstab_field(m.target, 'mount target')}:none:{flags}"


def start_argv(
    container: str, argv: Sequence[str], mounts: Sequence[Mount], env: Mapping[str, str], gpus: Sequence[str]
) -> list[str]:
    """Root inside and a writable rootfs (as under Docker); --pid so SIGTERM reaches the server and it dies with
    its enroot; the host's network (the servers listen on the node's ports, as with Docker's --network=host)."""
    out = ["enroot", "start", "--root", "--rw", "--pid"]
    for m in mounts:
        out += ["--mount", mount_arg(m)]
    visible = ",".join(gpus) if gpus else "void"
    for k, v in sorted({**env, "NVIDIA_VISIBLE_DEVICES": visible}.items()):
        out += ["--env", f"{k}={v}"]
    return [*out, container, *argv]


def _enroot(argv: list[str], what: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise StepFailed(
            "`enroot` not found on this node: the server image is an enroot squashfs file.",
            "install enroot (github.com/NVIDIA/enroot, doc/installation.md) or pass a Docker image with --server-image",
        ) from None
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise StepFailed(
            f"`{' '.join(argv[:3])}` failed ({what}): {last[0][:300]}", "`enroot list` and `enroot version`"
        )
    return done


def containers() -> list[str]:
    """`enroot list`: the containers created on this node (under $ENROOT_DATA_PATH)."""
    return _enroot(["enroot", "list"], "listing containers", timeout=60).stdout.split()


def create(image: Path, name: str) -> None:
    if not _NAME.fullmatch(name):
        raise InputError(f"{ascii(name)}: not an enroot container name.", "report this as a bug in repro")
    _enroot(["enroot", "create", "--name", name, str(image)], f"unpacking {image}")


def remove(name: str) -> None:
    """`enroot remove --force`; a container already gone is fine."""
    if name in containers():
        _enroot(["enroot", "remove", "--force", name], f"removing {name}", timeout=600)


class EnrootServer:
    """One `enroot start` process: its output, its state, its stop. Quacks like the Docker SDK's container where
    ServerFleet reads one (name, status, exit code, a log stream)."""

    def __init__(self, name: str, container: str, argv: list[str], spec_hash: str) -> None:
        self.name = name
        self.container = container
        self.argv = argv
        self.spec_hash = spec_hash
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C at the terminal reaches repro, which stops the servers in order
        )
        self._lines: deque[bytes] = deque()
        self._done = threading.Event()
        self._cond = threading.Condition()
        threading.Thread(target=self._pump, name=f"repro-enroot-{name}", daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            with self._cond:
                self._lines.append(raw)
                self._cond.notify_all()
        with self._cond:
            self._done.set()
            self._cond.notify_all()

    def logs(self, stream: bool = True, follow: bool = True) -> Iterator[bytes]:
        """The server's output as it comes, until the process ends (the one reader is the fleet's log follower)."""
        while True:
            with self._cond:
                while not self._lines and not self._done.is_set():
                    self._cond.wait(0.5)
                if not self._lines:
                    return
                chunk = self._lines.popleft()
            yield chunk

    @property
    def status(self) -> str:
        return "running" if self.proc.poll() is None else "exited"

    @property
    def exit_code(self) -> int | None:
        return self.proc.poll()

    def terminate(self) -> None:
        """SIGTERM: enroot --pid forwards it to the container's first process (the image's entrypoint)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL to the whole session after a grace; the server dies with its enroot."""
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.proc.stdout is not None:
            self._done.wait(2)


# Servers kept between runs of one process (`repro tune`'s probes): an enroot server lives as long as its
# `enroot start`, so "kept" ends with the process; atexit stops what is left and removes the containers.
LIVE: dict[str, EnrootServer] = {}
CREATED: set[str] = set()


def _at_exit() -> None:
    for name in list(LIVE):
        LIVE.pop(name).stop()
    for container in list(CREATED):
        with contextlib.suppress(StepFailed, subprocess.TimeoutExpired):
            remove(container)
        CREATED.discard(container)


atexit.register(_at_exit)
