"""Read a LoadGen result folder: summary, detail (`:::MLLOG {json}` lines), accuracy.txt, system JSON, run.json.

The summary and detail of one run can disagree (a published GB300 summary says target_qps 400 where
its detail log says 390), so results come from the summary and effective settings from the detail.
Anything that cannot be read raises InputError naming the file; the parser never raises anything else.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, Field, ValidationError

from repro.core.errors import InputError
from repro.core.safeio import loads_json, read_head

SUMMARY = "mlperf_log_summary.txt"
DETAIL = "mlperf_log_detail.txt"
ACCURACY_TXT = "accuracy.txt"
RUN_JSON = "run.json"
LABELS = ("simulated", "smoke", "demo")
_MAX_TEXT = 64 << 20

_LATENCY = re.compile(r"^(?:(min|max|mean)|(\d+(?:\.\d+)?) percentile) (first token latency|time to output token|latency) \(ns\)$", re.I)
_BUCKET = {"latency": "latency", "first token latency": "ttft", "time to output token": "tpot"}


class LoadGenRun(BaseModel):
    folder: Path
    summary_path: Optional[Path] = None
    detail_path: Optional[Path] = None
    scenario: str
    mode: str
    validity: str
    valid: bool
    invalid_reasons: list[str] = Field(default_factory=list)
    tokens_per_s: Optional[float] = None
    samples_per_s: Optional[float] = None
    latency_ns: dict[str, float] = Field(default_factory=dict)
    ttft_ns: dict[str, float] = Field(default_factory=dict)
    tpot_ns: dict[str, float] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    loadgen_version: Optional[str] = None
    sut_name: Optional[str] = None
    warnings: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    min_duration_met: Optional[bool] = None
    min_queries_met: Optional[bool] = None
    early_stopping_met: Optional[bool] = None
    duration_s: Optional[float] = None
    accuracy: Optional[dict[str, float]] = None
    accuracy_path: Optional[Path] = None
    system: Optional[dict[str, Any]] = None
    system_path: Optional[Path] = None
    label: Optional[str] = None
    incomplete: bool = False
    run_info: Optional[dict[str, Any]] = None

    @property
    def is_reproduction_candidate(self) -> bool:
        return self.label is None and not self.incomplete


def _read_text(path: Path) -> str:
    """Only the head that is parsed is read (a 200 MB log is not held whole); FIFOs and devices are refused."""
    return _read_head_checked(path, _MAX_TEXT).decode("utf-8", errors="replace")


def _num(text: str) -> float | int | None:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return None
        return value if math.isfinite(value) else None  # 'inf'/'nan' in a log is not a measurement


def _yes(text: str) -> bool | None:
    t = text.strip().lower()
    return True if t in ("yes", "true") else False if t in ("no", "false") else None


def _stat_key(word: str) -> str:
    word = word.lower()
    if word in ("min", "max", "mean"):
        return word
    return "p" + (word[:-3] if word.endswith(".00") else word.rstrip("0"))


def parse_summary(path: Path) -> dict[str, Any]:
    """Fields of mlperf_log_summary.txt across loadgen versions and scenarios."""
    text = _read_text(path)
    out: dict[str, Any] = {"params": {}, "latency": {}, "ttft": {}, "tpot": {}, "satisfied": {},
                           "recommendations": [], "warnings": [], "errors": []}
    section = "head"
    lines = text.splitlines()
    skip: set[int] = set()
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
        if m := re.match(r"^(\d+) (warning|error)s? encountered", stripped, re.I):
            out["errors" if m.group(2).lower() == "error" else "warnings"].append(stripped)
            continue
        if stripped.startswith("* "):
            out["recommendations"].append(stripped[2:].strip())
            continue
        if ":" not in stripped:
            continue
        key, _, value = stripped.partition(":")
        key, value = key.strip(), value.strip()
        low = key.lower()
        if section == "params":
            out["params"][key] = _num(value) if _num(value) is not None else value
        elif low == "result is":
            out["validity"] = value.upper()
        elif low.endswith("satisfied"):
            out["satisfied"][key] = _yes(value)
        elif low in ("scenario", "mode", "sut name"):
            out[low.replace(" ", "_")] = value
        elif low in ("samples per second", "completed samples per second"):
            out["samples_per_s"] = _num(value)
        elif low in ("tokens per second", "completed tokens per second"):
            out["tokens_per_s"] = _num(value)
        elif low == "scheduled samples per second":
            out["scheduled_samples_per_s"] = _num(value)
        elif (m := _LATENCY.match(key)) and _num(value) is not None:
            out[_BUCKET[m.group(3).lower()]][_stat_key(m.group(1) or m.group(2))] = _num(value)
    return out


def _iter_lines(path: Path) -> Iterator[str]:
    """The first _MAX_TEXT bytes of a log, line by line: a 200 MB detail log is streamed, never held whole (#16)."""
    _read_head_checked(path, 4096)
    with open(path, "rb") as fh:
        left = _MAX_TEXT
        for raw in fh:
            if left <= 0:
                return
            left -= len(raw)
            yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _read_head_checked(path: Path, limit: int) -> bytes:
    """The head of a log, with the same one-line errors as `_read_text` (unreadable, FIFO/device, binary)."""
    try:
        raw, _ = read_head(path, limit)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror}).",
                         "check the path, then `repro verify` again") from None
    if b"\x00" in raw[:4096]:
        raise InputError(f"{path}: is binary, not a LoadGen text log.", "point `repro verify` at the run folder")
    return raw


def parse_detail(path: Path) -> dict[str, Any]:
    """Last value of each MLLOG key, plus error/warning entries. Malformed lines are counted, not fatal."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    warnings: list[str] = []
    bad = good = 0
    for line in _iter_lines(path):
        if not line.startswith(":::MLLOG"):
            continue
        try:
            entry = loads_json(line[len(":::MLLOG"):].strip())
            key = entry["key"]
        except (ValueError, KeyError, TypeError):
            bad += 1
            continue
        if not isinstance(key, str):
            bad += 1
            continue
        good += 1
        values[key] = entry.get("value")
        meta = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
        if meta.get("is_error") or key.startswith("error"):
            errors.append(f"{key}: {entry.get('value')}")
        elif meta.get("is_warning") or key.startswith("warning"):
            warnings.append(f"{key}: {entry.get('value')}")
    if good == 0:
        raise InputError(f"{path}: no readable ':::MLLOG' lines ({bad} malformed).",
                         "point `repro verify` at an intact LoadGen result folder")
    if bad:
        warnings.append(f"{path.name}: {bad} malformed MLLOG line(s) skipped")
    return {"values": values, "errors": errors, "warnings": warnings}


def parse_accuracy_txt(path: Path) -> dict[str, float]:
    """The scores dict line MLPerf's evaluate-accuracy.py prints, e.g. {'rouge1': 44.7494, ...}."""
    text = _read_text(path)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and "rouge1" in line:
            try:
                scores = ast.literal_eval(line)
            except (ValueError, SyntaxError):
                break
            if isinstance(scores, dict):
                return {str(k): float(v) for k, v in scores.items() if isinstance(v, (int, float))}
    raise InputError(f"{path}: no ROUGE scores line found.", "re-run `repro run offline --accuracy`")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = loads_json(_read_text(path))
    except (InputError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def find_system_json(folder: Path, levels: int = 6) -> tuple[dict[str, Any], Path] | None:
    """The MLPerf system description sits beside or above the run (submission trees keep it in systems/)."""
    current = folder.resolve()
    for _ in range(levels):
        for directory in (current, current / "systems"):
            if not directory.is_dir():
                continue
            for candidate in sorted(directory.glob("*.json")):
                if candidate.name in (RUN_JSON, "mlperf_log_accuracy.json"):
                    continue
                doc = _read_json(candidate)
                if doc and "accelerators_per_node" in doc:
                    return doc, candidate
        if current.parent == current:
            break
        current = current.parent
    return None


def _accuracy_for(folder: Path) -> Path | None:
    """accuracy.txt in the run folder, or in the sibling accuracy/ of a submission's performance/run_N."""
    own = folder / ACCURACY_TXT
    if own.is_file():
        return own
    for up in (folder.parent, folder.parent.parent):
        if up.name == "performance" or (up / "accuracy").is_dir():
            cand = (up.parent if up.name == "performance" else up) / "accuracy" / ACCURACY_TXT
            if cand.is_file():
                return cand
    return None


def _label(run_info: dict[str, Any] | None, sut_name: str | None) -> str | None:
    if run_info and run_info.get("label") in LABELS:
        return str(run_info["label"])
    name = (sut_name or "").lower()
    return next((lab for lab in LABELS if lab in name), None)


def _reasons(summary: dict[str, Any], detail: dict[str, Any], duration_s: float | None,
             min_duration_ms: float | None) -> list[str]:
    reasons: list[str] = []
    for key, ok in summary["satisfied"].items():
        if ok is False:
            what = key.replace(" satisfied", "").strip()
            if what.lower() == "min duration" and duration_s is not None and min_duration_ms:
                reasons.append(f"min duration not met ({duration_s:,.0f} s < {min_duration_ms / 1000:,.0f} s)")
            else:
                reasons.append(f"{what.lower()} not met")
    if summary.get("validity") != "INVALID":
        return reasons
    reasons += [r for r in summary["recommendations"] if r.lower() != "run successful."]
    if not reasons:
        reasons.append("LoadGen marked the result INVALID without saying why; see mlperf_log_detail.txt")
    return reasons


def parse_run(folder: Path) -> LoadGenRun:
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder.", "check the path, then `repro verify` again")
    summary_path, detail_path = folder / SUMMARY, folder / DETAIL
    if not summary_path.is_file() and not detail_path.is_file():
        raise InputError(f"{folder}: no {SUMMARY} or {DETAIL} here.", "point `repro verify` at a LoadGen result folder")
    detail = parse_detail(detail_path) if detail_path.is_file() else {"values": {}, "errors": [], "warnings": []}
    v = detail["values"]
    if summary_path.is_file():
        summary = parse_summary(summary_path)
    else:
        if "result_validity" not in v:
            raise InputError(f"{detail_path}: no result_validity entry and no summary; the run did not finish.",
                             "re-run the benchmark (`repro run offline`)")
        summary = {"validity": str(v["result_validity"]).upper(), "params": {}, "latency": {}, "ttft": {}, "tpot": {},
                   "satisfied": {}, "recommendations": [], "warnings": [], "errors": []}
    scenario = summary.get("scenario") or v.get("effective_scenario") or v.get("requested_scenario")
    mode = summary.get("mode") or v.get("effective_test_mode") or v.get("requested_test_mode")
    if "validity" not in summary:
        if mode != "AccuracyOnly":
            raise InputError(f"{summary_path}: no 'Result is' line; the summary is truncated or not a LoadGen summary.",
                             "re-run the benchmark (`repro run offline`) or restore the complete log")
        summary["validity"] = "N/A"
    if not scenario or not mode:
        raise InputError(f"{summary_path if summary_path.is_file() else detail_path}: names no scenario or mode.",
                         "point `repro verify` at an intact LoadGen result folder")
    settings = {k[len("effective_"):]: val for k, val in v.items() if k.startswith("effective_")}
    for k, val in summary["params"].items():
        settings.setdefault(k.replace(" (ms)", "_ms").replace(" (ns)", "_ns").replace(" ", "_"), val)
    if "generated_samples_per_query" in v:
        settings["generated_samples_per_query"] = v["generated_samples_per_query"]
    latency = dict(summary["latency"])
    for k, val in v.items():
        if m := re.match(r"^result_(\d+\.\d+)_percentile_latency_ns$", k):
            latency.setdefault(_stat_key(m.group(1)), val)
        elif m := re.match(r"^result_(min|max|mean)_latency_ns$", k):
            latency.setdefault(m.group(1), val)
    tokens = summary.get("tokens_per_s")
    if tokens is None:
        tokens = v.get("result_tokens_per_second") or v.get("result_completed_tokens_per_second")
    samples = summary.get("samples_per_s")
    if samples is None:
        samples = v.get("result_samples_per_second") or v.get("result_completed_samples_per_second")
    duration_s = latency["max"] / 1e9 if scenario == "Offline" and latency.get("max") else None
    min_duration_ms = settings.get("min_duration_ms")
    satisfied = {k.lower(): ok for k, ok in summary["satisfied"].items()}
    min_duration_met = satisfied.get("min duration satisfied", v.get("result_min_duration_met"))
    run_info = _read_json(folder / RUN_JSON) if (folder / RUN_JSON).is_file() else None
    accuracy_path = _accuracy_for(folder)
    system = find_system_json(folder)
    sut_name = summary.get("sut_name") or v.get("sut_name")
    try:
        return LoadGenRun(
            folder=folder, summary_path=summary_path if summary_path.is_file() else None,
            detail_path=detail_path if detail_path.is_file() else None,
            scenario=str(scenario), mode=str(mode), validity=summary["validity"], valid=summary["validity"] == "VALID",
            invalid_reasons=_reasons(summary, detail, duration_s, min_duration_ms),
            tokens_per_s=float(tokens) if tokens is not None else None,
            samples_per_s=float(samples) if samples is not None else None,
            latency_ns=latency, ttft_ns=summary["ttft"], tpot_ns=summary["tpot"], settings=settings,
            loadgen_version=v.get("loadgen_version"), sut_name=sut_name,
            warnings=summary["warnings"] + detail["warnings"], errors=summary["errors"] + detail["errors"],
            min_duration_met=min_duration_met,
            min_queries_met=satisfied.get("min queries satisfied", v.get("result_min_queries_met")),
            early_stopping_met=satisfied.get("early stopping satisfied", v.get("early_stopping_met")),
            duration_s=duration_s,
            accuracy=parse_accuracy_txt(accuracy_path) if accuracy_path else None, accuracy_path=accuracy_path,
            system=system[0] if system else None, system_path=system[1] if system else None,
            label=_label(run_info, sut_name),
            incomplete=bool(run_info and (run_info.get("incomplete") or run_info.get("status") in ("interrupted", "failed"))),
            run_info=run_info,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(f"{folder}: unreadable value for {'.'.join(map(str, first['loc']))} in the LoadGen logs.",
                         "point `repro verify` at an intact LoadGen result folder") from None


def find_runs(root: Path) -> list[LoadGenRun]:
    """Every LoadGen run below root (root included), in path order."""
    root = Path(root)
    if not root.exists():
        raise InputError(f"{root}: no such file or folder.", "check the path, then `repro verify` again")
    if root.is_file():
        root = root.parent
    folders = sorted({p.parent for name in (SUMMARY, DETAIL) for p in root.rglob(name)})
    if not folders:
        raise InputError(f"{root}: no LoadGen logs ({SUMMARY}) in this folder or below.",
                         "run the benchmark first (`repro run offline`) or point at a result folder")
    return [parse_run(f) for f in folders]
