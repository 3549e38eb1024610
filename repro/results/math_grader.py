"""MATH500's grader as the MLPerf DeepSeek-R1 evaluator runs it: PRM800K's grade_answer (openai/prm800k @ 7ecc7947,
the submodule of mlcommons/inference @ b66003e1 language/deepseek-r1: prm800k/grading/grader.py and
math_normalize.py, the Hendrycks MATH normalisation), called by eval_accuracy.evaluate_math500 with the stripped
\\boxed{} contents. Written from those rules, not copied; tests/test_dsr1_answers.py compares it with the reference
on every MATH500 answer and thousands of variants. Needs sympy and pylatexenc (`pip install 'repro[dsr1]'`).

The answer is right when (a) both sides normalise to the same string the MATH way, or (b) PRM800K's own
normalisation makes them equal, or, element by element for a tuple or interval, sympy simplifies their difference to
0 (not for unreduced fractions, nor when exactly one side is an integer, nor for text of more than two letters or
powers sympy may hang on). sympy's parser evaluates the text it is given, so repro runs this module only inside the
sandbox (run_job), with an alarm per answer: the reference has no bound at all and would never finish on an answer
such as 99999999999!.
"""

from __future__ import annotations

import contextlib
import re
import signal
from typing import Any

# ---------------------------------------------------------------- MATH's normalisation (math_normalize.py)

_TEXT_ONLY = re.compile(r"^\\text\{(?P<text>.+?)\}$")


def _units_on_the_right(s: str) -> str:
    """'\\text{ ' only ever introduces units: keep what comes before (exactly one such part, else an error)."""
    if "\\text{ " not in s:
        return s
    parts = s.split("\\text{ ")
    if len(parts) != 2:
        raise ValueError("more than one unit")
    return parts[0]


def _braced_sqrt(s: str) -> str:
    """\\sqrt3 -> \\sqrt{3}: the one character after an unbraced \\sqrt gets braces."""
    if "\\sqrt" not in s:
        return s
    head, *tails = s.split("\\sqrt")
    out = [head]
    for tail in tails:
        out.append("\\sqrt" + tail if tail[0] == "{" else "\\sqrt{" + tail[0] + "}" + tail[1:])
    return "".join(out)


def _braced_fracs(s: str) -> str:
    """\\frac12 -> \\frac{1}{2}, \\frac1{72} -> \\frac{1}{72}; a \\frac with fewer than two characters after it
    leaves the whole text as it was."""
    head, *tails = s.split("\\frac")
    out = head
    for tail in tails:
        out += "\\frac"
        if tail[0] == "{":
            out += tail
            continue
        if len(tail) < 2:
            return s
        first, second, rest = tail[0], tail[1], tail[2:]
        out += "{" + first + "}" + (second if second == "{" else "{" + second + "}") + rest
    return out


def _slash_to_frac(s: str) -> str:
    """'3/4' written canonically as two integers becomes \\frac{3}{4}."""
    parts = s.split("/")
    if len(parts) != 2:
        return s
    try:
        num, den = int(parts[0]), int(parts[1])
    except ValueError:
        return s
    return "\\frac{" + str(num) + "}{" + str(den) + "}" if s == f"{num}/{den}" else s


_MATH_DROPS = (
    ("\n", ""),
    ("\\!", ""),
    ("\\\\", "\\"),
    ("tfrac", "frac"),
    ("dfrac", "frac"),
    ("\\left", ""),
    ("\\right", ""),
    ("^{\\circ}", ""),
    ("^\\circ", ""),
    ("\\$", ""),
)


def _math_strip(s: str) -> str:
    for old, new in _MATH_DROPS:
        s = s.replace(old, new)
    s = _units_on_the_right(s)
    s = s.replace("\\%", "").replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:  # 'x = 5', 'k=3': the value
        s = sides[1]
    s = _braced_fracs(_braced_sqrt(s).replace(" ", ""))
    if s == "0.5":
        s = "\\frac{1}{2}"
    return _slash_to_frac(s)


def math_normalize(answer: str | None) -> str | None:
    """Hendrycks' normalisation: a lone \\text{...} unwrapped, then _math_strip; on any error the unwrapped text."""
    if answer is None:
        return None
    answer = answer.strip()
    try:
        whole = _TEXT_ONLY.search(answer)
        if whole is not None:
            answer = whole.group("text").strip()
        return _math_strip(answer)
    except Exception:  # noqa: BLE001 - the reference returns the text on any failure
        return answer


# ---------------------------------------------------------------- PRM800K's own normalisation (grader.py)

_UNITS = (
    "degree",
    "cm",
    "centimeter",
    "meter",
    "mile",
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "year",
    "foot",
    "feet",
    "inch",
    "yard",
)
_WORDS = (
    ("\\%", "%"),
    ("\\$", "$"),
    ("$", ""),
    ("%", ""),
    (" or ", " , "),
    (" and ", " , "),
    ("million", "*10^6"),
    ("billion", "*10^9"),
    ("trillion", "*10^12"),
)
_GLYPHS = (("√", "sqrt"), ("π", "pi"), ("∞", "inf"), ("∪", "U"), ("·", "*"), ("×", "*"))
_THOUSANDS = re.compile(r"(\d)(,)(\d\d\d)($|\D)")


def _float_ok(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _whole(x: float) -> bool:
    try:
        return abs(x - int(round(x))) <= 1e-7
    except Exception:  # noqa: BLE001 - inf and nan are not whole
        return False


def _drop_thousands_commas(s: str) -> str:
    while True:
        nxt = _THOUSANDS.sub(r"\1\3\4", s)
        if nxt == s:
            return nxt
        s = nxt


def _is_integer_text(s: str) -> bool:
    try:
        return _whole(float(_drop_thousands_commas(s)))
    except Exception:  # noqa: BLE001
        return False


def _latex_to_text(s: str) -> str:
    from pylatexenc import latex2text

    s = s.replace("\\tfrac", "\\frac").replace("\\dfrac", "\\frac").replace("\\frac", " \\frac")
    s = latex2text.LatexNodes2Text().latex_to_text(s)
    for old, new in _GLYPHS:
        s = s.replace(old, new)
    return s.strip()


def prm_normalize(expr: str | None) -> str | None:
    if expr is None:
        return None
    whole = _TEXT_ONLY.search(expr)
    if whole is not None:
        expr = whole.group("text")
    for old, new in _WORDS:
        expr = expr.replace(old, new)
    for unit in _UNITS:
        expr = re.sub(unit + r"(es)?(s)? *(\^[0-9]+)?", "", expr)
    expr = re.sub(r"\^ *\\circ", "", expr)
    if expr and expr[0] == "{" and expr[-1] == "}":
        expr = expr[1:-1]
    expr = re.sub(r",\\! *", "", expr)
    if _float_ok(expr) and _whole(float(expr)):
        expr = str(int(round(float(expr))))
    if "\\" in expr:
        with contextlib.suppress(Exception):  # the reference keeps the text when pylatexenc fails
            expr = _latex_to_text(expr)
    expr = re.sub(r"- *", "-", expr)
    expr = re.sub(r"([0-9]) +([0-9])", r"\1+\2", expr)  # a mixed number: 7 3/4 -> 7+3/4
    expr = expr.replace(" ", "").replace("{", "").replace("}", "").lower()
    if _is_integer_text(expr):
        expr = str(int(float(expr.replace(",", ""))))
    return expr


# ---------------------------------------------------------------- sympy, tuples, the verdict

_HANG_SUBSTRINGS = ("^{", "^(")
_HANG_PATTERNS = (re.compile(r"\^[0-9]+\^"), re.compile(r"\^[0-9][0-9]+"))
_BRACKETS = "()[]"
_FRACTION = re.compile(r"^-?[0-9]+.?/0*[1-9][0-9]*.?$")


def _may_evaluate(expr: str) -> bool:
    """At most two distinct letters (sqrt and frac not counted), and no power sympy might hang on."""
    letters = {ch for ch in expr.replace("sqrt", "").replace("frac", "") if ch.isalpha()}
    if len(letters) > 2 or any(bad in expr for bad in _HANG_SUBSTRINGS):
        return False
    return not any(p.search(expr) for p in _HANG_PATTERNS)


def _sympy_equal(truth: str, given: str) -> bool:
    try:
        expr = f"({truth})-({given})"
        if not _may_evaluate(expr):
            return False
        import sympy
        from sympy.parsing import sympy_parser

        steps = sympy_parser.standard_transformations + (sympy_parser.implicit_multiplication_application,)
        return bool(sympy.simplify(sympy_parser.parse_expr(expr.replace("^", "**"), transformations=steps)) == 0)
    except Exception:  # noqa: BLE001 - any sympy failure is 'not equal', as in the reference
        return False


def _elements(expr: str) -> list[str]:
    """A tuple or interval's elements (one level of brackets, thousands commas kept); else the text itself."""
    expr = _drop_thousands_commas(expr)
    if not expr:
        return []
    inner = expr[1:-1]
    if len(expr) > 2 and expr[0] in _BRACKETS and expr[-1] in _BRACKETS and not any(c in inner for c in _BRACKETS):
        return [e.strip() for e in inner.split(",")]
    return [expr]


def grade_answer(given: str | None, truth: str) -> bool:
    """PRM800K's verdict on one answer."""
    if given is None:
        return False
    if math_normalize(truth) == math_normalize(given):
        return True
    want, got = prm_normalize(truth), prm_normalize(given)
    if want is None or got is None:
        return False
    if want == got:
        return True
    if not got:
        return False
    want_parts, got_parts = _elements(want), _elements(got)
    if len(want_parts) > 1 and (want[0] != got[0] or want[-1] != got[-1]):
        return False  # an interval's brackets must match
    if len(want_parts) != len(got_parts):
        return False
    for w, g in zip(want_parts, got_parts, strict=True):
        if _FRACTION.search(w) and _FRACTION.search(g):
            ok = w == g  # an unreduced fraction is not accepted through sympy
        elif _is_integer_text(w) != _is_integer_text(g):
            ok = False
        else:
            ok = _sympy_equal(w, g)
        if not ok:
            return False
    return True


def math500_correct(parsed: object, truth: object) -> bool:
    """eval_accuracy.evaluate_math500: both present, the answer stripped and non-empty, then grade_answer."""
    if not parsed or not truth:
        return False
    given = str(parsed).strip()
    return bool(given) and grade_answer(given, str(truth))


class _Timeout(BaseException):
    """Not an Exception: the grader's own `except Exception` blocks must let it through."""


def _alarm(signum: int, frame: object) -> None:
    raise _Timeout


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """In the sandbox: each (answer, truth) pair graded under its own alarm; None for a pair that ran out."""
    signal.signal(signal.SIGALRM, _alarm)
    timeout = int(job["timeout"])
    verdicts: list[bool | None] = []
    for given, truth in job["pairs"]:
        signal.alarm(timeout)
        try:
            verdicts.append(math500_correct(given, truth))
        except _Timeout:
            verdicts.append(None)
        finally:
            signal.alarm(0)
    return {"verdicts": verdicts}
