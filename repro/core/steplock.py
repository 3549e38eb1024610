"""One process at a time for a workspace step that writes shared files (`repro setup`).

Two `repro setup` in one workspace used to download into the same `.incomplete` files; both failed and blamed the
hub. The step now takes an exclusive `flock` on `<workspace>/<step>.lock` and writes who holds it (pid, host,
start, command) into the file; a second process is refused at once, naming the holder. The kernel releases the
lock when its process ends, however it ends, so no stale lock is ever left to clear by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from repro.core.clock import now_iso
from repro.core.errors import ReproError
from repro.core.secrets import redact_tree

MAX_HOLDER_BYTES = 4096


class StepBusy(ReproError):
    """Another process holds this step's lock in this workspace."""


def _holder(fd: int) -> str:
    try:
        raw = os.pread(fd, MAX_HOLDER_BYTES, 0)
        info = json.loads(raw.decode("utf-8")) if raw else {}
    except (OSError, ValueError, UnicodeDecodeError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "another process"
    return f"pid {info.get('pid')} on {info.get('host', '?')}, started {info.get('started', '?')}"


@contextlib.contextmanager
def step_lock(root: Path, step: str, next_command: str) -> Iterator[None]:
    """Hold `<root>/<step>.lock` for the duration; refuse (StepBusy, exit 2) when another process holds it."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{step}.lock"
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise ReproError(
            f"{path}: cannot open the lock file ({exc.strerror}).", f"remove {path}, then {next_command}"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StepBusy(
                f"Another `repro {step}` is already working in {root} ({_holder(fd)}); two at once would write the "
                "same files.",
                f"wait for it to finish (`repro status` shows it), then {next_command}",
            ) from None
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": now_iso(),
            "argv": redact_tree(sys.argv[1:8]),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode()[:MAX_HOLDER_BYTES], 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)
