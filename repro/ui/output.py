"""The one output path: every command returns a result object, shown with Rich or as JSON."""

from __future__ import annotations

import json
import sys
from typing import Any, Protocol

from rich.console import Console
from rich.markup import escape

from repro.core.secrets import redact
from repro.ui.safe import SafeConsole

console: Console = SafeConsole(highlight=False, soft_wrap=False)  # issue #16: no raw escape sequences from data
err_console: Console = SafeConsole(stderr=True, highlight=False, soft_wrap=True)


class Result(Protocol):
    def to_json(self) -> dict[str, Any]: ...
    def __rich__(self) -> Any: ...


def emit(result: Result, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(redact(json.dumps(result.to_json(), indent=2, default=str)) + "\n")
    else:
        console.print(result)


def error(message: str, next_command: str | None = None) -> None:
    text = redact(message)
    if next_command:
        text += f" Next: {redact(next_command)}"
    err_console.print(f"[bold red]error:[/] {escape(text)}", markup=True, highlight=False)


def info(message: str) -> None:
    err_console.print(escape(redact(message)))
