"""The recipe container through the Docker SDK: build (log streamed into a Rich progress view), run, clean up.

Images are tagged by a hash of the Dockerfile, the entrypoint, the build arguments and the recipe, so a
second build is a no-op; the image ID (content digest) goes into the ledger. Step containers get the
GPUs through device requests and the workspace through a bind mount, and are removed even on Ctrl-C.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro import __version__
from repro.core.errors import InputError, Interrupted, StepFailed
from repro.core.recipes import Recipe

LABEL = "org.repro.managed"
IMAGE_REPO = "repro-trtllm"
ENTRY_FILE = Path(__file__).with_name("container_entry.py")
LineSink = Callable[[str], None]


def containers_dir() -> Path:
    """Dockerfiles ship inside the wheel (repro/_containers) and live at the repo root in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "_containers", here.parent.parent / "containers"):
        if (candidate / "Dockerfile").is_file():
            return candidate
    raise StepFailed("No containers/Dockerfile found next to the repro package.", "reinstall with `pip install -e .`")


# A Docker reference (registry/path:tag@sha256:...), a pyxis/enroot `registry#path:tag`, or a squashfs file path.
# It may not start with '-' (it would be read as a flag) and holds no space, quote, `$` or control character.
_IMAGE_REF = re.compile(r"[A-Za-z0-9/][A-Za-z0-9._/:@#+-]{0,511}")


def validate_image_ref(value: str, option: str = "--container-image") -> str:
    """The image name, or one clear error: a value that could be read as a flag or shell text never reaches docker."""
    if not isinstance(value, str) or not _IMAGE_REF.fullmatch(value):
        shown = ascii(value) if isinstance(value, str) else type(value).__name__
        raise InputError(
            f"{option} {shown}: not an image name (letters, digits and ._/:@#+- only; it may not "
            "start with '-' or '.').",
            f"{option} registry.example/repro:gb300",
        )
    return value


def docker_client():
    import docker

    return docker.from_env(timeout=600)


def docker_cli_options(shm_size: str | None, mounts: Sequence[Mount], env: Mapping[str, str]) -> list[str]:
    """The `docker run` options a dry run prints for limits, mounts and environment (build steps and servers)."""
    argv: list[str] = []
    if shm_size:
        argv += [f"--shm-size={shm_size}", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
    for m in mounts:
        argv += ["-v", f"{m.host}:{m.target}{':ro' if m.read_only else ''}"]
    for k, v in sorted(env.items()):
        argv += ["-e", f"{k}={v}"]
    return argv


@dataclass(frozen=True)
class ImageSpec:
    """What to build: a Dockerfile, its build arguments and the extra files its context needs."""

    dockerfile: Path
    tag: str
    build_args: dict[str, str]
    with_repro_source: bool = True
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"tag": self.tag, "dockerfile": str(self.dockerfile), "build_args": dict(self.build_args)}


def spec_hash(dockerfile: Path, build_args: dict[str, str], extra: str = "") -> str:
    h = hashlib.sha256()
    h.update(Path(dockerfile).read_bytes())
    h.update(ENTRY_FILE.read_bytes())
    h.update(repr(sorted(build_args.items())).encode())
    h.update(extra.encode())
    return h.hexdigest()[:12]


def image_spec_for(recipe: Recipe, *, base_image: str | None = None, install: str = "full") -> ImageSpec:
    """The runtime image of a recipe; `base_image`/`install` let tests build the same Dockerfile on a tiny base."""
    if recipe.trtllm is None:
        raise StepFailed(
            f"Recipe '{recipe.name}' has no container (backend {recipe.backend}).",
            f"`repro recipes show {recipe.name}`",
        )
    if base_image is not None:
        validate_image_ref(base_image, "--base-image")
    dockerfile = containers_dir() / "Dockerfile"
    args = {"BASE_IMAGE": base_image or recipe.trtllm.base_image, "REPRO_INSTALL": install}
    labels = {
        "org.repro.recipe": recipe.name,
        "org.repro.recipe-hash": recipe.hash(),
        "org.repro.trtllm-version": recipe.trtllm.version,
    }
    digest = spec_hash(dockerfile, args, f"{recipe.hash()}|{__version__}")
    return ImageSpec(dockerfile, f"{IMAGE_REPO}:{recipe.name}-{digest}", args, labels=labels)


def context_files(spec: ImageSpec) -> list[tuple[Path, str]]:
    """A small, explicit build context, as (source, path in the context): never the workspace, the venv or model
    weights. The build copies these; `build-engine --dry-run` prints the same copies as shell commands."""
    files = [(item, item.name) for item in sorted(spec.dockerfile.parent.iterdir()) if item.is_file()]
    files.append((ENTRY_FILE, "container_entry.py"))
    if not spec.with_repro_source:
        return files
    from repro.core.recipes import recipes_dir

    pkg = Path(__file__).resolve().parents[1]
    files.append((pkg, "repro-src/repro"))
    files += [(pkg.parent / n, f"repro-src/{n}") for n in ("pyproject.toml", "README.md") if (pkg.parent / n).is_file()]
    files += [(recipes_dir(), "repro-src/recipes"), (spec.dockerfile.parent, "repro-src/containers")]
    return files


_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "_recipes", "_containers")


def _stage_context(spec: ImageSpec, dest: Path) -> None:
    (dest / "repro-src").mkdir()
    for source, rel in context_files(spec):
        target = dest / rel
        if source.is_dir():
            shutil.copytree(source, target, ignore=_IGNORE)
        else:
            shutil.copy2(source, target)


def context_shell(spec: ImageSpec) -> list[str]:
    """The staging as pasteable shell lines into "$ctx" (a fresh temporary folder)."""
    lines = ['ctx="$(mktemp -d)" && mkdir "$ctx/repro-src"']
    for source, rel in context_files(spec):
        flag = "-r " if source.is_dir() else ""
        lines.append(f'cp {flag}{shlex.quote(str(source))} "$ctx/{rel}"')
    return lines


def dockerfile_instructions(path: Path) -> list[tuple[int, str]]:
    """(first line number, instruction text) for each instruction, joining continuation lines."""
    out: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for no, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue
        if not current:
            start = no
        if line.endswith("\\"):
            current.append(line[:-1].strip())
            continue
        current.append(line)
        out.append((start, " ".join(p for p in current if p)))
        current = []
    if current:
        out.append((start, " ".join(current)))
    return out


STEP_RE = re.compile(r"^Step (\d+)/(\d+) : (.*)$")


@dataclass
class ImageRef:
    tag: str
    digest: str
    built: bool

    def to_json(self) -> dict[str, Any]:
        return {"tag": self.tag, "digest": self.digest, "built": self.built}


def image_env(image: ImageRef) -> dict[str, str]:
    """What provenance.container_digest() reads inside the container, so run.json names the exact image."""
    return {"REPRO_CONTAINER_IMAGE": image.tag, "REPRO_CONTAINER_DIGEST": image.digest}


def image_digest(tag: str, client=None) -> str | None:
    import docker.errors

    client = client or docker_client()
    try:
        return client.images.get(tag).id
    except docker.errors.ImageNotFound:
        return None


def _failed_line(dockerfile: Path, step_no: int | None, step_text: str | None) -> tuple[int, str] | None:
    instructions = dockerfile_instructions(dockerfile)
    if step_no is not None and 0 < step_no <= len(instructions):
        return instructions[step_no - 1]
    if step_text:
        for no, text in instructions:
            if text.split()[:2] == step_text.split()[:2]:
                return no, text
    return None


def build_image(
    spec: ImageSpec,
    *,
    force: bool = False,
    on_line: LineSink | None = None,
    log_path: Path | None = None,
    network: str = "host",
    client=None,
) -> ImageRef:
    """Build unless an image with this tag exists (the tag is the content hash), streaming every log line."""
    client = client or docker_client()
    if not force:
        digest = image_digest(spec.tag, client)
        if digest:
            return ImageRef(spec.tag, digest, built=False)
    step_no: int | None = None
    step_text: str | None = None
    tail: deque[str] = deque(maxlen=20)
    log = open(log_path, "w", encoding="utf-8") if log_path else None  # noqa: SIM115 - closed in the finally below
    try:
        with tempfile.TemporaryDirectory(prefix="repro-build-") as ctx:
            _stage_context(spec, Path(ctx))
            stream = client.api.build(
                path=ctx,
                dockerfile=spec.dockerfile.name,
                tag=spec.tag,
                buildargs=spec.build_args,
                labels={LABEL: "1", **spec.labels},
                rm=True,
                forcerm=True,
                decode=True,
                network_mode=network,
                nocache=force,
            )
            for chunk in stream:
                if "error" in chunk or "errorDetail" in chunk:
                    detail = (chunk.get("errorDetail") or {}).get("message") or chunk.get("error") or "unknown error"
                    if log:
                        log.write(f"ERROR: {detail}\n")
                    where = _failed_line(spec.dockerfile, step_no, step_text)
                    at = f"{spec.dockerfile}:{where[0]} `{where[1]}`" if where else str(spec.dockerfile)
                    last = f" Last output: {tail[-1]}" if tail else ""
                    raise StepFailed(
                        f"The container build failed at {at}: {detail.strip()}.{last}",
                        "fix the Dockerfile line, then `repro build-engine --force`"
                        + (f" (full log: {log_path})" if log_path else ""),
                    )
                for line in str(chunk.get("stream", "")).splitlines():
                    line = line.rstrip()
                    if not line:
                        continue
                    m = STEP_RE.match(line)
                    if m:
                        step_no, step_text = int(m.group(1)), m.group(3)
                    tail.append(line)
                    if log:
                        log.write(line + "\n")
                    if on_line:
                        on_line(line)
    finally:
        if log:
            log.close()
    digest = image_digest(spec.tag, client)
    if digest is None:
        raise StepFailed(f"The build of {spec.tag} finished but the image is missing.", "`repro build-engine --force`")
    return ImageRef(spec.tag, digest, built=True)


@dataclass(frozen=True)
class Mount:
    host: Path
    target: str
    read_only: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"host": str(self.host), "target": self.target, "read_only": self.read_only}


@dataclass
class RunSpec:
    """One step container: image, command, mounts, GPUs; `docker_cli()` is the same thing as a shell line."""

    image: str
    command: list[str]
    mounts: list[Mount] = field(default_factory=list)
    gpus: bool = False
    env: dict[str, str] = field(default_factory=dict)
    network: str = "host"
    shm_size: str | None = None
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_image_ref(self.image, "image")

    def docker_cli(self) -> str:
        argv = ["docker", "run", "--rm", f"--network={self.network}"]
        if self.gpus:
            argv.append("--gpus=all")
        argv += docker_cli_options(self.shm_size, self.mounts, self.env)
        return shlex.join(argv + [self.image, *self.command])

    def to_json(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "command": self.command,
            "mounts": [m.to_json() for m in self.mounts],
            "gpus": self.gpus,
            "env": dict(self.env),
            "network": self.network,
            "docker_cli": self.docker_cli(),
        }


def _iter_lines(chunks: Iterator[bytes]) -> Iterator[str]:
    buf = b""
    for chunk in chunks:
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", "replace").rstrip("\r")
    if buf:
        yield buf.decode("utf-8", "replace")


def run_container(
    spec: RunSpec,
    *,
    step: str = "container",
    on_line: LineSink | None = None,
    log_path: Path | None = None,
    client=None,
) -> int:
    """Run to completion, streaming logs; a non-zero exit is a StepFailed, Ctrl-C removes the container."""
    from docker.types import DeviceRequest, Ulimit

    client = client or docker_client()
    kwargs: dict[str, Any] = {}
    if spec.gpus:
        kwargs["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if spec.shm_size:
        kwargs["shm_size"] = spec.shm_size
        kwargs["ulimits"] = [
            Ulimit(name="memlock", soft=-1, hard=-1),
            Ulimit(name="stack", soft=67108864, hard=67108864),
        ]
    container = None
    tail: deque[str] = deque(maxlen=15)
    log = open(log_path, "w", encoding="utf-8") if log_path else None  # noqa: SIM115 - closed in the finally below
    try:
        container = client.containers.run(
            spec.image,
            spec.command,
            detach=True,
            network_mode=spec.network,
            environment=spec.env,
            labels={LABEL: "1", "org.repro.step": step, **spec.labels},
            volumes={str(m.host): {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in spec.mounts},
            **kwargs,
        )
        for line in _iter_lines(container.logs(stream=True, follow=True)):
            tail.append(line)
            if log:
                log.write(line + "\n")
                log.flush()
            if on_line:
                on_line(line)
        code = int(container.wait().get("StatusCode", 1))
    except KeyboardInterrupt:
        remove_container(container)
        container = None
        raise Interrupted(
            f"Interrupted during {step}; its container was stopped and removed.",
            "`repro build-engine` to resume (finished steps are skipped)",
        ) from None
    finally:
        if log:
            log.close()
        remove_container(container)
    if code != 0:
        last = " | ".join(list(tail)[-3:])
        raise StepFailed(
            f"Step {step} failed: the container exited with code {code}." + (f" Last output: {last}" if last else ""),
            (f"see {log_path}, fix it, then " if log_path else "") + "`repro build-engine --force`",
        )
    return code


def remove_container(container: Any) -> None:
    """Force-remove a container; gone already, or being removed by someone else, is fine."""
    if container is None:
        return
    import docker.errors

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise


def managed_containers(label: str | None = None, client=None) -> list:
    """Containers repro started (optionally with one extra `key=value` label), running or not.

    The SDK lists ids, then inspects each: one removed in between (a server stopping, a parallel cleanup after
    Ctrl-C) answers 404, which means it is gone, not that listing failed (`ignore_removed`)."""
    client = client or docker_client()
    filters = {"label": [LABEL] + ([label] if label else [])}
    return client.containers.list(all=True, filters=filters, ignore_removed=True)
