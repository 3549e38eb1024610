"""repro's DeepSeek-R1 answer parsers and MATH500 grader against MLCommons' own evaluator on the same inputs.

tests/fixtures/dsr1/reference.json is what mlcommons/inference @ b66003e1 language/deepseek-r1/eval_accuracy.py
(and PRM800K @ 7ecc7947's grade_answer) returned for tests/fixtures/dsr1/cases.json, run in a separate venv by
scripts/dsr1_reference_cases.py (its docstring says how); nothing here imports the reference."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from repro.results import dsr1_answers as answers

FIXTURES = Path(__file__).parent / "fixtures" / "dsr1"
CASES = json.loads((FIXTURES / "cases.json").read_text(encoding="utf-8"))
REFERENCE = json.loads((FIXTURES / "reference.json").read_text(encoding="utf-8"))


def test_the_fixture_says_what_it_was_made_with():
    ran = REFERENCE["ran_with"]
    assert ran["reference"].startswith("mlcommons/inference@b66003e1")
    assert ran["livecodebench"].endswith("@b1e7cab4") and ran["prm800k"].endswith("@7ecc7947")
    assert len(CASES["texts"]) == len(REFERENCE["parsers"]) > 80
    assert len(CASES["math_pairs"]) == len(REFERENCE["math"]) > 7000


@pytest.mark.parametrize("index", range(len(CASES["texts"])))
def test_every_parser_extracts_what_the_reference_extracts(index):
    text, want = CASES["texts"][index], REFERENCE["parsers"][index]
    got = {
        "gpqa": answers.parse_choice(text, "D"),
        "mmlu_pro": answers.parse_choice(text, "J"),
        "math500": answers.parse_boxed(text),
        "aime": answers.parse_aime(text),
        "livecodebench": answers.parse_python(text),
    }
    assert got == want, text


def test_the_reasoning_is_parsed_too():
    """No </think> handling: the last answer anywhere counts, the first code block anywhere counts."""
    think = "<think>ANSWER: A ... \\boxed{3} ```python\nfirst()\n```</think>\n"
    assert answers.parse_choice(think + "no letter given", "D") == "A"
    assert answers.parse_boxed(think + "so it is") == "3"
    assert answers.parse_python(think + "```python\nsecond()\n```") == "first()"


def test_aime_digits_too_long_for_int_are_no_answer():
    assert answers.parse_aime("\\boxed{" + "9" * 5000 + "}") is None


def test_subset_routing_is_the_references_substring_rule():
    assert answers.subset_of("aime2024").key == "aime"
    assert answers.subset_of("AIME1983").key == "aime"
    assert answers.subset_of("mmlu_pro").key == "mmlu_pro"
    assert answers.subset_of("gpqa_diamond").key == "gpqa"
    assert answers.subset_of("livecodebench_v1").key == "livecodebench"
    assert answers.subset_of("humaneval") is None


def _math_indices() -> list[int]:
    """Every pair under REPRO_SLOW_TESTS=1; else every pair of the first 150 answers and all the edge pairs."""
    n = len(CASES["math_pairs"])
    if os.environ.get("REPRO_SLOW_TESTS") == "1":
        return list(range(n))
    return list(range(0, 15 * 150)) + list(range(n - 18, n))


def test_the_math500_grader_agrees_with_prm800k_on_every_pair():
    pytest.importorskip("sympy")
    pytest.importorskip("pylatexenc")
    from repro.results.math_grader import grade_answer

    differ = []
    for i in _math_indices():
        given, truth = CASES["math_pairs"][i]
        if grade_answer(given, truth) != REFERENCE["math"][i]:
            differ.append((given, truth, REFERENCE["math"][i]))
    assert differ == []
    assert 0.6 < sum(REFERENCE["math"]) / len(REFERENCE["math"]) < 0.95  # the cases are neither all right nor wrong
