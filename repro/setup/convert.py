"""Convert a dataset pickle once, in a confined child, into the prepared files every later step reads (issue #43).

The bytes were read once and checked against their pin by the parent (safe_pickle.read_pinned). They go to a child
started fresh (`python -I`, exec'd: nothing of this process's memory, no inherited descriptor but three pipes, an
environment built from nothing: no HF token, no proxy), in a new network namespace where `unshare` is allowed
(`unshare --net`, or `--user --map-root-user --net` as an ordinary user; where neither works the child runs without
one, and the ledger says so). The child lowers its own limits first (address space, CPU, file size, open files, no
core), decodes with repro's own decoder, and writes into a temp folder beside the target; the parent checks the
result, writes the manifest and moves the folder into place. A refusal, a crash (SIGSEGV), a limit (memory, CPU,
output size) or the wall clock is one InputError naming the file; the temp folder is removed, the target untouched.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import repro
from repro.core.errors import InputError
from repro.setup import convert_child as child

MiB = 1 << 20
GiB = 1 << 30
MAX_REPORT = 1 << 20
"""Bytes of the child's JSON answer read back (it is a few hundred)."""


def limits_for(size: int) -> dict[str, int]:
    """What the child may use for a pickle of `size` bytes. Measured on a 71 MB pickle of the 405B set's shape (800
    prompts of 2-18 k token ids, pandas 2.2.3): peak RSS 8.8x the file (Python ints and lists, the bytes, the
    outputs), 7.4 s of CPU (0.1 s/MB) on a loaded 2-core VM. The limits allow about twice the memory and twenty
    times the CPU; the 892 MB 405B set gets 15.3 GB of address space, 29 minutes of CPU and an hour of wall clock."""
    cpu = 60 + 2 * (size // MiB)
    return {
        "as_bytes": max(2 * GiB, GiB + 16 * size),
        "cpu_s": cpu,
        "fsize_bytes": 64 * MiB + 4 * size,
        "nofile": 64,
        "core_bytes": 0,
        "wall_s": 2 * cpu + 30,
    }


def child_env(home: Path) -> dict[str, str]:
    """Built from nothing: no token, no proxy, no PYTHON* variable reaches the child."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(home),
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


@functools.lru_cache(maxsize=1)
def network_isolation() -> tuple[tuple[str, ...], str]:
    """(argv prefix, what it gives): a new network namespace where this host allows one, else none (said so)."""
    exe = shutil.which("unshare", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if exe is None:
        return (), "none: no `unshare` on this host (no sockets inherited, environment scrubbed)"
    tries: list[tuple[str, ...]] = [(exe, "--net", "--")] if os.geteuid() == 0 else []
    tries.append((exe, "--user", "--map-root-user", "--net", "--"))
    why = ""
    for prefix in tries:
        try:
            probe = subprocess.run(
                [*prefix, "/bin/true"], capture_output=True, timeout=10, env=child_env(Path("/")), check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            why = str(exc)
            continue
        if probe.returncode == 0:
            return prefix, "network namespace (" + " ".join(["unshare", *prefix[1:-1]]) + ")"
        lines = probe.stderr.decode(errors="replace").strip().splitlines()
        why = lines[-1] if lines else f"exit status {probe.returncode}"
    return (), f"none: unshare was refused ({why[:120]}); no sockets inherited, environment scrubbed"


def child_argv() -> list[str]:
    """A fresh interpreter in isolated mode that finds this very repro (appended to sys.path, after the stdlib)."""
    root = str(Path(repro.__file__).resolve().parents[1])
    code = (
        f"import sys; sys.path.append({root!r}); from repro.setup.convert_child import main; sys.exit(main(sys.argv))"
    )
    return [sys.executable, "-I", "-B", "-c", code]  # -B: it writes no .pyc (its files go to the out folder only)


def _size(n: int) -> str:
    return f"{n / GiB:,.1f} GiB" if n >= GiB else f"{n / MiB:,.1f} MiB" if n >= MiB else f"{n:,} bytes"


def _why(rc: int, report: dict[str, Any], limits: dict[str, int]) -> str:
    if rc < 0:
        sig = -rc
        name = signal.Signals(sig).name if sig in signal.valid_signals() else f"signal {sig}"
        if sig == signal.SIGXCPU:
            return f"the decoder ran past its CPU limit ({limits['cpu_s']} s) and was stopped (SIGXCPU)"
        if sig == signal.SIGXFSZ:
            return f"the decoder wrote past its file-size limit ({_size(limits['fsize_bytes'])}) (SIGXFSZ)"
        if sig == signal.SIGKILL:
            return "the decoder was killed by SIGKILL (out of memory, or by the system)"
        return f"the decoder was killed by {name}"
    if rc == child.EXIT_MEMORY:
        return f"the decoder ran out of memory (its limit is {_size(limits['as_bytes'])})"
    if rc == child.EXIT_FSIZE:
        return f"the decoder wrote past its file-size limit ({_size(limits['fsize_bytes'])})"
    if rc == child.EXIT_UNEXPECTED:
        return f"the decoder stopped on an unexpected {report.get('unexpected', 'error')}"
    return f"the decoder ended with exit status {rc}"


def run_decoder(
    source: Path,
    data: bytes,
    job: dict[str, Any],
    out_dir: Path,
    *,
    next_step: str,
    argv: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Decode `data` (the pinned bytes of `source`) in a confined child that writes into `out_dir`; the child's
    result (rows, columns, what it wrote with sha256s, and what its confinement looked like), or one InputError.

    `argv` replaces the child's command (tests: a child that really crashes)."""
    limits = limits_for(len(data))
    prefix, network = network_isolation()
    full = {**job, "source": str(source), "size": len(data), "out": str(out_dir), "limits": limits}
    cmd = [*prefix, *(argv or child_argv()), json.dumps(full)]
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=out_dir,
            env=child_env(out_dir),
            close_fds=True,
            start_new_session=True,
        )
    except OSError as exc:
        raise InputError(f"{source}: the decoder could not be started ({exc.strerror}).", next_step) from None
    try:
        out, _err = proc.communicate(data, timeout=limits["wall_s"])
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise InputError(
            f"the dataset file {source} could not be decoded safely: the decoder did not finish within "
            f"{limits['wall_s']:,} s and was stopped; nothing was written.",
            next_step,
        ) from None
    report = _report(out)
    if proc.returncode == child.EXIT_OK and "ok" in report:
        return {**report["ok"], "confinement": {"network": network, **limits}}
    if proc.returncode == child.EXIT_REFUSED and "refused" in report:
        raise InputError(
            f"{source}: {report['refused']}; refused (nothing in the file was run).", report.get("next") or next_step
        )
    raise InputError(
        f"the dataset file {source} could not be decoded safely: {_why(proc.returncode, report, limits)}; "
        "nothing was written.",
        next_step,
    )


def _report(out: bytes) -> dict[str, Any]:
    try:
        line = out[:MAX_REPORT].decode("utf-8").strip().splitlines()[-1]
        value = json.loads(line)
    except (UnicodeDecodeError, IndexError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


@contextmanager
def staging(target: Path) -> Iterator[Path]:
    """A temp folder beside `target` (same filesystem); removed unless `publish` moved it into place."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.convert-", dir=target.parent))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def publish(staged: Path, target: Path) -> None:
    """Put the staged folder at `target`: the old one (if any) is renamed aside, the new one renamed in, the old one
    removed. A reader sees the old folder or the new one, never a half-written one."""
    target = Path(target)
    old = None
    if target.exists() or target.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.rmdir(old)
        os.rename(target, old)
    os.rename(staged, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
