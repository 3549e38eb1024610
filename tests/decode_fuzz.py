"""The 1,000 fuzzed pickles of issue #43 item 5: mutations of real pandas-made pickles of MLPerf-shaped frames.

Bases: every real pickle in tests/fixtures/pickles/ (pandas 1.3.5 ... 3.1.1, protocols 2/4/5; pyarrow ones left
out) and repro's own writer on an MLPerf-shaped frame. Each case is one base with one kind of damage, drawn from a
seeded generator (the same 1,000 every run): truncations, byte flips, opcode swaps, huge lengths, wrong dtypes
(byte order, void, unicode, object from a buffer), changed shapes and placements (overlapping, past the end,
negative), memo references moved.
"""

from __future__ import annotations

import json
import pickletools
import random
import struct
import subprocess
import sys
from pathlib import Path

PICKLES = Path(__file__).parent / "fixtures" / "pickles"
KINDS = ("truncate", "flip", "opcode", "length", "dtype", "number", "memo", "splice")
LENGTH_OPS = {
    "SHORT_BINUNICODE": 1,
    "SHORT_BINBYTES": 1,
    "BINUNICODE": 4,
    "BINBYTES": 4,
    "BYTEARRAY8": 8,
    "BINUNICODE8": 8,
    "BINBYTES8": 8,
    "FRAME": 8,
    "LONG1": 1,
}
DTYPES = [b"i8", b"V8", b"U8", b"M8", b"O8", b"f8", b"i4", b"b1", b"S8", b"c8"]


def bases() -> list[bytes]:
    from repro.setup.frame_encode import encode_frame

    out = [p.read_bytes() for p in sorted(PICKLES.glob("pandas-*.pkl")) if "pyarrow" not in p.name]
    rows = 12
    out.append(
        encode_frame(
            {
                "input": [f"<s>[INST] question {i} [/INST]" for i in range(rows)],
                "tok_input": [list(range(1, 4 + i)) + [29871] for i in range(rows)],
                "tok_input_length": [4 + i for i in range(rows)],
                "output": [f"answer {i}" for i in range(rows)],
                "tok_output_length": [3] * rows,
            }
        )
    )
    return out


def _ops(data: bytes) -> list[tuple[str, int]]:
    try:
        return [(op.name, pos) for op, _, pos in pickletools.genops(data)]
    except Exception:  # noqa: BLE001 - a base is a real pickle; this is only defensive
        return []


def mutate(data: bytes, kind: str, rnd: random.Random) -> bytes:
    b = bytearray(data)
    ops = _ops(data)
    if kind == "truncate":
        return bytes(b[: rnd.randrange(1, len(b))])
    if kind == "flip":
        for _ in range(rnd.randint(1, 8)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        return bytes(b)
    if kind == "opcode":  # one opcode byte replaced by another one this pickle uses (or, 1 in 4, by any opcode)
        used = sorted({data[p] for _, p in ops})
        every = sorted(ord(o.code) for o in pickletools.opcodes)
        for _ in range(rnd.randint(1, 3)):
            _, pos = rnd.choice(ops)
            b[pos] = rnd.choice(every if rnd.random() < 0.25 else used)
        return bytes(b)
    if kind == "length":
        sized = [(n, p) for n, p in ops if n in LENGTH_OPS]
        name, pos = rnd.choice(sized)
        width = LENGTH_OPS[name]
        old = int.from_bytes(b[pos + 1 : pos + 1 + width], "little")
        new = rnd.choice([0, old + 1, old - 1, old * 2 + 1, (1 << (8 * width)) - 1, (1 << (8 * width - 1)) + 5])
        b[pos + 1 : pos + 1 + width] = (new % (1 << (8 * width))).to_bytes(width, "little")
        return bytes(b)
    if kind == "dtype":
        found = [i for i in range(len(b) - 3) if b[i] == 0x8C and b[i + 1] == 2 and bytes(b[i + 2 : i + 4]) in DTYPES]
        orders = [i for i in range(len(b) - 2) if b[i] == 0x8C and b[i + 1] == 1 and b[i + 2] in b"<|"]
        if found and (not orders or rnd.random() < 0.7):
            i = rnd.choice(found)
            b[i + 2 : i + 4] = rnd.choice(DTYPES)
        elif orders:
            b[rnd.choice(orders) + 2] = ord(rnd.choice("<>|=!"))
        return bytes(b)
    if kind == "number":  # shapes, slice bounds, RangeIndex stop, placement arrays: small ints
        ints = [p for n, p in ops if n in ("BININT1", "BININT2", "BININT")]
        for _ in range(rnd.randint(1, 3)):
            pos = rnd.choice(ints)
            op = b[pos]
            width = {0x4B: 1, 0x4D: 2, 0x4A: 4}[op]
            v = rnd.choice([0, 1, 2, 3, 7, 255, 1000, 65535, 10**9, 2**31 - 1, -1, -(2**31)])
            fmt = {1: "<B", 2: "<H", 4: "<i"}[width]
            lo, hi = {1: (0, 255), 2: (0, 65535), 4: (-(2**31), 2**31 - 1)}[width]
            b[pos + 1 : pos + 1 + width] = struct.pack(fmt, min(max(v, lo), hi))
        return bytes(b)
    if kind == "memo":
        gets = [p for n, p in ops if n == "BINGET"]
        if gets:
            pos = rnd.choice(gets)
            b[pos + 1] = rnd.randrange(256)
        return bytes(b)
    # splice: a stretch of one part of the pickle copied over another (repeated blocks, placements, arrays)
    i, j = sorted(rnd.sample(range(len(b)), 2))
    k = rnd.randrange(len(b))
    return bytes(b[:k] + b[i:j] + b[k:])


def cases(n: int = 1000, seed: int = 43) -> list[tuple[str, bytes]]:
    """n distinct cases, each different from every base, the kinds in turn."""
    rnd = random.Random(seed)
    base = bases()
    seen = set(base)
    out = []
    while len(out) < n:
        kind = KINDS[len(out) % len(KINDS)]
        data = mutate(rnd.choice(base), kind, rnd)
        if data not in seen:
            seen.add(data)
            out.append((kind, data))
    return out


class ForkServer:
    """tests/decode_forkserver.py, started fresh: `decode(bytes)` is how one forked child's decode ended."""

    def __init__(self, *flags: str) -> None:
        script = Path(__file__).parent / "decode_forkserver.py"
        root = Path(__file__).resolve().parents[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", str(script), str(root), *flags], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def decode(self, data: bytes) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the fork server died"
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
