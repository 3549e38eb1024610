"""DeepSeek-R1 accuracy end to end against MLCommons' evaluator: the same 335 outputs over six datasets (AIME twice,
GPQA, MMLU-Pro, MATH500, LiveCodeBench with 68 outputs on eight problems in code_generation_lite's row format) give
the reference's per-sample scores, its per-dataset log lines and its Results dict, digit for digit.

The reference ran in its own venv (scripts/dsr1_reference_cases.py) with LiveCodeBench's own testing_util and the
same problems; here every MATH500 answer and every program runs in repro's sandbox, at the reference's 60 s."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from repro.core.errors import InputError
from repro.results import dsr1_score
from repro.results.dsr1_score import Sample, ScoringRules, format_accuracy_txt, score_samples
from repro.results.livecodebench import load_problems
from repro.results.sandbox import Limits

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux-only")

FIXTURES = Path(__file__).parent / "fixtures" / "dsr1"
CASES = json.loads((FIXTURES / "cases.json").read_text(encoding="utf-8"))
REFERENCE = json.loads((FIXTURES / "reference.json").read_text(encoding="utf-8"))
RULES = ScoringRules(
    lcb_timeout_s=60,
    limits=Limits(memory_bytes=4 << 30, cpu_s=120, nproc=64, file_bytes=64 << 20, open_files=256),
    math_timeout_s=30,
    workers=2,
)


def _samples() -> list[Sample]:
    return [
        Sample(i, row["model_output"], row["tok_model_output_len"], row["dataset"], row["ground_truth"])
        for i, row in enumerate(CASES["rows"])
    ]


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    path = tmp_path_factory.mktemp("lcb") / "test.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in CASES["problems"]), encoding="utf-8")
    return load_problems(path)


@pytest.fixture(scope="module")
def scores(problems):
    pytest.importorskip("sympy")
    pytest.importorskip("pylatexenc")
    return score_samples(_samples(), problems, RULES)


def test_every_sample_scores_as_in_the_reference(scores):
    got = [100.0 if ok else 0.0 for ok in scores.correct]
    differ = [
        (i, CASES["rows"][i]["dataset"], got[i]) for i, want in enumerate(REFERENCE["per_sample"]) if got[i] != want
    ]
    assert differ == []


def test_the_per_dataset_lines_are_the_references(scores):
    lines = [
        f"{s.dataset} results: {s.correct}/{s.evaluated} correct ({s.logged_accuracy:.1f}% accuracy)"
        for s in scores.subsets
        if s.evaluated
    ]
    assert lines == REFERENCE["logged"]


def test_the_results_dict_is_the_references_digit_for_digit(scores):
    assert f"\nResults\n\n{scores.accuracy_dict()!r}\n" == REFERENCE["printed"]
    assert scores.num_samples == len(CASES["rows"]) == 335
    text = format_accuracy_txt(scores, "0" * 64)
    assert text.startswith(REFERENCE["printed"]) and text.endswith("hash=" + "0" * 64 + "\n")
    assert "'exact_match': 34.92537313432836," in text


def test_the_sandbox_ran_every_program_confined(scores):
    assert scores.lcb_runs == 66  # 68 outputs: one has no block, one an empty block (both fail unrun)
    assert scores.lcb_time_limits == 0 and scores.math_unfinished == 0
    assert scores.confinement["seccomp"] and scores.confinement["landlock"]


def test_per_subset_figures_cover_every_sample(scores):
    by = {s.dataset: s for s in scores.subsets}
    assert set(by) == {"aime1983", "aime2024", "gpqa", "livecodebench", "math500", "mmlu_pro"}
    assert sum(s.samples for s in by.values()) == 335
    lcb = by["livecodebench"].to_json()
    assert lcb["samples"] == 68 and lcb["correct"] == 37 and lcb["evaluated"] == 67
    assert lcb["exact_match"] == pytest.approx(100 * 37 / 68)
    assert by["math500"].evaluated == 108 and by["math500"].samples == 121  # no \boxed, or no ground truth: 0


def test_an_unknown_dataset_and_a_missing_problem_are_named(problems):
    with pytest.raises(InputError, match="no DeepSeek-R1 evaluator for dataset 'humaneval'"):
        score_samples([Sample(0, "x", 1, "humaneval", "a")], problems, RULES)
    text = "```python\nprint(1)\n```"
    with pytest.raises(InputError, match="LiveCodeBench problem 'nope' is not in the problems file"):
        score_samples([Sample(0, text, 1, "livecodebench", "nope")], problems, RULES)


def test_a_math_answer_that_hangs_sympy_is_unfinished_not_a_hang(problems):
    pytest.importorskip("sympy")
    rules = ScoringRules(RULES.lcb_timeout_s, RULES.limits, math_timeout_s=2, workers=1)
    scores = score_samples([Sample(0, "\\boxed{9**9**9}", 1, "math500", "\\frac{1}{2}")], problems, rules)
    assert scores.correct == [False] and scores.math_unfinished == 1


def test_the_packed_private_tests_are_read_without_running_pickle_globals(tmp_path):
    import base64
    import pickle
    import zlib

    row = dict(CASES["problems"][0])
    evil = pickle.dumps(__import__("os").system)  # a global: refused before anything runs
    row["private_test_cases"] = base64.b64encode(zlib.compress(evil)).decode()
    path = tmp_path / "test.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1 is not a LiveCodeBench problem"):
        load_problems(path)


def test_rules_have_no_defaults_hidden_in_code():
    assert "60" not in Path(dsr1_score.__file__).read_text(encoding="utf-8").replace("b66003e1", "")


def _byte_tokenizer():
    """A real byte-level BPE tokenizer (`tokenizers`, no merges: one id per byte, offset by 2 so that 0 and 1 are
    BOS and EOS as in DeepSeek-R1's vocabulary, both special, so skip_special_tokens drops them)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = ByteLevel.alphabet()
    vocab = {"<bos>": 0, "<eos>": 1, **{ch: i + 2 for i, ch in enumerate(sorted(alphabet))}}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<bos>", "<eos>"])

    class Decode:
        def batch_decode(self, ids, skip_special_tokens=False):
            return tok.decode_batch(ids, skip_special_tokens=skip_special_tokens)

    return tok, Decode()


def test_an_accuracy_log_end_to_end(tmp_path, problems):
    """The log's first entry per qsl_idx, decoded, its id count as its tokens; a repeated qsl_idx is ignored."""
    pytest.importorskip("sympy")
    tok, decode = _byte_tokenizer()
    picked = []
    for name in ("livecodebench", "gpqa", "mmlu_pro", "aime2024", "math500"):  # a right and a wrong one of each
        for want in (100.0, 0.0):
            rows_of = (i for i, r in enumerate(CASES["rows"]) if r["dataset"] == name)
            picked.append(next(i for i in rows_of if REFERENCE["per_sample"][i] == want))
    rows = [CASES["rows"][i] for i in picked]
    entries = []
    for idx, row in enumerate(rows):
        ids = [0, *tok.encode(row["model_output"]).ids, 1]  # BOS and EOS, dropped by skip_special_tokens
        entries.append({"seq_id": idx, "qsl_idx": idx, "data": b"".join(i.to_bytes(4, "little") for i in ids).hex()})
    entries.append({"seq_id": 9, "qsl_idx": 0, "data": "05000000"})
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps(entries), encoding="utf-8")
    problems_file = tmp_path / "test.jsonl"
    problems_file.write_text("".join(json.dumps(p) + "\n" for p in CASES["problems"]), encoding="utf-8")
    scores = dsr1_score.evaluate_dsr1_log(
        log, [r["dataset"] for r in rows], [r["ground_truth"] for r in rows], decode, problems_file, RULES
    )
    want = [REFERENCE["per_sample"][i] == 100.0 for i in picked]
    assert sum(want) == 5 and len(picked) == 10
    assert scores.correct == want
    lengths = [len(tok.encode(r["model_output"]).ids) + 2 for r in rows]
    assert scores.tokens_per_sample == sum(lengths) / 10 and scores.num_samples == 10
    out = dsr1_score.write_dsr1_accuracy_txt(tmp_path, scores)
    assert out.read_text(encoding="utf-8").startswith("\nResults\n\n{'exact_match': ")


def test_a_problems_file_of_another_release_is_refused(tmp_path):
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in CASES["problems"]), encoding="utf-8")
    assert len(load_problems(path, expected=8)) == 8
    with pytest.raises(InputError, match="8 LiveCodeBench problems; the release the benchmark names has 400"):
        load_problems(path, {"sum"}, expected=400)


def test_the_references_own_examples(problems):
    """mlcommons/endpoints' smoke test of the evaluator (examples/07_DeepSeekR1_Example/README.md @ ea332753: three
    outputs, 'Expect exact_match: 100.0'), and LiveCodeBench's own check_correctness example
    (compute_code_generation_metrics.py @ b1e7cab4 __main__: the ')))))' bracket DP, expected output 0)."""
    pytest.importorskip("sympy")
    smoke = [
        Sample(0, r"The answer is \boxed{8}.", 7, "math500", "8"),
        Sample(1, r"Hence \boxed{42}.", 5, "aime1983", "42"),
        Sample(2, "After reasoning, ANSWER: B", 6, "gpqa", "B"),
    ]
    scores = score_samples(smoke, problems, RULES)
    assert scores.accuracy_dict() == {"exact_match": 100.0, "tokens_per_sample": 6.0, "num-samples": 3}
    from repro.results.sandbox import Cases, run_program

    dp = (
        "\nMOD = 998244353\n\nS = input().strip()\nn = len(S)\n\nif n % 2 != 0:\n    print(0)\n    exit()\n\n"
        "dp = [[0] * (n + 2) for _ in range(n + 1)]\ndp[0][0] = 1\n\nfor i in range(1, n + 1):\n    c = S[i-1]\n"
        "    for b in range(n + 1):\n        if dp[i-1][b] == 0:\n            continue\n        if c == '(':\n"
        "            new_b = b + 1\n            if new_b <= n:\n"
        "                dp[i][new_b] = (dp[i][new_b] + dp[i-1][b]) % MOD\n"
        "        elif c == ')':\n            if b > 0:\n                new_b = b - 1\n"
        "                dp[i][new_b] = (dp[i][new_b] + dp[i-1][b]) % MOD\n\nprint(dp[n][0] % MOD)\n"
    )
    # LiveCodeBench's example passes its inputs as one string; a problem's tests are lists of strings
    outcome = run_program(dp, Cases((")))))",), ("0",)), timeout_s=6, limits=RULES.limits)
    assert outcome.passed and outcome.codes == [True]


def test_the_benchmark_evaluator_and_its_accuracy_txt(tmp_path):
    """evaluate_for_benchmark, the whole-log evaluator a benchmark module names (results/accuracy.py EVALUATORS):
    the benchmark file's rules, the dataset names as the per-sample kinds, the dict accuracy.txt states."""
    pytest.importorskip("sympy")
    from test_dsr1_rules import _bench

    bench = _bench(tmp_path)
    tok, decode = _byte_tokenizer()
    picked = [0, 1, *(i for i, r in enumerate(CASES["rows"]) if r["dataset"] == "gpqa")][:6]
    rows = [CASES["rows"][i] for i in picked]
    ids = [[0, *tok.encode(r["model_output"]).ids, 1] for r in rows]
    log = tmp_path / "mlperf_log_accuracy.json"
    entries = [{"qsl_idx": i, "data": b"".join(t.to_bytes(4, "little") for t in x).hex()} for i, x in enumerate(ids)]
    log.write_text(json.dumps(entries), encoding="utf-8")
    problems_file = tmp_path / "test.jsonl"
    problems_file.write_text("".join(json.dumps(p) + "\n" for p in CASES["problems"]), encoding="utf-8")
    truths, kinds = [r["ground_truth"] for r in rows], [r["dataset"] for r in rows]
    with pytest.raises(InputError, match="LiveCodeBench problems; the release the benchmark names has 400"):
        dsr1_score.evaluate_for_benchmark(log, truths, decode, bench, kinds, 2, problems_file=problems_file)
    problems_file.write_text(
        "".join(
            json.dumps(dict(p, question_id=f"{p['question_id']}{n}" if n else p["question_id"])) + "\n"
            for n in range(50)
            for p in CASES["problems"]
        ),
        encoding="utf-8",
    )
    got = dsr1_score.evaluate_for_benchmark(log, truths, decode, bench, kinds, 2, problems_file=problems_file)
    want = [REFERENCE["per_sample"][i] for i in picked]
    assert got == {"exact_match": sum(want) / 6, "tokens_per_sample": sum(len(x) for x in ids) / 6, "num-samples": 6}
    with pytest.raises(InputError, match="its problems .* are not set up"):
        dsr1_score.evaluate_for_benchmark(log, truths, decode, bench, kinds, 2)
    with pytest.raises(InputError, match="needs each sample's dataset name"):
        dsr1_score.evaluate_for_benchmark(log, truths, decode, bench, None, 2, problems_file=problems_file)
    out = dsr1_score.write_dsr1_accuracy_txt(tmp_path, got)
    assert out.read_text(encoding="utf-8").startswith(f"\nResults\n\n{got!r}\n\nhash=")
