"""The inference servers of a TensorRT-LLM recipe, owned by `repro run`: start, wait, watch, stop.

One trtllm-serve container per data-parallel rank, in the recipe's image, with the same mounts and limits
as `repro build-engine`, each with its own GPUs (NVIDIA's `launch_server.py` sets CUDA_VISIBLE_DEVICES=i;
here Docker's device requests give each container only its GPUs) and a log per server in the run folder.
`stop()` removes every container it started on success, failure, Ctrl-C and SIGTERM, unless asked to keep
them; a later run reuses kept containers whose command, image and GPUs are unchanged.

The runtime is Docker, or enroot when the image is an enroot squashfs file (repro/run/enroot.py:
is_enroot_image, the one rule; a Slurm rack with --image-source enroot hands each node such a file).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.errors import InputError, ReproError, StepFailed
from repro.core.recipes import Deployment, Recipe, as_deployment
from repro.core.workspace import Workspace
from repro.engine.container import LABEL, Mount, docker_cli_options, remove_container
from repro.run import enroot

SERVER_LABEL = "org.repro.server"
HASH_LABEL = "org.repro.server-spec"
READY_TIMEOUT_S = 1800.0
LOG_TAIL = 12


class ServerDied(ReproError):
    """A server container exited while repro waited for it or drove load through it."""

    exit_code = 1


def ready_timeout_s(recipe: Recipe) -> float:
    """Long enough for trtllm-serve to load a 70B checkpoint from local disk and warm up (minutes, not seconds)."""
    return max(READY_TIMEOUT_S, 10.0 * float(recipe.model.size_gb))


@dataclass
class ServerOptions:
    """How `repro run` starts servers; tests swap the image, the ports and the GPUs, never the command."""

    image: str | None = None
    gpus: bool = True
    keep: bool = False
    ready_timeout_s: float | None = None
    stall_timeout_s: float | None = None
    """No byte from a server for this long ends the run (None: derived from the recipe,
    repro.run.backends.trtllm.stall_timeout_s)."""
    client_concurrency: int | None = None
    """Requests the client keeps in flight per server instead of the recipe's (a rehearsal's thin twin; a test)."""
    client_processes: int | None = None
    """--client-processes: the client's worker processes (None: from the recipe's expected rate and this host's
    cores, repro.run.backends.trtllm.client_processes)."""
    base_port: int | None = None
    name_prefix: str = "repro-serve"
    listen: str = "127.0.0.1"  # the OpenAI endpoints have no authentication: this VM only unless asked
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class ServerPlan:
    rank: int
    name: str
    image: str
    argv: list[str]
    gpus: list[str]
    port: int
    mounts: list[Mount]
    env: dict[str, str]
    shm_size: str | None
    labels: dict[str, str]
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def spec_hash(self) -> str:
        doc = [
            self.image,
            self.argv,
            self.gpus,
            [m.to_json() for m in self.mounts],
            sorted(self.env.items()),
            self.shm_size,
        ]
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]

    def docker_cli(self) -> str:
        argv = ["docker", "run", "-d", "--name", self.name, "--network=host"]
        if self.gpus:
            argv.append(f'--gpus="device={",".join(self.gpus)}"')
        argv += docker_cli_options(self.shm_size, self.mounts, self.env)
        return shlex.join(argv + [self.image, *self.argv])

    @property
    def enroot_container(self) -> str:
        """The node's one enroot container for this image (every rank starts in it: one unpacked rootfs per node,
        not one per server). The host is in the name, because enroot's default data path is under $HOME, which the
        nodes of a cluster often share; the image's path too, so a new image never starts in an old rootfs."""
        digest = hashlib.sha256(self.image.encode()).hexdigest()[:8]
        host = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname().split(".")[0])[:32] or "host"
        return f"{self.name.rsplit('-', 1)[0]}-{host}-{digest}"

    def enroot_argv(self) -> list[str]:
        return enroot.start_argv(self.enroot_container, self.argv, self.mounts, self.env, self.gpus)

    def to_json(self) -> dict[str, Any]:
        out = {
            "rank": self.rank,
            "container": self.name,
            "image": self.image,
            "gpus": self.gpus,
            "port": self.port,
            "url": self.url,
            "command": self.argv,
            "log": str(self.log_path) if self.log_path else None,
        }
        if enroot.is_enroot_image(self.image):
            cli = shlex.join(self.enroot_argv())
            return {**out, "runtime": "enroot", "enroot_container": self.enroot_container, "enroot_cli": cli}
        return {**out, "docker_cli": self.docker_cli()}


def _with_port(argv: list[str], port: int, host: str = "127.0.0.1") -> list[str]:
    out = list(argv)
    for flag, value in (("--port", str(port)), ("--host", host)):
        if flag in out:
            out[out.index(flag) + 1] = value
    return out


def plan_servers(target: Recipe | Deployment, ws: Workspace, options: ServerOptions | None = None) -> list[ServerPlan]:
    """The servers `repro run` would start for a scenario's deployment (a recipe: its base one): the serve argv
    `repro build-engine` records, one per rank."""
    from repro.engine.plan import plan_build

    opts = options or ServerOptions()
    dep = as_deployment(target)
    recipe = dep.recipe
    build = plan_build(dep, ws, gpus=opts.gpus)
    image = opts.image or build.image.tag
    env = {"REPRO_HOME": "/workspace", **opts.env}
    plans = []
    for s in build.serve:
        port = (opts.base_port + s.rank) if opts.base_port is not None else s.port
        labels = {LABEL: "1", SERVER_LABEL: recipe.name, "org.repro.server-rank": str(s.rank), **opts.labels}
        plans.append(
            ServerPlan(
                s.rank,
                f"{opts.name_prefix}-{recipe.name}-{s.rank}",
                image,
                ["exec", "--", *_with_port(s.argv, port, opts.listen)],
                s.cuda_visible_devices.split(",") if opts.gpus else [],
                port,
                list(build.mounts),
                env,
                "32g" if opts.gpus else None,
                labels,
            )
        )
    return plans


def check_engine_built(dep: Deployment, ws: Workspace) -> None:
    """A scenario with its own engine (405B Server's TP4xPP1) is served from that engine only: before a server
    starts, a missing one is named with the command that builds it, rather than serving the base engine, which the
    published run of that scenario did not use."""
    if not dep.own:
        return
    from repro.engine.quantize import CONTAINER_WORKSPACE, paths_for

    p = paths_for(dep)
    served = p.engine_dir or p.checkpoint_dir
    host = ws.root / served.relative_to(CONTAINER_WORKSPACE)
    if (host / "config.json").is_file():
        return
    layout = dep.layout
    base = dep.recipe.deployment("Offline").layout
    raise InputError(
        f"{dep.scenario}'s own engine ({layout.text() if layout else '?'}) is not built: {host} holds no "
        f"config.json. repro does not serve {dep.scenario} from the Offline engine "
        f"({base.text() if base else '?'}), which the published {dep.scenario} run did not use.",
        f"`{dep.build_command()}`",
    )


def device_requests(gpus: list[str]) -> list[Any]:
    """Docker's request for exactly these GPUs (`--gpus device=...`); none for a server without GPUs."""
    from docker.types import DeviceRequest

    return [DeviceRequest(device_ids=gpus, capabilities=[["gpu"]])] if gpus else []


def _port_busy(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class _LogFollower(threading.Thread):
    """Copies one container's output into its log file and keeps the last lines for error messages."""

    def __init__(self, container: Any, path: Path | None) -> None:
        super().__init__(name=f"repro-log-{container.name}", daemon=True)
        self.container = container
        self.path = path
        self.tail: deque[str] = deque(maxlen=LOG_TAIL)

    def run(self) -> None:
        out = open(self.path, "a", encoding="utf-8") if self.path else None  # noqa: SIM115 - open as long as the thread
        buf = b""
        try:
            for chunk in self.container.logs(stream=True, follow=True):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    line = raw.decode("utf-8", "replace").rstrip("\r")
                    self.tail.append(line)
                    if out:
                        out.write(line + "\n")
                        out.flush()
        except Exception:  # noqa: BLE001 - the container went away; its log ends here
            pass
        finally:
            if buf:
                self.tail.append(buf.decode("utf-8", "replace"))
                if out:
                    out.write(buf.decode("utf-8", "replace") + "\n")
            if out:
                out.close()


class ServerFleet:
    """The running servers of one run. Use as a context manager, or call start() and, always, stop()."""

    def __init__(self, plans: list[ServerPlan], *, keep: bool = False, client: Any = None) -> None:
        self.plans = plans
        self.keep = keep
        self._client = client
        self.containers: dict[int, Any] = {}
        self.reused: list[str] = []
        self.followers: dict[int, _LogFollower] = {}
        self.removed: list[str] = []
        self.enroot = bool(plans) and enroot.is_enroot_image(plans[0].image)
        self.image_ids: dict[str, str] = {}
        """Each server image's content digest (Docker's image ID, sha256:...), recorded in run.json: a tag can be
        rebuilt, the digest names what ran."""

    @property
    def client(self) -> Any:
        if self._client is None:
            from repro.engine.container import docker_client

            try:
                self._client = docker_client()
                self._client.ping()
            except Exception as exc:  # noqa: BLE001 - any failure to reach Docker reads the same to the user
                raise StepFailed(
                    f"Docker is not reachable ({exc}); repro starts the inference servers in containers.",
                    "start Docker (`sudo systemctl start docker`), or pass `--endpoint URL` to use running servers",
                ) from None
        return self._client

    @property
    def urls(self) -> list[str]:
        return [p.url for p in self.plans]

    def __enter__(self) -> ServerFleet:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _existing(self, plan: ServerPlan) -> Any:
        if self.enroot:
            return enroot.LIVE.get(plan.name)
        import docker.errors

        try:
            return self.client.containers.get(plan.name)
        except docker.errors.NotFound:
            return None

    def start(self, log_dir: Path | None = None) -> None:
        if self.enroot:
            self._start_enroot(log_dir)
            return
        import docker.errors
        from docker.types import Ulimit

        images = {p.image for p in self.plans}
        for image in images:
            try:
                found = self.client.images.get(image)
            except docker.errors.ImageNotFound:
                recipe = self.plans[0].labels.get(SERVER_LABEL, "")
                raise InputError(
                    f"The server image {image} is not built on this machine.", f"`repro build-engine --recipe {recipe}`"
                ) from None
            if isinstance(getattr(found, "id", None), str):
                self.image_ids[image] = found.id
        for plan in self.plans:
            if log_dir is not None:
                log_dir.mkdir(parents=True, exist_ok=True)
                plan.log_path = log_dir / f"trtllm_serve_{plan.rank}.log"
            old = self._existing(plan)
            if old is not None:
                old.reload()
                if old.status == "running" and old.labels.get(HASH_LABEL) == plan.spec_hash():
                    self.containers[plan.rank] = old
                    self.reused.append(plan.name)
                    self._follow(plan, old)
                    continue
                remove_container(old)
            if _port_busy(plan.port):
                raise InputError(
                    f"Port {plan.port} (server {plan.rank}) is already in use by another program.",
                    f"stop it, or use it as it is: `repro run offline --endpoint http://127.0.0.1:{plan.port}`",
                )
            kwargs: dict[str, Any] = {}
            if plan.gpus:
                kwargs["device_requests"] = device_requests(plan.gpus)
            if plan.shm_size:
                kwargs["shm_size"] = plan.shm_size
                kwargs["ulimits"] = [
                    Ulimit(name="memlock", soft=-1, hard=-1),
                    Ulimit(name="stack", soft=67108864, hard=67108864),
                ]
            try:
                container = self.client.containers.run(
                    plan.image,
                    plan.argv,
                    name=plan.name,
                    detach=True,
                    network_mode="host",
                    environment=plan.env,
                    labels={**plan.labels, HASH_LABEL: plan.spec_hash()},
                    volumes={
                        str(m.host): {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in plan.mounts
                    },
                    **kwargs,
                )
            except docker.errors.APIError as exc:
                remove_container(self._existing(plan))
                text = str(exc)
                if "device driver" in text or "nvidia" in text.lower():
                    raise StepFailed(
                        "Docker cannot give GPUs to containers: the NVIDIA container runtime is not set up.",
                        "install the NVIDIA Container Toolkit, then `sudo nvidia-ctk runtime configure "
                        "--runtime=docker && sudo systemctl restart docker`",
                    ) from None
                raise StepFailed(
                    f"Docker could not start server {plan.rank} ({plan.name}): {text}",
                    "`docker ps -a` to see what holds the name or port",
                ) from None
            self.containers[plan.rank] = container
            self._follow(plan, container)

    def _start_enroot(self, log_dir: Path | None) -> None:
        """Each server as `enroot start` in the node's container, created once from the squashfs image; the node's
        limits (memlock, stack) are the ones Slurm gives the job, and /dev/shm is the host's."""
        image = Path(self.plans[0].image)
        if not image.is_file():
            raise InputError(
                f"The server image {image} (an enroot squashfs file) is not on this node.",
                f"`enroot import --output {image} dockerd://IMAGE` where the image is built, onto shared storage",
            )
        for plan in self.plans:
            if log_dir is not None:
                log_dir.mkdir(parents=True, exist_ok=True)
                plan.log_path = log_dir / f"trtllm_serve_{plan.rank}.log"
            old = enroot.LIVE.get(plan.name)
            if old is not None and old.status == "running" and old.spec_hash == plan.spec_hash():
                self.containers[plan.rank] = old
                self.reused.append(plan.name)
                self._follow(plan, old)
                continue
            if old is not None:
                enroot.LIVE.pop(plan.name).stop()
            if _port_busy(plan.port):
                raise InputError(
                    f"Port {plan.port} (server {plan.rank}) is already in use by another program.",
                    f"stop it, or use it as it is: `repro run offline --endpoint http://127.0.0.1:{plan.port}`",
                )
            if plan.enroot_container not in enroot.CREATED:
                enroot.remove(plan.enroot_container)  # left by a run that was killed: its rootfs may be stale
                enroot.create(image, plan.enroot_container)
                enroot.CREATED.add(plan.enroot_container)
            server = enroot.EnrootServer(plan.name, plan.enroot_container, plan.enroot_argv(), plan.spec_hash())
            enroot.LIVE[plan.name] = server
            self.containers[plan.rank] = server
            self._follow(plan, server)

    def _follow(self, plan: ServerPlan, container: Any) -> None:
        follower = _LogFollower(container, plan.log_path)
        follower.start()
        self.followers[plan.rank] = follower

    def tail(self, rank: int) -> list[str]:
        f = self.followers.get(rank)
        return list(f.tail) if f else []

    def tails(self) -> list[tuple[str, list[str]]]:
        """(server N, its last lines) for every server that printed something."""
        return [(f"server {p.rank}", self.tail(p.rank)) for p in self.plans if self.tail(p.rank)]

    def where(self, url: str) -> str | None:
        """'server 1 (repro-serve-x-1, log servers/trtllm_serve_1.log)' for the server at `url`."""
        for p in self.plans:
            if p.url == url.rstrip("/"):
                log = f", log {p.log_path}" if p.log_path else ""
                return f"server {p.rank} ({p.name}{log})"
        return None

    def system(self) -> None:
        """One VM's servers: the system is this VM (run.json's gpus and provenance say it)."""
        return None

    @property
    def log_dir(self) -> Path | None:
        return self.plans[0].log_path.parent if self.plans and self.plans[0].log_path else None

    def alive(self, grace_s: float = 0.0) -> None:
        """Raise ServerDied with the server's last log lines if any container has exited (within grace_s, for
        a failure just seen over HTTP: Docker marks a container exited a moment after its process ends)."""
        import time

        deadline = time.monotonic() + grace_s
        while True:
            self._check_exited()
            if time.monotonic() >= deadline:
                return
            time.sleep(0.2)

    def _check_exited(self) -> None:
        import docker.errors

        for plan in self.plans:
            c = self.containers.get(plan.rank)
            if c is None:
                continue
            if self.enroot:
                status, code = c.status, c.exit_code
            else:
                try:
                    c.reload()
                    status = c.status
                    code = c.attrs.get("State", {}).get("ExitCode")
                except docker.errors.NotFound:
                    status, code = "removed", None
            if status in ("exited", "dead", "removed"):
                follower = self.followers.get(plan.rank)
                if follower is not None:
                    follower.join(timeout=2)
                last = " | ".join(self.tail(plan.rank)[-5:]) or "(no output)"
                shown = "its output above" if self.enroot else f"`docker logs {plan.name}`"
                where = f"see {plan.log_path}" if plan.log_path else shown
                raise ServerDied(
                    f"Server {plan.rank} ({plan.name}, port {plan.port}) exited"
                    f"{f' with code {code}' if code is not None else ''}. Last output: {last}",
                    f"{where}, fix it, then run again",
                )

    def stop(self) -> None:
        """Remove every container this run started (or reused), unless keep; survives a second Ctrl-C."""
        pending: KeyboardInterrupt | None = None
        if not self.keep:
            if self.enroot:
                for c in self.containers.values():
                    c.terminate()  # all at once: each then waits out one grace, not the sum
            for plan in self.plans:
                for _ in range(2):
                    try:
                        c = self.containers.pop(plan.rank, None) or self._existing(plan)
                        if c is not None:
                            if self.enroot:
                                c.stop()
                                enroot.LIVE.pop(plan.name, None)
                            else:
                                remove_container(c)
                            self.removed.append(plan.name)
                        break
                    except KeyboardInterrupt as exc:
                        pending = exc
            if self.enroot:
                pending = self._remove_enroot_containers() or pending
        for f in self.followers.values():
            f.join(timeout=2 if not self.keep else 0)
        if pending is not None:
            raise pending

    def _remove_enroot_containers(self) -> KeyboardInterrupt | None:
        """The node's enroot container goes once no server of this process runs in it (nothing left behind)."""
        pending = None
        in_use = {s.container for s in enroot.LIVE.values()}
        for name in sorted({p.enroot_container for p in self.plans} - in_use):
            for _ in range(2):
                try:
                    enroot.remove(name)
                    enroot.CREATED.discard(name)
                    break
                except KeyboardInterrupt as exc:
                    pending = exc
        return pending

    def to_json(self) -> dict[str, Any]:
        return {
            "servers": [p.to_json() for p in self.plans],
            "image_ids": self.image_ids,
            "reused": self.reused,
            "kept": self.keep,
            "removed": self.removed,
        }


def dry_run_details(
    target: Recipe | Deployment,
    ws: Workspace,
    options: ServerOptions | None = None,
    plans: list[ServerPlan] | None = None,
) -> dict[str, Any]:
    """What `--dry-run` shows: the engine, each server container with its GPUs and command, the readiness wait."""
    opts = options or ServerOptions()
    dep = as_deployment(target)
    plans = plan_servers(dep, ws, opts) if plans is None else plans
    timeout = opts.ready_timeout_s or ready_timeout_s(dep.recipe)
    layout = dep.layout
    return {
        "engine": {
            "scenario": dep.engine_scenario,
            "layout": layout.text() if layout else None,
            "source": dep.source,
            "build": dep.build_command(),
        },
        "servers": [p.to_json() for p in plans],
        "readiness": {
            "timeout_s": timeout,
            "probe": "POST /v1/chat/completions (10 tokens) on each server",
            "retry": "connection refused/reset/timeout and HTTP 5xx, backoff 0.25 s doubling to 5 s",
            "fails_at_once_if": "a server container exits (its log tail is shown) or answers HTTP 4xx",
        },
        "keep_servers": opts.keep,
    }
