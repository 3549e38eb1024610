"""The step ledger: what each step did, from which inputs, with which outputs, so re-runs skip or resume.

Stored as one JSON file in the workspace, written atomically. Schema changes are numbered,
append-only migrations; a ledger from a newer repro is refused, and a corrupt one is moved
aside (never overwritten) before a fresh one starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

from repro.core.clock import now_iso
from repro.core.errors import LedgerError
from repro.core.fsutil import atomic_write_json, sha256_file
from repro.core.safeio import loads_json, read_text_bounded

# A real ledger is a few KB (one record per step); parsing 64 MB of JSON took 3 GB. Larger is treated as corrupt.
MAX_LEDGER_BYTES = 4 << 20

SCHEMA_VERSION = 2
Status = Literal["done", "running", "failed", "interrupted"]

MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def migration(from_version: int):
    def register(fn: Callable[[dict[str, Any]], dict[str, Any]]):
        MIGRATIONS[from_version] = fn
        return fn

    return register


@migration(1)
def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """v1 kept a flat list of steps; v2 keys them by name and records artifacts per step."""
    steps = {}
    for step in data.get("steps", []):
        step = dict(step)
        step.setdefault("outputs", [])
        steps[step.pop("name")] = step
    return {"schema_version": 2, "steps": steps, "facts": data.get("facts", {})}


class Artifact(BaseModel):
    path: str
    size: int
    sha256: str | None = None
    source: str | None = None
    revision: str | None = None

    @classmethod
    def of(cls, path: Path, *, checksum: bool = True, **kw: Any) -> Artifact:
        path = Path(path)
        return cls(path=str(path), size=path.stat().st_size, sha256=sha256_file(path) if checksum else None, **kw)

    def verify(self) -> bool:
        p = Path(self.path)
        if not p.exists() or p.stat().st_size != self.size:
            return False
        return self.sha256 is None or sha256_file(p) == self.sha256


class StepRecord(BaseModel):
    status: Status
    inputs_hash: str
    started: str
    finished: str | None = None
    outputs: list[Artifact] = Field(default_factory=list)
    error: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    pid: int | None = Field(default=None, description="The process that wrote 'running': live or dead")
    host: str | None = None
    signal: str | None = Field(default=None, description="SIGINT (Ctrl-C), SIGTERM (scancel, docker stop), ...")

    def stale_reason(self) -> str | None:
        """Why a 'running' record cannot be running any more, or None when it may be (or cannot be told)."""
        if self.status != "running" or self.pid is None or self.host is None:
            return None
        if self.host != socket.gethostname():
            return None
        if _pid_alive(self.pid):
            return None
        return f"process {self.pid} on {self.host} is gone (killed, out of memory or the VM rebooted)"


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


@contextlib.contextmanager
def ledger_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `<ledger>.lock` around load-modify-save, so two repro processes never lose a step."""
    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove_stale_temps(path: Path) -> None:
    """Temp files of saves that were killed before their rename. Every save holds the lock, so while this one
    does, no other writer's temp file can be live: each one found is left over and goes."""
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            tmp.unlink()


class Ledger(BaseModel):
    schema_version: int = SCHEMA_VERSION
    steps: dict[str, StepRecord] = Field(default_factory=dict)
    facts: dict[str, Any] = Field(default_factory=dict, description="Detected once, reused: VM size, GPU names")
    path: Path | None = Field(default=None, exclude=True)
    _base: dict[str, Any] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        self._remember()

    def _remember(self) -> None:
        """What was on disk when this object last read or wrote it: the base of the three-way merge in `save`."""
        dumped = self.model_dump(mode="json")
        self._base = {"steps": dumped["steps"], "facts": dumped["facts"]}

    @staticmethod
    def _read(path: Path) -> tuple[dict[str, Any] | None, str | None]:
        """(data, why it is corrupt); never moves anything."""
        try:
            data = loads_json(read_text_bounded(path, MAX_LEDGER_BYTES, what="ledger"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            version = data.get("schema_version", 1)
            if isinstance(version, bool) or not isinstance(version, int):
                raise ValueError(f"schema_version {str(version)[:40]!r} is not a whole number")
            data["schema_version"] = version
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            return None, str(exc).splitlines()[0] or type(exc).__name__
        return data, None

    @staticmethod
    def _newer(path: Path, version: int) -> LedgerError:
        return LedgerError(
            f"{path}: the ledger was written by a newer repro (schema {version} > {SCHEMA_VERSION}).",
            "`pip install -U repro`",
        )

    @classmethod
    def problem(cls, path: Path) -> LedgerError | None:
        """What `load` would refuse, found without moving anything (for `repro doctor`)."""
        path = Path(path)
        if not path.exists():
            return None
        data, why = cls._read(path)
        if data is None:
            return LedgerError(
                f"{path}: the ledger is corrupt ({why}).", "`repro status` moves it aside and starts a fresh one"
            )
        if data["schema_version"] > SCHEMA_VERSION:
            return cls._newer(path, data["schema_version"])
        return None

    @classmethod
    def load(cls, path: Path) -> Ledger:
        path = Path(path)
        if not path.exists():
            return cls(path=path)
        data, why = cls._read(path)
        if data is not None and data["schema_version"] > SCHEMA_VERSION:
            raise cls._newer(path, data["schema_version"])
        if data is not None:
            try:
                version = data["schema_version"]
                while version < SCHEMA_VERSION:
                    data = MIGRATIONS[version](data)
                    version = int(data["schema_version"])
                ledger = cls.model_validate(data)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            else:
                ledger.path = path
                return ledger
        aside = cls._aside(path)
        raise LedgerError(
            f"{path}: the ledger is corrupt ({why}); it was kept as {aside.name}.",
            "`repro status` to start a fresh ledger, then re-run the steps",
        )

    @staticmethod
    def _aside(path: Path) -> Path:
        """Move a corrupt ledger out of the way under a name no earlier one used."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        n = 0
        while True:
            aside = path.with_name(f"{path.name}.corrupt-{stamp}" + (f"-{n}" if n else ""))
            try:
                os.link(path, aside)
            except FileExistsError:
                n += 1
                continue
            path.unlink()
            return aside

    def save(self) -> None:
        """Lock, re-read, apply only what this process changed since it last read, write, unlock.

        `run offline` and `run server` on one workspace each hold a Ledger for hours; writing the whole object
        back would drop the other's steps, so steps and facts this process did not touch keep the disk's value.
        """
        assert self.path is not None
        with ledger_lock(self.path):
            disk: Ledger | None = None
            if self.path.exists():
                data, _ = self._read(self.path)
                if data is not None and data["schema_version"] == SCHEMA_VERSION:
                    with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
                        disk = type(self).model_validate(data)
            mine = self.model_dump(mode="json")
            if disk is not None:
                merged = disk.model_dump(mode="json")
                for part in ("steps", "facts"):
                    base = self._base.get(part, {})
                    for key, value in mine[part].items():
                        if base.get(key) != value:
                            merged[part][key] = value
                    for key in base:
                        if key not in mine[part]:
                            merged[part].pop(key, None)
                mine = merged
            _remove_stale_temps(self.path)
            atomic_write_json(self.path, mine)
            fresh = type(self).model_validate(mine)
            self.steps, self.facts = fresh.steps, fresh.facts
            self._remember()

    def recipe_name(self) -> str | None:
        """The recipe this workspace was used with: the recorded fact, else the first step that names one."""
        if self.facts.get("recipe"):
            return str(self.facts["recipe"])
        return next((str(r.details["recipe"]) for r in self.steps.values() if r.details.get("recipe")), None)

    def get(self, step: str) -> StepRecord | None:
        return self.steps.get(step)

    def is_fresh(self, step: str, inputs_hash: str, *, verify_outputs: bool = True) -> bool:
        """Done, from the same inputs, and its outputs still check out."""
        rec = self.steps.get(step)
        if rec is None or rec.status != "done" or rec.inputs_hash != inputs_hash:
            return False
        return all(a.verify() for a in rec.outputs) if verify_outputs else True

    def start(self, step: str, inputs_hash: str, **details: Any) -> None:
        self.steps[step] = StepRecord(
            status="running",
            inputs_hash=inputs_hash,
            started=now_iso(),
            details=details,
            pid=os.getpid(),
            host=socket.gethostname(),
        )
        self.save()

    def finish(self, step: str, outputs: list[Artifact] | None = None, **details: Any) -> None:
        rec = self.steps[step]
        rec.status, rec.finished, rec.error = "done", now_iso(), None
        rec.outputs = list(outputs or [])
        rec.details.update(details)
        self.save()

    def fail(self, step: str, error: str, *, interrupted: bool = False, signal: str | None = None) -> None:
        """Record a failure; `signal` names what stopped an interrupted step (SIGINT is Ctrl-C, SIGTERM is not)."""
        from repro.core.secrets import redact

        rec = self.steps.get(step)
        if rec is None:
            rec = self.steps[step] = StepRecord(status="failed", inputs_hash="", started=now_iso())
        rec.status = "interrupted" if interrupted or signal else "failed"
        rec.finished, rec.error, rec.signal = now_iso(), redact(error), signal
        self.save()
