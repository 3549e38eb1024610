"""Does a result folder agree with itself? Contradictions between its own files, and figures that are not numbers.

LoadGen writes one run's facts twice (the summary and the detail log) and MLPerf's evaluation writes the
accuracy log's sha256 into accuracy.txt. A folder edited by hand, merged from two runs or assembled to pass
disagrees with itself somewhere; each disagreement is a sentence naming both files, which the verdict turns into
a FAIL (`LoadGenRun.contradictions`). A figure the verdict needs that is text ("600000x", `٦٠٠٠٠٠`) is missing
evidence (`LoadGenRun.evidence_gaps`): the check it feeds is never skipped as if the figure were absent.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from repro.core.safeio import CHUNK, open_regular

ACCURACY_LOG = "mlperf_log_accuracy.json"
DETAIL_LOG = "mlperf_log_detail.txt"
# MLCommons' tools/submission/truncate_accuracy_log.py (mlcommons/inference @05bfef9) hashes the full log into
# accuracy.txt, then keeps its first and last 4,096 bytes around "\n\n...\n\n" (8,199 bytes). It leaves alone a
# log that already has a hash and is under MAX_ACCURACY_LOG_SIZE; a larger log is the full one.
MAX_ACCURACY_LOG_SIZE = 10 * 1024
_VIEWABLE = 4096
_TRUNCATION_MARK = b"\n\n...\n\n"
# Keys LoadGen may log more than once: free-text messages, warnings and errors.
_MESSAGE_PREFIXES = ("warning", "error")
_MESSAGE_KEYS = {"generic_message"}
# summary 'X satisfied' line -> the detail log's key for the same fact
_SATISFIED = {
    "min duration satisfied": "result_min_duration_met",
    "min queries satisfied": "result_min_queries_met",
    "early stopping satisfied": "early_stopping_met",
    "performance constraints satisfied": "result_perf_constraints_met",
}
# a setting as the summary names it -> the detail log's key for the value LoadGen used
_SETTING_KEYS = {
    "min_duration_ms": "effective_min_duration_ms",
    "samples_per_query": "effective_samples_per_query",
    "min_query_count": "effective_min_query_count",
    "ttft_latency_ns": "requested_server_ttft_latency",
    "tpot_latency_ns": "requested_server_tpot_latency",
}
_DETAIL_NUMBERS = (*_SETTING_KEYS.values(), "generated_query_duration")
_DETAIL_NUMBER_SUFFIXES = ("_ns", "_per_second", "_per_sec", "_count")

# The Test Parameters every LoadGen summary of an LLM run prints (v4.0 on); a summary without a detail log is never
# evidence, and the verdict names those it lacks besides.
SUMMARY_PARAMS = (
    "samples_per_query",
    "target_qps",
    "ttft_latency (ns)",
    "tpot_latency (ns)",
    "max_async_queries",
    "min_duration (ms)",
    "max_duration (ms)",
    "min_query_count",
    "max_query_count",
    "qsl_rng_seed",
    "sample_index_rng_seed",
    "schedule_rng_seed",
    "accuracy_log_rng_seed",
    "accuracy_log_probability",
    "accuracy_log_sampling_target",
    "print_timestamps",
    "performance_issue_unique",
    "performance_issue_same",
    "performance_issue_same_index",
    "performance_sample_count",
)
SUMMARY_STATS = ("Min latency (ns)", "Max latency (ns)", "Mean latency (ns)")


class HashCheck(BaseModel):
    """The accuracy log beside accuracy.txt against its hash= line: ok None when it cannot be re-checked."""

    ok: bool | None
    detail: str


def is_message_key(key: str) -> bool:
    return key in _MESSAGE_KEYS or key.startswith(_MESSAGE_PREFIXES)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def same_within_rounding(a: float, b: float) -> bool:
    """Two printings of one figure: the detail log keeps 6 significant digits, the summary 2 decimals."""
    return abs(a - b) <= max(0.01, 1e-5 * max(abs(a), abs(b)))


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def contradictions(
    summary_path: Path | None,
    detail_path: Path | None,
    summary: dict[str, Any],
    detail: dict[str, Any],
    scenario: str | None,
) -> list[str]:
    """Every place where the summary and the detail log of one run, or the detail log with itself, disagree."""
    out: list[str] = []
    s_name = summary_path.name if summary_path else "mlperf_log_summary.txt"
    d_name = detail_path.name if detail_path else "mlperf_log_detail.txt"
    v = detail.get("values", {})
    for key, first, old, line, new in detail.get("repeats", []):
        out.append(
            f"{d_name} logs {key} twice with different values: {_show(old)} (line {first}), {_show(new)} (line {line})"
        )
    for key, first, line in summary.get("repeats", []):
        out.append(f"{s_name} states {key!r} twice (lines {first} and {line}); LoadGen writes it once")
    params = {_param_key(k): val for k, val in summary.get("params", {}).items()}
    out += _too_short(s_name, d_name, summary, v, params, scenario)  # one file can contradict itself too
    if summary_path is None or detail_path is None:
        return out

    said = summary.get("validity")
    logged = v.get("result_validity")
    if isinstance(said, str) and said != "N/A" and logged is not None and str(logged).upper() != said:
        out.append(f"{s_name} says Result is : {said} but {d_name} says result_validity {_show(logged)}")
    for what, s_key, d_keys in (
        ("tokens per second", "tokens_per_s", ("result_tokens_per_second", "result_completed_tokens_per_second")),
        (
            "samples per second",
            "samples_per_s",
            ("result_samples_per_second", "result_completed_samples_per_sec", "result_completed_samples_per_second"),
        ),
    ):
        a = _number(summary.get(s_key))
        for d_key in d_keys:
            b = _number(v.get(d_key))
            if a is not None and b is not None and not same_within_rounding(a, b):
                out.append(f"{s_name} says {what} {a:,.6g} but {d_name} says {d_key} {b:,.6g}")
                break
    for s_key, ok in summary.get("satisfied", {}).items():
        met_key = _SATISFIED.get(s_key.lower())
        logged = v.get(met_key) if met_key else None
        if isinstance(ok, bool) and isinstance(logged, bool) and ok != logged:
            out.append(f"{s_name} says {s_key}: {'Yes' if ok else 'No'} but {d_name} says {met_key} {_show(logged)}")
    for what, s_val, d_key in (
        ("Scenario", summary.get("scenario"), "effective_scenario"),
        ("Mode", summary.get("mode"), "effective_test_mode"),
    ):
        logged = v.get(d_key)
        if (
            isinstance(s_val, str)
            and isinstance(logged, str)
            and s_val.replace(" ", "").lower() != logged.replace(" ", "").lower()
        ):
            out.append(f"{s_name} says {what} : {s_val} but {d_name} says {d_key} {_show(logged)}")
    for setting, d_key in _SETTING_KEYS.items():
        a, b = _number(params.get(setting)), _number(v.get(d_key))
        if a is not None and b is not None and a != b:
            out.append(f"{s_name} says {setting} {a:,.0f} but {d_name} says {d_key} {b:,.0f}")
    return out


def _param_key(key: str) -> str:
    return key.replace(" (ms)", "_ms").replace(" (ns)", "_ns").replace(" ", "_")


def _too_short(
    s_name: str, d_name: str, summary: dict[str, Any], v: dict[str, Any], params: dict[str, Any], scenario: str | None
) -> list[str]:
    """A run that says it met min duration while its own timings show it ran shorter than its min_duration."""
    min_ms = _number(v.get("effective_min_duration_ms"))
    setting_from = d_name
    if min_ms is None:
        min_ms, setting_from = _number(params.get("min_duration_ms")), s_name
    claims = [
        (s_name, "Min duration satisfied: Yes")
        for k, ok in summary.get("satisfied", {}).items()
        if k.lower() == "min duration satisfied" and ok is True
    ]
    if v.get("result_min_duration_met") is True:
        claims.append((d_name, "result_min_duration_met true"))
    if min_ms is None or not claims:
        return []
    if scenario == "Offline":
        max_ns = _number(summary.get("latency", {}).get("max"))
        lasted, how = (max_ns, f"max latency in {s_name}") if max_ns is not None else (None, "")
        if lasted is None and (max_ns := _number(v.get("result_max_latency_ns"))) is not None:
            lasted, how = max_ns, f"result_max_latency_ns in {d_name}"
    else:
        lasted, how = _number(v.get("generated_query_duration")), f"generated_query_duration in {d_name}"
    if lasted is None or lasted / 1e6 >= min_ms:
        return []
    where, claim = claims[0]
    return [
        f"{where} says {claim} but the run lasted {lasted / 1e9:,.1f} s ({how}), shorter than its own "
        f"min_duration {min_ms / 1000:,.0f} s ({setting_from})"
    ]


def evidence_gaps(
    summary_path: Path | None, detail_path: Path | None, summary: dict[str, Any], detail: dict[str, Any]
) -> list[str]:
    """Settings and figures the verdict reads that are present but not numbers, each naming its file."""
    gaps: list[str] = []
    if summary_path is not None:
        for line, key, text in summary.get("not_numbers", []):
            gaps.append(f"{summary_path.name} line {line}: {key} is {text!r}, not a number")
        if detail_path is None and summary.get("mode") == "PerformanceOnly":
            gaps += _summary_only_gaps(summary_path.name, summary)
    if dropped := detail.get("dropped"):
        name = detail_path.name if detail_path else "mlperf_log_detail.txt"
        gaps.append(f"{name}: {dropped:,} entries beyond the keys kept were not read (a real log has ~120 keys)")
    if detail_path is not None:
        for key, value in detail.get("values", {}).items():
            wanted = key in _DETAIL_NUMBERS or (key.startswith("result_") and key.endswith(_DETAIL_NUMBER_SUFFIXES))
            if wanted and _number(value) is None:
                gaps.append(f"{detail_path.name}: {key} is {_show(value)}, not a number")
    return gaps


def _summary_only_gaps(s_name: str, summary: dict[str, Any]) -> list[str]:
    """A summary with no detail log beside it is never evidence: nothing cross-checks it (a hand-typed complete
    summary reads like a real one), and MLCommons' submission checker rejects a result whose detail log is missing
    (REQUIRED_PERF_FILES, tools/submission/submission_checker/constants.py, mlcommons/inference @b66003e1). What
    else it lacks is said after."""
    gaps = [
        f"no {DETAIL_LOG} beside {s_name}: MLCommons' submission checker rejects a result without its detail log; "
        f"copy the run's {DETAIL_LOG} beside the summary and verify again"
    ]
    params = {k.lower() for k in summary.get("params", {})}
    missing = [k for k in SUMMARY_PARAMS if k not in params]
    latency = summary.get("latency", {})
    missing += [k for k, stat in zip(SUMMARY_STATS, ("min", "max", "mean"), strict=True) if stat not in latency]
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        gaps.append(f"{s_name} also lacks {shown}, which LoadGen always writes")
    return gaps


def accuracy_log_hash(accuracy_txt: Path, hashes: list[str], *, ours: bool) -> HashCheck | None:
    """The hash= lines of accuracy.txt against the mlperf_log_accuracy.json beside it.

    A full log (one repro wrote, or any log over 10 KiB) must hash to every hash= line; a published log that
    MLCommons' truncation tool cut after hashing cannot be re-checked, and the check says so instead of failing."""
    if not hashes:
        return None
    log = accuracy_txt.parent / ACCURACY_LOG
    txt = accuracy_txt.name
    try:
        with open_regular(log) as fh:  # one handle for the size, the head and the hash: nothing to swap between
            head = fh.read(MAX_ACCURACY_LOG_SIZE + 1)
            h = hashlib.sha256(head)
            while block := fh.read(CHUNK):
                h.update(block)
            size = fh.tell()
    except FileNotFoundError:
        return HashCheck(ok=None, detail=f"no {ACCURACY_LOG} beside {txt}: its hash= cannot be re-checked")
    except OSError as exc:
        return HashCheck(ok=None, detail=f"{ACCURACY_LOG} cannot be read ({exc.strerror}): hash= not re-checked")
    digest = h.hexdigest()
    wrong = sorted({h for h in hashes if h.lower() != digest})
    sized = f"{ACCURACY_LOG} ({_size(size)})"
    if not wrong:
        return HashCheck(ok=True, detail=f"hash= in {txt} is the sha256 of {sized}")
    if ours or size > MAX_ACCURACY_LOG_SIZE:
        why = "a log repro wrote is never truncated" if ours and size <= MAX_ACCURACY_LOG_SIZE else "the full log"
        return HashCheck(
            ok=False,
            detail=f"{txt} says hash={wrong[0][:16]}... but {sized} hashes to {digest[:16]}... ({why})",
        )
    cut = size == 2 * _VIEWABLE + len(_TRUNCATION_MARK) and head[_VIEWABLE : _VIEWABLE + 7] == _TRUNCATION_MARK
    how = (
        "was cut to its first and last 4 KB by MLCommons' truncate_accuracy_log.py after it wrote the hash"
        if cut
        else "is under the 10 KiB MLCommons' truncate_accuracy_log.py leaves, so not the log that was hashed"
    )
    return HashCheck(ok=None, detail=f"{sized} {how}: the hash= in {txt} cannot be re-checked")


def _size(n: int) -> str:
    return f"{n:,} bytes" if n < 1 << 20 else f"{n / (1 << 20):,.1f} MB"
