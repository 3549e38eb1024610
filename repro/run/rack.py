"""Rack scale through Slurm: one job-array task per VM, each running the same single-VM `repro run offline`.

The published 1.1M tokens/s is 18 independent single-VM runs summed, so a rack run is exactly that: an
sbatch job array (one exclusive node per task), each task's repro writing its run straight into its own folder of
one rack folder, `$REPRO_HOME/racks/<recipe>/<timestamp>/vm-NN/` (`repro run --into`: the nodes share the workspace,
so a node never picks up another node's run), then `repro.aggregate.aggregate` over it. Each task
writes its own `task.json` (state, exit code, host), so the rack folder says what happened even after
Slurm has forgotten the job; failed, cancelled or lost VMs are listed and never summed.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from repro import __version__
from repro.core.clock import new_stamped_dir, now_iso, stamped_path
from repro.core.errors import InputError, Interrupted, ReproError, StepFailed
from repro.core.fsutil import atomic_write_json, atomic_write_text
from repro.core.recipes import Recipe, get_recipe, is_registry_recipe, load_recipe_file, registry_recipe
from repro.core.textsafe import sh_quote, terminal_safe
from repro.core.workspace import Workspace
from repro.engine.container import validate_image_ref
from repro.run import enroot
from repro.run.rack_folder import (
    MAX_NODES,
    RACK_JSON,
    RECIPE_DIR,
    RERUN,
    SCRIPT,
    TERMINAL,
    RackResult,
    TaskRow,
    load_manifest,
    task_rows,
    validate_partition,
)
from repro.run.slurm import SlurmError, run_tool, sbatch, sbatch_argv

TEMPLATE = Path(__file__).with_name("templates") / "sbatch.sh"


def _check_path(value: str, what: str) -> str:
    if "\x00" in value:
        raise InputError(
            f"{what} {ascii(value)}: a path cannot hold a NUL byte.", "check $REPRO_HOME and the install path"
        )
    return value


IMAGE_DIR = "image"
IMAGE_SOURCES = ("archive", "registry", "enroot")


def work_dir_of(rack_dir: Path) -> Path:
    """The per-VM homes of simulated and rehearsal VMs and the retired attempts of --rerun-failed: outside the rack
    folder, so nothing in it is mistaken for a VM's result; removed by collect() once empty."""
    return rack_dir.with_name(rack_dir.name + ".work")


def _repro_bin() -> str:
    """The repro of this very install, so every node runs the same code (override with $REPRO_BIN)."""
    beside = Path(sys.executable).with_name("repro")
    if beside.exists():
        return str(beside)
    return shutil.which("repro") or "repro"


@dataclass
class RackPlan:
    """Everything a rack submission needs; pure data, so `--dry-run` can print it without touching anything."""

    recipe: Recipe
    rack_dir: Path
    nodes: int
    workspace: Path
    backend: str | None = None
    partition: str | None = None
    container_image: str | None = None
    duration_s: float | None = None
    samples: int | None = None
    sim_rate: float | None = None
    repro_bin: str = field(default_factory=_repro_bin)
    recipe_file: str | None = None
    image_source: str | None = None  # how each node gets the server image: one of IMAGE_SOURCES
    push_from: str | None = None  # with --image-registry: the local image pushed as container_image
    pyxis: bool | None = None  # the submit host's srun knows --container-image (recorded; repro does not use it)
    rehearsal_time_scale: float | None = None
    """`repro rehearse --nodes N`: each task runs a rehearsal node (stand-in servers, LoadGen scaled in time)."""

    @property
    def image_archive(self) -> Path | None:
        """The image as a file in the shared rack folder, which every node reads: `docker save` output (archive) or
        `enroot import` output (enroot); None when the nodes pull from a registry."""
        if self.image_source not in ("archive", "enroot") or not self.container_image:
            return None
        suffix = enroot.SQUASHFS_SUFFIX if self.image_source == "enroot" else ".tar"
        return self.rack_dir / IMAGE_DIR / (re.sub(r"[^A-Za-z0-9_.-]", "_", self.container_image) + suffix)

    @property
    def server_image(self) -> str | None:
        """What each node's repro starts its servers from: the squashfs file under enroot, else the image name."""
        if self.image_source == "enroot" and self.image_archive is not None:
            return str(self.image_archive)
        return self.container_image

    @property
    def simulated(self) -> bool:
        return (self.backend or self.recipe.backend) == "sim"

    @property
    def rehearsal(self) -> bool:
        return self.rehearsal_time_scale is not None

    @property
    def per_vm_home(self) -> bool:
        """Each task works in its own home under work_dir (removed after): simulated VMs and rehearsal nodes, which
        share this machine."""
        return self.simulated or self.rehearsal

    @property
    def label(self) -> str | None:
        if self.rehearsal:
            return "rehearsal"
        if self.simulated:
            return "simulated"
        return "demo" if self.recipe.demo else None

    @property
    def work_dir(self) -> Path:
        return work_dir_of(self.rack_dir)

    def validate(self) -> None:
        """Every value that reaches the script or sbatch's argv, checked against its grammar (issue #16)."""
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or not 1 <= self.nodes <= MAX_NODES:
            raise InputError(
                f"--nodes must be a whole number from 1 to {MAX_NODES} (got {self.nodes!r}).",
                "`repro run offline --launcher slurm --nodes 18 ...`",
            )
        if self.partition is not None:
            validate_partition(self.partition)
        if self.container_image is not None:
            validate_image_ref(self.container_image)
        for value, what in (
            (str(self.rack_dir), "rack folder"),
            (str(self.workspace), "workspace"),
            (self.repro_bin, "repro install path"),
        ):
            _check_path(value, what)

    def _run_flags(self) -> list[str]:
        """The run options each node's command and the pasteable submit command both carry."""
        flags = ["--backend", self.backend] if self.backend else []
        if self.duration_s is not None:
            flags += ["--duration", f"{self.duration_s:g}"]
        if self.samples is not None:
            flags += ["--samples", str(self.samples)]
        if self.simulated and self.sim_rate is not None:
            flags += ["--sim-rate", f"{self.sim_rate:g}"]
        return flags

    def run_args(self) -> list[str]:
        recipe = str(self.rack_dir / self.recipe_file) if self.recipe_file else self.recipe.name
        if self.rehearsal:
            return [
                "rehearse",
                "--recipe",
                recipe,
                "--rack-node",
                str(self.rack_dir),
                "--time-scale",
                repr(self.rehearsal_time_scale),
                "--server-image",
                self.server_image or "",
            ]
        args = ["run", "offline", "--recipe", recipe, *self._run_flags()]
        if not self.simulated and self.server_image:
            args += ["--server-image", self.server_image]
        return args

    def command(self, image_registry: str | None = None) -> str:
        """The one `repro` command that submits this rack (what a dry run prints to paste)."""
        source = ["--image-source", "enroot"] if self.image_source == "enroot" else []
        if self.rehearsal:
            return shlex.join(["repro", "rehearse", "--recipe", self.recipe.name, "--nodes", str(self.nodes), *source])
        argv = ["repro", "run", "offline", "--launcher", "slurm", "--nodes", str(self.nodes)]
        argv += ["--recipe", self.recipe_file and str(self.rack_dir / self.recipe_file) or self.recipe.name]
        argv += self._run_flags()
        if self.partition:
            argv += ["--partition", self.partition]
        if self.push_from:
            argv += ["--container-image", self.push_from, "--image-registry", image_registry or ""]
        elif self.container_image:
            argv += ["--container-image", self.container_image]
        return shlex.join([*argv, *source, "--workspace", str(self.workspace)])

    def manifest(self) -> dict[str, Any]:
        return {
            "kind": "repro-rack",
            "repro_version": __version__,
            "recipe": self.recipe.name,
            "recipe_hash": self.recipe.hash(),
            "recipe_file": self.recipe_file,
            "backend": self.backend or self.recipe.backend,
            "label": self.label,
            "nodes": self.nodes,
            "partition": self.partition,
            "container_image": self.container_image,
            "image_source": self.image_source,
            "push_from": self.push_from,
            "pyxis": self.pyxis,
            "rehearsal_time_scale": self.rehearsal_time_scale,
            "duration_s": self.duration_s,
            "samples": self.samples,
            "sim_rate": self.sim_rate,
            "workspace": str(self.workspace),
            "repro_bin": self.repro_bin,
            "script": SCRIPT,
            "created": now_iso(),
            "jobs": [],
        }

    @classmethod
    def from_manifest(cls, rack_dir: Path, m: dict[str, Any]) -> RackPlan:
        """From a validated manifest (`load_manifest`); the recipe is a registry name or the file in the rack."""
        if m.get("recipe_file"):
            recipe = load_recipe_file(rack_dir / m["recipe_file"])
            if m.get("recipe_hash") and recipe.hash() != m["recipe_hash"]:
                raise InputError(
                    f"{rack_dir / m['recipe_file']}: changed since the rack was submitted "
                    f"(hash {recipe.hash()} != {m['recipe_hash']}).",
                    "start a new rack run",
                )
        else:
            recipe = registry_recipe(m["recipe"])
        backend = m.get("backend")
        return cls(
            recipe=recipe,
            rack_dir=rack_dir,
            nodes=m["nodes"],
            workspace=Path(m["workspace"]),
            backend=backend if backend != recipe.backend else None,
            partition=m.get("partition"),
            container_image=m.get("container_image"),
            image_source=m.get("image_source"),
            push_from=m.get("push_from"),
            pyxis=m.get("pyxis"),
            rehearsal_time_scale=m.get("rehearsal_time_scale"),
            duration_s=m.get("duration_s"),
            samples=m.get("samples"),
            sim_rate=m.get("sim_rate"),
            repro_bin=m.get("repro_bin") or _repro_bin(),
            recipe_file=m.get("recipe_file"),
        )


def _header_safe(value: str) -> str:
    """Values in `#SBATCH` and comment lines come from grammars; this is the last guard, not the validation."""
    if not re.fullmatch(r"[A-Za-z0-9_.,:\[\] -]*", value):
        raise InputError(f"{ascii(value)}: cannot go into a #SBATCH line.", "report this as a bug in repro")
    return value


def render_script(plan: RackPlan) -> str:
    """The sbatch script (templates/sbatch.sh) with every value validated and quoted for bash; no raw newline."""
    plan.validate()
    label = f"[{plan.label}] " if plan.label else ""
    values = {
        "JOB_NAME": _header_safe(f"repro-{plan.recipe.name}{'-sim' if plan.simulated else ''}"),
        "ARRAY": f"0-{plan.nodes - 1}",
        "PARTITION_LINE": f"#SBATCH --partition={_header_safe(plan.partition)}" if plan.partition else "",
        "COMMENT": _header_safe(
            f"{label}repro {__version__} rack run of {plan.recipe.name}: {plan.nodes} VMs, one repro run offline each."
        ),
        "RACK_DIR": sh_quote(str(plan.rack_dir)),
        "WORK_DIR": sh_quote(str(plan.work_dir)),
        "WORKSPACE": sh_quote(str(plan.workspace)),
        "IMAGE": sh_quote(plan.container_image or ""),
        "IMAGE_SOURCE": sh_quote(plan.image_source or ""),
        "IMAGE_ARCHIVE": sh_quote(str(plan.image_archive or "")),
        "LABEL": sh_quote(plan.label or ""),
        "REPRO_BIN": sh_quote(plan.repro_bin),
        "SIMULATED": "1" if plan.simulated else "0",
        "PER_VM": "1" if plan.per_vm_home else "0",
        "ARGS": " ".join(sh_quote(a) for a in plan.run_args()),
    }
    text = TEMPLATE.read_text(encoding="utf-8")
    if not plan.partition:
        text = text.replace("@PARTITION_LINE@\n", "")
    return re.sub(r"@([A-Z_]+)@", lambda m: values[m[1]], text)


class RackUI(Protocol):
    """How a rack run talks to a person while it follows Slurm (the CLI passes a Rich one; tests and --json none)."""

    def note(self, text: str) -> None: ...
    def change(self, row: TaskRow) -> None: ...
    def watch(
        self, rows: list[TaskRow], manifest: dict[str, Any], rack_dir: Path
    ) -> AbstractContextManager[Callable[[list[TaskRow]], None]]: ...


class QuietRack:
    """Says nothing: for --json runs and tests."""

    def note(self, text: str) -> None:
        return None

    def change(self, row: TaskRow) -> None:
        return None

    @contextmanager
    def watch(
        self, rows: list[TaskRow], manifest: dict[str, Any], rack_dir: Path
    ) -> Iterator[Callable[[list[TaskRow]], None]]:
        yield lambda _rows: None


def follow(
    rack_dir: Path, *, poll_s: float = 2.0, ui: RackUI | None = None, timeout_s: float | None = None
) -> list[TaskRow]:
    """Poll until every task is terminal, telling `ui` of every state change and handing it each new table."""
    ui = ui or QuietRack()
    m = load_manifest(rack_dir)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    seen: dict[str, str] = {}
    rows = task_rows(rack_dir, m)

    def tick() -> None:
        for r in rows:
            if seen.get(r.vm) != r.state:
                seen[r.vm] = r.state
                ui.change(r)

    try:
        with ui.watch(rows, m, rack_dir) as update:
            tick()
            while not all(r.state in TERMINAL for r in rows):
                if deadline is not None and time.monotonic() > deadline:
                    raise StepFailed(
                        f"rack tasks still not finished after {timeout_s:.0f} s.",
                        f"follow again: `{RERUN.format(rack=rack_dir)}`",
                    )
                time.sleep(poll_s)
                rows = task_rows(rack_dir, m)
                tick()
                update(rows)
    except KeyboardInterrupt:
        jobs = ", ".join(sorted({j["job_id"] for j in m["jobs"]}))
        raise Interrupted(
            f"Stopped following; Slurm job {jobs} keeps running (cancel with `scancel {jobs}`).",
            f"follow and collect later: `{RERUN.format(rack=rack_dir)}`",
        ) from None
    return rows


def _rack_status(rows: list[TaskRow]) -> str:
    states = {r.state for r in rows}
    if states <= {"done"}:
        return "complete"
    if not states.isdisjoint({"pending", "running"}):
        return "running"
    if "done" in states:
        return "partial"
    return "cancelled" if states == {"cancelled"} else "failed"


def collect(rack_dir: Path, rows: list[TaskRow] | None = None) -> RackResult:
    """Record the final task states in rack.json and run the rack aggregate over the VMs that finished."""
    from repro.results.aggregate import aggregate

    rack_dir = Path(rack_dir)
    m = load_manifest(rack_dir)
    rows = rows if rows is not None else task_rows(rack_dir, m)
    result = RackResult(rack_dir, m, rows)
    vm_dirs = [rack_dir / r.vm for r in rows if (rack_dir / r.vm).is_dir()]
    if vm_dirs:
        try:
            recipe = RackPlan.from_manifest(rack_dir, m).recipe if m.get("recipe_file") else m["recipe"]
            result.report = aggregate(vm_dirs, recipe=recipe, expect=int(m["nodes"]))
        except ReproError as exc:
            result.report_error = exc.message
    else:
        result.report_error = "no VM wrote a result folder"
    m["status"] = _rack_status(rows)
    m["tasks"] = {r.vm: r.state for r in rows}
    m["collected"] = now_iso()
    atomic_write_json(rack_dir / RACK_JSON, m)
    if result.report is not None:
        atomic_write_text(rack_dir / "rack-report.md", result.report.to_markdown())
    with contextlib.suppress(OSError):  # kept while it holds something: a VM's leftover home, a retired attempt
        work_dir_of(rack_dir).rmdir()
    return result


def _new_rack_dir(ws: Workspace, recipe: Recipe) -> Path:
    return stamped_path(ws.root / "racks" / recipe.name, lambda p: p.exists() or work_dir_of(p).exists())


def _claim_rack_dir(plan: RackPlan) -> None:
    """Create the planned rack folder; if another submission took the name meanwhile (same second), the next free
    one. The mkdir is the claim, so two racks never share a folder."""
    plan.rack_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        plan.rack_dir.mkdir()
    except FileExistsError:
        plan.rack_dir = new_stamped_dir(plan.rack_dir.parent, lambda p: work_dir_of(p).exists())


def plan_rack(
    recipe: str | Recipe | None,
    ws: Workspace,
    nodes: int,
    *,
    partition: str | None = None,
    container_image: str | None = None,
    backend: str | None = None,
    duration_s: float | None = None,
    samples: int | None = None,
    sim_rate: float | None = None,
    image_registry: str | None = None,
    rehearsal_time_scale: float | None = None,
    image_source: str | None = None,
) -> RackPlan:
    if recipe is None:
        raise InputError(
            "a rack run needs --recipe: the login node is not one of the VMs, so it cannot detect it.",
            "`repro run offline --launcher slurm --nodes N --recipe nd-gb300-v6`",
        )
    rec = get_recipe(recipe) if isinstance(recipe, str) else recipe
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        raise InputError(
            f"--nodes must be a whole number from 1 to {MAX_NODES} (got {nodes!r}).",
            "`repro run offline --launcher slurm --nodes 18 ...`",
        )
    if rec.reference_only:
        raise InputError(
            f"recipe {rec.name} is reference-only: nobody runs it through repro.",
            "pick a runnable recipe from `repro recipes list`",
        )
    plan = RackPlan(
        rec,
        _new_rack_dir(ws, rec),
        nodes,
        ws.root,
        backend=backend,
        partition=partition,
        container_image=container_image,
        duration_s=duration_s,
        samples=samples,
        sim_rate=sim_rate,
        rehearsal_time_scale=rehearsal_time_scale,
    )
    if not is_registry_recipe(rec):
        plan.recipe_file = (
            f"{RECIPE_DIR}/{rec.name}.yaml"  # shipped with the rack: the nodes cannot see the user's file
        )
    plan.validate()
    if plan.simulated:
        if plan.sim_rate is None and rec.published.tokens_per_s_per_vm != "unknown":
            plan.sim_rate = float(rec.published.tokens_per_s_per_vm)
        manifest = ws.preprocessed / rec.dataset.name / "manifest.json"
        if not manifest.is_file():
            raise InputError(
                f"{manifest}: no prepared dataset; the simulated VMs replay it from this workspace.",
                f"`repro setup --recipe {rec.name}`, then submit again",
            )
    elif (plan.backend or rec.backend).startswith("trtllm") and rec.trtllm is not None:
        _plan_image(plan, ws, container_image, image_registry, image_source)
    return plan


def _is_remote(image: str) -> bool:
    """Docker's rule: the first path component names a registry when it has a dot or a port, or is localhost."""
    first = image.split("/", 1)[0]
    return "/" in image and ("." in first or ":" in first or first == "localhost")


def docker_usable() -> bool:
    """This host's Docker answers (compute nodes of enroot clusters often have no daemon)."""
    if shutil.which("docker") is None:
        return False
    try:
        return run_tool(["docker", "info", "--format", "{{.ServerVersion}}"], timeout=20).returncode == 0
    except SlurmError:
        return False


def pyxis_present() -> bool:
    """pyxis adds --container-image to srun; recorded in the plan, never needed (repro runs on each node's host)."""
    if shutil.which("srun") is None:
        return False
    try:
        return "--container-image" in run_tool(["srun", "--help"], timeout=20).stdout
    except SlurmError:
        return False


def resolve_image_source(source: str | None, image: str, registry: str | None) -> str:
    """The one decision of how the server image reaches the nodes: what the user names (--image-source), else a
    registry when one is named or the image is in one, else enroot on a host with enroot and no usable Docker, else
    `docker save` into the rack folder."""
    if source is not None and source not in IMAGE_SOURCES:
        raise InputError(
            f"--image-source {ascii(source)}: use {', '.join(IMAGE_SOURCES)}.",
            "`repro run offline --launcher slurm --image-source enroot ...`",
        )
    if source == "enroot" and registry:
        raise InputError(
            "--image-source enroot and --image-registry name two routes for the image; pick one.",
            "drop --image-registry: enroot imports the image into the shared rack folder",
        )
    if source == "registry" and not registry and not _is_remote(image):
        raise InputError(
            f"--image-source registry: {image} is not in a registry.",
            f"add --image-registry REGISTRY (repro pushes {image} there)",
        )
    if source is not None:
        return source
    if registry or _is_remote(image):
        return "registry"
    if enroot.enroot_on_path() and not docker_usable():
        return "enroot"
    return "archive"


def _plan_image(
    plan: RackPlan, ws: Workspace, image: str | None, registry: str | None, source: str | None = None
) -> None:
    """Each node's repro starts its servers through that node's Docker or enroot, so the image must reach every
    node: pushed to the registry the user names (or already in one), `docker save` into the shared rack folder and
    `docker load` on each node, or `enroot import` into it once (each node's repro creates its enroot container from
    that file). Without --container-image it is the image `repro build-engine` builds."""
    from repro.engine.plan import plan_build

    local = image or plan_build(plan.recipe, ws).image.tag
    plan.image_source = resolve_image_source(source, local, registry)
    if registry:
        registry = registry.strip().rstrip("/")
        validate_image_ref(registry)
        plan.push_from, plan.container_image = local, f"{registry}/{local.rsplit('/', 1)[-1]}"
    else:
        plan.container_image = local
    if plan.image_source == "enroot":
        plan.pyxis = pyxis_present()
        if not _is_remote(local) and not docker_usable():
            raise InputError(
                f"enroot imports {local} from this host's Docker (dockerd://), and no Docker answers here.",
                "start Docker here, or pass an image in a registry: --container-image REGISTRY/IMAGE:TAG",
            )
    plan.validate()


def image_commands(plan: RackPlan) -> list[list[str]]:
    """The commands that put the server image where the nodes fetch it (argv lists, no shell); none once the
    rack folder holds it. What a dry run prints and distribute_image runs."""
    if plan.simulated or not plan.container_image:
        return []
    archive = plan.image_archive
    if plan.push_from:
        return [["docker", "tag", plan.push_from, plan.container_image], ["docker", "push", plan.container_image]]
    if archive is None or archive.exists():
        return []
    partial = archive.with_name(archive.name + ".partial")
    if plan.image_source == "enroot":
        return [enroot.import_argv(plan.container_image, partial, in_registry=_is_remote(plan.container_image))]
    return [["docker", "save", "-o", str(partial), plan.container_image]]


def distribute_image(plan: RackPlan, run: Callable[[list[str]], None] | None = None) -> list[list[str]]:
    """Put the server image where the nodes fetch it; returns the commands run. The file lands under a .partial
    name and is renamed when whole, so a node never reads half an image."""
    cmds = image_commands(plan)
    archive = plan.image_archive
    for cmd in cmds:
        if archive is not None:
            archive.parent.mkdir(parents=True, exist_ok=True)
            archive.with_name(archive.name + ".partial").unlink(missing_ok=True)  # enroot refuses an existing file
        (run or (lambda c: _image_tool(c, plan.recipe.name)))(cmd)
    if archive is not None and not archive.exists():
        archive.with_name(archive.name + ".partial").replace(archive)
    return cmds


def _image_tool(cmd: list[str], recipe: str) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        install = "sudo apt-get install -y docker.io"
        if cmd[0] == "enroot":
            install = "install enroot (github.com/NVIDIA/enroot, doc/installation.md), or --image-source archive"
        raise StepFailed(
            f"`{cmd[0]}` not found on this machine: the rack ships the server image with it.", install
        ) from None
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        nxt = "docker login"
        if cmd[1] in ("save", "import"):
            nxt = f"repro build-engine --recipe {recipe}"
        raise StepFailed(f"`{shlex.join(cmd)}` failed for the rack's server image: {terminal_safe(last[0][:300])}", nxt)


def submit(plan: RackPlan, indices: list[int] | None = None) -> str:
    """Write the rack folder's script and manifest, then sbatch the array (or just `indices` of it)."""
    rack = plan.rack_dir
    (rack / "slurm").mkdir(parents=True, exist_ok=True)
    script = rack / SCRIPT
    if plan.recipe_file and not (rack / plan.recipe_file).exists():
        (rack / plan.recipe_file).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(rack / plan.recipe_file, yaml.safe_dump(plan.recipe.model_dump(mode="json"), sort_keys=False))
    atomic_write_text(script, render_script(plan))  # re-rendered from the validated plan, never reused from disk
    script.chmod(0o755)
    distribute_image(plan)
    m = load_manifest(rack) if (rack / RACK_JSON).exists() else plan.manifest()
    tasks = sorted(indices) if indices is not None else list(range(plan.nodes))
    job_id = sbatch(script, ",".join(map(str, tasks)) if indices is not None else None, rack)
    m["jobs"].append({"job_id": job_id, "tasks": tasks, "submitted": now_iso()})
    m["status"] = "submitted"
    atomic_write_json(rack / RACK_JSON, m)
    return job_id


def _retire(rack_dir: Path, row: TaskRow) -> None:
    """Move a failed VM's folder aside (outside the rack folder) so its re-run starts clean and nothing is lost."""
    src = rack_dir / row.vm
    if not src.exists():
        return
    dest = work_dir_of(rack_dir) / "attempts" / f"{row.vm}-{row.job_id}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    src.rename(dest)


def check(result: RackResult) -> RackResult:
    """Turn a rack with failed VMs (or a real rack outside the band) into a non-zero exit naming the next command."""
    if result.dry_run:
        return result
    if result.failed:
        raise StepFailed(
            f"{len(result.failed)} of {len(result.rows)} VMs did not finish "
            f"({', '.join(r.vm for r in result.failed)}) and are not in the total.",
            result.rerun_command,
        )
    if result.report is None:
        raise StepFailed(
            f"no rack table for {result.rack_dir}: {result.report_error}.", f"`repro aggregate {result.rack_dir}`"
        )
    uncounted = [r for r in result.report.rows if not r.counted]
    if uncounted or not result.report.counted:
        # A rehearsal whose VMs cannot be VALID teaches nothing, and a total over 0 VMs is no result.
        first = uncounted[0] if uncounted else None
        why = "; ".join(first.verdict.reasons[:2]) if first and first.verdict else (first.problem if first else "")
        what = f"{first.status}, {why}" if first and why else (first.status if first else "no runs")
        raise StepFailed(
            f"{len(uncounted)} of {len(result.report.rows)} VMs ran but are not in the total "
            f"({', '.join(r.name for r in uncounted)}: {what}).",
            f"repro aggregate {shlex.quote(str(result.rack_dir))}",
        )
    if not result.manifest.get("label") and result.report.exit_code:
        raise ReproError(
            "not every VM reproduces the published number; see the rack table.",
            f"`repro report {result.rack_dir}`",
            exit_code=result.report.exit_code,
        )
    return result


def _finish(rack_dir: Path, poll_s: float, ui: RackUI, timeout_s: float | None) -> RackResult:
    rows = follow(rack_dir, poll_s=poll_s, ui=ui, timeout_s=timeout_s)
    return collect(rack_dir, rows)


def launch_offline(
    recipe: str | None,
    workspace: Path | None,
    nodes: int,
    partition: str | None = None,
    container_image: str | None = None,
    backend: str | None = None,
    duration_s: float | None = None,
    samples: int | None = None,
    dry_run: bool = False,
    *,
    ui: RackUI | None = None,
    sim_rate: float | None = None,
    image_registry: str | None = None,
    rehearsal_time_scale: float | None = None,
    image_source: str | None = None,
    poll_s: float = 2.0,
    timeout_s: float | None = None,
) -> RackResult:
    """`repro run offline --launcher slurm`: submit the array, follow it, collect and aggregate.

    The caller shows the result, then `check(result)` turns an incomplete or failing rack into its exit code."""
    ui = ui or QuietRack()
    ws = Workspace.open(workspace)
    plan = plan_rack(
        recipe,
        ws,
        nodes,
        partition=partition,
        container_image=container_image,
        backend=backend,
        duration_s=duration_s,
        samples=samples,
        sim_rate=sim_rate,
        image_registry=image_registry,
        rehearsal_time_scale=rehearsal_time_scale,
        image_source=image_source,
    )
    if dry_run:
        return RackResult(
            plan.rack_dir,
            plan.manifest(),
            script=render_script(plan),
            dry_run=True,
            submit_command=sbatch_argv(plan.rack_dir / SCRIPT, plan.rack_dir),
            next_command=plan.command(image_registry),
            image_commands=image_commands(plan),
        )
    _claim_rack_dir(plan)
    job_id = submit(plan)
    ui.note(f"submitted Slurm job {job_id} ({nodes} tasks); results go to {plan.rack_dir}")
    return _finish(plan.rack_dir, poll_s, ui, timeout_s)


def rerun_failed(
    rack_dir: Path,
    dry_run: bool = False,
    *,
    ui: RackUI | None = None,
    poll_s: float = 2.0,
    timeout_s: float | None = None,
) -> RackResult:
    """Resubmit only the VMs that failed, were cancelled or got lost; follow anything still running; re-aggregate."""
    ui = ui or QuietRack()
    rack_dir = Path(rack_dir).expanduser().resolve()
    m = load_manifest(rack_dir)
    plan = RackPlan.from_manifest(rack_dir, m)
    rows = task_rows(rack_dir, m)
    again = [r for r in rows if r.state in ("failed", "cancelled", "missing")]
    if dry_run:
        tasks = ",".join(str(r.index) for r in again)
        return RackResult(
            rack_dir,
            m,
            rows,
            script=render_script(plan),
            dry_run=True,
            submit_command=sbatch_argv(rack_dir / SCRIPT, rack_dir, tasks) if again else [],
        )
    if again:
        render_script(plan)  # validates what rack.json says before anything is moved or submitted
        for r in again:
            _retire(rack_dir, r)
        job_id = submit(plan, [r.index for r in again])
        ui.note(f"re-submitted {', '.join(r.vm for r in again)} as Slurm job {job_id}")
    else:
        ui.note("no failed VMs to re-run; following and collecting what is there")
    return _finish(rack_dir, poll_s, ui, timeout_s)
