"""Reading MLPerf's dataset pickles without letting a pickle run anything (issues #36, #43).

A pickle is a program: `pandas.read_pickle` runs whatever its `__reduce__` says, and even an unpickler that admits
only pandas' and numpy's own classes hands the bytes to their C setstate code, which trusts the layout (pandas
3.1.1 writes out of bounds on a block placed past the frame; numpy 2.4 crashes on an object array short of items).
Three locks, all always on:

1. A file is read only when its SHA-256 equals a pinned one (a published checksum, or that of a pickle this very
   run wrote). The bytes are read once, hashed, and decoded from memory: the file cannot change in between.
2. repro's own decoder (pickle_vm.py + frame_decode.py) runs the pickle's opcodes without calling anything: every
   pandas/numpy global maps to an inert record, and repro rebuilds the columns, checking every size, dtype and
   placement. Anything else is one refusal.
3. It runs once, in a confined child (convert.py: fresh interpreter, memory/CPU/file limits, no network where the
   host allows a namespace) that writes the prepared files; every later step reads those, never the pickle.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from repro.core.errors import InputError
from repro.setup.table import Table

MAX_PICKLE_BYTES = 2 << 30  # MLPerf's largest set (Llama-3.1-405B) is 0.9 GB; 2 GiB bounds a hostile one


def read_pinned(path: Path, pinned: str | None, *, next_step: str) -> bytes:
    """The file's bytes, read once from a regular file (no symlink), when their SHA-256 equals `pinned`."""
    path = Path(path)
    if not pinned or pinned == "unknown":
        raise InputError(
            f"{path}: no published SHA-256 pins this pickle, and a pickle can run code when it is read; repro "
            "does not unpickle it.",
            next_step,
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: the dataset file is missing.", "`repro setup`") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be opened as a plain file ({exc.strerror}).", next_step) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: not a regular file; it is never unpickled.", next_step)
        data = fh.read(MAX_PICKLE_BYTES + 1)
    if len(data) > MAX_PICKLE_BYTES:
        raise InputError(f"{path}: larger than {MAX_PICKLE_BYTES >> 30} GiB; not a dataset pickle.", next_step)
    got = hashlib.sha256(data).hexdigest()
    if got != pinned:
        raise InputError(
            f"{path}: SHA-256 {got[:16]}… is not the pinned {pinned[:16]}…; the file is not the published one and "
            "is not unpickled.",
            f"delete it, then {next_step}",
        )
    return data


def loads_table(data: bytes, *, source: str, next_step: str) -> Table:
    """The table a DataFrame pickle's bytes describe, decoded in this process by repro's own code (the conversion
    child calls this; so do tests). Anything but a DataFrame of plain columns is one InputError."""
    from repro.setup.frame_decode import decode_table
    from repro.setup.pickle_vm import Refused

    try:
        return decode_table(data)
    except Refused as exc:
        raise InputError(f"{source}: {exc}; refused (nothing in the file was run).", next_step) from None
    except MemoryError:
        raise InputError(f"{source}: the pickle is too large to decode here.", next_step) from None
