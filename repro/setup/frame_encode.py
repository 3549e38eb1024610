"""repro's own writer of DataFrame pickles: the bytes pandas writes for a frame of plain columns, without pandas.

`repro setup --dataset-source rebuild` and the rehearsal's local hub write MLPerf's dataset pickles; doing it with
pandas would make the light install (README command 1: no pandas) unable to rehearse, and pandas 3 would write
pyarrow-backed strings. This writes protocol 4 with the globals and opcodes pandas 2.x + numpy 1.x write
(`pandas.core.frame.DataFrame`, `BlockManager(blocks, axes)`, `_unpickle_block(values, slice, 2)`,
`numpy.core.multiarray._reconstruct` + BUILD, `_new_Index(Index | RangeIndex, {...})`): pandas 1.5 to 3.x read it as
the same frame, and so does repro's decoder (tests/test_frame_codec.py checks both).

Each column is one block. A column of ints becomes int64, of floats float64, of bools bool; anything else (text,
token-id lists, None, a mix) an object column whose items are written as plain pickle values.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

INT64 = (-(1 << 63), (1 << 63) - 1)


class _Writer:
    """Opcodes into a buffer; globals and dtypes written once and then fetched from the memo."""

    def __init__(self) -> None:
        self.out = bytearray(b"\x80\x04")
        self.memo: dict[Any, int] = {}

    def op(self, code: bytes) -> None:
        self.out += code

    def remember(self, key: Any) -> bool:
        """Fetch `key` from the memo when it was written before (True), else note that it is written now."""
        if key in self.memo:
            idx = self.memo[key]
            self.out += b"h" + bytes([idx]) if idx < 256 else b"j" + struct.pack("<I", idx)
            return True
        return False

    def memoize(self, key: Any) -> None:
        self.memo[key] = len(self.memo)
        self.out += b"\x94"

    def glob(self, module: str, name: str) -> None:
        if self.remember(("global", module, name)):
            return
        self.text(module)
        self.text(name)
        self.out += b"\x93"
        self.memoize(("global", module, name))

    def text(self, s: str) -> None:
        raw = s.encode("utf-8")
        if len(raw) < 256:
            self.out += b"\x8c" + bytes([len(raw)]) + raw
        elif len(raw) < 1 << 32:
            self.out += b"X" + struct.pack("<I", len(raw)) + raw
        else:
            self.out += b"\x8d" + struct.pack("<Q", len(raw)) + raw

    def raw(self, b: bytes) -> None:
        if len(b) < 256:
            self.out += b"C" + bytes([len(b)]) + b
        elif len(b) < 1 << 32:
            self.out += b"B" + struct.pack("<I", len(b)) + b
        else:
            self.out += b"\x8e" + struct.pack("<Q", len(b)) + b

    def integer(self, v: int) -> None:
        if 0 <= v < 256:
            self.out += b"K" + bytes([v])
        elif 0 <= v < 65536:
            self.out += b"M" + struct.pack("<H", v)
        elif -(1 << 31) <= v < 1 << 31:
            self.out += b"J" + struct.pack("<i", v)
        else:
            n = (v.bit_length() + 8) // 8
            self.out += b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)

    def value(self, v: Any) -> None:
        """A plain item of an object column, as the pickler writes it (lists in APPENDS batches of 1,000)."""
        if isinstance(v, np.generic):
            v = v.item()
        if v is None:
            self.op(b"N")
        elif v is True or v is False:
            self.op(b"\x88" if v else b"\x89")
        elif isinstance(v, int):
            self.integer(int(v))
        elif isinstance(v, float):
            self.out += b"G" + struct.pack(">d", v)
        elif isinstance(v, str):
            self.text(v)
        elif isinstance(v, (list, tuple, np.ndarray)):
            self.items(list(v.tolist() if isinstance(v, np.ndarray) else v))
        else:
            raise TypeError(f"cannot write a {type(v).__name__} into a dataset pickle")

    def items(self, values: Sequence[Any]) -> None:
        self.op(b"]")
        for i in range(0, len(values), 1000):
            self.op(b"(")
            for v in values[i : i + 1000]:
                self.value(v)
            self.op(b"e")

    def dtype(self, code: str) -> None:
        if self.remember(("dtype", code)):
            return
        self.glob("numpy", "dtype")
        self.text(code)
        self.op(b"\x89\x88\x87R(")  # (code, False, True) REDUCE, then the state tuple
        self.integer(3)
        self.text("|" if code in ("O8", "b1", "i1", "u1") else "<")
        self.op(b"NNN")
        self.integer(-1)
        self.integer(-1)
        self.integer(63 if code == "O8" else 0)
        self.op(b"tb")
        self.memoize(("dtype", code))

    def array(self, shape: tuple[int, ...], code: str, payload: bytes | list[Any]) -> None:
        """numpy's protocol-4 array: _reconstruct(ndarray, (0,), b'b') then BUILD (1, shape, dtype, False, data)."""
        self.glob("numpy.core.multiarray", "_reconstruct")
        self.glob("numpy", "ndarray")
        self.op(b"K\x00\x85C\x01b\x87R(")
        self.integer(1)
        for d in shape:
            self.integer(d)
        self.op(b"\x85" if len(shape) == 1 else b"\x86")
        self.dtype(code)
        self.op(b"\x89")
        if isinstance(payload, list):
            self.items(payload)
        else:
            self.raw(payload)
        self.op(b"tb")

    def index(self, cls: str, d: dict[str, Any]) -> None:
        """_new_Index(cls, d): d's values are written by `put`."""
        self.glob("pandas.core.indexes.base", "_new_Index")
        module = "pandas.core.indexes.range" if cls == "RangeIndex" else "pandas.core.indexes.base"
        self.glob(module, cls)
        self.op(b"}(")
        for k, v in d.items():
            self.text(k)
            v(self) if callable(v) else self.value(v)
        self.op(b"u\x86R")


def _numeric(values: Any) -> tuple[str, bytes] | None:
    """(dtype code, little-endian bytes) when the column is numbers pandas would store as int64/float64/bool."""
    if isinstance(values, np.ndarray):
        code = {"i": "i8", "f": "f8", "b": "b1"}.get(values.dtype.kind)
        if code is None or values.ndim != 1:
            return None
        target = {"i8": "<i8", "f8": "<f8", "b1": "|b1"}[code]
        return code, np.ascontiguousarray(values, dtype=target).tobytes()
    vals = list(values)
    if vals and all(type(v) is bool for v in vals):
        return "b1", np.asarray(vals, dtype="|b1").tobytes()
    if vals and all(type(v) is int for v in vals) and all(INT64[0] <= v <= INT64[1] for v in vals):
        return "i8", np.asarray(vals, dtype="<i8").tobytes()
    if vals and all(type(v) is float for v in vals):
        return "f8", np.asarray(vals, dtype="<f8").tobytes()
    return None


def encode_frame(columns: Mapping[str, Sequence[Any] | np.ndarray]) -> bytes:
    """A DataFrame pickle (RangeIndex rows, one block per column) of these columns, in this order."""
    names = [str(c) for c in columns]
    if len(set(names)) != len(names):
        raise ValueError("column names must be unique")
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns differ in length: {sorted(lengths)}")
    n = lengths.pop() if lengths else 0
    w = _Writer()
    w.glob("pandas.core.frame", "DataFrame")
    w.op(b")\x81}(")
    w.text("_mgr")
    w.glob("pandas.core.internals.managers", "BlockManager")
    w.op(b"(")
    for i, values in enumerate(columns.values()):
        w.glob("pandas._libs.internals", "_unpickle_block")
        num = _numeric(values)
        if num is None:
            w.array((1, n), "O8", list(values.tolist() if isinstance(values, np.ndarray) else values))
        else:
            w.array((1, n), num[0], num[1])
        w.glob("builtins", "slice")
        w.integer(i)
        w.integer(i + 1)
        w.integer(1)
        w.op(b"\x87R")
        w.integer(2)
        w.op(b"\x87R")
    w.op(b"t](")
    w.index("Index", {"data": lambda wr: wr.array((len(names),), "O8", list(names)), "name": None})
    w.index("RangeIndex", {"name": None, "start": 0, "stop": n, "step": 1})
    w.op(b"e\x86R")
    w.text("_typ")
    w.text("dataframe")
    w.text("_metadata")
    w.op(b"]")
    w.text("attrs")
    w.op(b"}")
    w.text("_flags")
    w.op(b"}")
    w.text("allows_duplicate_labels")
    w.op(b"\x88sub.")
    return bytes(w.out)
