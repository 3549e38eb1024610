"""What a rack folder says, read back: rack.json (validated field by field: the folder sits on shared storage),
each VM's task.json merged with what Slurm still knows, and the result a rack run shows.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from repro.core.errors import InputError, ReproError
from repro.core.safeio import loads_json, read_text_bounded
from repro.core.textsafe import terminal_safe
from repro.engine.container import validate_image_ref
from repro.run.slurm import SLURM_STATE, TaskStateName, job_state, slurm_states

TERMINAL = ("done", "failed", "cancelled", "missing")
RACK_JSON = "rack.json"
SCRIPT = "rack.sbatch"
TASK_JSON = "task.json"
RERUN = "repro run offline --launcher slurm --rerun-failed {rack}"


MAX_NODES = 4096
RECIPE_DIR = "recipes"
# Slurm partition names (a comma-separated list is allowed): no space, `=`, quote or newline can add an option.
_PARTITION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}(?:,[A-Za-z0-9][A-Za-z0-9_.-]{0,63}){0,15}")


def validate_partition(value: str, where: str = "--partition") -> str:
    if not isinstance(value, str) or not _PARTITION.fullmatch(value):
        shown = ascii(value) if isinstance(value, str) else type(value).__name__
        raise InputError(
            f"{where} {shown}: not a Slurm partition name (letters, digits, _ . - and commas only).",
            "`sinfo -h -o %P` lists the partitions",
        )
    return value


def vm_name(index: int) -> str:
    return f"vm-{index:02d}"


@dataclass
class TaskRow:
    index: int
    vm: str
    state: TaskStateName
    job_id: str | None = None
    host: str | None = None
    exit_code: int | None = None
    reason: str = ""
    tokens_per_s: float | None = None
    label: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "vm": self.vm,
            "index": self.index,
            "state": self.state,
            "job_id": self.job_id,
            "host": self.host,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "tokens_per_s": self.tokens_per_s,
            "label": self.label,
        }


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = loads_json(read_text_bounded(path, 1 << 20, what="task file"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _text(value: Any, limit: int = 300) -> str | None:
    """A task.json string as display text (the rack folder is shared storage: any type, any bytes)."""
    return None if value is None else terminal_safe(str(value))[:limit]


class _Job(BaseModel):
    model_config = ConfigDict(extra="allow")
    job_id: str = Field(pattern=r"^[0-9]{1,20}$")
    tasks: list[int] = Field(max_length=MAX_NODES)

    @field_validator("tasks")
    @classmethod
    def _in_range(cls, v: list[int]) -> list[int]:
        if any(isinstance(i, bool) or not 0 <= i < MAX_NODES for i in v):
            raise ValueError(f"task indices must be 0 to {MAX_NODES - 1}")
        return v


class RackManifest(BaseModel):
    """rack.json as read back: the rack folder sits on shared storage, so every field is checked before use."""

    model_config = ConfigDict(extra="allow", strict=True)
    kind: str = Field(pattern=r"^repro-rack$")
    recipe: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,99}$")
    recipe_hash: str | None = None
    recipe_file: str | None = Field(default=None, pattern=rf"^{RECIPE_DIR}/[a-z0-9][a-z0-9-]{{0,99}}\.yaml$")
    backend: str | None = Field(default=None, pattern=r"^[a-z0-9-]{1,40}$")
    label: str | None = Field(default=None, pattern=r"^(simulated|demo|rehearsal)$")
    shape: str = Field(default="per-vm", pattern=r"^(per-vm|one-system)$")
    """per-vm: a job array, one independent run per VM; one-system: one job, one run over every node."""
    scenario: str = Field(default="Offline", pattern=r"^(Offline|Server|Interactive)$")
    nodes: int = Field(ge=1, le=MAX_NODES)
    partition: str | None = None
    container_image: str | None = None
    image_source: str | None = Field(default=None, pattern=r"^(archive|registry|enroot|host)$")
    push_from: str | None = None
    pyxis: bool | None = None
    rehearsal_time_scale: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    duration_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    samples: int | None = Field(default=None, gt=0)
    sim_rate: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    workspace: str = Field(min_length=1, max_length=4096)
    repro_bin: str | None = Field(default=None, max_length=4096)
    jobs: list[_Job] = Field(default_factory=list)

    @field_validator("partition")
    @classmethod
    def _partition(cls, v: str | None) -> str | None:
        if v is not None and not _PARTITION.fullmatch(v):
            raise ValueError("not a Slurm partition name (letters, digits, _ . - and commas only)")
        return v

    @field_validator("container_image", "push_from")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                validate_image_ref(v)
            except InputError:
                raise ValueError("not an image name (it may not start with '-')") from None
        return v

    @field_validator("workspace", "repro_bin")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is not None and "\x00" in v:
            raise ValueError("a path cannot hold a NUL byte")
        return v


def load_manifest(rack_dir: Path) -> dict[str, Any]:
    """rack.json, validated field by field: a malformed one is one error naming the field (exit 2), no traceback."""
    path = Path(rack_dir) / RACK_JSON
    nxt = "pass the folder `repro run offline --launcher slurm` printed (under $REPRO_HOME/racks/)"
    try:
        data = loads_json(read_text_bounded(path, 16 << 20, what=RACK_JSON))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or data.get("kind") != "repro-rack":
        raise InputError(f"{path}: not a repro rack folder (missing or unreadable {RACK_JSON}).", nxt)
    try:
        checked = RackManifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise InputError(
            f"{path}: field '{terminal_safe(where)}': {first['msg']}.",
            "restore rack.json from the rack's first submission, or start a new rack run",
        ) from None
    data.update(checked.model_dump(exclude_unset=False, include=set(RackManifest.model_fields)))
    data["jobs"] = [dict(j) for j in data["jobs"]]
    return data


def _tokens(folder: Path) -> float | None:
    """The VM's performance run (a run folder keeps it in performance/run_1/)."""
    from repro.results.logs import find_runs

    try:
        perf = [r for r in find_runs(folder) if r.mode == "PerformanceOnly"]
    except ReproError:
        return None
    return perf[0].tokens_per_s if len(perf) == 1 else None


SYSTEM_DIR = "system"


def task_rows(rack_dir: Path, manifest: dict[str, Any] | None = None) -> list[TaskRow]:
    """One row per VM: the task's own task.json wins once terminal; Slurm fills in pending/running/cancelled. A
    one-system rack is one row, its one job."""
    rack_dir = Path(rack_dir)
    m = manifest or load_manifest(rack_dir)
    if m.get("shape") == "one-system":
        return [_system_row(rack_dir, m)]
    latest: dict[int, str] = {}
    for job in m["jobs"]:
        for i in job["tasks"]:
            latest[i] = job["job_id"]
    live = {job_id: slurm_states(job_id) for job_id in sorted(set(latest.values()))}
    rows = []
    for i in range(int(m["nodes"])):
        vm, job_id = vm_name(i), latest.get(i)
        row = TaskRow(i, vm, "missing", job_id, label=m.get("label"), reason="never submitted")
        own = _read_json(rack_dir / vm / TASK_JSON)
        if own and str(own.get("job_id")) != str(job_id):
            own = None
        slurm = live.get(job_id, {}).get(i) if job_id else None
        if own:
            code = own.get("exit_code")
            row.host, row.reason = _text(own.get("host"), 100), _text(own.get("reason")) or ""
            row.exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
        if own and own.get("state") in TERMINAL:
            row.state = own["state"]
        elif slurm:
            name: TaskStateName = SLURM_STATE.get(slurm[0].split()[0], "failed")
            row.state = name if name != "done" else "missing"
            if name == "done":
                row.reason = "Slurm says COMPLETED but the task wrote no result"
            elif name == "pending":
                row.reason = slurm[1] if slurm[1] not in ("None", "") else ""
            elif name == "running":
                row.host = row.host or slurm[2] or None
            else:
                row.reason = row.reason or f"Slurm state {slurm[0]}" + (
                    f" ({slurm[1]})" if slurm[1] not in ("None", "") else ""
                )
        elif job_id:
            row.reason = "Slurm no longer knows the task and it left no result (killed before it started, or node lost)"
        if row.state == "done":
            row.tokens_per_s = _tokens(rack_dir / vm)
        rows.append(row)
    return rows


def _system_row(rack_dir: Path, m: dict[str, Any]) -> TaskRow:
    """The system's one job: its task.json (written by system.sbatch on node 0) once terminal, else Slurm's state."""
    job_id = m["jobs"][-1]["job_id"] if m["jobs"] else None
    row = TaskRow(0, SYSTEM_DIR, "missing", job_id, label=m.get("label"), reason="never submitted")
    own = _read_json(rack_dir / SYSTEM_DIR / TASK_JSON)
    if own and str(own.get("job_id")) != str(job_id):
        own = None
    if own:
        code = own.get("exit_code")
        row.host, row.reason = _text(own.get("host"), 100), _text(own.get("reason")) or ""
        row.exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    if own and own.get("state") in TERMINAL:
        row.state = own["state"]
    elif job_id and (slurm := job_state(job_id)) is not None:
        name: TaskStateName = SLURM_STATE.get(slurm[0].split()[0], "failed")
        row.state = name if name != "done" else "missing"
        row.reason = {
            "done": "Slurm says COMPLETED but the job wrote no result",
            "pending": slurm[1] if slurm[1] not in ("None", "") else "",
            "running": "",
        }.get(name, row.reason or f"Slurm state {slurm[0]}")
        row.host = row.host or (slurm[2] if name == "running" else None) or None
    elif job_id:
        row.reason = "Slurm no longer knows the job and it left no result (killed before it started, or node lost)"
    if row.state == "done":
        row.tokens_per_s = _tokens(rack_dir / SYSTEM_DIR)
    return row


@dataclass
class RackResult:
    """What `repro run offline --launcher slurm` shows: the tasks, then the rack table over the finished VMs."""

    rack_dir: Path
    manifest: dict[str, Any]
    rows: list[TaskRow] = field(default_factory=list)
    report: Any = None
    report_error: str | None = None
    script: str | None = None
    dry_run: bool = False
    submit_command: list[str] = field(default_factory=list)
    next_command: str | None = None
    image_commands: list[list[str]] = field(default_factory=list)
    plan_lines: list[str] = field(default_factory=list)
    """A system's dry run: every node's servers, their ranks and GPUs, and the LoadGen node (LaunchPlan.lines)."""
    steps: list[dict[str, Any]] = field(default_factory=list)
    """A system's dry run: each server's srun step (argv, environment)."""

    @property
    def failed(self) -> list[TaskRow]:
        return [r for r in self.rows if r.state in ("failed", "cancelled", "missing")]

    @property
    def rerun_command(self) -> str | None:
        if self.manifest.get("shape") == "one-system":
            return None
        return RERUN.format(rack=shlex.quote(str(self.rack_dir))) if self.failed else None

    @property
    def exit_code(self) -> int:
        if self.dry_run:
            return 0
        if self.failed or self.report is None:
            return 1
        return self.report.exit_code

    def to_json(self) -> dict[str, Any]:
        m = self.manifest
        out: dict[str, Any] = {
            "rack_dir": str(self.rack_dir),
            "recipe": m["recipe"],
            "label": m.get("label"),
            "backend": m.get("backend"),
            "nodes": m["nodes"],
            "dry_run": self.dry_run,
            "jobs": m.get("jobs", []),
            "status": m.get("status"),
        }
        if self.dry_run:
            out |= {
                "script": self.script,
                "submit_command": self.submit_command,
                "container_image": m.get("container_image"),
                "image_source": m.get("image_source"),
                "image_commands": self.image_commands,
                "pyxis": m.get("pyxis"),
                "next_command": self.next_command,
            }
            if m.get("shape") == "one-system":
                out |= {"shape": "one-system", "scenario": m.get("scenario"), "plan": m.get("plan")}
                out |= {"plan_lines": self.plan_lines, "steps": self.steps}
            return out
        if m.get("shape") == "one-system":
            row = self.rows[0] if self.rows else None
            return out | {
                "shape": "one-system",
                "scenario": m.get("scenario"),
                "tasks": [r.to_json() for r in self.rows],
                "state": row.state if row else "missing",
                "run_dir": str(self.rack_dir / SYSTEM_DIR),
                "verdict": self.report.to_json() if self.report is not None else None,
                "verdict_error": self.report_error,
            }
        out |= {
            "tasks": [r.to_json() for r in self.rows],
            "done": sum(r.state == "done" for r in self.rows),
            "failed": [r.vm for r in self.failed],
            "aggregate": self.report.to_json() if self.report is not None else None,
            "aggregate_error": self.report_error,
            "rerun_command": self.rerun_command,
        }
        return out
