"""No PASS on a contradicted or uncheckable log (issue #36 item 3): each hostile shape is built from a copy of a real
published bundle, edited in tmp, and must not PASS (the untouched copy PASSes, so the edit is what is refused)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import cli, copy_bundle, edit

GB200 = "azure-nd-gb200-v6-v5.1"  # summary + detail log, with accuracy.txt
GB200_RUN = "llama2-70b-99/Offline/performance/run_1"
INTEL = "v6.0_Intel_1-node-4x-BMG-B60_llama2-70b-99_Offline"  # summary + detail log
CISCO16 = "v5.1_Cisco_C885A_M8_H200_SXM_141GBx16_TRT_llama2-70b-99_Offline_truncated_test06"


def _verify(folder: Path) -> tuple[int, dict]:
    res = cli("verify", str(folder), "--json")
    return res.exit_code, json.loads(res.output)


def test_the_untouched_copies_pass(fixtures: Path, tmp_path: Path) -> None:
    for name in (GB200, INTEL, CISCO16):
        code, doc = _verify(copy_bundle(fixtures, name, tmp_path / name))
        assert code == 0 and doc["status"] == "PASS", (name, doc["reasons"])


# --- (a) the detail log: nothing the verdict reads is crowded out, anything dropped is missing evidence ----------


def _junk(n: int) -> str:
    return "".join(f':::MLLOG {{"key": "junk_{i}", "value": 1, "time_ms": 1.0}}\n' for i in range(n))


def test_result_key_after_ten_thousand_junk_keys_is_read(fixtures: Path, tmp_path: Path) -> None:
    b = copy_bundle(fixtures, INTEL, tmp_path / "b")
    detail = b / "performance/run_1/mlperf_log_detail.txt"
    lines = detail.read_text().split("\n")
    validity = next(i for i, ln in enumerate(lines) if '"key": "result_validity"' in ln)
    moved = lines.pop(validity).replace('"value": "VALID"', '"value": "INVALID"')
    detail.write_text("\n".join(lines) + _junk(10_050) + moved + "\n")
    code, doc = _verify(b)
    assert code == 1 and doc["status"] == "FAIL"
    assert any("result_validity 'INVALID'" in r for r in doc["reasons"]), doc["reasons"]
    assert any("entries beyond the keys kept were not read" in g for g in doc["evidence_gaps"])


def test_dropped_keys_alone_are_missing_evidence(fixtures: Path, tmp_path: Path) -> None:
    b = copy_bundle(fixtures, INTEL, tmp_path / "b")
    detail = b / "performance/run_1/mlperf_log_detail.txt"
    detail.write_text(detail.read_text() + _junk(10_050))
    code, doc = _verify(b)
    assert code == 1 and doc["status"] == "NOT A REPRODUCTION"
    assert any("were not read" in r for r in doc["reasons"])


# --- (b) a summary with no detail log is never evidence, and is checked against itself besides ------------------
# (every path that prints a verdict: tests/test_no_detail_log.py)


def _summary_only(fixtures: Path, dst: Path) -> Path:
    b = copy_bundle(fixtures, GB200, dst)
    (b / GB200_RUN / "mlperf_log_detail.txt").unlink()
    return b


def test_summary_stating_result_twice_fails(fixtures: Path, tmp_path: Path) -> None:
    b = _summary_only(fixtures, tmp_path / "b")
    edit(b / GB200_RUN / "mlperf_log_summary.txt", "Result is : VALID", "Result is : INVALID\nResult is : VALID")
    code, doc = _verify(b)
    assert code == 1 and doc["status"] == "FAIL"
    assert any("states 'Result is' twice" in r for r in doc["reasons"]), doc["reasons"]


@pytest.mark.parametrize("sep", ["\x1e", "\x1c", "\x1d", "\u2028", "\x85"])
def test_lines_split_on_record_separators_are_one_line(fixtures: Path, tmp_path: Path, sep: str) -> None:
    b = _summary_only(fixtures, tmp_path / "b")
    edit(b / GB200_RUN / "mlperf_log_summary.txt", "Result is : VALID", f"Result is : INVALID{sep}Result is : VALID")
    code, doc = _verify(b)
    assert code == 1 and doc["status"] != "PASS"


def test_hand_typed_ten_line_summary_is_not_evidence(fixtures: Path, tmp_path: Path) -> None:
    b = _summary_only(fixtures, tmp_path / "b")
    (b / GB200_RUN / "mlperf_log_summary.txt").write_text(
        "SUT name : x\nScenario : Offline\nMode : PerformanceOnly\nTokens per second: 52061.6\n"
        "Result is : VALID\n  Min duration satisfied : Yes\nTest Parameters Used\n"
        "samples_per_query : 607200\nmin_duration (ms): 2400000\nNo errors encountered during test.\n"
    )
    code, doc = _verify(b)
    assert code == 1 and doc["status"] == "NOT A REPRODUCTION", doc["status"]
    assert any("no mlperf_log_detail.txt beside mlperf_log_summary.txt" in r for r in doc["reasons"]), doc["reasons"]
    assert any("also lacks" in g for g in doc["evidence_gaps"]), doc["evidence_gaps"]


def test_complete_summary_without_detail_log_is_not_evidence(fixtures: Path, tmp_path: Path) -> None:
    """The real published summary, whole: without its detail log it cannot PASS (it does with it, above)."""
    code, doc = _verify(_summary_only(fixtures, tmp_path / "b"))
    assert code == 1 and doc["status"] == "NOT A REPRODUCTION", doc["status"]
    assert doc["evidence_gaps"][0].startswith("no mlperf_log_detail.txt beside mlperf_log_summary.txt")


# --- (c) accuracy.txt and TEST06's verify_accuracy.txt stating a score or a check twice --------------------------


def test_accuracy_score_stated_twice_is_refused(fixtures: Path, tmp_path: Path) -> None:
    b = copy_bundle(fixtures, GB200, tmp_path / "b")
    acc = b / "llama2-70b-99/Offline/accuracy/accuracy.txt"
    edit(acc, "'rouge1': 44.7494,", "'rouge1': 40.0, 'rouge1': 44.7494,")
    res = cli("verify", str(b))
    assert res.exit_code == 2 and "states 'rouge1' twice" in " ".join(res.output.split())


@pytest.mark.parametrize("sep", ["\x1e", "\u2028"])
def test_accuracy_line_hidden_behind_a_separator_is_not_a_second_line(fixtures: Path, tmp_path: Path, sep: str) -> None:
    b = copy_bundle(fixtures, GB200, tmp_path / "b")
    acc = b / "llama2-70b-99/Offline/accuracy/accuracy.txt"
    text = acc.read_text()
    line = next(ln for ln in text.split("\n") if ln.startswith("{"))
    acc.write_text(text.replace(line, line.replace("44.7494", "40.0") + sep + line))
    res = cli("verify", str(b))
    assert res.exit_code == 2 and "no scores line" in res.output and "PASS" not in res.output


@pytest.mark.parametrize(
    "old,new",
    [
        ("EOS check pass: True", "EOS check pass: False\nEOS check pass: True"),
        ("TEST06 verification complete", "TEST06 verification failed\nTEST06 verification complete"),
    ],
)
def test_test06_check_stated_twice_fails(fixtures: Path, tmp_path: Path, old: str, new: str) -> None:
    b = copy_bundle(fixtures, CISCO16, tmp_path / "b")
    edit(b / "TEST06/verify_accuracy.txt", old, new)
    code, doc = _verify(b)
    assert code == 1 and doc["status"] == "FAIL" and doc["test06"] == "FAIL"
    assert any("twice" in r and "contradicts itself" in r for r in doc["reasons"]), doc["reasons"]
