"""The llama3.1-405b accuracy metrics (MLCommons' language/llama3.1-405b/evaluate-accuracy.py, read at e0d093d6):
ROUGE-L over the 'rouge' samples, exact match over the 'niah_em' and 'qa_em' ones, each mean over its own samples.

Nothing is fetched and no MLCommons code is copied: the expected values below are worked out by hand on a crafted
log whose answers are obvious, and ROUGE-L is cross-checked against the `rouge_score` package itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from repro.core.benchmarks import load_benchmark
from repro.core.families.llama3_1_405b import niah_em, qa_em
from repro.results import accuracy as A
from repro.results.logfiles import parse_accuracy_txt

B405 = load_benchmark("llama3.1-405b")
U1 = "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
U2 = "ffffffff-ffff-ffff-ffff-ffffffffffff"


def test_niah_em_by_hand() -> None:
    assert niah_em(f"The key is {U1}.", f"It is {U1}.") == 100.0
    assert niah_em(f"The key is {U1}.", "I cannot find it.") == 0.0  # no UUID answered
    # U2 shares only 'f' and '-' with U1: 'f' occurs twice (4e5f, 0e1f) and '-' 4 times in U1's 36 characters
    assert niah_em(f"The key is {U1}.", f"It is {U2}.") == round(6 / 36 * 100, 2) == 16.67
    # two answered UUIDs against one expected: the pairs stop at the shorter list, the sum is divided by 2
    assert niah_em(f"The key is {U1}.", f"{U1} or {U2}") == 50.0
    # case does not matter
    assert niah_em(f"key {U1.upper()}", f"got {U1}") == 100.0


def test_qa_em_by_hand() -> None:
    assert qa_em("Paris|paris, France", "Answer: Paris") == 100.0  # the text after 'Answer: ' is in the reference
    assert qa_em("Paris", "I think... Answer: maybe Answer: Paris") == 100.0  # the last 'Answer: ' counts
    assert qa_em("New York|NYC", "answer:  new   york city") == 100.0  # spaces removed, lower-cased, contains one
    assert qa_em("Berlin", "Answer: Paris") == 0.0
    assert qa_em("Rome", "Rome") == 100.0  # no 'Answer: ': the whole text


def _rouge_l(reference: str, prediction: str) -> float:
    """rouge_score itself (the test dependency MLCommons' evaluation uses), on already post-processed texts."""
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(reference, prediction)["rougeL"].fmeasure * 100


def test_a_crafted_405b_log_scores_by_hand_and_against_rouge_score() -> None:
    refs = [
        "The cat sat on the mat.",  # rouge
        "Dogs run fast in the park.",  # rouge
        f"The special magic number is {U1}.",  # niah_em
        "Paris|paris",  # qa_em
        "Berlin",  # qa_em
    ]
    kinds = ["rouge", "rouge", "niah_em", "qa_em", "qa_em"]
    preds = [
        "The cat sat on the mat.",  # identical: ROUGE-L 100
        "Cats sleep all day.",  # no word in common with its reference: ROUGE-L 0
        f"It is {U1}.",  # 100
        "Answer: Paris",  # 100
        "Answer: Madrid",  # 0
    ]
    got = A.score_benchmark(preds, refs, B405, kinds, workers=1)
    # rougeL: mean of 100 and 0 over the two 'rouge' samples; exact_match: mean of 100, 100, 0 over the other three
    assert got["rougeL"] == pytest.approx(50.0)
    assert got["exact_match"] == pytest.approx(200 / 3)
    assert list(got) == ["rougeL", "exact_match", "gen_len"]
    assert got["gen_len"] == sum(len(p) for p in preds)  # one sentence each: post-processing keeps them whole
    # ROUGE-L on text that overlaps in part, against rouge_score computed here
    refs2 = ["the quick brown fox jumps over the lazy dog", *refs[1:]]
    preds2 = ["a quick brown dog jumps over a lazy fox", *preds[1:]]
    got2 = A.score_benchmark(preds2, refs2, B405, kinds, workers=1)
    want = np.mean([_rouge_l(refs2[0], preds2[0]), _rouge_l(refs2[1], preds2[1])])
    assert 0 < _rouge_l(refs2[0], preds2[0]) < 100
    assert got2["rougeL"] == pytest.approx(want, abs=1e-9)


def test_a_405b_accuracy_log_round_trips_through_accuracy_txt(tmp_path: Path) -> None:
    """mlperf_log_accuracy.json of int32 ids -> decoded by the tokenizer -> scored -> accuracy.txt that verify's
    parser reads back with the benchmark's keys (exact_match, rougeL, tokens_per_sample)."""
    from tests.helpers import word_tokenizer

    tok = word_tokenizer(tmp_path / "tok")
    texts = ["w7 w8 w9", "w10 w11", "w12"]
    refs = ["w7 w8 w9", "w13", "w12"]
    kinds = ["rouge", "qa_em", "qa_em"]
    entries = []
    for i, text in enumerate(texts):
        ids = np.asarray(tok.encode(text, add_special_tokens=False), dtype="<i4")
        entries.append({"seq_id": i, "qsl_idx": i, "data": ids.tobytes().hex().upper(), "token_count": len(ids)})
    log = tmp_path / "run" / A.ACCURACY_JSON
    log.parent.mkdir()
    log.write_text(json.dumps(entries))
    scores = A.evaluate_accuracy_log(log, refs, tok, workers=1, bench=B405, sample_metrics=kinds)
    assert scores["rougeL"] == pytest.approx(100.0) and scores["exact_match"] == pytest.approx(50.0)
    assert scores["gen_num"] == 3 and scores["tokens_per_sample"] == round(scores["gen_tok_len"] / 3, 1)
    back = parse_accuracy_txt(A.write_accuracy_txt(log.parent, scores))
    assert back["exact_match"] == pytest.approx(50.0) and back["rougeL"] == pytest.approx(100.0)
    assert A.check_targets(back, B405)  # 50% exact match is far below 89.23: named failures


def test_a_405b_evaluation_without_per_sample_kinds_is_one_clear_error() -> None:
    from repro.core.errors import InputError

    with pytest.raises(InputError, match="needs each sample's metric"):
        A.score_benchmark(["a"], ["a"], B405, None, workers=1)
