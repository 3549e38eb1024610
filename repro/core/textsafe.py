"""Text from result folders, rack folders and CLI values, made safe for the place it is written to.

Folder names and log lines are untrusted: an escape sequence in one can clear a terminal or overwrite a
verdict, a `|` or `<img onerror=...>` in one can break or script a Markdown table, a newline in one can
start a new line in a generated shell script. Each writer calls the one function for its medium.
"""

from __future__ import annotations

import re
import shlex

# C0 controls except tab and newline, DEL, and the C1 controls (0x80-0x9f: 0x9b is a one-byte CSI); then the
# invisible format characters that reorder or hide text (bidi embeddings/overrides/isolates, zero-width
# spaces and joiners, LRM/RLM, line/paragraph separators): a folder name must read as what it is.
_INVISIBLE = "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_INVISIBLE}]")
_ANY_CONTROL = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_INVISIBLE}]")
_SHELL_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # C1 code points are plain UTF-8 bytes inside single quotes


def _visible(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """Control characters shown as `\\x1b` instead of being sent to the terminal; newlines and tabs kept."""
    return _CONTROL.sub(_visible, text)


def one_line(text: object) -> str:
    """A name or path from data on one terminal line: a newline in a folder name is shown as `\\x0a`, so it
    can never print a line of its own (`Verdict: PASS`)."""
    return _ANY_CONTROL.sub(_visible, str(text))


def md_cell(text: object) -> str:
    """One Markdown table cell: HTML escaped (renderers pass raw HTML through), pipes and newlines neutralised,
    brackets escaped so `[x](javascript:...)` or `![x](...)` is text, never a link or an image."""
    s = _ANY_CONTROL.sub(_visible, str(text).replace("\n", " "))
    s = s.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "|`[]":
        s = s.replace(ch, "\\" + ch)
    return s


def sh_quote(value: str) -> str:
    """Quote for bash; a value with control characters becomes an ANSI-C `$'...'` word, so no raw newline is written."""
    if not _SHELL_CONTROL.search(value):
        return shlex.quote(value)
    out = []
    for ch in value:
        if ch in ("\\", "'"):
            out.append("\\" + ch)
        elif _SHELL_CONTROL.match(ch):
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def md_code(text: object) -> str:
    """A path as a Markdown code span when that is safe, else an escaped cell (a backtick would end the span)."""
    s = str(text)
    if _ANY_CONTROL.search(s) or any(c in s for c in "`<>&|"):
        return md_cell(s)
    return f"`{s}`"
