"""Reading files a user or a result folder supplies: regular files only, bounded, and JSON that cannot recurse.

`/dev/zero` would be read for ever, a FIFO would block the open, a 200 MB log would be held whole when only
its head is parsed, and JSON nested 100,000 levels deep overflows Python's stack. Each is one clear error
(or a bounded read) here instead of a hang or a traceback further up.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO


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


def read_head(path: Path | str, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of a regular file and whether there was more; never opens a FIFO or device blocking."""
    with open_regular(path) as fh:
        data = fh.read(limit + 1)
    return data[:limit], len(data) > limit


def read_text_bounded(path: Path | str, limit: int, *, what: str = "file") -> str:
    """The whole file as UTF-8 when it fits in `limit` bytes; a ValueError naming the limit when it does not."""
    data, more = read_head(path, limit)
    if more:
        raise ValueError(f"larger than {limit >> 20 or 1} MB, too large for a {what}")
    return data.decode("utf-8")


def loads_json(text: str | bytes) -> Any:
    """json.loads whose too-deep nesting is a ValueError like any other malformed JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
