"""The accuracy evaluator against the MLPerf reference's own scoring path (rouge_score + nltk Punkt)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.core.errors import InputError
from repro.core.fsutil import sha256_file
from repro.core.recipes import get_recipe
from repro.results import accuracy as A
from repro.results.logfiles import parse_accuracy_txt

WORDS = [
    "the",
    "cat",
    "cats",
    "running",
    "runs",
    "ran",
    "quickly",
    "quick",
    "jumped",
    "over",
    "lazy",
    "dog",
    "fox",
    "apple",
    "Apple's",
    "12",
    "3.5",
    "and",
    "or",
    "but",
    "however,",
    "Mr.",
    "Dr.",
    "e.g.",
    "i.e.",
    "U.S.",
    "because",
    "caring",
    "cared",
    "cares",
    "universal",
    "university",
    "generously",
    "généreux",
    "naïve",
    "CAFÉ",
    "x-ray",
    "it's",
    "1990s",
    "\u212aelvin",
    "İstanbul",
    "ß",
    "東京",
    "😀",
    "Ελλάδα",
    "ﬁnal",
]
SEPS = (" ", " ", " ", ". ", "? ", "! ", "\n", ", ", "  ", ".\n", "\r\n")

texts = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPS)), max_size=60).map(
    lambda parts: "".join(w + s for w, s in parts)
)


def _bench():
    """benchmarks/accuracy_speed.py, loaded by path: it makes the MLPerf-shaped samples and runs the reference."""
    import importlib.util
    import sys

    name = "repro_accuracy_speed"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy_speed.py"
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def _reference_scores(pairs):
    return _bench().reference_fmeasures(pairs)


@settings(max_examples=250, deadline=None)
@given(target=texts, prediction=texts)
def test_rouge_is_identical_to_rouge_score(target, prediction):
    """rouge-score-rs against rouge_score on random texts: a drift in the pinned library fails here first."""
    target, prediction = A.postprocess(target) if target.strip() else target, A.postprocess(prediction)
    assert A.rouge_fmeasures(target, prediction) == _reference_scores([(target, prediction)])[0]


def test_rouge_identical_on_a_sample_of_the_benchmark_set():
    """Every kind of sample the benchmark set holds (ordinary, non-ASCII, empty, token-less, runaway), scored
    both ways, sample by sample and bit for bit."""
    b = _bench()
    outputs, refs = b.make_case(300, seed=3)
    kinds = {
        "empty": [i for i, o in enumerate(outputs) if not o],
        "token-less": [i for i, o in enumerate(outputs) if o and all(w in b.NO_TOKENS for w in o)],
        "runaway": [i for i, o in enumerate(outputs) if len(o) >= 700],
        "non-ASCII": [i for i, o in enumerate(outputs) if not all(w.isascii() for w in o)][:12],
        "ordinary": list(range(12)),
    }
    assert all(kinds.values()), {k: len(v) for k, v in kinds.items()}
    picked = sorted({i for v in kinds.values() for i in v})
    preds, mine = A.sample_scores([" ".join(outputs[i]) for i in picked], [refs[i] for i in picked], workers=1)
    pairs = [(A.postprocess(refs[i]), p) for i, p in zip(picked, preds, strict=True)]
    assert mine == _reference_scores(pairs)
    assert A.score_pairs(*zip(*pairs, strict=True)) == mine
    assert sum(0 < m[0] < 1 for m in mine) >= len(picked) - len(kinds["empty"]) - len(kinds["token-less"])
    assert all(mine[picked.index(i)] == (0.0, 0.0, 0.0, 0.0) for i in kinds["empty"] + kinds["token-less"])


def test_edge_cases_identical():
    cases = [
        ("", ""),
        ("a", ""),
        ("", "b"),
        ("...\n\n!", "the\n\n"),
        ("x y z", "z y x"),
        ("a b\nb a", "b a\na b"),
        ("The the THE", "the"),
        ("ÉCOLE école", "ecole"),
        ("\u212aelvin kelvin", "kelvin"),
        ("İstanbul is big", "i stanbul"),
        ("東京 tokyo\r\nosaka", "tokyo\n東京 osaka"),
        ("x\ud800y", "x y"),
        ("runs " * 600, "running " * 400 + "\nran"),
    ]
    assert [A.rouge_fmeasures(t, p) for t, p in cases] == _reference_scores(cases)


def test_scoring_needs_no_compiler():
    """The scorer no longer pulls numba/LLVM in (nor writes a kernel cache anywhere)."""
    code = (
        "import sys; from repro.results import accuracy as A; A.score_texts(['A b. C d.'], ['a b c.'], workers=1);"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'llvmlite', 'rouge_score')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(A.__file__).resolve().parents[2])},
    )
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- the whole pipeline


def _hex(ids) -> str:
    return np.asarray(ids, dtype="<i4").tobytes().hex().upper()


@pytest.fixture
def small_case(tmp_path):
    make_case = _bench().make_case

    outputs, refs = make_case(40, seed=7)
    words = sorted({w for o in outputs for w in o})
    tok = _bench().wordpiece_tokenizer(words, tmp_path / "tok")
    ids = [[tok.convert_tokens_to_ids(w) for w in o] for o in outputs]
    order = list(range(40))[::-1]
    entries = [
        {"seq_id": n, "qsl_idx": i, "data": _hex([1] + ids[i] + [2]), "token_count": len(ids[i]) + 2}
        for n, i in enumerate(order)
    ]
    entries.insert(5, {"seq_id": 99, "qsl_idx": order[0], "data": _hex(ids[3]), "token_count": len(ids[3])})
    run = tmp_path / "run"
    run.mkdir()
    (run / A.ACCURACY_JSON).write_text(json.dumps(entries))
    return run, refs, tmp_path / "tok", order


def test_evaluate_matches_the_reference_script_path(small_case, tmp_path, monkeypatch):
    """Same steps as evaluate-accuracy.py: dedup by qsl_idx, batch_decode, nltk.sent_tokenize, rouge, round."""
    import nltk
    from rouge_score import rouge_scorer
    from transformers import AutoTokenizer

    run, refs, tok_dir, order = small_case
    got = A.evaluate_accuracy_log(run / A.ACCURACY_JSON, refs, tok_dir, workers=1)

    monkeypatch.setattr(nltk.data, "path", [str(_bench().nltk_punkt_tab(tmp_path / "nltk_data"))])
    from nltk.tokenize import _get_punkt_tokenizer

    _get_punkt_tokenizer.cache_clear()
    results = json.loads((run / A.ACCURACY_JSON).read_text())
    seen, targets, preds_ids, gen_tok_len = set(), [], [], 0
    for pred in results:
        if pred["qsl_idx"] in seen:
            continue
        seen.add(pred["qsl_idx"])
        targets.append(refs[pred["qsl_idx"]])
        arr = np.frombuffer(bytes.fromhex(pred["data"]), np.int32)
        gen_tok_len += len(arr)
        preds_ids.append(arr)
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    decoded = tok.batch_decode(preds_ids, skip_special_tokens=True)
    preds = ["\n".join(nltk.sent_tokenize(p.strip())) for p in decoded]
    targets = ["\n".join(nltk.sent_tokenize(t.strip())) for t in targets]
    _get_punkt_tokenizer.cache_clear()
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=True)
    per = [scorer.score(t, p) for t, p in zip(targets, preds, strict=True)]
    want = {k: round(np.mean([s[k].fmeasure for s in per]) * 100, 4) for k in A.ROUGE_KEYS}
    want.update(
        gen_len=int(np.sum([len(p) for p in preds])),
        gen_num=len(preds),
        gen_tok_len=gen_tok_len,
        tokens_per_sample=round(gen_tok_len / len(preds), 1),
    )

    assert got == want
    assert got["gen_num"] == 40
    assert 20 < got["rouge1"] < 90


def test_first_occurrence_of_a_qsl_idx_wins(small_case):
    run, refs, tok_dir, order = small_case
    got = A.read_accuracy_log(run / A.ACCURACY_JSON, len(refs))
    assert [i for i, _ in got] == order
    assert got[0][1][0] == 1 and got[0][1][-1] == 2


def test_parallel_equals_serial(small_case):
    run, refs, tok_dir, _ = small_case
    one = A.evaluate_accuracy_log(run / A.ACCURACY_JSON, refs, tok_dir, workers=1)
    two = A.evaluate_accuracy_log(run / A.ACCURACY_JSON, refs, tok_dir, workers=2)
    assert one == two


# ---------------------------------------------------------------- targets and accuracy.txt


def test_published_gb200_scores_meet_the_99_targets(fixtures):
    published = parse_accuracy_txt(fixtures / "azure-nd-gb200-v6-v5.1/llama2-70b-99/Offline/accuracy/accuracy.txt")
    assert A.check_targets(published, get_recipe("nd-gb200-v6").bench) == []


def test_low_scores_fail_with_named_metrics():
    recipe = get_recipe("demo")
    scores = {"rouge1": 43.9, "rouge2": 30.0, "rougeL": 30.0, "tokens_per_sample": 100.0}
    failures = A.check_targets(scores, recipe.bench)
    assert len(failures) == 2
    assert failures[0].startswith("rouge1 43.9 is below") and "43.9869" in failures[0]
    assert failures[1].startswith("tokens_per_sample 100")


def test_accuracy_txt_has_mlperf_layout(tmp_path, fixtures):
    run = tmp_path / "run"
    run.mkdir()
    (run / A.ACCURACY_JSON).write_text("[]\n")
    scores = {
        "rouge1": 44.7494,
        "rouge2": 22.3586,
        "rougeL": 29.1373,
        "rougeLsum": 42.2591,
        "gen_len": np.int64(26551226),
        "gen_num": 24576,
        "gen_tok_len": 6718594,
        "tokens_per_sample": 273.4,
    }
    out = A.write_accuracy_txt(run, scores)
    ours = out.read_text().splitlines()
    theirs = (fixtures / "azure-nd-gb200-v6-v5.1/llama2-70b-99/Offline/accuracy/accuracy.txt").read_text().splitlines()
    assert ours[:-1] == theirs[:-1]
    assert ours[-1] == f"hash={sha256_file(run / A.ACCURACY_JSON)}"
    assert parse_accuracy_txt(out)["rouge1"] == 44.7494
    assert list(ast.literal_eval(ours[3])) == list(ast.literal_eval(theirs[3]))
    assert sorted(p.name for p in run.iterdir()) == [A.ACCURACY_TXT, A.ACCURACY_JSON]


def test_accuracy_txt_needs_the_log(tmp_path):
    with pytest.raises(InputError, match="accuracy log not found"):
        A.write_accuracy_txt(tmp_path, {})
    assert not (tmp_path / A.ACCURACY_TXT).exists()


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "content,problem",
    [
        ('[{"qsl_idx": 0, "data": "0100', "not valid JSON"),
        ('{"qsl_idx": 0}', "expected a JSON list"),
        ('[{"qsl_idx": 0, "data": "zz000000"}]', "not a hex string"),
        ('[{"qsl_idx": 0, "data": "010000"}]', "not a hex string"),
        ('[{"qsl_idx": 7, "data": "01000000"}]', "out of range for a dataset of 3 samples"),
        ('[{"qsl_idx": -1, "data": "01000000"}]', "not a non-negative integer"),
        ('[{"data": "01000000"}]', "lacks 'qsl_idx'"),
        (b"\xff\xfe[", "not valid JSON"),
    ],
)
def test_bad_logs_name_the_file(tmp_path, content, problem):
    log = tmp_path / A.ACCURACY_JSON
    log.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InputError) as err:
        A.evaluate_accuracy_log(log, ["a", "b", "c"], tokenizer=object())
    assert str(log) in err.value.message and problem in err.value.message
    assert err.value.next_command


def test_empty_and_missing_logs(tmp_path):
    log = tmp_path / A.ACCURACY_JSON
    with pytest.raises(InputError, match="not found"):
        A.read_accuracy_log(log)
    log.write_text("[]")
    with pytest.raises(InputError, match="no samples"):
        A.evaluate_accuracy_log(log, ["a"], tokenizer=object())


def test_speed_benchmark_runs_small(capsys, tmp_path):
    """The side-by-side benchmark at a tiny size: it prints a ratio per size and finds the scores equal."""
    out_json = tmp_path / "acc.json"
    assert _bench().main(["--base", "2", "--repeats", "1", "--all-cores", "--out", str(out_json)]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out_json.read_text())["side_by_side"]["rows"]
    assert [r["samples"] for r in rows] == [2, 8, 32]
    assert all(r["agree_4_decimals"] and r["samples_differing"] == 0 and r["ratio"] > 0 for r in rows)
    assert out.count("x (") == 3 and "'gen_len'" in out
