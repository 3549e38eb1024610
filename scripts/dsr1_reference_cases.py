#!/usr/bin/env python3
"""Build the DeepSeek-R1 scoring cases and run MLCommons' own evaluator on them: tests/fixtures/dsr1/.

Run with the REFERENCE's environment, never repro's (it imports neither repro nor anything repro ships):

    git archive the reference at its pins into REF (mlcommons/inference @ b66003e1 language/deepseek-r1, with
    submodules/LiveCodeBench @ b1e7cab4 and submodules/prm800k @ 7ecc7947), make a venv with pandas numpy tqdm
    transformers sympy pylatexenc datasets, then
    REF/venv/bin/python scripts/dsr1_reference_cases.py --reference REF/language/deepseek-r1 \\
        --math500 math500_answers.json --out tests/fixtures/dsr1

It writes cases.json (the inputs: output texts, answer pairs, a small dataset with its LiveCodeBench problems in
code_generation_lite's row format) and reference.json (what the reference returned for each: its parsers, PRM800K's
grade_answer, and process_dataframe's per-dataset lines and Results dict, LiveCodeBench graded by its own
testing_util with the problems given to load_lcb_benchmark in place of the Hugging Face download).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import logging
import pickle
import platform
import sys
import zlib
from pathlib import Path

THINK = "<think>\nLet me work through this step by step. Maybe ANSWER: A? No.\n</think>\n\n"

CHOICE_TEXTS = [
    "ANSWER: B",
    "answer: c",
    "Final Answer: (C)",
    "FINAL ANSWER:D",
    "FINALANSWER = d",
    "ANSWER=(a)",
    "ANSWER (B)",
    "The answer is B.",
    "I think it is E, so ANSWER: E",
    "ANSWER: J",
    "ANSWER: K",
    "answer:j.",
    "ANSWER: Bob",
    "ANSWER: B and ANSWER: C",
    THINK + "ANSWER: C",
    "ANSWER: A\n" + THINK,
    "['ANSWER: B']",
    '["ANSWER: D"]',
    "ANSWER:\\nB",
    "It\\'s ANSWER: C",
    "no letter here",
    "",
    "   ",
    "A",
    "a b c",
    "choose (H) or (I): I",
    "ANSWER: ( D )",
    "ANSWER:  B  ",
    "**ANSWER: C**",
    "ANSWER: C)",
    "ANSWER: Cx",
    "ANSWER: C1",
    "The answer: F",
    "answer\n:\nG",
    "xANSWER: B",
    "ANSWER:B,C",
    "ANSWER: ａ",
    "Ǆ ANSWER: B",
    "ANSWERS: B",
    "Answer:\tH\n",
    "Therefore the final answer is $\\boxed{C}$. ANSWER: C",
]
BOXED_TEXTS = [
    "\\boxed{5}",
    "so \\boxed{\\frac{1}{2}} and then \\boxed{3}",
    "\\boxed{ 42 }",
    "\\boxed{\\text{(A)}}",
    "\\boxed{a{b}c}",
    "\\boxed{unclosed",
    "\\boxed{}",
    "\\boxed 5",
    THINK + "\\boxed{7}",
    "\\boxed{7}\n" + THINK,
    "Answer: 12",
    "Answer: 012",
    "answer:   999",
    "Answer: 1000",
    "\\boxed{1000}",
    "\\boxed{1000} Answer: 5",
    "Answer: 12.5",
    "Answer: 12.",
    "Answer: 7\nAnswer: 8",
    "\\boxed{٣}",
    "\\boxed{-5}",
    "Answer: -5",
    "\\boxed{5} \\boxed{x}",
    "\\boxed{\\boxed{9}}",
    "ANSWER: 77",
    "\\boxed{00}",
    "Answer:42abc",
    "Answer: 42 abc",
    "\\boxed{3.5}",
    "\\boxed{\n17\n}",
    "",
    "no answer",
]
CODE_TEXTS = [
    "```python\nprint(1)\n```",
    "```python3\nprint(1)\n```",
    "```\nprint(1)\n```",
    "```python print(2)```",
    "<think>```python\nfirst()\n```</think>\n```python\nsecond()\n```",
    "```python\nunclosed",
    "```python```",
    "```Python\nprint(1)\n```",
    "text ```python\n  x = 1  \n``` more",
]

# The reference parses the stripped decoded text; these wrap answers the way outputs carry them.
MATH_WRAPS = [
    "{}",
    " {} ",
    "\\dfrac{{{}}}{{1}}",
    "\\text{{{}}}",
    "x = {}",
    "{}^\\circ",
    "\\${}",
    "{}\\%",
    "\\left( {} \\right)",
    "{} \\text{{ cm}}",
    "{}.0",
    "0{}",
]


def choice_and_boxed_texts() -> list[str]:
    texts = list(dict.fromkeys(CHOICE_TEXTS + BOXED_TEXTS + CODE_TEXTS))
    for letter in "ADGJ":
        texts.append(THINK + f"After checking, the final answer is ANSWER: {letter}")
    return texts


def math_pairs(answers: list[str]) -> list[list[str]]:
    pairs: list[list[str]] = []
    for i, truth in enumerate(answers):
        other = answers[(i + 7) % len(answers)]
        for wrap in MATH_WRAPS:
            pairs.append([wrap.format(truth), truth])
        pairs.append([truth.replace(" ", ""), truth])
        pairs.append([truth.replace("\\frac", "\\dfrac"), truth])
        pairs.append([other, truth])
    extra = [
        ("0.5", "\\frac{1}{2}"),
        ("1/2", "\\frac12"),
        ("2/4", "\\frac{1}{2}"),
        ("\\frac{2}{4}", "\\frac{1}{2}"),
        ("(1,2)", "[1,2]"),
        ("[1, 2)", "[1,2)"),
        ("1,000", "1000"),
        ("10^6", "1 million"),
        ("3 or 4", "3, 4"),
        ("\\sqrt2", "\\sqrt{2}"),
        ("2\\sqrt{2}", "\\sqrt{8}"),
        ("x^2+2x+1", "(x+1)^2"),
        ("7 3/4", "\\frac{31}{4}"),
        ("\\pi", "3.14159"),
        ("\\infty", "\\infty"),
        ("5", "5.0000001"),
        ("  ", "5"),
        ("5", ""),
    ]
    pairs += [list(p) for p in extra]
    return pairs


def compress(tests: list[dict]) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


def lcb_problem(qid: str, tests: list[dict], fn_name: str | None = None, packed: bool = False) -> dict:
    public, private = tests[:1], tests[1:]
    return {
        "question_title": qid,
        "question_content": "synthetic",
        "platform": "atcoder",
        "question_id": qid,
        "contest_id": "c1",
        "contest_date": "2023-08-01T00:00:00",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps(public),
        "private_test_cases": compress(private) if packed else json.dumps(private),
        "metadata": json.dumps({"func_name": fn_name} if fn_name else {}),
    }


def stdin_tests(pairs: list[tuple[str, str]]) -> list[dict]:
    return [{"input": i, "output": o, "testtype": "stdin"} for i, o in pairs]


def call_tests(pairs: list[tuple[str, str]]) -> list[dict]:
    return [{"input": i, "output": o, "testtype": "functional"} for i, o in pairs]


SUM = stdin_tests([("1 2\n", "3\n"), ("10 20\n", "30\n"), ("-5 5\n", "0\n")])
LINES = stdin_tests([("3\n1\n2\n3\n", "6\n"), ("1\n9\n", "9\n")])
FLOAT = stdin_tests([("2\n", "1.0\n"), ("4\n", "2\n")])
TWO_SUM = call_tests([("[2,7,11,15]\n9", "[0, 1]"), ("[3,2,4]\n6", "[1, 2]")])
THIRD = stdin_tests([("3\n", "0.3333333333\n")])
YES = stdin_tests([("1\n", "Yes\n"), ("2\n", "No\n")])
REPEAT = call_tests([('"ab"\n2', '"abab"'), ('"x"\n0', '""')])

PROGRAMS = [  # (question id, code inside the ```python block, or None for an output with no block)
    ("sum", "a, b = map(int, input().split())\nprint(a + b)"),
    ("sum", "a, b = map(int, input().split())\nprint(a - b)"),
    ("sum", "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)"),
    ("sum", "import sys\nfor line in sys.stdin:\n    a, b = map(int, line.split())\n    print(a + b)"),
    ("sum", "a, b = map(int, open(0).read().split())\nprint(a + b)"),
    ("sum", "from sys import stdin\na, b = map(int, stdin.readline().split())\nprint(a + b)"),
    ("sum", "import sys\na, b = map(int, sys.stdin.buffer.read().split())\nprint(a + b)"),
    ("sum", "import sys\ninput = sys.stdin.readline\na, b = map(int, input().split())\nprint(a + b)"),
    (
        "sum",
        "def main():\n    a, b = map(int, input().split())\n    print(a + b)\n\nif __name__ == '__main__':\n    main()",
    ),
    (
        "sum",
        'def main():\n    a, b = map(int, input().split())\n    print(a + b)\nif __name__ == "__main__":\n    main()',
    ),
    ("sum", "a, b = map(int, input().split())\nprint(a + b)\nexit()"),
    ("sum", "a, b = map(int, input().split())\nprint(a + b)\nquit()"),
    ("sum", "raise ValueError('boom')"),
    ("sum", "print(undefined_name)"),
    ("sum", "def f(:\n  pass"),
    ("sum", "import os\na, b = map(int, input().split())\nos.getcwd()\nprint(a + b)"),
    ("sum", "a, b = map(int, input().split())\nprint(a + b, end='')"),
    ("sum", "a, b = map(int, input().split())\nprint(' ', a + b, ' ')"),
    ("sum", "a, b = map(int, input().split())\nprint(a + b)\nprint()"),
    ("sum", "import sys\na, b = map(int, input().split())\nsys.stdout.write(str(a + b) + '\\n')"),
    ("sum", "import sys\na, b = map(int, input().split())\nsys.stdout.close()\nprint(a + b)"),
    (
        "sum",
        "total = 0\ndef add(x):\n    global total\n    total += x\na, b = map(int, input().split())\nadd(a)\n"
        "add(b)\nprint(total)",
    ),
    ("sum", "from __future__ import annotations\na, b = map(int, input().split())\nprint(a + b)"),
    ("sum", "import resource\nprint(3)"),
    ("sum", "print(sqrt(16) and 3)"),
    ("lines", "n = int(input())\nprint(sum(int(input()) for _ in range(n)))"),
    ("lines", "import sys\ndata = sys.stdin.readlines()\nprint(sum(int(x) for x in data[1:] if x.strip()))"),
    ("lines", "import sys\nn, *xs = map(int, sys.stdin.read().split())\nprint(sum(xs))"),
    ("lines", "n = int(input())\nprint(sum(int(input()) for _ in range(n + 1)))"),
    ("float", "n = int(input())\nprint(n / 2)"),
    ("float", "n = int(input())\nprint(f'{n / 2:.1f}')"),
    ("float", "n = int(input())\nprint(n // 2)"),
    ("packed", "a, b = map(int, input().split())\nprint(a + b)"),
    (
        "two_sum",
        "class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n        for i, x in "
        "enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n"
        "            seen[x] = i",
    ),
    ("two_sum", "class Solution:\n    def twoSum(self, nums, target):\n        return (0, 1)"),
    (
        "two_sum",
        "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        return [0, 1]",
    ),
    ("two_sum", "class Solution:\n    def wrongName(self, nums, target):\n        return [0, 1]"),
    ("two_sum", "def twoSum(nums, target):\n    return [0, 1]"),
    ("two_sum", None),
    ("sum", ""),
    ("sum", "import sys\nprint(sum(map(int, sys.stdin.readline().split())))"),
    ("sum", "print(eval(input().replace(' ', '+')))"),
    ("sum", "a, b = map(int, input().split())\nprint(f'{a + b}.0')"),
    ("sum", "a, b = map(int, input().split())\nprint(a + b)\nraise SystemExit(1)"),
    ("sum", "a, b = map(int, input().split())\nprint(a + b)\nraise KeyboardInterrupt"),
    (
        "sum",
        "import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return 0 if n <= 0 else 1 + f(n - 1)\n"
        "a, b = map(int, input().split())\nprint(a + b if f(50) == 50 else -1)",
    ),
    ("sum", "import numpy as np\na, b = map(int, input().split())\nprint(np.int64(a) + b)"),
    ("sum", "print(input())"),
    (
        "sum",
        "import threading\nout = []\nt = threading.Thread(target=lambda: out.append(sum(map(int, input().split()))))\n"
        "t.start()\nt.join()\nprint(out[0])",
    ),
    ("sum", "a, b = map(int, input().split())\nprint(a + b)\nprint('debug', file=__import__('sys').stderr)"),
    ("lines", "for _ in range(int(input())):\n    pass\nprint(6)"),
    ("lines", "import sys\ninput()\nprint(sum(int(x) for x in sys.stdin.read().split()))"),
    ("lines", "import sys\nn = int(input())\nprint(sum(int(sys.stdin.readline()) for _ in range(n)))"),
    ("lines", "from sys import stdin\nn = int(stdin.readline())\nprint(sum(int(stdin.readline()) for _ in range(n)))"),
    ("lines", "import sys\ndata = sys.stdin.buffer.read().split()\nprint(sum(map(int, data[1:])))"),
    ("lines", "import sys\nn = int(sys.stdin.buffer.readline())\nprint(n)"),
    ("lines", "import sys\nlines = sys.stdin.readlines()\nprint(sum(map(int, lines[1:int(lines[0]) + 1])))"),
    (
        "two_sum",
        "class Solution:\n    calls = []\n    def twoSum(self, nums, target):\n        Solution.calls.append(1)\n"
        "        return [0, 1] if len(Solution.calls) == 1 else [1, 2]",
    ),
    (
        "two_sum",
        "import numpy as np\nclass Solution:\n    def twoSum(self, nums, target):\n        return np.array([0, 1])",
    ),
    (
        "two_sum",
        "import numpy as np\nclass Solution:\n    def twoSum(self, nums, target):\n"
        "        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n"
        "                return [np.int64(seen[target - x]), np.int64(i)]\n            seen[x] = i",
    ),
    ("two_sum", "class Solution:\n    def twoSum(self, nums, target):\n        return None"),
    ("two_sum", "class Solution:\n    def twoSum(self, nums, target):\n        raise RuntimeError('no')"),
    ("third", "print(1 / int(input()))"),
    ("third", "print(f'{1 / int(input()):.10f}')"),
    ("yes", "print('YES' if int(input()) == 1 else 'NO')"),
    ("yes", "print('Yes' if int(input()) == 1 else 'No')"),
    ("repeat", "class Solution:\n    def repeat(self, s: str, k: int) -> str:\n        return s * k"),
    ("repeat", "class Solution:\n    def repeat(self, s, k):\n        return list(s * k)"),
]


def dataset_rows(answers: list[str]) -> tuple[list[dict], list[dict]]:
    problems = [
        lcb_problem("sum", SUM),
        lcb_problem("lines", LINES),
        lcb_problem("float", FLOAT),
        lcb_problem("packed", SUM, packed=True),
        lcb_problem("two_sum", TWO_SUM, fn_name="twoSum"),
        lcb_problem("third", THIRD),
        lcb_problem("yes", YES),
        lcb_problem("repeat", REPEAT, fn_name="repeat"),
    ]
    rows: list[dict] = []
    for n, (qid, code) in enumerate(PROGRAMS):
        text = THINK + ("no code at all" if code is None else f"Here it is:\n```python\n{code}\n```\nDone.")
        rows.append(
            {"dataset": "livecodebench", "ground_truth": qid, "model_output": text, "tok_model_output_len": 500 + n}
        )
    letters = "ABCD"
    for n, text in enumerate(CHOICE_TEXTS):
        rows.append(
            {"dataset": "gpqa", "ground_truth": letters[n % 4], "model_output": text, "tok_model_output_len": 1000 + n}
        )
        rows.append(
            {
                "dataset": "mmlu_pro",
                "ground_truth": "ABCDEFGHIJ"[n % 10],
                "model_output": text,
                "tok_model_output_len": 2000 + 3 * n,
            }
        )
    for n, text in enumerate(BOXED_TEXTS):
        for name in ("aime2024", "aime1983"):
            rows.append(
                {
                    "dataset": name,
                    "ground_truth": str(7 * (n % 3) + 5 if n % 4 else 42),
                    "model_output": text,
                    "tok_model_output_len": 3000 + n,
                }
            )
    for n, truth in enumerate(answers[:120]):
        given = [truth, MATH_WRAPS[n % len(MATH_WRAPS)].format(truth), answers[(n + 3) % 120]][n % 3]
        text = THINK + f"So the result is \\boxed{{{given}}}." if n % 10 else "I could not finish."
        rows.append(
            {"dataset": "math500", "ground_truth": truth, "model_output": text, "tok_model_output_len": 4000 + 11 * n}
        )
    rows.append({"dataset": "math500", "ground_truth": None, "model_output": "\\boxed{5}", "tok_model_output_len": 9})
    return rows, problems


def run_reference(ref: Path, cases: dict) -> dict:
    sys.path.insert(0, str(ref))
    sys.path.insert(0, str(ref / "submodules" / "LiveCodeBench"))
    import eval_accuracy as ev  # noqa: E402 - the reference, from the path given
    import pandas as pd  # noqa: E402
    from lcb_runner.benchmarks.code_generation import CodeGenerationProblem  # noqa: E402

    sys.path.insert(0, str(ref / "submodules" / "prm800k" / "prm800k"))
    from grading.grader import grade_answer  # noqa: E402

    out: dict = {"parsers": [], "math": []}
    for text in cases["texts"]:
        aime = ev.parse_aime_answer(text)
        out["parsers"].append(
            {
                "gpqa": ev.parse_multiple_choice(text, "D"),
                "mmlu_pro": ev.parse_multiple_choice(text, "J"),
                "math500": ev.parse_boxed_math(text),
                "aime": aime,
                "livecodebench": ev.parse_code(text),
            }
        )
    for given, truth in cases["math_pairs"]:
        out["math"].append(bool(grade_answer(given_answer=given, ground_truth=truth)))
    problems = {p["question_id"]: CodeGenerationProblem(**p) for p in cases["problems"]}
    ev.load_lcb_benchmark = lambda: problems  # in place of the Hugging Face download
    df = pd.DataFrame(cases["rows"])
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    ev.logger.addHandler(handler)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        evaluated = ev.process_dataframe(df)
        ev.print_evaluation_results(evaluated)
    ev.logger.removeHandler(handler)
    out["per_sample"] = [float(x) for x in evaluated["prompt_accuracy"]]
    out["logged"] = [line for line in log.getvalue().splitlines() if " results: " in line]
    out["printed"] = printed.getvalue()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", type=Path, required=True)
    ap.add_argument("--math500", type=Path, required=True, help="a JSON list of the 500 MATH500 answers")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    answers = json.loads(args.math500.read_text())
    rows, problems = dataset_rows(answers)
    cases = {"texts": choice_and_boxed_texts(), "math_pairs": math_pairs(answers), "rows": rows, "problems": problems}
    reference = run_reference(args.reference, cases)
    import pylatexenc  # noqa: E402
    import sympy  # noqa: E402

    reference["ran_with"] = {
        "python": platform.python_version(),
        "sympy": sympy.__version__,
        "pylatexenc": getattr(pylatexenc, "_version_str", "?"),
        "reference": "mlcommons/inference@b66003e1 language/deepseek-r1/eval_accuracy.py",
        "livecodebench": "LiveCodeBench/LiveCodeBench@b1e7cab4",
        "prm800k": "openai/prm800k@7ecc7947",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cases.json").write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n")
    (args.out / "reference.json").write_text(json.dumps(reference, indent=1, ensure_ascii=False) + "\n")
    print(reference["printed"])
    print("\n".join(reference["logged"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
