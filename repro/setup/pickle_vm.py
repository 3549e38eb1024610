"""repro's own pickle machine: it reads the opcodes of a pickle and calls nothing.

`pickle.Unpickler` calls whatever a pickle's REDUCE, NEWOBJ and BUILD name, and the classes it is handed (pandas'
BlockManager, numpy's object arrays) run their own C code on the bytes: that is where a pickle naming only
allowlisted globals still corrupts memory (issue #43). This machine implements the opcodes a pandas DataFrame pickle
uses (protocols 2 to 5) in plain Python and nothing else. A global is looked up only in the `stubs` table it is
given (repro's own inert classes, see frame_decode.py); REDUCE, NEWOBJ and BUILD only *record* what the pickle asked
for, on a `Stub` instance. Whatever the bytes, the result is a tree of str, int, float, bool, None, bytes, list,
tuple, dict and `Stub` records, or one `Refused` naming the offset and what was wrong.

Bounds: every length is checked against the bytes that remain before anything is sliced; ints are at most 9 bytes;
marks nest at most MAX_DEPTH deep; memo indices are dictionary keys (no table sized by the pickle).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, ClassVar

MAX_DEPTH = 64
"""MARKs open at once: a DataFrame pickle nests about 10 deep."""
MAX_GLOBAL_TEXT = 256
"""Bytes of one GLOBAL opcode's 'module\\nname\\n' text."""
MAX_INT_BYTES = 9
"""LONG1/LONG4 payload: MLPerf's numbers fit in 64 bits; a LONG4 of a million bytes is an allocation bomb."""


class Refused(Exception):
    """These bytes are not a pickle this machine reads; the message says what and where."""


class Stub:
    """A record of one allowlisted pandas/numpy callable the pickle invoked: never the real thing.

    Subclasses say which opcodes may create them (`via_reduce`, `via_newobj`), whether BUILD may give them a state,
    and whether an instance may itself be called by REDUCE (functools.partial). A class token (numpy.ndarray passed
    as an argument) is a subclass with all of these False: the pickle can name it, never call it."""

    via_reduce: ClassVar[bool] = False
    via_newobj: ClassVar[bool] = False
    takes_state: ClassVar[bool] = False
    callable_instance: ClassVar[bool] = False
    label: ClassVar[str] = "?"
    refusal: ClassVar[str] = ""
    """Non-empty for a name the allowlist knows only to refuse it with a better sentence (pyarrow columns)."""

    __slots__ = ("args", "state", "has_state", "func")

    def __init__(self, args: tuple[Any, ...], func: Stub | None = None) -> None:
        self.args = args
        self.state: Any = None
        self.has_state = False
        self.func = func

    def __repr__(self) -> str:  # for messages and debugging: never the arguments (they may be huge)
        return f"<{self.label} record>"


class Called(Stub):
    """The result of REDUCE on a callable stub instance (`partial(new_block, ndim=2)(values, placement)`)."""

    label = "call"


class _Mark:
    """MARK on the stack (kept apart from data so a pickle cannot forge one)."""


_S1 = struct.Struct("<B")
_H = struct.Struct("<H")
_I = struct.Struct("<I")
_i = struct.Struct("<i")
_Q = struct.Struct("<Q")
_d = struct.Struct(">d")
_HASHABLE = (str, int, float, bool, type(None), bytes)


class Machine:
    """One run over one pickle's bytes (use `run`)."""

    def __init__(self, data: bytes, stubs: Mapping[tuple[str, str], type[Stub]]) -> None:
        self.data = data
        self.stubs = stubs
        self.pos = 0
        self.stack: list[Any] = []
        self.marks: list[list[Any]] = []
        self.memo: dict[int, Any] = {}

    # -- reading ------------------------------------------------------------------------------------------------
    def fail(self, why: str, at: int | None = None) -> Refused:
        return Refused(f"{why} (at byte {self.pos if at is None else at})")

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise self.fail(f"a length of {n:,} bytes runs past the end of the {len(self.data):,}-byte file")
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def length(self, st: struct.Struct) -> int:
        return int(st.unpack(self.take(st.size))[0])

    def text(self, n: int) -> str:
        raw = self.take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("text that is not UTF-8", self.pos - n) from None

    # -- the stack ----------------------------------------------------------------------------------------------
    def pop(self) -> Any:
        if not self.stack:
            raise self.fail("an opcode needs a value and the stack is empty")
        value = self.stack.pop()
        return value

    def pop_mark(self) -> list[Any]:
        if not self.marks:
            raise self.fail("an opcode needs a MARK and none is open")
        items = self.stack
        self.stack = self.marks.pop()
        return items

    def resolve(self, module: str, name: str) -> type[Stub]:
        stub = self.stubs.get((module, name))
        if stub is None:
            raise Refused(f"the pickle asks for {module}.{name}, which a DataFrame pickle never needs")
        if stub.refusal:
            raise Refused(f"the pickle asks for {module}.{name}: {stub.refusal}")
        return stub

    # -- opcodes that build things --------------------------------------------------------------------------------
    def reduce(self) -> None:
        args = self.pop()
        func = self.pop()
        if not isinstance(args, tuple):
            raise self.fail("REDUCE with arguments that are not a tuple")
        if isinstance(func, type) and issubclass(func, Stub) and func.via_reduce:
            self.stack.append(func(args))
        elif isinstance(func, Stub) and func.callable_instance and func.has_state:
            self.stack.append(Called(args, func))
        else:
            raise self.fail(f"REDUCE calls {_what(func)}, which a DataFrame pickle never calls")

    def newobj(self) -> None:
        args = self.pop()
        cls = self.pop()
        if not isinstance(args, tuple):
            raise self.fail("NEWOBJ with arguments that are not a tuple")
        if not (isinstance(cls, type) and issubclass(cls, Stub) and cls.via_newobj):
            raise self.fail(f"NEWOBJ makes {_what(cls)}, which a DataFrame pickle never makes that way")
        self.stack.append(cls(args))

    def build(self) -> None:
        state = self.pop()
        obj = self.stack[-1] if self.stack else None
        if not (isinstance(obj, Stub) and type(obj).takes_state):
            raise self.fail(f"BUILD on {_what(obj)}, which a DataFrame pickle never gives a state")
        if obj.has_state:
            raise self.fail(f"a second BUILD on one {obj.label}")
        obj.state, obj.has_state = state, True

    def set_items(self, items: list[Any]) -> None:
        target = self.stack[-1] if self.stack else None
        if type(target) is not dict:
            raise self.fail(f"SETITEMS on {_what(target)}, not a dict")
        if len(items) % 2:
            raise self.fail("SETITEMS with an odd number of values")
        for i in range(0, len(items), 2):
            key = items[i]
            if type(key) not in _HASHABLE:
                raise self.fail(f"a dict key that is {_what(key)}")
            target[key] = items[i + 1]

    def append(self, items: list[Any]) -> None:
        target = self.stack[-1] if self.stack else None
        if type(target) is not list:
            raise self.fail(f"APPENDS on {_what(target)}, not a list")
        target.extend(items)

    def global_text(self) -> None:
        end = self.data.find(b"\n", self.pos, self.pos + MAX_GLOBAL_TEXT)
        end2 = self.data.find(b"\n", end + 1, end + 1 + MAX_GLOBAL_TEXT) if end >= 0 else -1
        if end < 0 or end2 < 0:
            raise self.fail("a GLOBAL whose module and name do not end in newlines")
        module = self.text(end - self.pos)
        self.pos += 1
        name = self.text(end2 - self.pos)
        self.pos += 1
        self.stack.append(self.resolve(module, name))

    def stack_global(self) -> None:
        name = self.pop()
        module = self.pop()
        if type(module) is not str or type(name) is not str:
            raise self.fail("STACK_GLOBAL with a module or name that is not text")
        self.stack.append(self.resolve(module, name))

    def memo_get(self, idx: int) -> None:
        try:
            self.stack.append(self.memo[idx])
        except KeyError:
            raise self.fail(f"memo entry {idx} read before it was written") from None

    def memo_put(self, idx: int) -> None:
        if not self.stack:
            raise self.fail("a memo write with an empty stack")
        self.memo[idx] = self.stack[-1]

    def mark(self) -> None:
        if len(self.marks) >= MAX_DEPTH:
            raise self.fail(f"marks nested deeper than {MAX_DEPTH}")
        self.marks.append(self.stack)
        self.stack = []

    # -- the loop -------------------------------------------------------------------------------------------------
    def run(self) -> Any:
        data = self.data
        if len(data) < 2 or data[0] != 0x80 or not 2 <= data[1] <= 5:
            raise Refused("not a pickle of protocol 2 to 5 (pandas writes 4 or 5)")
        end = len(data)
        simple = _SIMPLE
        pos = 2
        while pos < end:
            op = data[pos]
            pos += 1
            # BININT1/BININT2/BININT inlined (the stack is only swapped by MARK handlers, below): a token-id list
            # is mostly these, and the 405B set holds ~80 M of them.
            if op == 0x4B and pos < end:
                self.stack.append(data[pos])
                pos += 1
                continue
            if op == 0x4D and pos + 2 <= end:
                self.stack.append(data[pos] | data[pos + 1] << 8)
                pos += 2
                continue
            if op == 0x4A and pos + 4 <= end:
                self.stack.append(int.from_bytes(data[pos : pos + 4], "little", signed=True))
                pos += 4
                continue
            handler = simple.get(op)
            self.pos = pos
            if handler is not None:
                handler(self)
                pos = self.pos
                continue
            if op == 0x2E:  # STOP
                return self.stop()
            raise self.fail(f"opcode {_opname(op)}, which a DataFrame pickle never uses", pos - 1)
        self.pos = pos
        raise self.fail("the pickle ends without STOP (truncated)")

    def stop(self) -> Any:
        if self.marks or len(self.stack) != 1:
            raise self.fail("STOP with an open MARK or more than one value on the stack")
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos:,} bytes after the pickle's STOP")
        return self.stack[0]


def run(data: bytes, stubs: Mapping[tuple[str, str], type[Stub]]) -> Any:
    """The record tree a pickle's bytes describe, or Refused; no global outside `stubs` is ever named back."""
    try:
        return Machine(bytes(data), stubs).run()
    except RecursionError:  # cannot happen (no recursion here); belt and braces for a refusal, never a crash
        raise Refused("nested too deeply") from None


def _what(obj: Any) -> str:
    if isinstance(obj, type) and issubclass(obj, Stub):
        return obj.label
    if isinstance(obj, Stub):
        return f"a {obj.label} record"
    return "nothing" if obj is None else f"a {type(obj).__name__}"


def _opname(op: int) -> str:
    import pickletools

    for info in pickletools.opcodes:
        if ord(info.code) == op:
            return info.name
    return f"0x{op:02x}"


def _tuple_n(n: int) -> Any:
    def handler(m: Machine) -> None:
        if len(m.stack) < n:
            raise m.fail(f"TUPLE{n} with fewer than {n} values")
        items = m.stack[-n:]
        del m.stack[-n:]
        m.stack.append(tuple(items))

    return handler


def _long(m: Machine, st: struct.Struct) -> None:
    n = m.length(st)
    if n > MAX_INT_BYTES:
        raise m.fail(f"an integer of {n:,} bytes")
    m.stack.append(int.from_bytes(m.take(n), "little", signed=True))


def _frame(m: Machine) -> None:
    n = m.length(_Q)
    if n > len(m.data) - m.pos:
        raise m.fail(f"a FRAME of {n:,} bytes runs past the end of the file")


def _pop_any(m: Machine) -> None:
    if m.stack:
        m.stack.pop()
    else:
        m.pop_mark()


_SIMPLE: dict[int, Any] = {
    0x4B: lambda m: m.stack.append(m.take(1)[0]),  # BININT1
    0x4D: lambda m: m.stack.append(m.length(_H)),  # BININT2
    0x4A: lambda m: m.stack.append(_i.unpack(m.take(4))[0]),  # BININT
    0x8A: lambda m: _long(m, _S1),  # LONG1
    0x8B: lambda m: _long(m, _I),  # LONG4
    0x47: lambda m: m.stack.append(_d.unpack(m.take(8))[0]),  # BINFLOAT
    0x4E: lambda m: m.stack.append(None),  # NONE
    0x88: lambda m: m.stack.append(True),  # NEWTRUE
    0x89: lambda m: m.stack.append(False),  # NEWFALSE
    0x8C: lambda m: m.stack.append(m.text(m.length(_S1))),  # SHORT_BINUNICODE
    0x58: lambda m: m.stack.append(m.text(m.length(_I))),  # BINUNICODE
    0x8D: lambda m: m.stack.append(m.text(m.length(_Q))),  # BINUNICODE8
    0x43: lambda m: m.stack.append(m.take(m.length(_S1))),  # SHORT_BINBYTES
    0x42: lambda m: m.stack.append(m.take(m.length(_I))),  # BINBYTES
    0x8E: lambda m: m.stack.append(m.take(m.length(_Q))),  # BINBYTES8
    0x96: lambda m: m.stack.append(m.take(m.length(_Q))),  # BYTEARRAY8 (kept as immutable bytes)
    0x29: lambda m: m.stack.append(()),  # EMPTY_TUPLE
    0x85: _tuple_n(1),  # TUPLE1
    0x86: _tuple_n(2),  # TUPLE2
    0x87: _tuple_n(3),  # TUPLE3
    0x74: lambda m: _push_marked(m, tuple),  # TUPLE
    0x5D: lambda m: m.stack.append([]),  # EMPTY_LIST
    0x6C: lambda m: _push_marked(m, list),  # LIST
    0x61: lambda m: m.append([m.pop()]),  # APPEND
    0x65: lambda m: m.append(m.pop_mark()),  # APPENDS
    0x7D: lambda m: m.stack.append({}),  # EMPTY_DICT
    0x64: lambda m: _dict(m),  # DICT
    0x73: lambda m: m.set_items([*reversed([m.pop(), m.pop()])]),  # SETITEM
    0x75: lambda m: m.set_items(m.pop_mark()),  # SETITEMS
    0x28: Machine.mark,  # MARK
    0x30: _pop_any,  # POP
    0x31: lambda m: m.pop_mark(),  # POP_MARK
    0x32: lambda m: m.stack.append(m.stack[-1]) if m.stack else m.pop(),  # DUP
    0x68: lambda m: m.memo_get(m.take(1)[0]),  # BINGET
    0x6A: lambda m: m.memo_get(m.length(_I)),  # LONG_BINGET
    0x71: lambda m: m.memo_put(m.take(1)[0]),  # BINPUT
    0x72: lambda m: m.memo_put(m.length(_I)),  # LONG_BINPUT
    0x94: lambda m: m.memo_put(len(m.memo)),  # MEMOIZE
    0x63: Machine.global_text,  # GLOBAL
    0x93: Machine.stack_global,  # STACK_GLOBAL
    0x52: Machine.reduce,  # REDUCE
    0x81: Machine.newobj,  # NEWOBJ
    0x62: Machine.build,  # BUILD
    0x95: _frame,  # FRAME
    0x80: lambda m: _second_proto(m),  # PROTO (only as the first opcode)
}


def _push_marked(m: Machine, kind: type) -> None:
    items = m.pop_mark()  # first: it puts back the stack below the mark
    m.stack.append(kind(items))


def _dict(m: Machine) -> None:
    items = m.pop_mark()
    m.stack.append({})
    m.set_items(items)


def _second_proto(m: Machine) -> None:
    raise m.fail("a second PROTO")
