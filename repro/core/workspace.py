"""The one state directory: $REPRO_HOME, or ./repro-workspace under the current folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_NAME = "repro-workspace"


def repro_home(override: Path | None = None) -> Path:
    env = os.environ.get("REPRO_HOME")
    given = Path(override) if override is not None else Path(env) if env else Path.cwd() / DEFAULT_NAME
    try:
        return given.expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # a link loop: RuntimeError on Python 3.11, OSError ELOOP later
        from repro.core.errors import InputError
        from repro.core.textsafe import terminal_safe

        why = getattr(exc, "strerror", None) or "a symbolic link that loops back on itself"
        raise InputError(
            f"The workspace {terminal_safe(str(given))} cannot be used ({why}).",
            "point --workspace (or $REPRO_HOME) at a real folder, or remove the looping link",
        ) from None


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
            if p.is_symlink() and not p.exists():
                from repro.core.errors import InputError

                raise InputError(
                    f"{p} is a symbolic link that loops or leads nowhere; the workspace cannot use it.",
                    f"remove the link {p} (only the link), or point it at a folder, then run the command again",
                )
            p.mkdir(parents=True, exist_ok=True)
        return self


def workspace_of(path: Path) -> Workspace | None:
    """The workspace whose runs/ folder holds `path` (a run folder), for runs that predate run.json's
    dataset_path; None when it is under none."""
    for parent in Path(path).resolve().parents:
        if parent.name == "runs" and (parent.parent / "preprocessed").is_dir():
            return Workspace(parent.parent)
    return None
