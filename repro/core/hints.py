"""What to do next, split into prose and the one command a `Next:` line may hold.

Errors and results carry hints written for people ("check the path, then `repro verify` again"). Pasted
into a shell, backticks run a command substitution and prose is a syntax error, so every hint is split
here, once: the prose goes on its own line, and `Next:` gets a single command with no placeholder, or
nothing at all.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# Words a command may start with; anything else in backticks (an option, a YAML key) is not a command.
_PROGRAMS = ("repro", "pip", "sudo", "hf", "docker", "df", "nvidia-smi", "ulimit", "sbatch", "squeue", "scancel")
# NAME, RUN_DIR, N, DIR..., <run folder>, ...: something the user would have to fill in.
_WHOLE_PLACEHOLDER = re.compile(r"(?:--[a-z-]+=)?[A-Z][A-Z_]*(?:\.\.\.)?")
_PLACEHOLDER_PART = re.compile(r"[<>]|\.\.\.|\{[A-Za-z_]+\}")
# Commands that exit 2 without a folder or a name: alone, they are not a next step.
_NEEDS_ARGUMENT = {("repro", "verify"), ("repro", "aggregate"), ("repro", "report"), ("repro", "published", "show")}


@dataclass(frozen=True)
class Hint:
    """`prose` is printed as a sentence; `command` is the whole of the `Next:` line (or there is none)."""

    prose: str | None
    command: str | None

    @property
    def sentence(self) -> str:
        """The prose starting with a capital, unless it starts with a command (`pip install ...`)."""
        text = self.prose or ""
        if text.split(" ", 1)[0] in _PROGRAMS:
            return text
        return text[:1].upper() + text[1:]

    def to_json(self) -> dict[str, str | None]:
        return {"hint": self.prose, "next_command": self.command}


def is_command(text: str) -> bool:
    """One pasteable shell command: a known program, no placeholder, and it splits like a shell would."""
    text = text.strip()
    if not text or "`" in text or "\n" in text:
        return False
    try:
        argv = shlex.split(text)
    except ValueError:
        return False
    if not argv or argv[0] not in _PROGRAMS:
        return False
    if tuple(argv) in _NEEDS_ARGUMENT or (tuple(argv[:3]) in _NEEDS_ARGUMENT and len(argv) == 3):
        return False
    return not any(_WHOLE_PLACEHOLDER.fullmatch(arg) or _PLACEHOLDER_PART.search(arg) for arg in argv[1:])


def _quoted_controls(text: str) -> str | None:
    """A whole command whose argument holds a newline or a control character (a folder named so), requoted as
    bash's `$'...'` word: joining the hint's whitespace would otherwise turn it into a different path."""
    if not re.search(r"[\x00-\x1f\x7f]", text.strip()):
        return None
    try:
        argv = shlex.split(text)
    except ValueError:
        return None
    if not argv or argv[0] not in _PROGRAMS or not any(re.search(r"[\x00-\x1f\x7f]", a) for a in argv):
        return None
    from repro.core.textsafe import sh_quote

    return " ".join(sh_quote(a) for a in argv)


def split_hint(text: str | None) -> Hint:
    """The first pasteable command in the hint, and the hint as prose when it says more than that command."""
    if not text or not text.strip():
        return Hint(None, None)
    quoted = _quoted_controls(text)
    if quoted is not None:
        return Hint(None, quoted)
    text = " ".join(text.split())
    if is_command(text):
        return Hint(None, text)
    ticked = re.findall(r"`([^`]+)`", text)
    command = next((t.strip() for t in ticked if is_command(t)), None)
    prose = re.sub(r"`([^`]+)`", r"\1", text)
    residue = prose.replace(command, " ") if command else prose
    if command is not None and len(re.findall(r"[A-Za-z]{2,}", residue)) < 3:
        return Hint(None, command)  # "`repro setup` again" says nothing the command does not
    return Hint(prose, command)
