"""Characters on a terminal that is not UTF-8: repro's own output degrades to ASCII (± as +/-), never a crash.

Apart from `safe.py` (Rich) because the console script calls it before anything else, `repro --help` included,
which must stay free of any command's stack (tests/test_cli_imports.py)."""

from __future__ import annotations

import codecs
import contextlib
import sys
import unicodedata

ASCII_FALLBACK = {
    "±": "+/-",
    "×": "x",
    "…": "...",
    "→": "->",
    "←": "<-",
    "↔": "<->",
    "–": "-",
    "—": "--",
    "−": "-",
    "≥": ">=",
    "≤": "<=",
    "≠": "!=",
    "≈": "~",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "·": "*",
    "•": "*",
    "✓": "ok",
    "✔": "ok",
    "✗": "x",
    "✘": "x",
    "µ": "u",
    "°": " deg",
    "━": "-",
    "─": "-",
    "│": "|",
    "┃": "|",
    "█": "#",
    "▏": "|",
}
"""What a character repro prints becomes on a terminal that cannot show it (LANG=C with PYTHONIOENCODING=ascii,
a latin-1 terminal): the meaning kept in ASCII, never a crash."""

_ERRORS = "repro-ascii"


def ascii_of(ch: str) -> str:
    """One character in ASCII: the table above, else its compatibility decomposition (é -> e), else \\uXXXX."""
    if ch in ASCII_FALLBACK:
        return ASCII_FALLBACK[ch]
    plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode("ascii")
    return plain if plain.isprintable() and plain else f"\\u{ord(ch):04x}"


def _degrade(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(ascii_of(ch) for ch in exc.object[exc.start : exc.end]), exc.end


codecs.register_error(_ERRORS, _degrade)


def degrade_streams() -> None:
    """stdout and stderr of a terminal (or pipe) whose encoding is not UTF-8 write what it cannot encode in ASCII
    (± as +/-, → as ->) instead of raising UnicodeEncodeError half way through a verdict."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if encoding.startswith("utf"):
            continue
        with contextlib.suppress(AttributeError, ValueError, OSError):  # not a text stream of its own
            stream.reconfigure(errors=_ERRORS)  # type: ignore[union-attr]
