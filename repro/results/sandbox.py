"""Run a program a model wrote, confined, and say whether it passed its tests (LiveCodeBench's check).

The program never runs in this process: each one gets a fresh child (repro/results/sandbox_child.py, standard
library only) started with `python -I -B`, a private folder made here as its cwd, HOME and TMPDIR (mode 0700,
removed after), an environment of PATH, HOME, TMPDIR and LANG only, its own session, and fd 3 for its report. The
child confines itself before reading the program (namespaces, rlimits, Landlock, seccomp: its docstring) and
refuses to run it when it cannot. Here: a wall-clock bound over the child (LiveCodeBench's own global bound plus a
grace), a bounded read of its report, SIGKILL to its session, and a /proc scan for any process that carries the
run's id (everything the child forks does) until none is left. docs/SECURITY.md says what it allows and refuses.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.errors import ReproError

CHILD = Path(__file__).with_name("sandbox_child.py")
HARNESS = Path(__file__).with_name("lcb_harness.py")
_REPORT_MAX = 1 << 20  # the child's report: a few JSON lines; a program writing more is cut off
_GRACE_S = 5.0


class SandboxUnavailable(ReproError):
    """This machine offers none of the means the sandbox needs to run generated code confined."""


@dataclass(frozen=True)
class Limits:
    """Per-program limits (the benchmark file's livecodebench.sandbox block)."""

    memory_bytes: int
    cpu_s: int
    nproc: int
    file_bytes: int
    open_files: int

    def as_job(self, cpu_s: int) -> dict[str, int]:
        return {
            "memory_bytes": self.memory_bytes,
            "cpu_s": max(self.cpu_s, cpu_s),
            "nproc": self.nproc,
            "file_bytes": self.file_bytes,
            "open_files": self.open_files,
        }


@dataclass(frozen=True)
class Cases:
    """One problem's tests as LiveCodeBench evaluates them: public then private cases, fn_name for call-based."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    fn_name: str | None = None


@dataclass
class Outcome:
    """What running one program gave: passed only when the harness reported every test passed."""

    passed: bool
    codes: list[Any] = field(default_factory=list)
    timed_out: bool = False
    error: str | None = None
    confinement: dict[str, Any] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    stragglers_killed: int = 0
    wall_s: float = 0.0
    result: dict[str, Any] | None = None


def wall_bound(timeout_s: int, n_tests: int) -> float:
    """LiveCodeBench's global bound on one program: (timeout + 1) x tests + 5 s (check_correctness's join)."""
    return (timeout_s + 1) * max(1, n_tests) + 5


def _environment(folder: Path, run_id: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(folder),
        "TMPDIR": str(folder),
        "LANG": "C.UTF-8",
        "REPRO_SANDBOX_RUN": run_id,
    }


def _private_folder(base: Path | None) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="repro-sandbox-", dir=str(base) if base else None))
    os.chmod(folder, 0o700)
    return folder


_CGROUP_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/pids"))


def _pids_cgroup(run_id: str, nproc: int) -> Path | None:
    """As root, a pids cgroup of the run's own (RLIMIT_NPROC never binds uid 0): cgroup v2, else v1's pids tree."""
    if os.geteuid() != 0:
        return None
    for root in _CGROUP_ROOTS:
        unified = (root / "cgroup.controllers").is_file()
        if root == _CGROUP_ROOTS[0] and not unified:
            continue
        if not (root / ("cgroup.controllers" if unified else "pids.max")).exists() and unified:
            continue
        try:
            if unified and "pids" not in (root / "cgroup.subtree_control").read_text().split():
                (root / "cgroup.subtree_control").write_text("+pids")
            group = root / f"repro-sandbox-{run_id}"
            group.mkdir(mode=0o755)
        except OSError:
            continue
        try:
            (group / "pids.max").write_text(str(nproc))
        except OSError:
            _remove_cgroup(group)
            continue
        return group
    return None


def _remove_cgroup(group: Path) -> int:
    """SIGKILL whatever is still in the run's cgroup (every process below, however it detached), then remove it."""
    killed = 0
    if (group / "cgroup.kill").exists():
        with contextlib.suppress(OSError):
            (group / "cgroup.kill").write_text("1")
    for _ in range(200):
        try:
            pids = {int(p) for p in (group / "cgroup.procs").read_text().split()}
        except (OSError, ValueError):
            break
        if not pids:
            break
        killed += _stop_then_kill(pids)
        time.sleep(0.02)
    for _ in range(100):
        try:
            group.rmdir()
            break
        except FileNotFoundError:
            break
        except OSError:
            time.sleep(0.02)
    return killed


def run_program(
    code: str, tests: Cases, *, timeout_s: int, limits: Limits, base: Path | None = None, namespaces: bool = True
) -> Outcome:
    """Run `code` against `tests` in a confined child; the outcome, never an exception for what the program did.

    namespaces=False skips the network/PID/user namespaces (the fallback a kernel without them gets; tests)."""
    payload = {
        "code": code,
        "inputs": list(tests.inputs),
        "outputs": list(tests.outputs),
        "fn_name": tests.fn_name,
        "timeout": timeout_s,
    }
    outcome = run_confined(
        payload,
        HARNESS,
        wall_s=wall_bound(timeout_s, len(tests.inputs)),
        limits=limits,
        base=base,
        namespaces=namespaces,
    )
    result = outcome.result
    if result is not None and not outcome.timed_out:
        codes = result.get("codes")
        outcome.codes = codes if isinstance(codes, list) else []
        outcome.passed = result.get("passed") is True
        outcome.error = outcome.error or (str(result["error"])[:80] if result.get("error") else None)
    return outcome


def run_confined(
    payload: dict[str, Any],
    harness: Path,
    *,
    wall_s: float,
    limits: Limits,
    base: Path | None = None,
    namespaces: bool = True,
) -> Outcome:
    """Run `harness`'s run_job(payload) in a fresh confined child under a wall-clock bound; its report."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(
            "generated code runs only on Linux here (namespaces, Landlock, seccomp).",
            "score the DeepSeek-R1 accuracy log on the Linux VM",
        )
    run_id = uuid.uuid4().hex
    folder = _private_folder(base)
    group = _pids_cgroup(run_id, limits.nproc)
    job = {
        **payload,
        "wall_s": wall_s,
        "dir": str(folder),
        "harness": str(harness),
        "limits": limits.as_job(int(wall_s) + 1),
        "namespaces": namespaces,
        "cgroup": str(group) if group else None,
    }
    job_file = folder.parent / f"{folder.name}.job"
    started = time.monotonic()
    stragglers = 0
    try:
        job_file.write_text(json.dumps(job), encoding="utf-8")
        os.chmod(job_file, 0o600)
        report = _launch(job_file, folder, run_id, wall_s + _GRACE_S)
    finally:
        if group is not None:
            stragglers += _remove_cgroup(group)
        stragglers += kill_run(run_id)
        job_file.unlink(missing_ok=True)
        shutil.rmtree(folder, ignore_errors=True)
    outcome = _outcome(report)
    outcome.stragglers_killed += stragglers
    outcome.wall_s = round(time.monotonic() - started, 3)
    return outcome


def _launch(job_file: Path, folder: Path, run_id: str, deadline_s: float) -> bytes:
    read_fd, write_fd = os.pipe()
    with open(job_file, "rb") as stdin:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", str(CHILD), "--run-id", run_id, "--result-fd", str(write_fd)],
                stdin=stdin,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=str(folder),
                env=_environment(folder, run_id),
                start_new_session=True,
                close_fds=True,
                pass_fds=(write_fd,),
            )
        finally:
            os.close(write_fd)
    try:
        return _read_bounded(read_fd, time.monotonic() + deadline_s, proc)
    finally:
        os.close(read_fd)
        _end(proc)


def _read_bounded(fd: int, deadline: float, proc: subprocess.Popen) -> bytes:
    """The report, kept to its first 1 MiB and drained (so nothing blocks on a full pipe) until the launcher has
    written its closing `exit` line and exited (its sweep done), the pipe ends, or the deadline passes. A program's
    children may hold the pipe open, and a program may write a false `exit` line: only the launcher's exit counts."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if proc.poll() is not None and b'{"kind":"exit"' in b"".join(chunks[-2:]):
            break
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], min(left, 0.05))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        if size < _REPORT_MAX:
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)[:_REPORT_MAX]


def _end(proc: subprocess.Popen) -> None:
    """The launcher has exited (its report ended) or overran: its whole session gets SIGKILL either way."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_GRACE_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _processes_of(run_id: str) -> list[int]:
    token = run_id.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read(65536)
        except OSError:
            continue
        if token in cmdline:
            found.append(int(entry))
    return found


def _stop_then_kill(pids: set[int]) -> int:
    """SIGSTOP first (a stopped process forks no more), then SIGKILL."""
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
    return len(pids)


def kill_run(run_id: str, *, rounds: int = 200) -> int:
    """Stop and kill every process whose command line carries the run's id, until a scan finds none; how many."""
    killed = 0
    for _ in range(rounds):
        pids = set(_processes_of(run_id))
        if not pids:
            return killed
        killed += _stop_then_kill(pids)
        time.sleep(0.02)
    return killed


def _outcome(report: bytes) -> Outcome:
    outcome = Outcome(passed=False)
    result: dict[str, Any] | None = None
    for line in report.decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        kind = item.get("kind")
        if kind == "confinement" and not outcome.confinement:
            outcome.confinement = {k: v for k, v in item.items() if k != "kind"}
        elif kind == "refused":
            outcome.refused = [str(r) for r in item.get("reasons", [])][:10]
        elif kind == "result" and result is None:
            result = item
        elif kind == "exit":
            outcome.timed_out = bool(item.get("timed_out"))
            outcome.stragglers_killed = int(item.get("killed_after") or 0)
        elif kind == "crashed":
            outcome.error = str(item.get("error"))[:80]
    if outcome.refused:
        raise SandboxUnavailable(
            "generated code cannot run confined on this machine: " + "; ".join(outcome.refused) + ".",
            "run on a Linux kernel with Landlock and seccomp (Ubuntu 22.04 or later), then score again",
        )
    outcome.result = result
    return outcome
