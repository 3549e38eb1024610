"""DeepSeek-R1's accuracy as MLCommons computes it: every sample scored by its subset's rule, per-subset figures, then
exact_match and tokens_per_sample over all samples (mlcommons/inference @ b66003e1 language/deepseek-r1/
eval_accuracy.py: process_mlperf_log_accuracy, process_dataframe, process_livecodebench_parallel,
print_evaluation_results).

What the reference does, and so what this does:
- the accuracy log's first entry per qsl_idx, its int32 ids decoded with skip_special_tokens; a sample's token
  count is its id count; tokens_per_sample is their unrounded mean over the samples;
- each sample's subset is the first of gpqa, mmlu_pro, math500, aime, livecodebench its dataset name contains;
  its answer is parsed from the whole output (repro/results/dsr1_answers.py) and checked when one was found and the
  ground truth is present: letters and integers here, MATH500 by PRM800K's grader and LiveCodeBench by running the
  code, both in the sandbox (repro/results/sandbox.py);
- a sample scores 100 when correct, else 0 (no answer found counts 0); exact_match is the mean over ALL samples;
- the per-dataset line the reference logs, 'correct/evaluated (x.x%)', counts only the samples whose answer was found.
Not reproduced: the reference's 1,200 s bound on all LiveCodeBench samples together (as_completed's timeout, which
ends its whole evaluation with an error), since every program here has the reference's own per-program bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.benchmarks import Benchmark
from repro.core.errors import InputError
from repro.results import dsr1_answers
from repro.results.livecodebench import load_problems
from repro.results.sandbox import Cases, Limits, run_confined, run_program

MATH_GRADER = Path(__file__).with_name("math_grader.py")
_NEXT = "`repro setup` to prepare the DeepSeek-R1 dataset and LiveCodeBench's problems again"


@dataclass(frozen=True)
class ScoringRules:
    """The benchmark file's scoring block: LiveCodeBench's per-test timeout (the reference's), the sandbox's
    limits, MATH500's per-answer grader bound (the reference has none) and how many children run at once."""

    lcb_timeout_s: int
    limits: Limits
    math_timeout_s: int
    workers: int = 1
    problem_count: int | None = None


def rules_from(bench: Benchmark, workers: int = 1) -> ScoringRules:
    """The scoring rules a benchmark file states (its accuracy.code_execution block)."""
    spec = bench.accuracy.code_execution
    if spec is None:
        raise InputError(
            f"benchmark {bench.name} states no code_execution block: its outputs are not scored by running code.",
            f"`repro benchmarks show {bench.name}`",
        )
    box = spec.sandbox
    limits = Limits(box.memory_bytes, box.cpu_s, box.nproc, box.file_bytes, box.open_files)
    return ScoringRules(spec.test_timeout_s, limits, spec.math_grader_timeout_s, max(1, workers), spec.problem_count)


@dataclass(frozen=True)
class Sample:
    qsl_idx: int
    text: str
    tokens: int
    dataset: str
    truth: Any


@dataclass
class SubsetScore:
    """One dataset name's figures, as the reference's groupby('dataset') has them."""

    dataset: str
    evaluator: str
    samples: int = 0
    evaluated: int = 0
    correct: int = 0
    tokens: int = 0

    @property
    def exact_match(self) -> float:
        return 100.0 * self.correct / self.samples if self.samples else 0.0

    @property
    def logged_accuracy(self) -> float | None:
        """The reference's 'correct/evaluated (x.x% accuracy)' figure, over the samples with an answer."""
        return self.correct / self.evaluated * 100 if self.evaluated else None

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "evaluator": self.evaluator,
            "samples": self.samples,
            "evaluated": self.evaluated,
            "correct": self.correct,
            "exact_match": self.exact_match,
            "logged_accuracy": self.logged_accuracy,
            "tokens_per_sample": self.tokens / self.samples if self.samples else None,
        }


@dataclass
class Dsr1Scores:
    subsets: list[SubsetScore]
    correct: list[bool]
    lcb_runs: int = 0
    lcb_time_limits: int = 0
    lcb_stragglers_killed: int = 0
    math_unfinished: int = 0
    confinement: dict[str, Any] = field(default_factory=dict)

    @property
    def num_samples(self) -> int:
        return sum(s.samples for s in self.subsets)

    @property
    def exact_match(self) -> float:
        return 100.0 * sum(self.correct) / len(self.correct)

    @property
    def tokens_per_sample(self) -> float:
        return sum(s.tokens for s in self.subsets) / self.num_samples

    def accuracy_dict(self) -> dict[str, Any]:
        """The dict the reference prints after 'Results' (what accuracy.txt holds and the checker reads)."""
        return {
            "exact_match": self.exact_match,
            "tokens_per_sample": self.tokens_per_sample,
            "num-samples": self.num_samples,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            **self.accuracy_dict(),
            "subsets": [s.to_json() for s in self.subsets],
            "livecodebench": {
                "programs_run": self.lcb_runs,
                "wall_clock_overruns": self.lcb_time_limits,
                "stragglers_killed": self.lcb_stragglers_killed,
                "confinement": self.confinement,
            },
            "math500_unfinished": self.math_unfinished,
        }


def _present(truth: Any) -> bool:
    """pandas' notna for what a dataset cell holds: None and NaN are missing."""
    return truth is not None and not (isinstance(truth, float) and math.isnan(truth))


def score_samples(samples: Sequence[Sample], problems: dict[str, Cases], rules: ScoringRules) -> Dsr1Scores:
    """Every sample's verdict and the per-dataset and overall figures."""
    if not samples:
        raise InputError("the accuracy log holds no samples.", "re-run the accuracy run")
    groups: dict[str, SubsetScore] = {}
    correct = [False] * len(samples)
    math_jobs: list[tuple[int, str, str]] = []
    code_jobs: list[tuple[int, str, Cases]] = []
    for pos, sample in enumerate(samples):
        subset = dsr1_answers.subset_of(sample.dataset)
        if subset is None:
            raise InputError(
                f"sample {sample.qsl_idx}: no DeepSeek-R1 evaluator for dataset {sample.dataset!r}.", _NEXT
            )
        group = groups.setdefault(sample.dataset, SubsetScore(sample.dataset, subset.key))
        group.samples += 1
        group.tokens += sample.tokens
        answer = subset.parse(sample.text)
        if answer is None or not _present(sample.truth):
            continue
        group.evaluated += 1
        if subset.key == "math500":
            math_jobs.append((pos, str(answer), str(sample.truth)))
        elif subset.key == "livecodebench":
            cases = problems.get(str(sample.truth))
            if cases is None:
                raise InputError(
                    f"sample {sample.qsl_idx}: LiveCodeBench problem {str(sample.truth)!r} is not in "
                    "the problems file.",
                    _NEXT,
                )
            if answer:  # an empty ```python``` block fails without running, as the reference's `if not code`
                code_jobs.append((pos, str(answer), cases))
        else:
            assert subset.check is not None
            correct[pos] = subset.check(answer, sample.truth)
    scores = Dsr1Scores(sorted(groups.values(), key=lambda g: g.dataset), correct)
    _grade_math(math_jobs, rules, scores)
    _run_code(code_jobs, rules, scores)
    by_pos = {pos: samples[pos].dataset for pos in range(len(samples))}
    for pos, ok in enumerate(scores.correct):
        if ok:
            groups[by_pos[pos]].correct += 1
    return scores


def _grade_math(jobs: list[tuple[int, str, str]], rules: ScoringRules, scores: Dsr1Scores) -> None:
    if not jobs:
        return
    chunks = [jobs[i :: rules.workers] for i in range(min(rules.workers, len(jobs)))]

    def grade(chunk: list[tuple[int, str, str]]) -> list[bool | None]:
        payload = {"pairs": [[given, truth] for _, given, truth in chunk], "timeout": rules.math_timeout_s}
        outcome = run_confined(
            payload, MATH_GRADER, wall_s=rules.math_timeout_s * len(chunk) + 30.0, limits=rules.limits
        )
        verdicts = (outcome.result or {}).get("verdicts")
        if not isinstance(verdicts, list) or len(verdicts) != len(chunk):
            return [None] * len(chunk)
        return [v if isinstance(v, bool) else None for v in verdicts]

    with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        for chunk, verdicts in zip(chunks, pool.map(grade, chunks), strict=True):
            for (pos, _, _), verdict in zip(chunk, verdicts, strict=True):
                scores.correct[pos] = verdict is True
                scores.math_unfinished += verdict is None


def _run_code(jobs: list[tuple[int, str, Cases]], rules: ScoringRules, scores: Dsr1Scores) -> None:
    if not jobs:
        return

    def run(job: tuple[int, str, Cases]):
        _, code, cases = job
        return run_program(code, cases, timeout_s=rules.lcb_timeout_s, limits=rules.limits)

    with ThreadPoolExecutor(max_workers=max(1, rules.workers)) as pool:
        for (pos, _, _), outcome in zip(jobs, pool.map(run, jobs), strict=True):
            scores.correct[pos] = outcome.passed
            scores.lcb_runs += 1
            scores.lcb_time_limits += outcome.timed_out
            scores.lcb_stragglers_killed += outcome.stragglers_killed
            scores.confinement = scores.confinement or outcome.confinement


def format_accuracy_txt(scores: Dsr1Scores | dict[str, Any], log_sha256: str) -> str:
    """accuracy.txt as the reference prints its results (the dict the checker's exact_match pattern reads)."""
    figures = scores.accuracy_dict() if isinstance(scores, Dsr1Scores) else scores
    return f"\nResults\n\n{figures!r}\n\nhash={log_sha256}\n"


def evaluate_dsr1_log(
    accuracy_json: Path,
    datasets: Sequence[str],
    truths: Sequence[Any],
    tokenizer: Any,
    problems_file: Path,
    rules: ScoringRules,
) -> Dsr1Scores:
    """Score one accuracy log: `datasets` and `truths` are the dataset's 'dataset' and 'ground_truth' columns by
    qsl_idx; `tokenizer` a loaded tokenizer (or its folder); LiveCodeBench's problems from `problems_file`."""
    from repro.results.accuracy import load_tokenizer, read_accuracy_log

    if len(datasets) != len(truths):
        raise ValueError("datasets and truths differ in length")
    entries = read_accuracy_log(Path(accuracy_json), len(truths))
    if not entries:
        raise InputError(f"{accuracy_json}: the accuracy log holds no samples.", "re-run the accuracy run")
    if isinstance(tokenizer, (str, Path)):
        tokenizer = load_tokenizer(tokenizer)
    texts = tokenizer.batch_decode([ids.tolist() for _, ids in entries], skip_special_tokens=True)
    samples = [
        Sample(idx, text, len(ids), str(datasets[idx]), truths[idx])
        for (idx, ids), text in zip(entries, texts, strict=True)
    ]
    wanted = {
        str(s.truth) for s in samples if (sub := dsr1_answers.subset_of(s.dataset)) and sub.key == "livecodebench"
    }
    problems = load_problems(Path(problems_file), wanted, expected=rules.problem_count) if wanted else {}
    return score_samples(samples, problems, rules)


def evaluate_for_benchmark(
    accuracy_json: Path,
    references: list[str],
    tokenizer: Any,
    bench: Benchmark,
    sample_kinds: Sequence[str] | None,
    workers: int | None,
    *,
    problems_file: Path | None = None,
) -> dict[str, Any]:
    """The whole-log evaluator of a benchmark whose module names this one (results/accuracy.py EVALUATORS):
    `references` the ground truths and `sample_kinds` the dataset names, both by qsl_idx; LiveCodeBench's problems
    from `problems_file` (the benchmark's code_execution.file as setup placed it). The dict accuracy.txt states."""
    if sample_kinds is None or len(sample_kinds) != len(references):
        raise InputError(
            f"the {bench.name} evaluation needs each sample's dataset name (the dataset's 'dataset' column), and the "
            "prepared dataset has none.",
            "`repro setup --force` to prepare the dataset again",
        )
    from repro.results.accuracy import default_workers

    rules = rules_from(bench, workers or default_workers())  # the reference runs one program per core
    spec = bench.accuracy.code_execution
    assert spec is not None  # rules_from refused a benchmark without one
    wanted = problems_file or Path(f"<no {spec.file} set up>")
    if problems_file is None and any(
        (sub := dsr1_answers.subset_of(str(k))) is not None and sub.key == "livecodebench" for k in sample_kinds
    ):
        raise InputError(
            f"scoring {bench.name} runs LiveCodeBench's tests, and its problems ({spec.problems} {spec.version}, "
            f"{spec.file}) are not set up.",
            "`repro setup` to fetch them, then score the accuracy log again",
        )
    return evaluate_dsr1_log(accuracy_json, sample_kinds, references, tokenizer, wanted, rules).accuracy_dict()


def write_dsr1_accuracy_txt(run_dir: Path, scores: Dsr1Scores | dict[str, Any]) -> Path:
    """accuracy.txt beside mlperf_log_accuracy.json with that log's sha256, written atomically."""
    from repro.core.fsutil import atomic_write_text, sha256_file

    log = Path(run_dir) / "mlperf_log_accuracy.json"
    out = Path(run_dir) / "accuracy.txt"
    atomic_write_text(out, format_accuracy_txt(scores, sha256_file(log)))
    return out
