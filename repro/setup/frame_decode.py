"""A pandas DataFrame pickle -> a `Table`, by repro's own code: no pandas or numpy class ever sees the bytes.

Every pandas/numpy global a DataFrame pickle names maps to an inert stub of repro's own (`ALLOWED`); the pickle
machine (pickle_vm.py) only records what the pickle asked those stubs to do. This module then rebuilds the table
from the records, checking everything pandas' own setstate code trusts:

- numeric arrays only from raw bytes of an allowlisted dtype (`NUMERIC`: byte order, item size), whose length is
  exactly shape x itemsize; object columns from the decoded Python items (text, numbers, lists, None), by repro,
  with their count equal to the shape's (numpy's object-array state is never used);
- blocks and their placements (a slice or an integer array) within the column count, every column placed once;
- the row index (RangeIndex or an integer index) and the column labels (unique text);
- a budget: no more values than the file has bytes, lists at most MAX_NESTING deep, at most MAX_COLUMNS columns.

The globals, and the record forms below, are those of real pickles of MLPerf-shaped frames written by pandas 1.3.5
(numpy 1.21), 1.4.4, 1.5.3 (numpy 1.24), 2.0.3, 2.2.3 (numpy 1.26 and 2.4) and 3.1.1 (numpy 2.4, with and without
pyarrow), protocols 2, 4 and 5 (tests/fixtures/pickles/make_pickles.py; docs/SECURITY.md). pandas 3's default
string columns (StringArray, python storage) are read; pyarrow-backed ones are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from repro.setup.pickle_vm import Called, Refused, Stub
from repro.setup.pickle_vm import run as run_machine
from repro.setup.table import Column, Table

MAX_COLUMNS = 512
MAX_NESTING = 3
"""A cell may hold a list of lists of lists (a token-id list is one level)."""
FRAME_KEYS = frozenset({"_mgr", "_typ", "_metadata", "attrs", "_flags"})
"""NDFrame.__getstate__'s keys in pandas 1.3-3.x; pandas would setattr any other key on the frame."""

# numpy dtype code -> (byte order numpy writes for it, numpy type repro builds the array as)
NUMERIC: dict[str, tuple[str, str]] = {
    "b1": ("|", "|b1"),
    "i1": ("|", "|i1"),
    "u1": ("|", "|u1"),
    "i2": ("<", "<i2"),
    "u2": ("<", "<u2"),
    "i4": ("<", "<i4"),
    "u4": ("<", "<u4"),
    "i8": ("<", "<i8"),
    "u8": ("<", "<u8"),
    "f4": ("<", "<f4"),
    "f8": ("<", "<f8"),
}
OBJECT = "O8"


# ---- the stubs: one per global; none of them does anything -----------------------------------------------------
class DataFrameStub(Stub):
    __slots__ = ()
    via_newobj = takes_state = True
    label = "pandas DataFrame"


class BlockManagerStub(Stub):
    __slots__ = ()
    via_reduce = True
    label = "pandas BlockManager"


class UnpickleBlockStub(Stub):
    __slots__ = ()
    via_reduce = True
    label = "pandas block"


class PartialStub(Stub):
    """pandas 1.3 pickles a block as functools.partial(new_block, ndim=2)(values, placement)."""

    __slots__ = ()
    via_reduce = takes_state = callable_instance = True
    label = "functools.partial"


class NewBlockToken(Stub):
    __slots__ = ()
    label = "pandas new_block"


class NewIndexStub(Stub):
    __slots__ = ()
    via_reduce = True
    label = "pandas index"


class IndexToken(Stub):
    __slots__ = ()
    label = "pandas Index"


class RangeIndexToken(Stub):
    __slots__ = ()
    label = "pandas RangeIndex"


class NdarrayToken(Stub):
    __slots__ = ()
    label = "numpy.ndarray"


class ReconstructStub(Stub):
    __slots__ = ()
    via_reduce = takes_state = True
    label = "numpy array"


class FrombufferStub(Stub):
    __slots__ = ()
    via_reduce = True
    label = "numpy buffer array"


class DtypeStub(Stub):
    __slots__ = ()
    via_reduce = takes_state = True
    label = "numpy dtype"


class ScalarStub(Stub):
    __slots__ = ()
    via_reduce = True
    label = "numpy scalar"


class SliceStub(Stub):
    __slots__ = ()
    via_reduce = True
    label = "slice"


class EncodeStub(Stub):
    """Protocol 2 writes bytes as _codecs.encode(text, 'latin1')."""

    __slots__ = ()
    via_reduce = True
    label = "_codecs.encode"


class BackedArrayStub(Stub):
    __slots__ = ()
    via_reduce = takes_state = True
    label = "pandas extension array"


class StringArrayToken(Stub):
    __slots__ = ()
    label = "pandas StringArray"


class StringDtypeStub(Stub):
    __slots__ = ()
    via_reduce = True
    label = "pandas StringDtype"


class PyarrowRefusal(Stub):
    __slots__ = ()
    label = "pyarrow"
    refusal = "a column stored by pyarrow, which repro does not decode (MLPerf's files hold object columns)"


def _both_numpy(module: str, name: str, stub: type[Stub]) -> dict[tuple[str, str], type[Stub]]:
    """numpy 1.x writes numpy.core.*, numpy 2.x numpy._core.*."""
    return {(f"numpy.core.{module}", name): stub, (f"numpy._core.{module}", name): stub}


ALLOWED: dict[tuple[str, str], type[Stub]] = {
    ("pandas.core.frame", "DataFrame"): DataFrameStub,
    ("pandas", "DataFrame"): DataFrameStub,
    ("pandas.core.internals.managers", "BlockManager"): BlockManagerStub,
    ("pandas._libs.internals", "_unpickle_block"): UnpickleBlockStub,
    ("functools", "partial"): PartialStub,
    ("pandas.core.internals.blocks", "new_block"): NewBlockToken,
    ("pandas.core.indexes.base", "_new_Index"): NewIndexStub,
    ("pandas.core.indexes.base", "Index"): IndexToken,
    ("pandas", "Index"): IndexToken,
    ("pandas.core.indexes.numeric", "Int64Index"): IndexToken,
    ("pandas.core.indexes.range", "RangeIndex"): RangeIndexToken,
    ("pandas", "RangeIndex"): RangeIndexToken,
    ("numpy", "ndarray"): NdarrayToken,
    ("numpy", "dtype"): DtypeStub,
    **_both_numpy("multiarray", "_reconstruct", ReconstructStub),
    **_both_numpy("numeric", "_frombuffer", FrombufferStub),
    **_both_numpy("multiarray", "scalar", ScalarStub),
    ("builtins", "slice"): SliceStub,
    ("__builtin__", "slice"): SliceStub,
    ("_codecs", "encode"): EncodeStub,
    ("pandas._libs.arrays", "__pyx_unpickle_NDArrayBacked"): BackedArrayStub,
    ("pandas.arrays", "StringArray"): StringArrayToken,
    ("pandas", "StringDtype"): StringDtypeStub,
    ("pandas.arrays", "ArrowStringArray"): PyarrowRefusal,
}


# ---- decoding ------------------------------------------------------------------------------------------------------
class Budget:
    """Values the table may hold: an honest pickle spends at least one byte per value, so no more than its size."""

    def __init__(self, size: int) -> None:
        self.left = 2 * size + 4096

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise Refused("the pickle expands to more values than its size can hold (shared references)")


@dataclass
class Array:
    """A decoded array: its shape, and its values flat in C order (numpy for numbers, a list for objects)."""

    shape: tuple[int, ...]
    flat: Column

    def rows(self) -> list[Column]:
        """A 2-D array's rows (each one column of the frame)."""
        k, n = self.shape
        return [self.flat[i * n : (i + 1) * n] for i in range(k)]


def decode_table(data: bytes) -> Table:
    """The DataFrame a pickle describes, as a Table; anything else is Refused (with what was wrong)."""
    root = run_machine(data, ALLOWED)
    budget = Budget(len(data))
    if not isinstance(root, DataFrameStub):
        raise Refused(f"the pickle holds {_what(root)}, not a DataFrame")
    if root.args != () or not root.has_state or type(root.state) is not dict:
        raise Refused("the DataFrame record is not in the form pandas writes")
    state = root.state
    extra = sorted(k for k in state if k not in FRAME_KEYS)
    if extra or "_mgr" not in state or state.get("_typ", "dataframe") != "dataframe":
        raise Refused(f"the DataFrame's state has keys pandas never writes ({_names(extra) or '_mgr/_typ'})")
    mgr = state["_mgr"]
    if not isinstance(mgr, BlockManagerStub) or len(mgr.args) != 2:
        raise Refused(f"the DataFrame's data is {_what(mgr)}, not a BlockManager(blocks, axes)")
    blocks, axes = mgr.args
    if type(blocks) not in (tuple, list) or type(axes) not in (tuple, list) or len(axes) != 2:
        raise Refused("the BlockManager is not (blocks, [columns, index])")
    columns = _column_labels(axes[0], budget)
    index = _row_index(axes[1], budget)
    placed = _place(blocks, len(columns), len(index), budget)
    return Table(columns, {name: placed[i] for i, name in enumerate(columns)}, index)


def _place(blocks: Any, n_cols: int, n_rows: int, budget: Budget) -> dict[int, Column]:
    placed: dict[int, Column] = {}
    for b, block in enumerate(blocks):
        values, placement = _block_parts(block, b)
        positions = _placement(placement, n_cols, budget, b)
        for pos, col in zip(positions, _block_columns(values, len(positions), n_rows, budget, b), strict=True):
            if pos in placed:
                raise Refused(f"block {b} places column {pos}, which another block already holds")
            placed[pos] = col
    missing = [i for i in range(n_cols) if i not in placed]
    if missing:
        raise Refused(f"no block holds column {missing[0]} (of {n_cols})")
    return placed


def _block_parts(block: Any, b: int) -> tuple[Any, Any]:
    """(values, placement) from `_unpickle_block(values, placement, 2)` or pandas 1.3's partial form."""
    if isinstance(block, UnpickleBlockStub) and len(block.args) == 3 and block.args[2] == 2:
        return block.args[0], block.args[1]
    if isinstance(block, Called) and len(block.args) == 2:
        part = block.func
        if (
            isinstance(part, PartialStub)
            and part.args == (NewBlockToken,)
            and type(part.state) is tuple
            and len(part.state) == 4
            and part.state[:2] == (NewBlockToken, ())
            and part.state[2] == {"ndim": 2}
            and part.state[3] is None
        ):
            return block.args[0], block.args[1]
    raise Refused(f"block {b} is {_what(block)}, not a 2-D pandas block")


def _placement(p: Any, n_cols: int, budget: Budget, b: int) -> list[int]:
    if isinstance(p, SliceStub):
        if len(p.args) != 3 or not all(v is None or type(v) is int for v in p.args):
            raise Refused(f"block {b}'s placement is not slice(start, stop, step)")
        start, stop, step = p.args
        start, step = start or 0, 1 if step is None else step
        stop = n_cols if stop is None else stop
        if step < 1 or not 0 <= start <= stop <= n_cols:
            raise Refused(f"block {b} is placed at slice({start}, {stop}, {step}), outside the {n_cols} columns")
        return list(range(start, stop, step))
    arr = _array(p, budget)
    if len(arr.shape) != 1 or not isinstance(arr.flat, np.ndarray) or arr.flat.dtype.kind not in "iu":
        raise Refused(f"block {b}'s placement is not a slice or a 1-D integer array")
    positions = arr.flat.tolist()
    bad = [j for j in positions if not 0 <= j < n_cols]
    if bad:
        raise Refused(f"block {b} is placed at column {bad[0]}, outside the {n_cols} columns")
    return positions


def _block_columns(values: Any, k: int, n_rows: int, budget: Budget, b: int) -> list[Column]:
    if isinstance(values, BackedArrayStub):
        if k != 1:
            raise Refused(f"block {b} holds one string column but is placed at {k}")
        col = _string_array(values, budget)
        if len(col) != n_rows:
            raise Refused(f"block {b} holds {len(col)} rows, the index {n_rows}")
        return [col]
    arr = _array(values, budget)
    if arr.shape != (k, n_rows):
        raise Refused(f"block {b} has shape {arr.shape}, its placement and the index need ({k}, {n_rows})")
    rows = arr.rows()
    if isinstance(arr.flat, np.ndarray):
        return [np.array(r, copy=True) for r in rows]
    return [list(r) for r in rows]


def _column_labels(ax: Any, budget: Budget) -> tuple[str, ...]:
    data = _index_data(ax, "the column labels are", budget)
    labels = data.flat.tolist() if isinstance(data.flat, np.ndarray) else list(data.flat)
    if len(data.shape) != 1 or not all(type(s) is str for s in labels):
        raise Refused("the column labels are not text")
    if len(labels) > MAX_COLUMNS:
        raise Refused(f"{len(labels):,} columns; a dataset has at most {MAX_COLUMNS}")
    if len(set(labels)) != len(labels):
        dup = next(s for s in labels if labels.count(s) > 1)
        raise Refused(f"column {_names([dup])} appears twice")
    return tuple(labels)


def _row_index(ax: Any, budget: Budget) -> range | list[int]:
    if isinstance(ax, NewIndexStub) and len(ax.args) == 2 and ax.args[0] is RangeIndexToken:
        d = ax.args[1]
        if type(d) is not dict or set(d) != {"name", "start", "stop", "step"}:
            raise Refused("the RangeIndex is not {name, start, stop, step}")
        if not all(type(d[k]) is int for k in ("start", "stop", "step")) or d["step"] == 0:
            raise Refused("the RangeIndex's start, stop and step are not integers with a non-zero step")
        rows = range(d["start"], d["stop"], d["step"])
        budget.spend(len(rows))
        return rows
    data = _index_data(ax, "the row index is", budget)
    if len(data.shape) != 1 or not isinstance(data.flat, np.ndarray) or data.flat.dtype.kind not in "iu":
        raise Refused("the row index is not a RangeIndex or an integer index")
    return [int(v) for v in data.flat.tolist()]


def _index_data(ax: Any, what: str, budget: Budget) -> Array:
    if not (isinstance(ax, NewIndexStub) and len(ax.args) == 2 and ax.args[0] is IndexToken):
        raise Refused(f"{what} {_what(ax)}, not a pandas Index")
    d = ax.args[1]
    if type(d) is not dict or set(d) != {"data", "name"} or not (d["name"] is None or type(d["name"]) is str):
        raise Refused(f"{what} an Index that is not {{data, name}}")
    if isinstance(d["data"], BackedArrayStub):
        col = _string_array(d["data"], budget)
        return Array((len(col),), col)
    return _array(d["data"], budget)


def _array(rec: Any, budget: Budget, *, depth: int = 0) -> Array:
    """A numpy array record (`_reconstruct` + BUILD, or `_frombuffer`) decoded by repro: numbers from raw bytes of
    a checked dtype and exact length, objects from the recorded item list of exactly the shape's count."""
    if isinstance(rec, FrombufferStub):
        if len(rec.args) != 4:
            raise Refused("a numpy _frombuffer record without (buffer, dtype, shape, order)")
        raw, dtype, shape, order = rec.args
        if order not in ("C", "F"):
            raise Refused("a numpy buffer array with an order other than C or F")
        return _numeric(raw, _dtype(dtype), _shape(shape, budget), order == "F")
    if not isinstance(rec, ReconstructStub):
        raise Refused(f"{_what(rec)} where a numpy array belongs")
    if len(rec.args) != 3 or rec.args[:2] != (NdarrayToken, (0,)) or _raw_bytes(rec.args[2]) != b"b":
        raise Refused("a numpy array record in a form numpy never writes")
    if not rec.has_state or type(rec.state) is not tuple:
        raise Refused("a numpy array record in a form numpy never writes")
    state = rec.state
    if len(state) == 5 and state[0] == 1:
        state = state[1:]
    if len(state) != 4 or type(state[2]) is not bool:
        raise Refused("a numpy array state that is not (version, shape, dtype, fortran, data)")
    shape_v, dtype, fortran, raw = state
    shape = _shape(shape_v, budget)
    code = _dtype(dtype)
    if code != OBJECT:
        return _numeric(_raw_bytes(raw), code, shape, fortran)
    count = math.prod(shape)
    if type(raw) is not list or len(raw) != count:
        raise Refused(f"an object array of {count:,} slots holds {_count(raw)} items")
    items = [_cell(x, budget, depth) for x in raw]
    if fortran and len(shape) == 2:
        k, n = shape
        items = [items[j * k + i] for i in range(k) for j in range(n)]
    return Array(shape, items)


def _numeric(raw: Any, code: str, shape: tuple[int, ...], fortran: bool) -> Array:
    if code == OBJECT:
        raise Refused("an object array from a raw buffer")
    if type(raw) is not bytes:
        raise Refused("a numeric array without raw bytes")
    want = math.prod(shape) * int(code[1:])
    if len(raw) != want:
        raise Refused(f"a {code} array of shape {shape} needs {want:,} bytes and has {len(raw):,}")
    flat = np.frombuffer(raw, dtype=np.dtype(NUMERIC[code][1]))
    if fortran and len(shape) == 2:
        flat = flat.reshape(shape[::-1]).T.reshape(-1)
    return Array(shape, np.array(flat, copy=True))


def _shape(v: Any, budget: Budget) -> tuple[int, ...]:
    if type(v) is not tuple or not 1 <= len(v) <= 2 or not all(type(d) is int and d >= 0 for d in v):
        raise Refused("an array shape that is not one or two non-negative integers")
    budget.spend(math.prod(v))
    return v


def _raw_bytes(raw: Any) -> Any:
    """Protocol 2's _codecs.encode(text, 'latin1') becomes the bytes it stands for, by repro."""
    if isinstance(raw, EncodeStub):
        if len(raw.args) != 2 or type(raw.args[0]) is not str or raw.args[1] != "latin1":
            raise Refused("a _codecs.encode record that is not (text, 'latin1')")
        try:
            return raw.args[0].encode("latin-1")
        except UnicodeEncodeError:
            raise Refused("a latin1 byte string with characters above 255") from None
    return raw


def _dtype(rec: Any) -> str:
    """The dtype code, when the record is exactly numpy's pickle of an allowlisted dtype."""
    if not isinstance(rec, DtypeStub) or len(rec.args) != 3 or rec.args[1:] != (False, True):
        raise Refused(f"{_what(rec)} where a numpy dtype belongs")
    code = rec.args[0]
    if code != OBJECT and code not in NUMERIC:
        raise Refused(f"a numpy dtype {_names([code])}, which a dataset column never has")
    order = "|" if code == OBJECT else NUMERIC[code][0]
    flags = 63 if code == OBJECT else 0
    if not rec.has_state or rec.state != (3, order, None, None, None, -1, -1, flags):
        raise Refused(f"a numpy dtype {code} in a form numpy does not write for it (byte order, fields, size)")
    return str(code)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _cell(x: Any, budget: Budget, depth: int) -> Any:
    """One item of an object column as a plain Python value (text, number, None, list), built by repro."""
    budget.spend(1)
    t = type(x)
    if t is str or t is int or t is float or t is bool or x is None:
        return x
    if t is list or t is tuple:
        if depth >= MAX_NESTING:
            raise Refused(f"a cell nested deeper than {MAX_NESTING} lists")
        budget.spend(len(x))
        if set(map(type, x)) <= _SCALARS:  # a token-id list: checked at C speed, kept as it is (never mutated)
            return x if t is list else list(x)
        return [_cell(v, budget, depth + 1) for v in x]
    if isinstance(x, ScalarStub):
        return _scalar(x)
    if isinstance(x, (ReconstructStub, FrombufferStub)):
        if depth >= MAX_NESTING:
            raise Refused(f"a cell nested deeper than {MAX_NESTING} lists")
        arr = _array(x, budget, depth=depth + 1)
        if len(arr.shape) != 1:
            raise Refused("a cell holding a 2-D array")
        return arr.flat.tolist() if isinstance(arr.flat, np.ndarray) else arr.flat
    raise Refused(f"a cell holding {_what(x)}")


def _scalar(x: ScalarStub) -> Any:
    if len(x.args) != 2:
        raise Refused("a numpy scalar record that is not (dtype, bytes)")
    code = _dtype(x.args[0])
    if code == OBJECT:
        raise Refused("a numpy object scalar")
    arr = _numeric(_raw_bytes(x.args[1]), code, (1,), False)
    return arr.flat.tolist()[0]  # type: ignore[union-attr]


def _string_array(rec: BackedArrayStub, budget: Budget) -> list[Any]:
    """pandas 3's StringArray (python storage): text and NaN for missing, from its recorded object array."""
    if rec.args[:1] != (StringArrayToken,) or len(rec.args) != 3 or type(rec.args[1]) is not int:
        raise Refused(f"{_what(rec.args[0] if rec.args else None)} as an extension array; only strings are read")
    state = rec.state
    if not rec.has_state or type(state) is not tuple or len(state) != 2:
        raise Refused("a StringArray state that is not (dtype, values)")
    dtype = state[0]
    if not isinstance(dtype, StringDtypeStub) or len(dtype.args) != 2 or dtype.args[0] != "python":
        raise Refused("a string column stored by pyarrow (only pandas' python storage is read)")
    na = dtype.args[1]
    if not (type(na) is float and math.isnan(na)):
        raise Refused("a StringDtype whose missing value is not NaN")
    arr = _array(state[1], budget)
    if len(arr.shape) != 1 or isinstance(arr.flat, np.ndarray):
        raise Refused("a StringArray whose values are not a 1-D object array")
    if not all(type(v) is str or (type(v) is float and math.isnan(v)) for v in arr.flat):
        raise Refused("a StringArray holding something other than text and NaN")
    return list(arr.flat)


def _what(obj: Any) -> str:
    if isinstance(obj, type) and issubclass(obj, Stub):
        return f"the class {obj.label}"
    if isinstance(obj, Stub):
        return f"a {obj.label}"
    return "nothing" if obj is None else f"a {type(obj).__name__}"


def _count(obj: Any) -> str:
    return f"{len(obj):,}" if type(obj) in (list, tuple) else _what(obj)


def _names(names: list[Any]) -> str:
    """Names from the file, shown safely (ascii escapes, at most 40 characters each)."""
    return ", ".join(ascii(str(n)[:40]) for n in names)
