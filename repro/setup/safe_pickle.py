"""Reading MLPerf's dataset pickles without letting a pickle run code.

A pickle is a program: `pandas.read_pickle` on a file from a third-party bucket runs whatever its `__reduce__`
says, as the user. Two locks, both always on:

1. A file is unpickled only when its SHA-256 equals a pinned one (a published checksum in the recipe, or the
   checksum of a pickle this very run wrote). The bytes are read once, hashed, and unpickled from memory, so the
   file cannot change between the check and the load. No pin, no unpickling: trust on first use is not enough
   for a format that executes.
2. The unpickler admits only the globals a pandas DataFrame of plain columns needs (the list below; see
   docs/SECURITY.md for how it was derived from pandas 1.5.3, 2.0.3 and 3.1 pickles of MLPerf's columns).
   Anything else (`os.system`, `builtins.eval`, pyarrow buffers, ...) is refused before it is looked up, so a
   payload "pinned" by a hostile recipe still runs nothing.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from repro.core.errors import InputError

MAX_PICKLE_BYTES = 2 << 30  # MLPerf's sampled set is ~0.1 GB uncompressed; 2 GiB bounds a hostile one


class _NdarrayToken:
    """Stands for `numpy.ndarray` inside a pickle: numpy writes it only as `_reconstruct`'s first argument.

    Handing out the real class would let a pickle call `ndarray(shape, ...)` itself."""


def _reconstruct(token: object, shape: object, dtype: object) -> Any:
    """numpy's array-unpickling entry, admitted only in the form numpy writes: (ndarray, (0,), b'b')."""
    import numpy as np

    if token is not _NdarrayToken or shape != (0,):
        raise pickle.UnpicklingError("numpy _reconstruct called in a form numpy never writes")
    return np.ndarray((0,), dtype=cast(Any, dtype))


def _frombuffer(buf: object, dtype: object, shape: object, order: object) -> Any:
    """numpy's protocol-5 array entry: a view of bytes that came from the pickle, reshaped (size-checked)."""
    import numpy as np

    if not isinstance(buf, (bytes, bytearray, memoryview, pickle.PickleBuffer)):
        raise pickle.UnpicklingError("numpy _frombuffer without a buffer")
    arr = np.frombuffer(cast(Any, buf), dtype=cast(Any, dtype))
    return arr.reshape(cast(Any, shape), order=cast(Any, order))


def _pandas(attr: str) -> Callable[[], Any]:
    def get() -> Any:
        import pandas as pd

        return getattr(pd, attr)

    return get


def _unpickle_block() -> Any:
    from pandas._libs.internals import _unpickle_block as fn

    return fn


def _new_index() -> Any:
    from pandas.core.indexes.base import _new_Index

    return _new_Index


def _block_manager() -> Any:
    from pandas.core.internals.managers import BlockManager

    return BlockManager


def _numpy_dtype() -> Any:
    import numpy as np

    return np.dtype


# (module, name) as pickles of DataFrames with object/int64 columns and a RangeIndex reference them, under the
# pandas and numpy versions MLPerf's files were written with (pandas 1.5/2.0, numpy 1.2x: `numpy.core`) and the
# ones repro runs with (pandas 3, numpy 2: `numpy._core`). Int64Index is pandas 1.x's name for an integer index.
ALLOWED: dict[tuple[str, str], Callable[[], Any]] = {
    ("pandas.core.frame", "DataFrame"): _pandas("DataFrame"),
    ("pandas", "DataFrame"): _pandas("DataFrame"),
    ("pandas.core.internals.managers", "BlockManager"): _block_manager,
    ("pandas._libs.internals", "_unpickle_block"): _unpickle_block,
    ("pandas.core.indexes.base", "_new_Index"): _new_index,
    ("pandas.core.indexes.base", "Index"): _pandas("Index"),
    ("pandas", "Index"): _pandas("Index"),
    ("pandas.core.indexes.numeric", "Int64Index"): _pandas("Index"),
    ("pandas.core.indexes.range", "RangeIndex"): _pandas("RangeIndex"),
    ("pandas", "RangeIndex"): _pandas("RangeIndex"),
    ("numpy", "ndarray"): lambda: _NdarrayToken,
    ("numpy", "dtype"): _numpy_dtype,
    ("numpy.core.multiarray", "_reconstruct"): lambda: _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): lambda: _reconstruct,
    ("numpy.core.numeric", "_frombuffer"): lambda: _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): lambda: _frombuffer,
    ("builtins", "slice"): lambda: slice,
}


class RefusedGlobal(pickle.UnpicklingError):
    """The pickle names a global outside the DataFrame allowlist: it is never imported or looked up."""


class DataFrameUnpickler(pickle.Unpickler):
    """An Unpickler whose every global lookup (GLOBAL, STACK_GLOBAL, INST, OBJ, EXT*) goes through ALLOWED."""

    def find_class(self, module: str, name: str) -> Any:
        get = ALLOWED.get((module, name))
        if get is None:
            raise RefusedGlobal(f"{module}.{name}")
        return get()

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent ids are not allowed")


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


def loads_dataframe(data: bytes, *, source: str, next_step: str) -> Any:
    """A pandas DataFrame from pickle bytes through the allowlist; anything else is one InputError."""
    try:
        obj = DataFrameUnpickler(io.BytesIO(data)).load()
    except RefusedGlobal as exc:
        raise InputError(
            f"{source}: the pickle asks for {exc}, which a dataset never needs; refused without running it.",
            next_step,
        ) from None
    except (MemoryError, RecursionError) as exc:
        raise InputError(f"{source}: the pickle is too large or too deep ({type(exc).__name__}).", next_step) from None
    except Exception as exc:  # noqa: BLE001 - malformed bytes raise many kinds; every one is a bad file, not a bug
        raise InputError(f"{source}: not a readable DataFrame pickle ({type(exc).__name__}).", next_step) from None
    import pandas as pd

    if not isinstance(obj, pd.DataFrame):
        raise InputError(f"{source}: the pickle holds a {type(obj).__name__}, not a DataFrame.", next_step)
    return obj


def load_dataframe(path: Path, pinned: str | None, *, next_step: str = "`repro setup`") -> Any:
    """Checksum first (pinned and matched), then the restricted unpickler; see the module docstring."""
    data = read_pinned(path, pinned, next_step=next_step)
    return loads_dataframe(data, source=str(path), next_step=next_step)


def dataframe_pickle_bytes(df: Any) -> bytes:
    """A DataFrame as a pickle the allowlist admits: object columns and labels (pandas 3 would otherwise write
    pyarrow-backed strings, whose buffers the restricted unpickler refuses)."""
    import pandas as pd

    out = pd.DataFrame(index=pd.RangeIndex(len(df)))
    for c in df.columns:
        numeric = df[c].dtype.kind in "iufb"
        out[str(c)] = pd.Series(df[c].to_numpy(), dtype=None if numeric else object, index=out.index)
    out.columns = pd.Index([str(c) for c in df.columns], dtype=object)
    buf = io.BytesIO()
    pickle.dump(out, buf, protocol=4)
    return buf.getvalue()
