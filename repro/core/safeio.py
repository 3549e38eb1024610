"""Reading files a user or a result folder supplies: regular files only, bounded, and JSON that cannot recurse.

`/dev/zero` would be read for ever, a FIFO would block the open, a 200 MB log would be held whole when only
its head is parsed, and JSON nested 100,000 levels deep overflows Python's stack. Each is one clear error
(or a bounded read) here instead of a hang or a traceback further up.

Every reader opens the path once, non-blocking, and checks *that handle* (fstat): checking the path first and
opening it again leaves a window in which a symlink can be pointed at a FIFO or a blocking device.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import yaml

CHUNK = 1 << 20


class NotARegularFile(OSError):
    """The path is a FIFO, a device, a socket or a folder: reading it could hang or never end."""


def open_regular(path: Path | str) -> BinaryIO:
    """A regular file opened for binary reading; the open never blocks and the check is made on the open handle.

    Checking the path first and opening it after is a race: a symlink swapped to a FIFO in between hangs the open.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, device or socket)"
            raise NotARegularFile(0, kind, str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


_CHUNK = 1 << 20


def read_head(path: Path | str, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of a regular file and whether there was more; never opens a FIFO or device blocking."""
    chunks: list[bytes] = []
    got = 0
    with open_regular(path) as fh:
        while got <= limit:  # in chunks: read(limit + 1) allocates the whole limit up front, even for a tiny file
            chunk = fh.read(min(_CHUNK, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    data = b"".join(chunks)
    return data[:limit], len(data) > limit


def read_text_bounded(path: Path | str, limit: int, *, what: str = "file") -> str:
    """The whole file as UTF-8 when it fits in `limit` bytes; a ValueError naming the limit when it does not."""
    data, more = read_head(path, limit)
    if more:
        raise ValueError(f"larger than {limit >> 20 or 1} MB, too large for a {what}")
    return data.decode("utf-8")


def iter_lines(fh: BinaryIO, *, max_bytes: int, max_line: int) -> Iterator[tuple[bytes, bool]]:
    """(line without its end, was it cut) for each line of the first `max_bytes`: a line longer than `max_line`
    yields its first `max_line` bytes and the rest is skipped unread into memory, so a 1 GB line costs 1 MB."""
    left = max_bytes
    while left > 0:
        raw = fh.readline(min(max_line, left) + 1)
        if not raw:
            return
        left -= len(raw)
        if raw.endswith(b"\n") or len(raw) <= max_line:
            yield raw.rstrip(b"\r\n"), False
            continue
        while left > 0 and (rest := fh.readline(min(CHUNK, left))):
            left -= len(rest)
            if rest.endswith(b"\n"):
                break
        yield raw[:max_line], True


def sha256_regular(path: Path | str) -> str:
    """sha256 of a regular file, streamed in 1 MB blocks (a 6 GB file costs 1 MB of memory, not 6 GB)."""
    h = hashlib.sha256()
    with open_regular(path) as fh:
        while block := fh.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def loads_json(text: str | bytes) -> Any:
    """json.loads whose too-deep nesting is a ValueError like any other malformed JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def iter_json_list(fh: BinaryIO, *, max_items: int, max_item_bytes: int, max_bytes: int) -> Iterator[Any]:
    """The entries of a top-level JSON list, decoded one at a time from a stream.

    A 200 MB `[{},{},...]` becomes 66 million dicts (12 GB) when loaded whole; here each entry is decoded alone
    and the caps (entries, bytes per entry, bytes in all) bound what is ever expanded. Any breach or malformed
    JSON is a ValueError saying which."""
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
    buf, pos, read, eof = "", 0, 0, False

    def fill() -> None:
        nonlocal buf, pos, read, eof
        block = fh.read(CHUNK)
        read += len(block)
        if read > max_bytes:
            raise ValueError(f"larger than {max_bytes >> 20 or 1} MB")
        try:
            text = utf8.decode(block, final=not block)
        except UnicodeDecodeError:
            raise ValueError("not UTF-8") from None
        buf, pos, eof = buf[pos:] + text, 0, not block

    def next_char() -> str:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            if pos < len(buf):
                return buf[pos]
            if eof:
                return ""
            fill()

    if next_char() != "[":
        raise ValueError("not a JSON list")
    pos += 1
    count = 0
    while True:
        c = next_char()
        if c == "]" and count == 0:
            pos += 1
            break
        while True:
            try:
                value, end = decoder.raw_decode(buf, pos)
            except RecursionError:
                raise ValueError("JSON nested too deeply") from None
            except json.JSONDecodeError as exc:
                if eof:
                    raise ValueError(f"malformed JSON in entry {count}: {exc.msg}") from None
                end = -1
            if end != -1 and (end < len(buf) or eof):
                break
            if len(buf) - pos > max_item_bytes:
                raise ValueError(f"entry {count} is larger than {max_item_bytes >> 10} KB")
            fill()
        pos = end
        count += 1
        if count > max_items:
            raise ValueError(f"more than {max_items:,} entries")
        yield value
        c = next_char()
        if c == "]":
            pos += 1
            break
        if c != ",":
            raise ValueError(f"malformed JSON after entry {count - 1}")
        pos += 1
    if next_char() != "":
        raise ValueError("text after the end of the JSON list")


def load_npy_bounded(path: Path | str, max_bytes: int) -> Any:
    """A .npy array from a regular file whose header must agree with the file's size: a 200-byte file whose header
    asks for a 7 TiB shape is refused before anything is allocated, and so is any array over `max_bytes`. No
    pickles (object arrays are refused). ValueError says which; NotARegularFile for FIFOs and devices."""
    import numpy as np
    from numpy.lib import format as npy

    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        try:
            version = npy.read_magic(fh)
            read_header = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}.get(version)
            if read_header is None:
                raise ValueError(f"format version {version}")
            shape, fortran, dtype = read_header(fh, max_header_size=10_000)
        except (ValueError, EOFError, SyntaxError) as exc:
            raise ValueError(f"not a .npy array ({exc})") from None
        if dtype.hasobject:
            raise ValueError("an object array (a pickle), which is never loaded")
        count = 1
        for n in shape:
            count *= int(n)
        want = count * dtype.itemsize
        if want > max_bytes:
            raise ValueError(f"its header asks for {want:,} bytes, over the {max_bytes:,} a dataset file may hold")
        if size - fh.tell() != want:
            raise ValueError(f"its header asks for {want:,} bytes of data but the file holds {size - fh.tell():,}")
        data = fh.read(want)
    if len(data) != want:
        raise ValueError("the file changed while it was read")
    arr = np.frombuffer(data, dtype=dtype, count=count)
    return arr.reshape(shape, order="F" if fortran else "C")


def read_bytes_bounded(path: Path | str, limit: int, *, what: str = "file") -> bytes:
    """A regular file's bytes when it fits in `limit`; a ValueError naming the limit when it does not."""
    data, more = read_head(path, limit)
    if more:
        raise ValueError(f"larger than {limit >> 20 or 1} MB, too large for a {what}")
    return data


# ---------------------------------------------------------------- YAML (recipes, benchmarks)

MAX_FLOW_DEPTH = 64


def _not_too_deep(text: str) -> str:
    """Refuse `[[[[...` before PyYAML recurses into it (slow, then RecursionError); quotes are not parsed, so this
    over-counts only brackets inside strings, which no recipe nests 64 deep."""
    depth = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            if depth > MAX_FLOW_DEPTH:
                raise ValueError(f"nested more than {MAX_FLOW_DEPTH} levels deep")
        elif ch in "]}" and depth:
            depth -= 1
    return text


# libyaml's safe loader when PyYAML was built with it (7x faster; the recipes load on every `repro verify`).
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _no_aliases(text: str) -> str:
    """Refuse `*alias` before anything is built: nine nested aliases of nine items ("billion laughs") stay a small
    file but expand to 10^9 values once validated, hashed or printed. No recipe needs one; each field is written out.
    """
    for event in yaml.parse(text, Loader=_SAFE_LOADER):
        if isinstance(event, yaml.AliasEvent):
            mark = event.start_mark
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise ValueError(f"YAML alias *{event.anchor}{where}: aliases are not allowed here")
    return text


class DuplicateKey(ValueError):
    """A mapping states one key twice: PyYAML keeps the last silently (`band_pct: 5` then `band_pct: 60` is 60)."""


class _UniqueKeyLoader(_SAFE_LOADER):  # the C parser (when built with libyaml), the Python constructor
    """The safe loader, refusing a mapping that states a key twice, at any depth, naming the key and both lines."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                continue  # the base constructor says "found unhashable key" with its line
            line = key_node.start_mark.line + 1 if key_node.start_mark is not None else 0
            if key in seen:
                shown = key if isinstance(key, str) and key.isprintable() and len(key) <= 60 else ascii(key)[:60]
                raise DuplicateKey(
                    f"key '{shown}' is stated twice in one mapping (lines {seen[key]} and {line}); "
                    "YAML would keep the last silently"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _no_bom(text: str) -> str:
    """A UTF-8 byte order mark some editors write is not part of the document."""
    return text[1:] if text.startswith("\ufeff") else text


def safe_yaml(text: str) -> Any:
    """YAML that cannot blow up or say two things: bounded nesting, no aliases, no key stated twice, the safe
    loader."""
    return yaml.load(_no_aliases(_not_too_deep(_no_bom(text))), Loader=_UniqueKeyLoader)


def yaml_problem(exc: BaseException) -> str:
    """Why a YAML file could not be read, as the clause after its name: not UTF-8 (which byte, where), a key stated
    twice, or the parser's problem with its line and column (PyYAML's first line alone often names neither)."""
    if isinstance(exc, UnicodeDecodeError):
        byte = exc.object[exc.start : exc.start + 1].hex() if isinstance(exc.object, bytes | bytearray) else "?"
        return f"not UTF-8 text (byte 0x{byte} at offset {exc.start:,}); save it as UTF-8"
    if isinstance(exc, RecursionError):
        return "not valid YAML (nested too deeply)"
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"not valid YAML ({exc.problem}{where})"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if text.startswith("larger than "):  # read_text_bounded's size limit: not a YAML problem
        return text
    return f"not valid YAML ({text})"


def yaml_kind(value: Any) -> str:
    """What a YAML document is when it is not the mapping a loader wants: 'a list', 'an empty file', 'the text ...'."""
    if value is None:
        return "an empty document"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, str):
        return "a line of text" if len(value) > 40 else f"the text {value!r}"
    return f"a {type(value).__name__}"
