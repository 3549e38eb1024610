"""Every expected failure, and the one table that turns it into a sentence naming the next command."""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass

BUG_EXIT_CODE = 3
"""An unexpected exception (a bug): not 1, which a FAIL verdict means, nor 2, bad input."""

SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}
"""128 + the signal number, as a shell reports a process the signal ended."""


class ReproError(Exception):
    """An expected failure: one sentence for the user, an exit code and the command that fixes it."""

    exit_code = 2

    def __init__(self, message: str, next_command: str | None = None, *, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.next_command = next_command
        if exit_code is not None:
            self.exit_code = exit_code


class InputError(ReproError):
    """A file or folder the user gave cannot be read or makes no sense."""


class RecipeError(InputError):
    """A recipe file breaks the schema or names an unknown system."""


class LedgerError(ReproError):
    """The workspace ledger is unreadable or from a newer repro."""


class SystemMismatch(ReproError):
    """The hardware cannot run the chosen recipe (e.g. NVFP4 on Hopper)."""


class StepFailed(ReproError):
    """A long step (download, build, run) failed part way; its state is recorded in the ledger."""

    exit_code = 1


class Interrupted(ReproError):
    """The user pressed Ctrl-C; partial work was kept and marked incomplete."""

    exit_code = 130
    # True when a LoadGen thread is still waiting out its schedule: the console script then exits at once.
    abandoned_threads = False


@dataclass(frozen=True)
class Explained:
    message: str
    next_command: str | None
    exit_code: int


def _explain_oserror(exc: OSError) -> Explained:
    where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
    if exc.errno == errno.ENOSPC:
        return Explained(f"The disk is full{where}.", "free space, then `repro doctor`", 2)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return Explained(f"Permission denied{where}.", "check the workspace owner, then `repro doctor`", 2)
    from repro.core.fmt import clause

    return Explained(f"{clause(str(exc.strerror or exc))}{where}.", "`repro doctor`", 2)


def _external_mappings() -> list[tuple[type[BaseException], Callable[[BaseException], Explained]]]:
    """Library exceptions, subclass first; imported lazily so a missing optional library never breaks the CLI."""
    rows: list[tuple[type[BaseException], Callable[[BaseException], Explained]]] = []
    try:
        from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError
    except ImportError:  # pragma: no cover - huggingface_hub is a hard dependency
        pass
    else:
        rows += [
            (
                GatedRepoError,
                lambda e: Explained(
                    "The model is gated and this token has no access: request access on the model page.",
                    "`repro setup` again once access is granted",
                    2,
                ),
            ),
            (
                RepositoryNotFoundError,
                lambda e: Explained(
                    "The model repository was not found, or the token cannot see it.",
                    "check `model.repo_id` in the recipe, then `repro setup`",
                    2,
                ),
            ),
            (
                HfHubHTTPError,
                lambda e: Explained(
                    f"The Hugging Face hub answered with an error: {str(e).splitlines()[0]}", "`repro setup` again", 2
                ),
            ),
        ]
    try:
        from docker.errors import BuildError, DockerException
    except ImportError:  # pragma: no cover
        pass
    else:
        rows += [
            (
                BuildError,
                lambda e: Explained(
                    f"The container build failed: {getattr(e, 'msg', e)}", "`repro build-engine --force`", 1
                ),
            ),
            (
                DockerException,
                lambda e: Explained(
                    "The Docker engine is not reachable.",
                    "start Docker (`sudo systemctl start docker`), then `repro doctor`",
                    2,
                ),
            ),
        ]
    return rows


def sigterm_as_interrupt() -> None:
    """Slurm's scancel, `docker stop` and kill send SIGTERM: stop as for Ctrl-C (partial work kept and marked), with
    the signal's name on the KeyboardInterrupt so the exit code is 143, not Ctrl-C's 130."""
    import signal

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, handler)


def stop_signal(exc: BaseException) -> str | None:
    """The signal behind an interruption: a KeyboardInterrupt (Ctrl-C carries no name) or the one an Interrupted was
    raised from; None when no signal stopped the command."""
    seen: BaseException | None = exc
    for _ in range(16):  # a chain, never a loop, but bounded all the same
        if seen is None:
            return None
        if isinstance(seen, KeyboardInterrupt):
            name = seen.args[0] if seen.args and isinstance(seen.args[0], str) else ""
            return name if name in SIGNAL_EXIT else "SIGINT"
        seen = seen.__cause__ or seen.__context__
    return None


def explain(exc: BaseException) -> Explained | None:
    """Map an exception to a message, or None when it is a bug and deserves its traceback."""
    if isinstance(exc, ReproError):
        code = exc.exit_code
        if isinstance(exc, Interrupted) and code == Interrupted.exit_code:
            code = SIGNAL_EXIT.get(stop_signal(exc) or "SIGINT", code)
        return Explained(exc.message, exc.next_command, code)
    from repro.core.extras import missing_extra

    if (missing := missing_extra(exc)) is not None:
        module, extra = missing
        if not extra:
            return Explained(
                f"This command needs the package '{module}', which repro installs but is missing here.",
                "`pip install repro` (from a clone: `pip install -e .`)",
                2,
            )
        return Explained(
            f"This command needs the optional package '{module}', which is not installed.",
            f"`pip install 'repro[{extra}]'` (from a clone: `pip install -e '.[{extra}]'`)",
            2,
        )
    if isinstance(exc, KeyboardInterrupt):
        return Explained("Interrupted.", "repro status", SIGNAL_EXIT.get(stop_signal(exc) or "SIGINT", 130))
    for exc_type, fn in _external_mappings():
        if isinstance(exc, exc_type):
            return fn(exc)
    if isinstance(exc, OSError):
        return _explain_oserror(exc)
    if isinstance(exc, RuntimeError) and str(exc).startswith("Symlink loop from "):
        # Python 3.11's Path.resolve() raises RuntimeError (3.13: OSError ELOOP) on a link that leads back to itself
        where = str(exc).removeprefix("Symlink loop from ")
        return Explained(
            f"A symbolic link loops back on itself ({where}); repro cannot use a folder behind it.",
            "remove or fix that link (`ls -l` shows where it points), then run the command again",
            2,
        )
    return None
