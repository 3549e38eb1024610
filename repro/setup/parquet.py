"""A parquet file of one string column, written without pyarrow: the calibration set the quantizer reads.

`repro setup` writes `<calibration_dir>/data.parquet` with a `text` column; inside the recipe image it is read by
`pd.read_parquet` (repro/engine/container_entry.py hf-quantize) and by TensorRT-LLM's quantize.py through HF
`datasets`, both with pyarrow. Writing it needs none: one row group, one uncompressed PLAIN data page per ~1 MB,
and the footer in Thrift's compact protocol, as the Apache Parquet format (parquet.thrift) defines them. The light
install (README command 1, which rehearses) has no pyarrow; tests/test_parquet.py reads the files back with
pyarrow and pandas and compares them with what pandas writes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

MAGIC = b"PAR1"
PAGE_BYTES = 1 << 20
# parquet.thrift enums
BYTE_ARRAY, REQUIRED, UTF8, PLAIN, RLE, UNCOMPRESSED, DATA_PAGE = 6, 0, 0, 0, 3, 0, 0
# Thrift compact protocol field types
_I32, _I64, _BINARY, _LIST, _STRUCT = 5, 6, 8, 9, 12


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


class _Struct:
    """One Thrift struct in the compact protocol: fields in increasing id order, then STOP."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.last = 0

    def _header(self, fid: int, ftype: int) -> None:
        delta = fid - self.last
        if 0 < delta <= 15:
            self.buf.append((delta << 4) | ftype)
        else:
            self.buf.append(ftype)
            self.buf += _zigzag(fid)
        self.last = fid

    def i32(self, fid: int, value: int) -> _Struct:
        self._header(fid, _I32)
        self.buf += _zigzag(value)
        return self

    def i64(self, fid: int, value: int) -> _Struct:
        self._header(fid, _I64)
        self.buf += _zigzag(value)
        return self

    def string(self, fid: int, value: str) -> _Struct:
        data = value.encode("utf-8")
        self._header(fid, _BINARY)
        self.buf += _varint(len(data)) + data
        return self

    def struct(self, fid: int, value: _Struct) -> _Struct:
        self._header(fid, _STRUCT)
        self.buf += value.end()
        return self

    def _list(self, fid: int, etype: int, items: list[bytes]) -> _Struct:
        self._header(fid, _LIST)
        n = len(items)
        self.buf += bytes([(n << 4) | etype]) if n < 15 else bytes([0xF0 | etype]) + _varint(n)
        for item in items:
            self.buf += item
        return self

    def structs(self, fid: int, items: list[_Struct]) -> _Struct:
        return self._list(fid, _STRUCT, [s.end() for s in items])

    def i32s(self, fid: int, items: list[int]) -> _Struct:
        return self._list(fid, _I32, [_zigzag(v) for v in items])

    def strings(self, fid: int, items: list[str]) -> _Struct:
        return self._list(fid, _BINARY, [_varint(len(b)) + b for b in (s.encode("utf-8") for s in items)])

    def end(self) -> bytes:
        return bytes(self.buf) + b"\x00"


def _pages(values: list[bytes]) -> list[tuple[int, bytes]]:
    """(value count, PLAIN body) per page: each value is its 4-byte little-endian length, then its bytes."""
    pages, body, count = [], bytearray(), 0
    for v in values:
        body += struct.pack("<I", len(v)) + v
        count += 1
        if len(body) >= PAGE_BYTES:
            pages.append((count, bytes(body)))
            body, count = bytearray(), 0
    if count or not pages:
        pages.append((count, bytes(body)))
    return pages


def text_parquet(texts: Sequence[str], column: str = "text") -> bytes:
    """The bytes of a parquet file whose one required UTF-8 column holds `texts`, in order."""
    values = [str(t).encode("utf-8") for t in texts]
    chunk = bytearray()
    for count, body in _pages(values):
        header = (
            _Struct()
            .i32(1, DATA_PAGE)
            .i32(2, len(body))
            .i32(3, len(body))
            .struct(5, _Struct().i32(1, count).i32(2, PLAIN).i32(3, RLE).i32(4, RLE))
        )
        chunk += header.end() + body
    offset = len(MAGIC)
    meta = (
        _Struct()
        .i32(1, BYTE_ARRAY)
        .i32s(2, [PLAIN, RLE])
        .strings(3, [column])
        .i32(4, UNCOMPRESSED)
        .i64(5, len(values))
        .i64(6, len(chunk))
        .i64(7, len(chunk))
        .i64(9, offset)
    )
    root = _Struct().string(4, "schema").i32(5, 1)
    col = _Struct().i32(1, BYTE_ARRAY).i32(3, REQUIRED).string(4, column).i32(6, UTF8)
    col.struct(10, _Struct().struct(1, _Struct()))  # LogicalType STRING
    group = (
        _Struct()
        .structs(1, [_Struct().i64(2, offset).struct(3, meta)])
        .i64(2, len(chunk))
        .i64(3, len(values))
        .i64(5, offset)
        .i64(6, len(chunk))
    )
    footer = (
        _Struct()
        .i32(1, 1)
        .structs(2, [root, col])
        .i64(3, len(values))
        .structs(4, [group])
        .string(6, "repro (repro/setup/parquet.py)")
        .end()
    )
    return MAGIC + bytes(chunk) + footer + struct.pack("<I", len(footer)) + MAGIC
