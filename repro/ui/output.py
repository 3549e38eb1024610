"""The one output path: every command returns a result object, shown with Rich or as JSON.

With --json, stdout carries exactly one JSON document (results and errors alike, each with
`schema_version`); everything for people goes to stderr. When a stream is not a terminal, Rich
gets a width no line reaches, so paths, commands and scripts are never wrapped in pipes and logs.
"""

from __future__ import annotations

import json
import math
import sys
from typing import IO, TYPE_CHECKING, Any, Protocol

from repro.core.secrets import redact

if TYPE_CHECKING:
    from rich.console import Console

SCHEMA_VERSION = 1
# A pipe or a log file has no width; this one is wider than any path, command or script line.
UNWRAPPED_WIDTH = 100_000


def _width(stream: IO[str]) -> int | None:
    """None (Rich measures the terminal) on a terminal; a width no line reaches anywhere else."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return None if tty else UNWRAPPED_WIDTH


def make_console(stderr: bool = False) -> Console:
    """An explicit width also keeps a COLUMNS variable from narrowing a pipe."""
    from repro.ui.safe import SafeConsole

    width = _width(sys.stderr if stderr else sys.stdout)
    # On a terminal prose wraps between words (soft wrap would let the terminal cut words in half); `Next:`
    # lines and paths are printed no-wrap on their own. Elsewhere nothing wraps at all.
    return SafeConsole(stderr=stderr, highlight=False, markup=False, soft_wrap=width is not None, width=width)


_consoles: dict[str, Console] = {}


def _console(name: str) -> Console:
    """Made on first use: importing Rich costs more than a `repro --help` should take."""
    if name not in _consoles:
        _consoles[name] = make_console(stderr=name == "err_console")
    return _consoles[name]


def __getattr__(name: str) -> Console:
    """`from repro.ui.output import console, err_console` still works; they are created when first asked for."""
    if name in ("console", "err_console"):
        return _console(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def finite(value: Any) -> Any:
    """NaN and infinities are not JSON: they become null, so the document always parses."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


class Result(Protocol):
    def to_json(self) -> dict[str, Any]: ...


def json_document(payload: dict[str, Any]) -> str:
    """The one JSON shape every command prints: `schema_version` first, then the payload."""
    body = {"schema_version": SCHEMA_VERSION, **{k: v for k, v in payload.items() if k != "schema_version"}}
    body = finite(json.loads(json.dumps(body, default=str)))
    return redact(json.dumps(body, indent=2, default=str, allow_nan=False))


_json_written = {"count": 0}


def _write_json(payload: dict[str, Any]) -> None:
    sys.stdout.write(json_document(payload) + "\n")
    sys.stdout.flush()
    _json_written["count"] += 1


def start_command() -> None:
    """Each command prints its own one document (tests run many commands in one process)."""
    _json_written["count"] = 0


def _with_hint(payload: dict[str, Any]) -> dict[str, Any]:
    """`next_command` in every document is one pasteable command (or null), with any prose beside it as `hint`:
    the same shape as an error's."""
    if "next_command" not in payload:
        return payload
    from repro.core.hints import split_hint

    hint = split_hint(payload["next_command"])
    return {**payload, "next_command": hint.command, "hint": payload.get("hint") or hint.prose}


class WithNext:
    """A result plus the command that follows it, for results whose own type does not know the next step."""

    def __init__(self, result: Result, next_command: str | None, hint: str | None = None):
        self.result, self.next_command, self.hint = result, next_command, hint

    def to_json(self) -> dict[str, Any]:
        return {
            **self.result.to_json(),
            "next_command": self.next_command,
            **({"hint": self.hint} if self.hint else {}),
        }

    def __rich__(self) -> Any:
        from repro.ui.render import renderable

        return renderable(self.result)


def emit(result: Result, as_json: bool) -> None:
    if as_json:
        _write_json(_with_hint(result.to_json()))
    else:
        show(result)


def show(obj: Any) -> None:
    """Print one result (or note) for people, through its registered view; its next command goes last, alone."""
    _show(obj, "console")


def _show(obj: Any, console: str) -> None:
    from repro.core.hints import split_hint
    from repro.ui.render import renderable
    from repro.ui.wrap import Prose

    # a no-wrap line (a path, a command) runs past the edge; a plain line wraps between words, never folding a path
    view = Prose(obj) if isinstance(obj, str) else renderable(obj)
    _console(console).print(view, crop=False)
    hint = split_hint(getattr(obj, "next_command", None) if not isinstance(obj, dict) else None)
    prose = getattr(obj, "hint", None) if not isinstance(obj, dict) else None
    if prose or hint.prose:
        _console(console).print(Prose(prose or hint.prose or ""), crop=False)
    if hint.command:
        print_next(hint.command, stderr=console == "err_console")


def show_err(obj: Any) -> None:
    """As show, on stderr: the narrative of a --json command, whose stdout holds only the JSON."""
    _show(obj, "err_console")


def confirm(question: str) -> bool:
    """Asked on stderr, so a --json run's stdout stays one document. Ctrl-C or end of input at the prompt is a
    cancel: the cursor leaves the prompt line first, so the one error line starts a line of its own."""
    from rich.prompt import Confirm
    from rich.text import Text

    from repro.core.errors import Interrupted

    err = _console("err_console")
    try:
        return Confirm.ask(Text(question), default=True, console=err)
    except (KeyboardInterrupt, EOFError) as exc:
        err.print()
        what = "Ctrl-C" if isinstance(exc, KeyboardInterrupt) else "end of input"
        raise Interrupted(f"Cancelled at the prompt ({what}); nothing was started.", "repro status") from None


def error(
    message: str, next_command: str | None = None, *, exit_code: int | None = None, as_json: bool = False
) -> None:
    """One line on stderr for people, then `Next:` with one command alone on its line (so it pastes whole);
    with --json also the same error as the one JSON document on stdout."""
    from repro.core.hints import split_hint
    from repro.core.textsafe import one_line

    hint = split_hint(redact(next_command) if next_command else None)
    text = redact(message)
    if hint.prose:
        from repro.core.fmt import join_sentences

        text = join_sentences(text, hint.sentence)
    text = one_line(text)  # an HTTP 500 body or a file name from data never starts a line of its own
    from rich.text import Text

    from repro.ui.wrap import Prose

    line = Text("error:", style="bold red") + Text(f" {text}")
    _console("err_console").print(Prose(line), crop=False, highlight=False)
    if hint.command:
        print_next(one_line(hint.command), stderr=True)
    if as_json and not _json_written["count"]:  # a result already printed is the one document; its error is on stderr
        _write_json({"ok": False, "error": {"message": redact(message), **hint.to_json(), "exit_code": exit_code}})


def next_text(command: str) -> Any:
    """`Next: COMMAND` as a Rich Text that never wraps: a terminal narrower than the line lets it run past the
    edge, and copying the screen line gives the whole command."""
    from rich.text import Text

    text = Text("Next: ")
    text.append(command, style="bold")
    text.no_wrap, text.overflow = True, "ignore"
    return text


def print_next(command: str, *, stderr: bool = False) -> None:
    _console("err_console" if stderr else "console").print(next_text(command), soft_wrap=True, crop=False)


def traceback_text(exc: BaseException) -> str:
    """A traceback as --debug (or a bug) prints it: secrets redacted and escape sequences shown, never sent.

    Its lines quote folder names, URLs and server answers; an OSC 52 in one would write the user's clipboard.
    """
    import traceback

    from repro.core.textsafe import terminal_safe

    return terminal_safe(redact("".join(traceback.format_exception(exc))))


def info(message: str) -> None:
    from repro.ui.wrap import Prose

    _console("err_console").print(Prose(redact(message)), crop=False)
