"""File helpers shared by every step: results are written whole or not at all."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary sibling, fsync, then rename, so readers never see half a file.

    The temp file is created by mkstemp (O_CREAT|O_EXCL: never an existing file or a symlink's target). A device,
    FIFO, socket or folder already at `path` is refused, never replaced by a regular file."""
    path = Path(path)
    _refuse_special(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class NotAPlainTarget(OSError):
    """An output path that is a device, FIFO, socket, folder or a symlink repro did not make."""


def _refuse_special(path: Path, *, symlinks: bool = False) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        if symlinks:
            raise NotAPlainTarget(0, "a symbolic link (repro does not write through or replace a link)", str(path))
        st = os.stat(path) if os.path.exists(path) else st
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISLNK(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a device, FIFO or socket, not a regular file"
        raise NotAPlainTarget(0, kind, str(path))


def write_output(path: Path | str, data: bytes, *, option: str) -> str:
    """A file the user named on the command line (`--html FILE`): `-` streams to stdout; an existing target must
    be a regular file (a device, FIFO, socket, folder or symlink is refused, never replaced); the bytes go to a
    temp file created O_EXCL in the target's folder and are renamed over it. Returns what was done, for the
    result's outputs."""
    import sys

    from repro.core.errors import InputError

    if str(path) == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return f"wrote {option} to stdout"
    path = Path(path)
    try:
        _refuse_special(path, symlinks=True)
    except NotAPlainTarget as exc:
        raise InputError(
            f"{path}: --{option} writes only regular files, and this is {exc.strerror}; nothing was written.",
            f"name a new file, or `--{option} -` to write to stdout",
        ) from None
    atomic_write_bytes(path, data)
    return f"wrote {path}"


def confined(base: Path, target: Path, *, step: str) -> Path:
    """`target`, where `step` writes, refused unless it lies inside the workspace folder `base` once every link on
    the way is followed, and is not itself a link (a link planted at a dataset file would make the write land on
    whatever it points to). Names in recipes are names (core/names.py); this holds even when a folder of the
    workspace was replaced by a link. The error names only paths inside the workspace: the link to remove."""
    from repro.core.errors import InputError

    base, target = Path(base), Path(target)
    try:
        root = base.resolve()
        where = target.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: Python 3.11's "Symlink loop"
        raise InputError(
            f"{target}: a link on the way loops or cannot be followed ({getattr(exc, 'strerror', None) or exc}); "
            "nothing was written.",
            f"remove the looping link under {base}, then `{step}`",
        ) from None
    if not where.is_relative_to(root):
        link = _first_link(base, target) or target
        which = "is a link that points" if link == target else f"lies behind the link {link}, which points"
        raise InputError(
            f"{target} {which} outside {base}; repro writes only inside the workspace, so nothing was written.",
            f"remove the link {link} (only the link), then `{step}`",
        )
    if target.is_symlink():
        raise InputError(
            f"{target}: a symbolic link; repro never writes through or replaces a link, so nothing was written.",
            f"remove the link {target} (only the link), then `{step}`",
        )
    return target


def _first_link(base: Path, target: Path) -> Path | None:
    """The first symbolic link on the way from `base` down to `target` (both as given), or None."""
    try:
        rel = target.relative_to(base)
    except ValueError:
        return None
    here = base
    for part in rel.parts:
        here = here / part
        if here.is_symlink():
            return here
    return None


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_published_json(path: Path, obj: Any) -> None:
    """A file users publish (run.json): no URL credential or token in it, whatever the run was given."""
    from repro.core.secrets import redact_tree

    atomic_write_json(path, redact_tree(obj))


def check_output(output: Path, inputs: list[Path], option: str, command: str, read: Iterable[Path] = ()) -> Path:
    """An output file is never one of the inputs, inside an input folder, or a file the command read (a system
    JSON found beside the folders): a report would overwrite a log or a system JSON, or be read back as part of
    the next run's results."""
    from repro.core.errors import InputError
    from repro.core.textsafe import sh_quote

    out = Path(output).resolve()
    for src_file in read:
        if Path(src_file).resolve() == out:
            raise InputError(
                f"{output}: --{option} would write over {src_file}, which this {command} read.",
                f"{command} {' '.join(sh_quote(str(p)) for p in inputs)} --{option} {sh_quote(Path(output).name)}",
            )
    for given in inputs:
        src = Path(given).resolve()
        if out == src or src in out.parents:
            instead = src.parent / Path(output).name
            raise InputError(
                f"{output}: --{option} would write {'over' if out == src else 'inside'} the input {given}; "
                "an output never replaces or joins the results it was made from.",
                f"{command} {' '.join(sh_quote(str(p)) for p in inputs)} --{option} {sh_quote(str(instead))}",
            )
    return output


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
