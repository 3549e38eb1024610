"""LoadGen's files, one bounded parser each: the summary, the detail log (`:::MLLOG {json}` lines), accuracy.txt
and a JSON file. results/logs.py reads a whole result folder with them into one LoadGenRun.

Anything that cannot be read raises InputError naming the file; the parsers never raise anything else.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from repro.core.benchmarks import impossible_score
from repro.core.errors import InputError
from repro.core.safeio import iter_lines, loads_json, open_regular
from repro.results import consistency

SUMMARY = "mlperf_log_summary.txt"


DETAIL = "mlperf_log_detail.txt"


ACCURACY_TXT = "accuracy.txt"


_MAX_TEXT = 64 << 20


_MAX_SUMMARY = 4 << 20  # a LoadGen summary is a few KB; a bigger one is not a summary


_MAX_ACCURACY_TXT = 4 << 20  # MLPerf's accuracy.txt is under 1 KB (plus evaluation progress lines)


_MAX_JSON = 4 << 20  # a system JSON or run.json is a few KB; 4 MB of `[{},...]` expands to ~100 MB at most


_MAX_LINE = 1 << 20  # the longest published MLLOG line (loaded_qsl_set: Llama-2-70B's every sample index) is ~137 KB


_MAX_SCORES_LINE = 64 << 10


_MAX_KEYS = 10_000  # distinct MLLOG keys kept (a real detail log has ~120)


_MAX_RESULT_KEYS = 10_000  # more kept for the keys a verdict reads (result_*, effective_*, ...): never crowded out


_VERDICT_KEY_PREFIXES = ("result_", "effective_", "requested_", "early_stopping", "generated_", "loadgen_")


_MAX_NESTED = 8 << 20  # bytes of lines whose list/dict values are kept (loaded_qsl_set is ~137 KB)


_MAX_MESSAGES = 1_000  # errors and warnings kept, each cut to 300 characters


def _brief(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 300 else text[:297] + "..."


_LATENCY = re.compile(
    r"^(?:(min|max|mean)|(\d+(?:\.\d+)?) percentile) (first token latency|time to output token|latency) \(ns\)$", re.I
)


_BUCKET = {"latency": "latency", "first token latency": "ttft", "time to output token": "tpot"}


def _read_text(path: Path, limit: int = _MAX_TEXT, what: str = "") -> str:
    """The whole file when it fits in `limit` (with `what`: larger is an InputError naming it), else its head;
    FIFOs and devices are refused on the one handle that is read."""
    raw, more = _read_head_checked(path, limit)
    if more and what:
        run = path.parent.parent if path.parent.name == "accuracy" else path.parent
        raise InputError(
            f"{path}: larger than {limit >> 20} MB; {what}, so this file is corrupt or something else.",
            f"restore the file from the run (or move it out of {path.parent}), then `repro verify {run}`",
        )
    return raw.decode("utf-8", errors="replace")


LOADGEN_SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline")


_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)", re.I)


def _num(text: str) -> float | int | None:
    """A number as LoadGen prints one: ASCII digits only. Python's int()/float() also take `٦٢٦٩٠`, fullwidth
    digits and `6_2690.8`, none of which LoadGen writes."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:
        return float(text)  # a non-finite figure is refused where it is used, naming the field


def finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _yes(text: str) -> bool | None:
    t = text.strip().lower()
    return True if t in ("yes", "true") else False if t in ("no", "false") else None


def stat_key(word: str) -> str:
    word = word.lower()
    if word in ("min", "max", "mean"):
        return word
    return "p" + (word[:-3] if word.endswith(".00") else word.rstrip("0"))


def empty_summary() -> dict[str, Any]:
    """The summary's shape before any line is read; a detail-only run starts from it too."""
    return {
        "params": {},
        "latency": {},
        "ttft": {},
        "tpot": {},
        "satisfied": {},
        "recommendations": [],
        "early_stopping": {},
        "warnings": [],
        "errors": [],
    }


def parse_summary(path: Path) -> dict[str, Any]:
    """Fields of mlperf_log_summary.txt across loadgen versions and scenarios. A figure or setting that is not a
    number is kept in `not_numbers` (line, key, text): it is missing evidence, never silently dropped."""
    text = _read_text(path, _MAX_SUMMARY, "a LoadGen summary is a few KB")
    out = empty_summary()
    section = "head"
    group: str | None = None
    lines = text_lines(text)
    skip: set[int] = set()
    stated: dict[str, int] = {}
    for i, line in enumerate(lines):
        if line.startswith("WARNING:"):
            block = []
            for j in range(i, len(lines)):
                if not lines[j].strip():
                    break
                block.append(lines[j].strip())
                skip.add(j)
            out["warnings"].append(" ".join(block))
    for i, line in enumerate(lines):
        stripped = line.strip()
        if i in skip or stripped.startswith("===") or not stripped:
            continue
        if stripped == "Additional Stats":
            section = "stats"
            continue
        if stripped == "Test Parameters Used":
            section = "params"
            continue
        if m := re.match(r"^(no|\d+) (warning|error)s? encountered", stripped, re.I):
            if m.group(2).lower() == "error":
                out["closed"] = True
            if m.group(1).lower() != "no":
                out["errors" if m.group(2).lower() == "error" else "warnings"].append(stripped)
            continue
        if stripped.startswith("* ") or (group and group != "recommendations" and ":" not in stripped):
            item = stripped[2:].strip() if stripped.startswith("* ") else None
            if group is None or group == "recommendations":
                out["recommendations"].append(item or stripped)
            elif item is not None:
                out["early_stopping"].setdefault(group, []).append(item)
            elif out["early_stopping"].get(group):
                out["early_stopping"][group][-1] += " " + stripped
            continue
        if stripped.endswith(":") and section == "head":
            header = stripped[:-1].strip()
            group = "recommendations" if header.lower() == "recommendations" else header
            continue
        group = None
        if ":" not in stripped:
            continue
        key, _, value = stripped.partition(":")
        key, value = key.strip(), value.strip()
        low = key.lower()
        said = f"{section}:{low}"
        if said in stated and (section == "params" or low in _ONCE):
            out.setdefault("repeats", []).append((key, stated[said], i + 1))
        stated.setdefault(said, i + 1)
        number = _num(value)
        numeric = low in SUMMARY_FIGURES or bool(_LATENCY.match(key)) or (section == "params" and low in _SETTINGS)
        if numeric and number is None:
            out.setdefault("not_numbers", []).append((i + 1, key, value[:40]))
        if section == "params":
            out["params"][key] = number if number is not None else value
        elif low == "result is":
            out["validity"] = value.upper()
        elif low.endswith("satisfied"):
            out["satisfied"][key] = _yes(value)
        elif low in ("scenario", "mode", "sut name"):
            out[low.replace(" ", "_")] = value
        elif low in ("samples per second", "completed samples per second"):
            out.setdefault("samples_per_s", number)
        elif low in ("tokens per second", "completed tokens per second"):
            out.setdefault("tokens_per_s", number)
        elif low == "scheduled samples per second":
            out["scheduled_samples_per_s"] = number
        elif (m := _LATENCY.match(key)) and number is not None:
            out[_BUCKET[m.group(3).lower()]][stat_key(m.group(1) or m.group(2))] = number
    return out


def text_lines(text: str) -> list[str]:
    """Lines as LoadGen and the evaluation write them: ended by a newline only. str.splitlines() also breaks at
    U+001C-U+001E, U+0085 and U+2028, so a second 'Result is' hidden behind one would be read as a line (#36)."""
    return [line.removesuffix("\r") for line in text.split("\n")]


# Lines a LoadGen summary states once: a second one is a contradiction, whichever value it has.
_ONCE = {
    "result is",
    "scenario",
    "mode",
    "sut name",
    "samples per second",
    "completed samples per second",
    "tokens per second",
    "completed tokens per second",
    "min duration satisfied",
    "min queries satisfied",
    "early stopping satisfied",
    "performance constraints satisfied",
}


SUMMARY_FIGURES = {
    "samples per second",
    "completed samples per second",
    "tokens per second",
    "completed tokens per second",
    "scheduled samples per second",
}


# The settings a verdict reads: text in their place is missing evidence (summary spelling, then detail key).
_SETTINGS = {
    "min_duration (ms)": "min_duration_ms",
    "samples_per_query": "samples_per_query",
    "ttft_latency (ns)": "ttft_latency_ns",
    "tpot_latency (ns)": "tpot_latency_ns",
    "min_query_count": "min_query_count",
}


def _iter_lines(path: Path) -> Iterator[str]:
    """The first _MAX_TEXT bytes of a log, line by line, from ONE non-blocking handle checked with fstat (a
    symlink swapped to a FIFO between a check and a second open would hang); lines over _MAX_LINE are cut to
    it, so a 1 GB line costs 1 MB (#16, #29)."""
    fh = _open_checked(path)
    with fh:
        head = fh.read(4096)
        if b"\x00" in head:
            raise InputError(f"{path}: is binary, not a LoadGen text log.", "point `repro verify` at the run folder")
        fh.seek(0)
        for raw, _cut in iter_lines(fh, max_bytes=_MAX_TEXT, max_line=_MAX_LINE):
            yield raw.decode("utf-8", errors="replace")


def _open_checked(path: Path) -> BinaryIO:
    try:
        return open_regular(path)
    except OSError as exc:
        raise InputError(
            f"{path}: cannot be read ({exc.strerror}).", "check the path; `repro status` names the latest run folder"
        ) from None


def _read_head_checked(path: Path, limit: int) -> tuple[bytes, bool]:
    """The head of a log and whether there is more, with the same one-line errors as `_iter_lines` (unreadable,
    FIFO/device, binary)."""
    with _open_checked(path) as fh:
        raw = fh.read(limit + 1)
    if b"\x00" in raw[:4096]:
        raise InputError(f"{path}: is binary, not a LoadGen text log.", "point `repro verify` at the run folder")
    return raw[:limit], len(raw) > limit


def _kept_always(key: str) -> bool:
    """Keys the verdict reads: junk keys before them never push them out (#36: a result_validity INVALID after
    10,000 junk keys was not seen)."""
    return key.startswith(_VERDICT_KEY_PREFIXES)


def parse_detail(path: Path) -> dict[str, Any]:
    """Last value of each MLLOG key, plus error/warning entries. Malformed lines are counted, not fatal. A key
    logged twice with different values (messages aside) is kept in `repeats`: LoadGen logs each result once.

    What is kept is capped, not only what is read (#29): a real log has ~120 keys and two list values
    (loaded_qsl_set, loadgen_file_sha1), while 64 MB of `[1.5, 1.5, ...]` under fresh keys expands eightfold."""
    values: dict[str, Any] = {}
    first_line: dict[str, int] = {}
    repeats: list[tuple[str, int, Any, int, Any]] = []
    errors: list[str] = []
    warnings: list[str] = []
    bad = good = dropped = nested = 0
    for lineno, line in enumerate(_iter_lines(path), 1):
        if not line.startswith(":::MLLOG"):
            continue
        try:
            entry = loads_json(line[len(":::MLLOG") :].strip())
            key = entry["key"]
        except (ValueError, KeyError, TypeError):
            bad += 1
            continue
        if not isinstance(key, str):
            bad += 1
            continue
        good += 1
        value = entry.get("value")
        if key not in values and len(values) >= _MAX_KEYS + (_MAX_RESULT_KEYS if _kept_always(key) else 0):
            dropped += 1
            continue
        if isinstance(value, (list, dict)):
            nested += len(line)
            if nested > _MAX_NESTED:
                value = f"<a {type(value).__name__} of {len(line):,} bytes, not kept>"
        if key in values and not consistency.is_message_key(key) and values[key] != value and len(repeats) < 20:
            repeats.append((key, first_line[key], values[key], lineno, value))
        first_line.setdefault(key, lineno)
        values[key] = value
        meta = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
        if meta.get("is_error") or key.startswith("error"):
            errors.append(f"{key}: {_brief(value)}")
        elif meta.get("is_warning") or key.startswith("warning"):
            warnings.append(f"{key}: {_brief(value)}")
    if good == 0:
        raise InputError(
            f"{path}: no readable ':::MLLOG' lines ({bad} malformed).",
            "point `repro verify` at an intact LoadGen result folder",
        )
    if bad:
        warnings.append(f"{path.name}: {bad} malformed MLLOG line(s) skipped")
    if dropped:
        warnings.append(f"{path.name}: {dropped} entries under keys beyond the first {_MAX_KEYS:,} not kept")
    if len(errors) > _MAX_MESSAGES or len(warnings) > _MAX_MESSAGES:
        errors = errors[:_MAX_MESSAGES] + [f"... {len(errors) - _MAX_MESSAGES} more"] * (len(errors) > _MAX_MESSAGES)
        warnings = warnings[:_MAX_MESSAGES] + [f"... {len(warnings) - _MAX_MESSAGES} more"] * (
            len(warnings) > _MAX_MESSAGES
        )
    return {"values": values, "errors": errors, "warnings": warnings, "repeats": repeats, "dropped": dropped}


_NUMPY_SCALAR = re.compile(r"(?:np|numpy)\.(?:float|int|uint)(?:16|32|64|128)?_?\(\s*([^()]*?)\s*\)")


_SCORE_ITEM = re.compile(
    r"""\s*(['"])([A-Za-z0-9_-]{1,64})\1\s*:\s*"""
    r"""((?:np|numpy)\.\w{1,16}\([^()]{0,80}\)|'[^']{0,80}'|"[^"]{0,80}"|[^,'"{}()]{0,80})\s*(?:,|$)"""
)


def _score(value: Any) -> float | None:
    """A score as evaluate-accuracy.py prints it: a number or a quoted number ('44.8085'); finite only."""
    if isinstance(value, str):
        value = _num(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


_TOTAL_KEYS = ("tokens_per_sample", "gen_num")


def _score_keys() -> tuple[str, ...]:
    """What marks the scores line of any benchmark's accuracy.txt: its metrics' names (the benchmark files') and
    the totals every evaluation prints."""
    from repro.core.benchmarks import all_benchmarks

    return (*dict.fromkeys(m.name for b in all_benchmarks() for m in b.accuracy.metrics), *_TOTAL_KEYS)


def _scores_line(line: str) -> dict[str, float] | str | None:
    """The dict line evaluate-accuracy.py prints, read item by item (no eval): quoted or bare numbers and numpy
    reprs (np.int64(27723428)); None when the line is not one such dict; the key's name when it is stated twice."""
    if not (line.startswith("{") and line.endswith("}")):
        return None
    inner, pos, scores = line[1:-1], 0, {}
    seen: set[str] = set()
    while pos < len(inner.rstrip()):
        m = _SCORE_ITEM.match(inner, pos)
        if not m or m.end() == pos:
            return None
        raw = m.group(3).strip()
        if numpy := _NUMPY_SCALAR.fullmatch(raw):
            raw = numpy.group(1)
        if m.group(2) in seen:
            return m.group(2)  # a key stated twice: the caller refuses the file
        seen.add(m.group(2))
        text = raw.strip("'\"")
        if (value := _score(text)) is not None:
            scores[m.group(2)] = value
        elif isinstance(number := _num(text), float):  # nan, inf: kept, so that the caller refuses the file
            scores[m.group(2)] = number
        pos = m.end()
    return scores


def read_accuracy_txt(path: Path) -> tuple[dict[str, float], list[str]]:
    """Scores and hash= values of MLPerf's accuracy.txt in every published form: carriage-return progress and
    [nltk_data] lines before it, quoted values, numpy reprs (np.int64(27723428)), one or two hash lines.
    Two scores lines are an input error: which one the run scored is not in the file."""
    text = _read_text(path, _MAX_ACCURACY_TXT, "MLPerf's accuracy.txt is under 1 KB")
    run = path.parent.parent if path.parent.name == "accuracy" else path.parent  # verify the run, not accuracy/
    lines = [ln.strip() for ln in text_lines(text)]
    found: list[tuple[int, dict[str, float]]] = []
    keys = _score_keys()
    for number, line in enumerate(lines, 1):
        if not (line.startswith("{") and any(key in line for key in keys)):
            continue
        if len(line) > _MAX_SCORES_LINE:
            raise InputError(
                f"{path}: a scores line of {len(line) >> 10} KB; evaluate-accuracy.py writes one of ~250 bytes.",
                f"restore the accuracy.txt the evaluation wrote, then `repro verify {run}`",
            )
        if (scores := _scores_line(line)) is not None:
            if isinstance(scores, str):
                raise InputError(
                    f"{path}: line {number} states {scores!r} twice; the evaluation prints each score once, so "
                    "the file contradicts itself.",
                    f"restore the accuracy.txt the evaluation wrote, then `repro verify {run}`",
                )
            for key, value in scores.items():
                if (why := impossible_score(key, value)) is not None:
                    raise InputError(
                        f"{path}: line {number}: {key!r} {why}, so the file contradicts itself and is no evidence.",
                        f"restore the accuracy.txt the evaluation wrote, then `repro verify {run}`",
                    )
            found.append((number, scores))
    if not found:
        raise InputError(
            f"{path}: no scores line (a line like {{'rouge1': 44.7, ...}} or {{'exact_match': 90.1, ...}}); the file "
            "is truncated or "
            "not MLPerf's accuracy.txt.",
            f"restore the complete file or move it out of {path.parent}, then `repro verify` again",
        )
    if len(found) > 1:
        raise InputError(
            f"{path}: {len(found)} scores lines (lines {', '.join(str(n) for n, _ in found)}); the evaluation "
            "writes one, so which scores belong to the run is not in the file.",
            f"restore the accuracy.txt the evaluation wrote, then `repro verify {run}`",
        )
    hashes = [m.group(1) for line in lines if (m := re.match(r"^hash=([0-9A-Za-z]+)$", line))]
    return found[0][1], hashes


def parse_accuracy_txt(path: Path) -> dict[str, float]:
    return read_accuracy_txt(path)[0]


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = loads_json(_read_text(path, _MAX_JSON, "a system JSON or run.json is a few KB"))
    except (InputError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
