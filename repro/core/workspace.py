"""The one state directory: $REPRO_HOME, or ./repro-workspace under the current folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_NAME = "repro-workspace"


def repro_home(override: Path | None = None) -> Path:
    if override is not None:
        return Path(override).expanduser().resolve()
    env = os.environ.get("REPRO_HOME")
    return Path(env).expanduser().resolve() if env else (Path.cwd() / DEFAULT_NAME).resolve()


@dataclass(frozen=True)
class Workspace:
    """Layout of the state directory; every step reads and writes only through these paths."""

    root: Path

    @classmethod
    def open(cls, override: Path | None = None) -> Workspace:
        return cls(repro_home(override))

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def preprocessed(self) -> Path:
        return self.root / "preprocessed"

    @property
    def engines(self) -> Path:
        return self.root / "engines"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def tuned(self) -> Path:
        """Rates `repro tune` chose, one file per recipe and scenario."""
        return self.root / "tuned"

    @property
    def ledger_path(self) -> Path:
        return self.root / "ledger.json"

    def ensure(self) -> Workspace:
        for p in (self.root, self.models, self.data, self.preprocessed, self.engines, self.runs):
            p.mkdir(parents=True, exist_ok=True)
        return self


def workspace_of(path: Path) -> Workspace | None:
    """The workspace whose runs/ folder holds `path` (a run folder), for runs that predate run.json's
    dataset_path; None when it is under none."""
    for parent in Path(path).resolve().parents:
        if parent.name == "runs" and (parent.parent / "preprocessed").is_dir():
            return Workspace(parent.parent)
    return None
