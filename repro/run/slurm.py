"""The Slurm client tools as a rack run uses them: sbatch with an explicit --export, and scontrol's view of a job
array's tasks. Every call is an argv list with a timeout; a missing or silent tool is one SlurmError.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from repro.core.errors import ReproError

TaskStateName = Literal["pending", "running", "done", "failed", "cancelled", "missing"]
SLURM_STATE: dict[str, TaskStateName] = {
    "PENDING": "pending",
    "REQUEUED": "pending",
    "REQUEUE_HOLD": "pending",
    "SUSPENDED": "pending",
    "CONFIGURING": "running",
    "RUNNING": "running",
    "COMPLETING": "running",
    "STAGE_OUT": "running",
    "COMPLETED": "done",
    "CANCELLED": "cancelled",
    "PREEMPTED": "cancelled",
    "REVOKED": "cancelled",
}


class SlurmError(ReproError):
    """Slurm is not installed, not reachable, or refused the job."""


# What the job needs from the submitting shell (the same interpreter and code as the login node: PYTHONPATH,
# VIRTUAL_ENV, LD_LIBRARY_PATH); HF_TOKEN is not among them (runs read local weights only).
EXPORT = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "LD_LIBRARY_PATH",
    "REPRO_BIN",
    "REPRO_DEBUG",
    "REPRO_FAIL_TASKS",
    "CUDA_VISIBLE_DEVICES",
)


def _slurm_path(path: Path) -> str:
    """sbatch expands %-patterns in --output; a literal % in the rack path is written %%."""
    return str(path).replace("%", "%%")


def export_list(environ: Mapping[str, str] | None = None) -> str:
    """`--export` for sbatch: only the names the job needs, so HF_TOKEN and the rest of the shell stay behind."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    extra = [n for n in env.get("REPRO_SLURM_EXPORT", "").split(",") if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
    names = [n for n in (*EXPORT, *extra) if n in env and "," not in env[n]]
    return ",".join(names) if names else "NONE"


def sbatch_argv(script: Path, rack_dir: Path, array: str | None = None, *, one_job: bool = False) -> list[str]:
    """The submit command as an argv list: values never pass through a shell on the submitting side either. A job
    array's tasks write slurm/JOB_TASK.out; one job (a system's) slurm/JOB.out."""
    out = f"{_slurm_path(rack_dir / 'slurm')}/" + ("%j.out" if one_job else "%A_%a.out")
    return (
        ["sbatch", "--parsable", f"--export={export_list()}", f"--output={out}"]
        + ([f"--array={array}"] if array else [])
        + [str(script)]
    )


def run_tool(cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise SlurmError(
            f"`{cmd[0]}` not found: Slurm client tools are not installed on this machine.",
            "run from a Slurm login node (CycleCloud scheduler), or `sudo .ci/start-slurm.sh` for a local test cluster",
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{' '.join(cmd)}` did not answer in {timeout:.0f} s; is slurmctld up?", "`sinfo`") from None


def sbatch(script: Path, array: str | None = None, rack_dir: Path | None = None, *, one_job: bool = False) -> str:
    cmd = sbatch_argv(script, rack_dir or script.parent, array, one_job=one_job)
    proc = run_tool(cmd)
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise SlurmError(
            f"sbatch refused {script}: {msg[-1] if msg else f'exit {proc.returncode}'}",
            "check the partition with `sinfo`, then submit again",
        )
    return proc.stdout.strip().split(";")[0]


def _indices(expr: str) -> list[int]:
    """Array task ids from Slurm's notation: '3', '0-5%2', '1,3,6-7'."""
    out: list[int] = []
    for part in expr.split("%")[0].strip("[]").split(","):
        if m := re.fullmatch(r"(\d+)-(\d+)(?::(\d+))?", part):
            out += range(int(m[1]), int(m[2]) + 1, int(m[3] or 1))
        elif part.isdigit():
            out.append(int(part))
    return out


def slurm_states(job_id: str) -> dict[int, tuple[str, str, str]]:
    """Array index -> (JobState, Reason, NodeList) from `scontrol show job`, while Slurm still remembers it."""
    proc = run_tool(["scontrol", "-o", "show", "job", job_id])
    states: dict[int, tuple[str, str, str]] = {}
    if proc.returncode != 0:
        return states
    for line in proc.stdout.splitlines():
        kv = dict(re.findall(r"(\w+)=(\S*)", line))
        if kv.get("ArrayJobId") != job_id or "ArrayTaskId" not in kv:
            continue
        for i in _indices(kv["ArrayTaskId"]):
            states[i] = (kv.get("JobState", "UNKNOWN"), kv.get("Reason", ""), kv.get("NodeList", ""))
    return states


def job_state(job_id: str) -> tuple[str, str, str] | None:
    """(JobState, Reason, NodeList) of one job that is not an array, while Slurm still remembers it."""
    proc = run_tool(["scontrol", "-o", "show", "job", job_id])
    if proc.returncode != 0:
        return None
    for line in proc.stdout.splitlines():
        kv = dict(re.findall(r"(\w+)=(\S*)", line))
        if kv.get("JobId") == job_id and "ArrayJobId" not in kv:
            return kv.get("JobState", "UNKNOWN"), kv.get("Reason", ""), kv.get("NodeList", "")
    return None


def live_jobs(job_ids: list[str]) -> list[str]:
    """The jobs of `job_ids` Slurm still has pending or running (a finished rack leaves none)."""
    return [
        j for j in job_ids if any(SLURM_STATE.get(s[0], "") in ("pending", "running") for s in slurm_states(j).values())
    ]
