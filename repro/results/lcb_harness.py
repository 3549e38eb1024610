"""How LiveCodeBench runs one generated program against its tests, as the MLPerf DeepSeek-R1 evaluator uses it
(LiveCodeBench/LiveCodeBench @ b1e7cab4, the submodule of mlcommons/inference @ b66003e1 language/deepseek-r1:
lcb_runner/evaluation/testing_util.py run_test, grade_stdio, grade_call_based; compute_code_generation_metrics.py;
pass_k_utils.py). Standard library only: it runs inside the confined child (repro/results/sandbox_child.py), never
in repro's own process. Written from those rules, not copied; tests/test_dsr1_livecodebench.py compares it with
the reference on the same programs.

The rules it keeps, because a program's verdict depends on them:
- numpy is imported first (testing_util imports it at its top, so a program's `import numpy` finds it loaded);
- the destructive-function guard (reliability_guard, called with no memory size: it sets no rlimit) runs next;
- a call-based problem (the test data names fn_name) runs `import_string + "\\n\\n" + code` as module `tmp_sol`,
  takes `Solution()` when the text contains "class Solution", calls the method with each test's JSON lines as
  arguments and compares with `==` (a tuple is a list first);
- a standard-input problem loses a trailing `if __name__ == '__main__':` block (its body kept), has every top-level
  statement but imports moved into `wrapped_function()` after `import_string`, and is called once per test with
  sys.stdin, builtins.open and the real stdin's read/readline/readlines replaced as the reference's stacked
  `unittest.mock.patch` decorators replace them; stdout is captured; lines compare stripped, else as Decimals;
- each test has its own `signal.alarm(timeout)`; the first failing test ends the program; the codes are
  True (passed), -2 wrong answer, -3 time limit, -4 runtime error; a program passes when every code is > 0.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import json
import signal
import sys
from decimal import Decimal, InvalidOperation
from io import StringIO
from types import ModuleType
from typing import Any
from unittest import mock

# The modules whose names LiveCodeBench's import_string puts in the program's namespace, in its order: the star
# imports first (later ones shadow earlier names: builtins' after math's, so pow is the builtin), then the modules.
_STAR = (
    "string",
    "re",
    "datetime",
    "collections",
    "heapq",
    "bisect",
    "copy",
    "math",
    "random",
    "statistics",
    "itertools",
    "functools",
    "operator",
    "io",
    "sys",
    "json",
    "builtins",
    "typing",
)
_PLAIN = (
    "string",
    "re",
    "datetime",
    "collections",
    "heapq",
    "bisect",
    "copy",
    "math",
    "random",
    "statistics",
    "itertools",
    "functools",
    "operator",
    "io",
    "sys",
    "json",
)
PRELUDE = "".join(f"from {m} import *\n" for m in _STAR) + "".join(f"import {m}\n" for m in _PLAIN)
PRELUDE += "sys.setrecursionlimit(50000)\n"

# reliability_guard's list: attributes set to None, then modules made unimportable.
_GUARD = {
    "os": (
        "kill",
        "system",
        "putenv",
        "remove",
        "removedirs",
        "rmdir",
        "fchdir",
        "setuid",
        "fork",
        "forkpty",
        "killpg",
        "rename",
        "renames",
        "truncate",
        "replace",
        "unlink",
        "fchmod",
        "fchown",
        "chmod",
        "chown",
        "chroot",
        "lchflags",
        "lchmod",
        "lchown",
        "getcwd",
        "chdir",
    ),
    "shutil": ("rmtree", "move", "chown"),
    "subprocess": ("Popen",),
}
_NO_IMPORT = ("ipdb", "joblib", "resource", "psutil", "tkinter")

PASSED, WRONG, TIME_LIMIT, RUNTIME = True, -2, -3, -4


class TimeoutException(Exception):
    """The alarm's exception; its name is how a time limit is told from another error, as in the reference."""


def _on_alarm(signum: int, frame: object) -> None:
    raise TimeoutException


def guard() -> None:
    """The reference's reliability_guard without a memory size (as run_test calls it)."""
    import os
    import shutil
    import subprocess

    modules = {"os": os, "shutil": shutil, "subprocess": subprocess}
    os.environ["OMP_NUM_THREADS"] = "1"
    for module, names in _GUARD.items():
        for name in names:
            setattr(modules[module], name, None)
    builtins.quit = None  # type: ignore[assignment]
    builtins.help = None  # type: ignore[assignment]
    for name in _NO_IMPORT:
        sys.modules[name] = None  # type: ignore[assignment]


def compile_module(code: str, timeout: int) -> Any:
    """The program as module tmp_sol (its Solution() when the text names one), under the alarm."""
    signal.alarm(timeout)
    try:
        module = ModuleType("tmp_sol", "")
        exec(code, module.__dict__)
        target = module.Solution() if "class Solution" in code else module
        assert target is not None
    finally:
        signal.alarm(0)
    return target


def drop_main_guard(code: str) -> str:
    """A last `if __name__ == '__main__':` block is replaced by its body; unparsable text is kept as it is."""
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            code = ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - the reference keeps the text on any failure
        pass
    return code


def wrap_in_function(code: str) -> str:
    """Imports stay at the top after the prelude; every other statement becomes the body of wrapped_function()."""
    try:
        tree = ast.parse(code)
        imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        rest = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        func = ast.FunctionDef(
            name="wrapped_function",
            args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=rest,
            decorator_list=[],
            lineno=-1,
        )
        return PRELUDE + "\n" + ast.unparse(imports) + "\n" + ast.unparse(func)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - as the reference: the text unchanged
        return code


class _BytesStdin:
    """sys.stdin.buffer during a call: read() is the whole input, readline() always its first line."""

    def __init__(self, text: str) -> None:
        self._data = text.encode("utf-8")

    def read(self, *args: object) -> bytes:
        return self._data

    def readline(self, *args: object) -> bytes:
        return self._data.split(b"\n")[0] + b"\n"


class _Stdin:
    """sys.stdin during a call: read() the whole input, readline() line by line with its newline, readlines()
    the input split on newlines (no newlines kept), other attributes from a StringIO; not iterable."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._lines = StringIO(text)
        self.buffer = _BytesStdin(text)

    def read(self, *args: object) -> str:
        return self._text

    def readline(self, *args: object) -> str:
        return self._lines.readline(*args)  # type: ignore[arg-type]

    def readlines(self, *args: object) -> list[str]:
        return self._text.split("\n")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lines, name)


def _call_with_input(function: Any, text: str) -> None:
    """One call of wrapped_function with the reference's replacements entered in its order: the then-current
    sys.stdin object's read, readlines and readline first, then sys.stdin itself, then builtins.open."""
    lines = iter(text.split("\n"))
    real = sys.stdin
    with (
        mock.patch.object(real, "read", lambda *a: text),
        mock.patch.object(real, "readlines", lambda *a: text.split("\n")),
        mock.patch.object(real, "readline", lambda *a: next(lines)),
        mock.patch("sys.stdin", _Stdin(text)),
        mock.patch("builtins.open", mock.mock_open(read_data=text)),
        contextlib.suppress(SystemExit),
    ):
        function()


def _one_argument(x: object) -> int:
    return 1


class _Capture:
    """sys.stdout as a StringIO for one call; its close is the reference's one-argument lambda (so a program's
    sys.stdout.close() raises TypeError there too)."""

    def __enter__(self) -> _Capture:
        self._saved = sys.stdout
        self._buffer = StringIO()
        self._buffer.close = _one_argument  # type: ignore[method-assign,assignment]
        sys.stdout = self._buffer
        self.text = ""
        return self

    def __exit__(self, *exc: object) -> None:
        self.text = self._buffer.getvalue()
        sys.stdout = self._saved


def _stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(word) for word in line.split()]
    except (InvalidOperation, ValueError, TypeError):
        return None


def same_output(got: str, want: str) -> bool:
    """The reference's stdio comparison: as many stripped lines, each equal as text or as a row of Decimals."""
    got_lines, want_lines = _stripped_lines(got), _stripped_lines(want)
    if len(got_lines) != len(want_lines):
        return False
    for a, b in zip(got_lines, want_lines, strict=True):
        if a == b:
            continue
        da, db = _decimals(a), _decimals(b)
        if da is None or db is None or da != db:
            return False
    return True


def _failure(exc: BaseException) -> int:
    return TIME_LIMIT if "timeoutexception" in repr(exc).lower() else RUNTIME


def grade_stdio(code: str, inputs: list[str], outputs: list[str], timeout: int) -> list[Any] | None:
    function = getattr(compile_module(wrap_in_function(drop_main_guard(code)), timeout), "wrapped_function", None)
    if function is None:
        return None
    codes: list[Any] = []
    for text, want in zip(inputs, outputs, strict=False):
        signal.alarm(timeout)
        with _Capture() as captured:
            try:
                _call_with_input(function, text)
                signal.alarm(0)
            except Exception as exc:  # noqa: BLE001 - every program error is a test result
                signal.alarm(0)
                codes.append(_failure(exc))
                return codes
            finally:
                signal.alarm(0)
        if not same_output(captured.text, want):
            codes.append(WRONG)
            return codes
        codes.append(PASSED)
    return codes


def grade_call_based(code: str, inputs: list[str], outputs: list[str], fn_name: str, timeout: int) -> list[Any] | None:
    target = compile_module(PRELUDE + "\n\n" + code, timeout)
    method = getattr(target, fn_name, None) if target is not None else None
    if method is None:
        return None
    args_per_test = [[json.loads(line) for line in text.split("\n")] for text in inputs]
    expected = [json.loads(text) for text in outputs]
    codes: list[Any] = []
    for args, want in zip(args_per_test, expected, strict=False):
        signal.alarm(timeout)
        try:
            got = method(*args)
            signal.alarm(0)
            if isinstance(got, tuple):
                got = list(got)
            same = got == want
            codes.append(same)
            if not same:
                return codes
        except Exception as exc:  # noqa: BLE001 - every program error is a test result
            signal.alarm(0)
            codes.append(_failure(exc))
            return codes
        finally:
            signal.alarm(0)
    return codes


def _plain(code: Any) -> Any:
    """A test code as the parent receives it: True, an int, else the truth of `> 0` as the reference's check."""
    if code is True or code is False or (isinstance(code, int) and not isinstance(code, bool)):
        return code
    try:
        return bool(code > 0)
    except Exception:  # noqa: BLE001 - an object that cannot be compared fails
        return False


def _preload() -> None:
    """numpy is imported before the guard, as testing_util imports it at its top: a program's `import numpy` then
    finds it loaded, where importing it after the guard (os.getcwd and friends gone) would fail."""
    with contextlib.suppress(ImportError):
        import numpy  # noqa: F401


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Grade one program: its test codes, and passed (every code > 0). A harness failure is code -4."""
    _preload()
    sys.set_int_max_str_digits(50000)
    signal.signal(signal.SIGALRM, _on_alarm)
    guard()
    inputs, outputs, fn_name = job["inputs"], job["outputs"], job.get("fn_name")
    timeout = int(job["timeout"])
    signal.alarm(timeout)
    try:
        if fn_name is None:
            codes = grade_stdio(job["code"], inputs, outputs, timeout)
        else:
            codes = grade_call_based(job["code"], inputs, outputs, fn_name, timeout)
    except Exception as exc:  # noqa: BLE001 - as run_test: any error while grading is [-4]
        return {"codes": [RUNTIME], "passed": False, "error": type(exc).__name__}
    finally:
        signal.alarm(0)
    if codes is None:  # the reference's run_test returns None; unpacking it fails the whole program
        return {"codes": [-1] * len(inputs), "passed": False, "error": "no function to call"}
    plain = [_plain(c) for c in codes]
    return {"codes": plain, "passed": all(c > 0 for c in plain)}
