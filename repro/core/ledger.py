"""The step ledger: what each step did, from which inputs, with which outputs, so re-runs skip or resume.

Stored as one JSON file in the workspace, written atomically. Schema changes are numbered,
append-only migrations; a ledger from a newer repro is refused, and a corrupt one is moved
aside (never overwritten) before a fresh one starts.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field

from repro.core.clock import now_iso
from repro.core.errors import LedgerError
from repro.core.fsutil import atomic_write_json, sha256_file

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
    def of(cls, path: Path, *, checksum: bool = True, **kw: Any) -> "Artifact":
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


class Ledger(BaseModel):
    schema_version: int = SCHEMA_VERSION
    steps: dict[str, StepRecord] = Field(default_factory=dict)
    facts: dict[str, Any] = Field(default_factory=dict, description="Detected once, reused: VM size, GPU names")
    path: Path | None = Field(default=None, exclude=True)

    @staticmethod
    def _read(path: Path) -> tuple[dict[str, Any] | None, str | None]:
        """(data, why it is corrupt); never moves anything."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            data["schema_version"] = int(data.get("schema_version", 1))
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            return None, str(exc).splitlines()[0] or type(exc).__name__
        return data, None

    @staticmethod
    def _newer(path: Path, version: int) -> LedgerError:
        return LedgerError(f"{path}: the ledger was written by a newer repro (schema {version} > {SCHEMA_VERSION}).",
                           "`pip install -U repro`")

    @classmethod
    def problem(cls, path: Path) -> LedgerError | None:
        """What `load` would refuse, found without moving anything (for `repro doctor`)."""
        path = Path(path)
        if not path.exists():
            return None
        data, why = cls._read(path)
        if data is None:
            return LedgerError(f"{path}: the ledger is corrupt ({why}).",
                               "`repro status` moves it aside and starts a fresh one")
        if data["schema_version"] > SCHEMA_VERSION:
            return cls._newer(path, data["schema_version"])
        return None

    @classmethod
    def load(cls, path: Path) -> "Ledger":
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
        raise LedgerError(f"{path}: the ledger is corrupt ({why}); it was kept as {aside.name}.",
                          "`repro status` to start a fresh ledger, then re-run the steps")

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
        assert self.path is not None
        atomic_write_json(self.path, self.model_dump(mode="json"))

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
        self.steps[step] = StepRecord(status="running", inputs_hash=inputs_hash, started=now_iso(), details=details)
        self.save()

    def finish(self, step: str, outputs: list[Artifact] | None = None, **details: Any) -> None:
        rec = self.steps[step]
        rec.status, rec.finished, rec.error = "done", now_iso(), None
        rec.outputs = list(outputs or [])
        rec.details.update(details)
        self.save()

    def fail(self, step: str, error: str, *, interrupted: bool = False) -> None:
        from repro.core.secrets import redact
        rec = self.steps.get(step)
        if rec is None:
            rec = self.steps[step] = StepRecord(status="failed", inputs_hash="", started=now_iso())
        rec.status = "interrupted" if interrupted else "failed"
        rec.finished, rec.error = now_iso(), redact(error)
        self.save()
