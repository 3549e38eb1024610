"""A value a recipe or benchmark file gives for a file or folder is a *name*, never a path.

`dataset.files.sampled: ../../../.bashrc` once made `repro setup` replace the user's ~/.bashrc, and
`dataset.name: ../../elsewhere/ds` wrote a dataset folder outside the workspace: every such value is joined onto a
workspace folder, so the schema holds it to one path component of plain ASCII (letters, digits, `.`, `_`, `-`, `+`;
no separator, no leading dot, so never `..`), at most NAME_MAX characters. A look-alike of a separator or a dot
(`∕`, `／`, `．`) is not ASCII and is refused with the rest. Every other string in those files is one line of text:
no control character, line separator or bidirectional override, which would reach a terminal raw.

The validators raise ValueError (pydantic turns it into a field error); `text_problem` walks a whole loaded YAML
tree and says where the first bad string is, so a loader names the field.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import AfterValidator

NAME_MAX = 128
"""Characters in one name: far under the 255 bytes a Linux file name may have, room for `.incomplete` after it."""
NUMBER_MAX = 1e15
"""The largest magnitude any number in a recipe or benchmark file may have (bytes of a dataset are ~1e12): 1e308
GB of disk or GPU memory overflowed the integer arithmetic of setup and doctor."""
TEXT_MAX = 4096
"""Characters in any one string of a recipe or benchmark file (the longest shipped note is under 800)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_ROLE = re.compile(r"[a-z][a-z0-9_]{0,31}")
_BIDI = {*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C}


def shown(value: str, limit: int = 60) -> str:
    """A value from a file as an error shows it: quoted, escapes for anything unprintable, cut to `limit`."""
    cut = value[:limit]
    text = ascii(cut) if not cut.isprintable() or not cut.isascii() else repr(cut)
    return text + ("…" if len(value) > limit else "")


def _bad_char(value: str) -> str | None:
    """The first character that must never reach a terminal raw, as U+XXXX with its Unicode name, or None."""
    for ch in value:
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Zl", "Zp", "Cs") or ord(ch) in _BIDI:
            return f"U+{ord(ch):04X} {unicodedata.name(ch, 'control character')}"
    return None


def name_problem(value: object) -> str | None:
    """Why `value` is not a name (one path component inside a workspace folder), or None when it is one."""
    if not isinstance(value, str):
        return f"is {type(value).__name__}, not a name"
    if not value:
        return "is empty: a file or folder name is needed"
    bad = _bad_char(value)
    if bad is not None:
        return f"holds {bad}: a name is one line of plain characters"
    if value.startswith(("/", "\\", "~")) or re.match(r"[A-Za-z]:[\\/]", value):
        return "is an absolute path, not a name (one file or folder inside the workspace)"
    if "/" in value or "\\" in value:
        return "is a path, not a name ('/' in it): one file or folder inside the workspace"
    if value.strip(".") == "":
        return "is a dot name, not a name: '.' is the folder itself and '..' leaves it"
    if len(value) > NAME_MAX:
        return f"is {len(value):,} characters long: a name has at most {NAME_MAX}"
    if not value.isascii():
        odd = next(ch for ch in value if not ch.isascii())
        what = unicodedata.name(odd, "a non-ASCII character")
        return f"holds U+{ord(odd):04X} {what}: a name is plain ASCII (letters, digits, '.', '_', '-', '+')"
    if not _NAME.fullmatch(value):
        return "is not a plain name: letters, digits, '.', '_', '-', '+', never starting with '.', '_', '-' or '+'"
    return None


def check_name(value: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(f"{shown(value)} {problem}")
    return value


def check_repo_id(value: str) -> str:
    """A hub repository id, `owner/name` or `name`: its last part becomes the model's folder, so each part is a
    name and there is at most one '/'."""
    parts = value.split("/")
    if len(parts) > 2:
        raise ValueError(f"{shown(value)} has {len(parts) - 1} '/'; a repository id is 'owner/name'")
    for part in parts:
        problem = name_problem(part)
        if problem is not None:
            raise ValueError(f"{shown(value)}: its part {shown(part)} {problem}")
    return value


def check_revision(value: str) -> str:
    """A git revision (a commit, a tag, `main`, `refs/pr/1`): parts that are names, joined by single '/'."""
    if len(value) > 256:
        raise ValueError(f"{shown(value)} is {len(value):,} characters long; a revision has at most 256")
    for part in value.split("/"):
        problem = name_problem(part)
        if problem is not None:
            raise ValueError(f"{shown(value)}: its part {shown(part)} {problem}")
    return value


def check_role(value: str) -> str:
    """A dataset file's role (sampled, calibration): a key in lower-case letters, digits and '_'."""
    if not isinstance(value, str) or not _ROLE.fullmatch(value):
        raise ValueError(f"role {shown(str(value))} is not a role name (lower-case letters, digits, '_'; 32 at most)")
    return value


def check_url(value: str) -> str:
    """A download URL: http(s), one line, no spaces (it is shown, fetched and recorded, never joined to a path)."""
    if not re.fullmatch(r"https?://[!-~]+", value) or len(value) > 2048:
        raise ValueError(f"{shown(value)} is not an http(s) URL of printable ASCII without spaces")
    return value


def check_finite(value: float) -> float:
    """A figure a verdict is built from: `.nan` compares false with every bound and `.inf` passes any floor."""
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    return value


Name = Annotated[str, AfterValidator(check_name)]
RepoId = Annotated[str, AfterValidator(check_repo_id)]
Revision = Annotated[str, AfterValidator(check_revision)]
Role = Annotated[str, AfterValidator(check_role)]
Url = Annotated[str, AfterValidator(check_url)]


def _walk(node: Any, loc: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            k = str(key)
            yield (*loc, k), k
            yield from _walk(value, (*loc, k))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, (*loc, str(i)))
    else:
        yield loc, node


def text_problem(tree: Any) -> tuple[str, str] | None:
    """(field, problem) of the first value in a loaded recipe or benchmark that cannot be: a string that is not one
    line of text (a control character, a line separator, a bidirectional override) or is over TEXT_MAX characters,
    or a number that is not finite (`.nan`, `.inf`: no bound holds it, in typed fields and free-form option blocks
    alike); None when every value can be."""
    for loc, text in _walk(tree, ()):
        field = ".".join(shown(p, 40) if _bad_char(p) else p for p in loc) or "(top level)"
        if isinstance(text, float) and not math.isfinite(text):
            return field, f"is {text!r}, not a finite number"
        if isinstance(text, int | float) and not isinstance(text, bool) and abs(text) > NUMBER_MAX:
            return field, f"is {text:.3g}, beyond any real figure (at most {NUMBER_MAX:.0e} in a recipe or benchmark)"
        if not isinstance(text, str):
            continue
        bad = _bad_char(text)
        if bad is not None:
            return field, f"holds {bad} ({shown(text)}); every value is one line of text"
        if len(text) > TEXT_MAX:
            return field, f"is {len(text):,} characters long; a value has at most {TEXT_MAX:,}"
    return None
