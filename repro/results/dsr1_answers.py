"""The answer a DeepSeek-R1 output gives, per subset, as MLCommons' evaluator extracts and checks it
(mlcommons/inference @ b66003e1 language/deepseek-r1/eval_accuracy.py: parse_multiple_choice, parse_boxed_math,
parse_aime_answer, parse_code, evaluate_multiple_choice, evaluate_aime, DATASET_EVALUATORS, get_evaluator).
Written from those rules; tests/test_dsr1_answers.py holds the reference's own results on the same texts.

There is no `</think>` handling: the reference parses the whole decoded output, reasoning included (the
tokenizer's skip_special_tokens drops BOS/EOS only; `<think>`/`</think>` are not special tokens), and
mlcommons/endpoints' scorer passes "the full raw generation, including the <think> trace" the same way. So the
LAST "ANSWER: X" / \\boxed{...} anywhere wins, and for code the FIRST ```python block, even one inside the
reasoning. Every parser first strips the text (str.strip); an empty text has no answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# "ANSWER" or "FINAL ANSWER" (any case, any spacing between the words), an optional ':' or '=', then the letter,
# optionally in parentheses, followed by the end of the text or by anything but a letter.
_CHOICE = {
    top: re.compile(
        rf"\b(?:FINAL\s*)?ANSWER\b\s*[:=]?\s*\(?\s*([A-{top}])\s*\)?(?:\s*$|[^A-Za-z])",
        re.IGNORECASE,
    )
    for top in ("D", "J")
}
_LONE_LETTER = re.compile(r"\b([A-J])\b", re.IGNORECASE)  # MMLU-Pro's fallback: the last letter standing alone
_BOXED_DIGITS = re.compile(r"\\boxed\{\s*(\d+)\s*\}")
_ANSWER_DIGITS = re.compile(r"Answer:\s*(\d+)(?!\.)\b", re.IGNORECASE | re.MULTILINE)
_PYTHON_BLOCK = re.compile(r"```python(.*?)```", re.DOTALL)
_BOXED = "\\boxed{"


def parse_choice(text: str, top: str) -> str | None:
    """The letter (A..top) of the last 'ANSWER: X'; for A-J (MMLU-Pro) else the last lone letter; else None."""
    text = text.strip()
    if not text:
        return None
    if text[:2] in ("['", '["') and text[-2:] in ("']", '"]'):  # a list's repr around the text
        text = text[2:-2].strip()
    text = text.replace("\\n", "\n").replace("\\'", "'")  # literal backslash escapes, as the reference undoes them
    found = _CHOICE[top].findall(text)
    if found:
        return found[-1].upper()
    if top == "J":
        lone = _LONE_LETTER.findall(text)
        if lone:
            return lone[-1].upper()
    return None


def parse_boxed(text: str) -> str | None:
    """The contents of the last \\boxed{...}, braces balanced, stripped; None when absent or unclosed."""
    text = text.strip()
    start = text.rfind(_BOXED)
    if not text or start < 0:
        return None
    depth = 0
    begin = start + len(_BOXED)
    for pos in range(begin, len(text)):
        ch = text[pos]
        if ch == "{":
            depth += 1
        elif ch == "}":
            if depth == 0:
                return text[begin:pos].strip()
            depth -= 1
    return None


def parse_aime(text: str) -> int | None:
    """The integer in the last \\boxed{digits}, else after the last 'Answer:'; only 0-999 counts."""
    text = text.strip()
    if not text:
        return None
    boxed = _BOXED_DIGITS.findall(text)
    digits = boxed[-1] if boxed else None
    if digits is None:
        after = _ANSWER_DIGITS.findall(text)
        if not after:
            return None
        digits = after[-1]
    try:
        value = int(digits)
    except ValueError:  # more digits than int() takes: the reference's except gives no answer too
        return None
    return value if 0 <= value <= 999 else None


def parse_python(text: str) -> str | None:
    """The first ```python ... ``` block's body, stripped (text after the word `python` included)."""
    text = text.strip()
    if not text:
        return None
    block = _PYTHON_BLOCK.search(text)
    return block.group(1).strip() if block else None


def choice_correct(parsed: str | None, truth: object, letters: str) -> bool:
    if not parsed or not truth:
        return False
    parsed, want = parsed.upper(), str(truth).upper()
    return parsed in letters and parsed == want


def aime_correct(parsed: int | None, truth: object) -> bool:
    if parsed is None:
        return False
    try:
        return int(parsed) == int(truth)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class Subset:
    """How one subset's outputs are read and checked; `code` subsets are checked by running them (LiveCodeBench)."""

    key: str
    parse: Callable[[str], object]
    check: Callable[[object, object], bool] | None


def _math_check(parsed: object, truth: object) -> bool:
    from repro.results.math_grader import math500_correct

    return math500_correct(parsed, truth)


# In the reference's order: a dataset name is the first key it contains (lower-cased), so 'aime2024' is AIME.
SUBSETS: tuple[Subset, ...] = (
    Subset("gpqa", lambda t: parse_choice(t, "D"), lambda p, g: choice_correct(p, g, "ABCD")),  # type: ignore[arg-type]
    Subset("mmlu_pro", lambda t: parse_choice(t, "J"), lambda p, g: choice_correct(p, g, "ABCDEFGHIJ")),  # type: ignore[arg-type]
    Subset("math500", parse_boxed, _math_check),
    Subset("aime", parse_aime, aime_correct),  # type: ignore[arg-type]
    Subset("livecodebench", parse_python, None),
)


def subset_of(dataset: str) -> Subset | None:
    """The evaluator of a dataset name as the reference's get_evaluator picks it; None when none fits."""
    name = str(dataset).lower()
    for subset in SUBSETS:
        if subset.key in name:
            return subset
    return None
