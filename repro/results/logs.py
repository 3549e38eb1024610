"""Read a LoadGen result folder: summary, detail (`:::MLLOG {json}` lines), accuracy.txt, system JSON, run.json.

The summary and detail of one run can disagree (a published GB300 summary says target_qps 400 where
its detail log says 390), so results come from the summary and effective settings from the detail.
Anything that cannot be read raises InputError naming the file; the parser never raises anything else.
Numbers are kept only when finite: a NaN, infinite or negative throughput is an unreadable log, not a result.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from repro.core.errors import InputError
from repro.core.safeio import loads_json, read_head

SUMMARY = "mlperf_log_summary.txt"
DETAIL = "mlperf_log_detail.txt"
ACCURACY_TXT = "accuracy.txt"
RUN_JSON = "run.json"
LABELS = ("simulated", "smoke", "demo")
_MAX_TEXT = 64 << 20

_LATENCY = re.compile(
    r"^(?:(min|max|mean)|(\d+(?:\.\d+)?) percentile) (first token latency|time to output token|latency) \(ns\)$", re.I
)
_BUCKET = {"latency": "latency", "first token latency": "ttft", "time to output token": "tpot"}


class LoadGenRun(BaseModel):
    folder: Path
    summary_path: Path | None = None
    detail_path: Path | None = None
    scenario: str
    mode: str
    validity: str
    valid: bool
    invalid_reasons: list[str] = Field(default_factory=list)
    tokens_per_s: float | None = None
    samples_per_s: float | None = None
    latency_ns: dict[str, float] = Field(default_factory=dict)
    ttft_ns: dict[str, float] = Field(default_factory=dict)
    tpot_ns: dict[str, float] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    loadgen_version: str | None = None
    sut_name: str | None = None
    warnings: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    min_duration_met: bool | None = None
    min_queries_met: bool | None = None
    early_stopping_met: bool | None = None
    duration_s: float | None = None
    accuracy: dict[str, float] | None = None
    accuracy_path: Path | None = None
    system: dict[str, Any] | None = None
    system_path: Path | None = None
    label: str | None = None
    incomplete: bool = False
    run_info: dict[str, Any] | None = None
    benchmark_scenario: str = Field(default="", description="Offline, Server or Interactive (Interactive logs: Server)")
    scenario_source: str = ""
    accuracy_target: str | None = Field(default=None, description="99 or 99.9, from the run's benchmark folder")
    accuracy_target_source: str | None = None
    accuracy_hashes: list[str] = Field(default_factory=list)
    system_folder: str | None = Field(default=None, description="The results/<system> folder name, if any")
    system_node_of: str | None = Field(default=None, description="Set when the run is one node of a system")

    @property
    def is_reproduction_candidate(self) -> bool:
        return self.label is None and not self.incomplete


def _read_text(path: Path) -> str:
    """Only the head that is parsed is read (a 200 MB log is not held whole); FIFOs and devices are refused."""
    return _read_head_checked(path, _MAX_TEXT).decode("utf-8", errors="replace")


LOADGEN_SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline")


def _num(text: str) -> float | int | None:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return None
        return value  # a non-finite figure is refused where it is used, naming the field


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _yes(text: str) -> bool | None:
    t = text.strip().lower()
    return True if t in ("yes", "true") else False if t in ("no", "false") else None


def _stat_key(word: str) -> str:
    word = word.lower()
    if word in ("min", "max", "mean"):
        return word
    return "p" + (word[:-3] if word.endswith(".00") else word.rstrip("0"))


def _empty_summary() -> dict[str, Any]:
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
    """Fields of mlperf_log_summary.txt across loadgen versions and scenarios."""
    text = _read_text(path)
    out = _empty_summary()
    section = "head"
    group: str | None = None
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
        if section == "params":
            out["params"][key] = _num(value) if _num(value) is not None else value
        elif low == "result is":
            out["validity"] = value.upper()
        elif low.endswith("satisfied"):
            out["satisfied"][key] = _yes(value)
        elif low in ("scenario", "mode", "sut name"):
            out[low.replace(" ", "_")] = value
        elif low in ("samples per second", "completed samples per second"):
            out.setdefault("samples_per_s", _num(value))
        elif low in ("tokens per second", "completed tokens per second"):
            out.setdefault("tokens_per_s", _num(value))
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
        raise InputError(
            f"{path}: cannot be read ({exc.strerror}).", "check the path; `repro status` names the latest run folder"
        ) from None
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
            entry = loads_json(line[len(":::MLLOG") :].strip())
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
        raise InputError(
            f"{path}: no readable ':::MLLOG' lines ({bad} malformed).",
            "point `repro verify` at an intact LoadGen result folder",
        )
    if bad:
        warnings.append(f"{path.name}: {bad} malformed MLLOG line(s) skipped")
    return {"values": values, "errors": errors, "warnings": warnings}


_NUMPY_SCALAR = re.compile(r"\b(?:np|numpy)\.(?:float|int|uint)(?:16|32|64|128)?_?\(\s*([^()]*?)\s*\)")


def _score(value: Any) -> float | None:
    """A score as evaluate-accuracy.py prints it: a number or a quoted number ('44.8085'); finite only."""
    if isinstance(value, str):
        value = _num(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def read_accuracy_txt(path: Path) -> tuple[dict[str, float], list[str]]:
    """Scores and hash= values of MLPerf's accuracy.txt in every published form: carriage-return progress and
    [nltk_data] lines before it, quoted values, numpy reprs (np.int64(27723428)), one or two hash lines."""
    text = _read_text(path)
    lines = [ln.strip() for ln in re.split(r"[\r\n]+", text)]
    scores: dict[str, float] | None = None
    for line in lines:
        if not (line.startswith("{") and "rouge1" in line):
            continue
        try:
            parsed = ast.literal_eval(_NUMPY_SCALAR.sub(r"\1", line))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(parsed, dict):
            scores = {str(k): v for k, raw in parsed.items() if (v := _score(raw)) is not None}
    if scores is None:
        raise InputError(
            f"{path}: no scores line (a line like {{'rouge1': 44.7, ...}}); the file is truncated or "
            "not MLPerf's accuracy.txt.",
            f"restore the complete file or move it out of {path.parent}, then `repro verify` again",
        )
    hashes = [m.group(1) for line in lines if (m := re.match(r"^hash=([0-9A-Za-z]+)$", line))]
    return scores, hashes


def parse_accuracy_txt(path: Path) -> dict[str, float]:
    return read_accuracy_txt(path)[0]


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = loads_json(_read_text(path))
    except (InputError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


_BENCHMARK = re.compile(r"^llama2-70b(?:-interactive)?-(99(?:\.9)?)$", re.I)


def _parts(folder: Path) -> tuple[str, ...]:
    return Path(folder).absolute().parts


def system_folder_of(folder: Path) -> str | None:
    """`results/<system>/<benchmark>/<scenario>`: the folder above the llama2-70b-99[.9] benchmark folder."""
    parts = _parts(folder)
    for i in range(len(parts) - 1, 0, -1):
        if _BENCHMARK.match(parts[i]) or parts[i].lower().startswith("llama2-70b"):
            return parts[i - 1]
    return None


_TARGET_IN_NAME = re.compile(r"(?<![A-Za-z0-9])llama2-70b(?:-interactive)?-(99(?:\.9)?)(?![\d.])", re.I)


def benchmark_target(folder: Path) -> str | None:
    """99 or 99.9 from the nearest folder naming the benchmark (`llama2-70b-99.9`, or `..._llama2-70b-99_Offline`)."""
    for part in reversed(_parts(folder)):
        if m := _TARGET_IN_NAME.search(part):
            return m.group(1)
    return None


def find_system_json(folder: Path, levels: int = 8) -> tuple[dict[str, Any], Path, str | None] | None:
    """The MLPerf system description of this run: `<system>.json` named like its results/<system> folder, beside
    or above the run (submission trees keep them in systems/). Returns (doc, path, node_of): node_of is set when
    the run folder is `<system>_<N>`, one node of a multi-node system. Several JSONs and none named like the run:
    no guess, None."""
    system = system_folder_of(folder)
    current = Path(folder).absolute()
    for _ in range(levels):
        candidates: list[tuple[dict[str, Any], Path]] = []
        for directory in (current, current / "systems"):
            if not directory.is_dir():
                continue
            for candidate in sorted(directory.glob("*.json")):
                if candidate.name in (RUN_JSON, "mlperf_log_accuracy.json", "mlperf_log_trace.json"):
                    continue
                doc = _read_json(candidate)
                if doc and "accelerators_per_node" in doc:
                    candidates.append((doc, candidate))
        for doc, path in candidates:
            if system and path.stem == system:
                return doc, path, None
        for doc, path in candidates:
            if system and re.fullmatch(rf"{re.escape(path.stem)}[_-]\d+", system):
                return doc, path, path.stem
        if len(candidates) == 1:
            return candidates[0][0], candidates[0][1], None
        if candidates:
            return None
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


def _reasons(
    summary: dict[str, Any], detail: dict[str, Any], duration_s: float | None, min_duration_ms: float | None
) -> list[str]:
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
    for header, items in summary.get("early_stopping", {}).items():
        if any(i.lower() != "run successful." for i in items):
            reasons.append(f"{header}: {' '.join(items)}")
    if not reasons:
        reasons.append("LoadGen marked the result INVALID without saying why; see mlperf_log_detail.txt")
    return reasons


def _first(*values: Any) -> Any:
    return next((x for x in values if x is not None), None)


def _summary_gaps(summary: dict[str, Any]) -> list[str]:
    """What a complete LoadGen summary has and this one lacks, in the order LoadGen writes it."""
    satisfied = {k.lower() for k in summary["satisfied"]}
    gaps = [
        what
        for what, present in (
            ("the tokens per second line", "tokens_per_s" in summary),
            ("'Min duration satisfied'", "min duration satisfied" in satisfied),
            ("the 'Test Parameters Used' section", bool(summary["params"])),
        )
        if not present
    ]
    return gaps + ["the closing 'errors encountered' line"]


def _benchmark_scenario(log_scenario: str, folder: Path, settings: dict[str, Any]) -> tuple[str, str]:
    """Interactive runs log `Scenario : Server`; the TTFT/TPOT limits LoadGen enforced (450/40 ms, not 2,000/200)
    decide, and the folder name (Interactive, llama2-70b-interactive) when the logs carry no limits."""
    if log_scenario.lower() != "server":
        return log_scenario, "the logs"
    names = [p.lower() for p in _parts(folder)]
    folder_says = any("interactive" in re.split(r"[^a-z0-9]+", p) or "llama2-70b-interactive" in p for p in names)
    ttft, tpot = settings.get("ttft_latency_ns"), settings.get("tpot_latency_ns")
    if _finite(ttft) and _finite(tpot):
        ttft, tpot = float(ttft), float(tpot)  # type: ignore[arg-type]
        interactive = ttft <= 450e6 and tpot <= 40e6
        limits = f"TTFT/TPOT limits {ttft / 1e6:,.0f}/{tpot / 1e6:,.0f} ms"
        if interactive != folder_says and any(p in ("server", "interactive") for p in names[-4:]):
            return ("Interactive" if interactive else "Server"), f"{limits} (the folder name says otherwise)"
        return ("Interactive" if interactive else "Server"), limits
    return ("Interactive" if folder_says else "Server"), "the folder name (the logs carry no TTFT/TPOT limits)"


def parse_run(folder: Path) -> LoadGenRun:
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder.", "check the path; `repro status` names the latest run folder")
    summary_path, detail_path = folder / SUMMARY, folder / DETAIL
    if not summary_path.is_file() and not detail_path.is_file():
        raise InputError(f"{folder}: no {SUMMARY} or {DETAIL} here.", "point `repro verify` at a LoadGen result folder")
    detail = parse_detail(detail_path) if detail_path.is_file() else {"values": {}, "errors": [], "warnings": []}
    v = detail["values"]
    if summary_path.is_file():
        summary = parse_summary(summary_path)
    else:
        if "result_validity" not in v:
            raise InputError(
                f"{detail_path}: no result_validity entry and no summary; the run did not finish.",
                f"restore {SUMMARY} from the run, or re-run your own (`repro run offline`)",
            )
        summary = {**_empty_summary(), "validity": str(v["result_validity"]).upper()}
    scenario = summary.get("scenario") or v.get("effective_scenario") or v.get("requested_scenario")
    known = {s.lower(): s for s in LOADGEN_SCENARIOS}
    if scenario is not None and str(scenario).replace(" ", "").lower() not in known:
        raise InputError(
            f"{summary_path if summary_path.is_file() else detail_path}: scenario {str(scenario)[:40]!r} "
            f"is not a LoadGen scenario ({', '.join(LOADGEN_SCENARIOS)}); the log is corrupt.",
            f"restore the complete log from the run, then `repro verify {folder}`",
        )
    if scenario is not None:
        scenario = known[str(scenario).replace(" ", "").lower()]
    mode = summary.get("mode") or v.get("effective_test_mode") or v.get("requested_test_mode")
    if "validity" not in summary:
        if mode != "AccuracyOnly":
            raise InputError(
                f"{summary_path}: no 'Result is' line; the summary is truncated or not a LoadGen summary.",
                f"restore the complete log from the run, then `repro verify {folder}`",
            )
        summary["validity"] = "N/A"
    elif summary_path.is_file() and not summary.get("closed"):
        raise InputError(
            f"{summary_path}: truncated; missing {', '.join(_summary_gaps(summary))}.",
            f"restore the complete log from the run, then `repro verify {folder}`",
        )
    if not scenario or not mode:
        raise InputError(
            f"{summary_path if summary_path.is_file() else detail_path}: names no scenario or mode.",
            "point `repro verify` at an intact LoadGen result folder",
        )
    settings = {k[len("effective_") :]: val for k, val in v.items() if k.startswith("effective_")}
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
    tokens = _first(
        summary.get("tokens_per_s"), v.get("result_tokens_per_second"), v.get("result_completed_tokens_per_second")
    )
    samples = _first(
        summary.get("samples_per_s"),
        v.get("result_samples_per_second"),
        v.get("result_completed_samples_per_second"),
        v.get("result_completed_samples_per_sec"),
    )
    for what, value in (("tokens per second", tokens), ("samples per second", samples)):
        if value is not None and not (_finite(value) and value >= 0):
            raise InputError(
                f"{summary_path if summary_path.is_file() else detail_path}: {what} is {value!r}, "
                "not a finite number ≥ 0; the log is corrupt.",
                f"restore the complete log from the run, then `repro verify {folder}`",
            )
    if "ttft_latency_ns" not in settings and _finite(v.get("requested_server_ttft_latency")):
        settings["ttft_latency_ns"] = v["requested_server_ttft_latency"]
    if "tpot_latency_ns" not in settings and _finite(v.get("requested_server_tpot_latency")):
        settings["tpot_latency_ns"] = v["requested_server_tpot_latency"]
    bench_scenario, scenario_source = _benchmark_scenario(str(scenario), folder, settings)
    duration_s = latency["max"] / 1e9 if scenario == "Offline" and latency.get("max") else None
    min_duration_ms = settings.get("min_duration_ms")
    satisfied = {k.lower(): ok for k, ok in summary["satisfied"].items()}
    min_duration_met = satisfied.get("min duration satisfied", v.get("result_min_duration_met"))
    run_info = _read_json(folder / RUN_JSON) if (folder / RUN_JSON).is_file() else None
    accuracy_path = _accuracy_for(folder)
    scores, hashes = read_accuracy_txt(accuracy_path) if accuracy_path else (None, [])
    system = find_system_json(folder)
    target = benchmark_target(folder)
    sut_name = summary.get("sut_name") or v.get("sut_name")
    try:
        return LoadGenRun(
            folder=folder,
            summary_path=summary_path if summary_path.is_file() else None,
            detail_path=detail_path if detail_path.is_file() else None,
            scenario=str(scenario),
            mode=str(mode),
            validity=summary["validity"],
            valid=summary["validity"] == "VALID",
            invalid_reasons=_reasons(summary, detail, duration_s, min_duration_ms),
            tokens_per_s=float(tokens) if tokens is not None else None,
            samples_per_s=float(samples) if samples is not None else None,
            latency_ns=latency,
            ttft_ns=summary["ttft"],
            tpot_ns=summary["tpot"],
            settings=settings,
            loadgen_version=v.get("loadgen_version"),
            sut_name=sut_name,
            warnings=summary["warnings"] + detail["warnings"],
            errors=summary["errors"] + detail["errors"],
            min_duration_met=min_duration_met,
            min_queries_met=satisfied.get("min queries satisfied", v.get("result_min_queries_met")),
            early_stopping_met=satisfied.get("early stopping satisfied", v.get("early_stopping_met")),
            duration_s=duration_s,
            accuracy=scores,
            accuracy_path=accuracy_path,
            accuracy_hashes=hashes,
            system=system[0] if system else None,
            system_path=system[1] if system else None,
            system_node_of=system[2] if system else None,
            system_folder=system_folder_of(folder),
            benchmark_scenario=bench_scenario,
            scenario_source=scenario_source,
            accuracy_target=target,
            accuracy_target_source=f"llama2-70b-{target} in the path" if target else None,
            label=_label(run_info, sut_name),
            incomplete=bool(
                run_info and (run_info.get("incomplete") or run_info.get("status") in ("interrupted", "failed"))
            ),
            run_info=run_info,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(
            f"{folder}: unreadable value for {'.'.join(map(str, first['loc']))} in the LoadGen logs.",
            "point `repro verify` at an intact LoadGen result folder",
        ) from None


_COMPLIANCE_TEST = re.compile(r"^TEST0\d$")


def _in_compliance_test(rel: Path) -> bool:
    """A compliance test's own LoadGen run (TEST06/accuracy/...) is read by repro.results.compliance, not judged."""
    return any(_COMPLIANCE_TEST.match(part) for part in rel.parts)


def run_folders(root: Path) -> list[Path]:
    """Every folder holding LoadGen logs below root (root included), in path order."""
    root = Path(root)
    if not root.exists():
        raise InputError(
            f"{root}: no such file or folder.", "check the path; `repro status` names the latest run folder"
        )
    if root.is_file():
        root = root.parent
    folders = sorted(
        {
            p.parent
            for name in (SUMMARY, DETAIL)
            for p in root.rglob(name)
            if not _in_compliance_test(p.parent.relative_to(root))
        }
    )
    if not folders:
        raise InputError(
            f"{root}: no LoadGen logs ({SUMMARY}) in this folder or below.",
            "run the benchmark first (`repro run offline`) or point at a result folder",
        )
    return folders


def find_runs(root: Path) -> list[LoadGenRun]:
    """Every LoadGen run below root (root included), in path order."""
    return [parse_run(f) for f in run_folders(root)]
