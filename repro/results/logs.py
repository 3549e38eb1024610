"""Read a LoadGen result folder: summary, detail (`:::MLLOG {json}` lines), accuracy.txt, system JSON, run.json.

The summary and detail of one run can disagree (a published GB300 summary says target_qps 400 where
its detail log says 390), so results come from the summary and effective settings from the detail.
Anything that cannot be read raises InputError naming the file; the parser never raises anything else.
Numbers are kept only when finite: a NaN, infinite or negative throughput is an unreadable log, not a result.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from repro.core.benchmarks import all_benchmarks, benchmark_for_result_name, load_benchmark, search_path
from repro.core.errors import InputError
from repro.core.record import RUN_JSON, RunRecord
from repro.results import consistency
from repro.results.logfiles import (
    ACCURACY_TXT,
    DETAIL,
    LOADGEN_SCENARIOS,
    SUMMARY,
    SUMMARY_FIGURES,
    empty_summary,
    finite,
    parse_detail,
    parse_summary,
    read_accuracy_txt,
    read_json,
    stat_key,
)

LABELS = ("simulated", "smoke", "demo", "rehearsal", "non-compliant")
NON_COMPLIANT = "non-compliant"
"""The label of a run whose recipe waives an MLPerf rule (`waive_rules`: an experiment, never a reproduction)."""


def label_reason(label: str) -> str:
    """Why a labelled run is never a reproduction, in the words every verdict path uses."""
    if label == NON_COMPLIANT:
        return f"{label} run: its recipe waives MLPerf rules (waive_rules), so it is never a reproduction"
    return f"{label} run: it rehearses the flow and is never a reproduction"


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
    test_datetime: str | None = Field(default=None, description="When LoadGen started the run (its detail log)")
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
    run_info: RunRecord | None = None
    benchmark_scenario: str = Field(default="", description="Offline, Server or Interactive (Interactive logs: Server)")
    scenario_source: str = ""
    benchmark: str | None = Field(
        default=None,
        description="The benchmark its path names (benchmark_of_path); the run's benchmark is decided from this "
        "and the rest by results/identity.py (ResultIdentity.bench)",
    )
    accuracy_hashes: list[str] = Field(default_factory=list)
    system_folder: str | None = Field(default=None, description="The results/<system> folder name, if any")
    system_node_of: str | None = Field(default=None, description="Set when the run is one node of a system")
    contradictions: list[str] = Field(
        default_factory=list, description="Where the run's own files disagree; each names both files"
    )
    evidence_gaps: list[str] = Field(
        default_factory=list, description="Figures present but not numbers: evidence missing, never a check skipped"
    )
    accuracy_log_hash: consistency.HashCheck | None = None
    copies: list[Any] = Field(
        default_factory=list,
        description="Identical copies of this run (same summary) counted once; their own "
        "accuracy and TEST06 are still checked",
    )

    @property
    def effective_scenario(self) -> str:
        """Offline, Server or Interactive as the verdict sees it (Interactive logs say Server): the one expression."""
        return self.benchmark_scenario or self.scenario

    @property
    def is_reproduction_candidate(self) -> bool:
        return self.label is None and not self.incomplete


def _parts(folder: Path) -> tuple[str, ...]:
    return Path(folder).absolute().parts


def _result_names() -> tuple[tuple[str, str], ...]:
    """(result-folder name, benchmark) of every benchmark file on the search path, longest name first (so that
    `llama2-70b-99.9` is tried before `llama2-70b-99`)."""
    return _result_names_on(tuple(str(p) for p in search_path()))


@cache
def _result_names_on(where: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    del where  # the cache key: the search path all_benchmarks() reads
    names = ((n.lower(), b.name) for b in all_benchmarks() for n in b.all_result_names())
    return tuple(sorted(names, key=lambda x: -len(x[0])))


def _is_benchmark_folder(part: str) -> bool:
    """`results/<system>/<benchmark>/`: a folder named as a benchmark file names its results, or such a name with a
    variant after an underscore (the open division's `llama3_1-405b_pruned`)."""
    low = part.lower()
    return benchmark_for_result_name(low) is not None or any(low.startswith(f"{n}_") for n, _ in _result_names())


def system_folder_of(folder: Path) -> str | None:
    """`results/<system>/<benchmark>/<scenario>`: the folder above the benchmark folder."""
    parts = _parts(folder)
    for i in range(len(parts) - 1, 0, -1):
        if _is_benchmark_folder(parts[i]):
            return parts[i - 1]
    return None


def benchmark_of_path(folder: Path) -> str | None:
    """The benchmark the nearest folder names, as the benchmark files list their result-folder names: the whole
    name (`llama3.1-405b`, `llama2-70b-interactive-99`), else one inside a longer name (`..._llama2-70b-99_Offline`,
    `v5.1_Cisco_..._llama3_1-405b_Offline`). results/identity.py decides the run's benchmark from this and the rest."""
    for part in reversed(_parts(folder)):
        if (bench := benchmark_for_result_name(part)) is not None:
            return bench.name
        if named := _result_name_inside(part):
            return named
    return None


def _result_name_inside(part: str) -> str | None:
    """A result-folder name inside a longer folder name, whole: not after a letter or digit, and not followed by
    one or by '.digit' (llama2-70b-99 is not inside llama2-70b-99.9)."""
    for name, bench in _result_names():
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9]|\.\d)", part, re.I):
            return bench
    return None


def system_json_dirs(folder: Path) -> list[list[Path]]:
    """Where the submission layout keeps a run's system JSON, nearest first, one group per level: the run's own
    folder, its scenario folder (above performance/ or accuracy/), then around the benchmark folder
    (`_is_benchmark_folder`) the system folder, the results root and `<submitter>/systems` beside `results/`.
    Never an arbitrary ancestor: a JSON five levels up in /tmp describes nothing about this run."""
    folder = Path(folder).absolute()
    groups: list[list[Path]] = [[folder, folder / "systems"]]
    up = folder.parent
    if up.name == "performance" or folder.name in ("performance", "accuracy"):
        scenario = up.parent if up.name == "performance" else up
        groups.append([scenario, scenario / "systems"])
    parts = folder.parts
    bench = next((i for i in range(len(parts) - 1, 0, -1) if _is_benchmark_folder(parts[i])), None)
    if bench is not None and bench >= 2:
        system_dir, results_root = Path(*parts[:bench]), Path(*parts[: bench - 1])
        groups += [[system_dir, system_dir / "systems"], [results_root, results_root / "systems"]]
        if parts[bench - 2].lower() == "results" and bench >= 3:
            groups.append([Path(*parts[: bench - 2]) / "systems"])
    seen: set[Path] = set()
    out = []
    for group in groups:
        fresh = [d for d in group if d not in seen]
        seen.update(fresh)
        if fresh:
            out.append(fresh)
    return out


def find_system_json(folder: Path) -> tuple[dict[str, Any], Path, str | None] | None:
    """The MLPerf system description of this run: `<system>.json` named like its results/<system> folder, in the
    places the submission layout puts it (`system_json_dirs`). Returns (doc, path, node_of): node_of is set when
    the run folder is `<system>_<N>`, one node of a multi-node system. Several JSONs and none named like the run:
    no guess, None."""
    system = system_folder_of(folder)
    for group in system_json_dirs(folder):
        candidates: list[tuple[dict[str, Any], Path]] = []
        for directory in group:
            if not directory.is_dir():
                continue
            for candidate in sorted(directory.glob("*.json")):
                if candidate.name in (RUN_JSON, "mlperf_log_accuracy.json", "mlperf_log_trace.json"):
                    continue
                doc = read_json(candidate)
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


def _label(run_info: RunRecord | None, sut_name: str | None) -> str | None:
    if run_info is not None and run_info.label in LABELS:
        return run_info.label
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


def _interactive_limits(folder: Path, recorded: str | None = None) -> list[tuple[float, float]]:
    """The Interactive (TTFT, TPOT) limits in ns of the benchmark the path names, else the one repro's run.json
    records (a known benchmark's name only), else of every benchmark file (DeepSeek-R1's Server limits, 2,000/80
    ms, are inside Llama-3.1-405B's Interactive ones, 4,500/80: a repro DeepSeek-R1 Server run under a folder that
    names no benchmark read as Interactive)."""
    named = benchmark_of_path(folder)
    if named is None and recorded in {b.name for b in all_benchmarks()}:
        named = recorded
    benches = [load_benchmark(named)] if named else all_benchmarks()
    rules = [b.scenarios.get("Interactive") for b in benches]
    return [(r.ttft_ms * 1e6, r.tpot_ms * 1e6) for r in rules if r and r.ttft_ms and r.tpot_ms]


def _benchmark_scenario(
    log_scenario: str, folder: Path, settings: dict[str, Any], recorded: str | None = None
) -> tuple[str, str]:
    """Interactive runs log `Scenario : Server`; the TTFT/TPOT limits LoadGen enforced decide (within the
    benchmark's Interactive limits: Llama-2-70B 450/40 ms, not Server's 2,000/200; Llama-3.1-405B 4,500/80, not
    6,000/175), and the folder name (a word `interactive`: Interactive, llama2-70b-interactive-99) when the logs carry
    no limits."""
    if log_scenario.lower() != "server":
        return log_scenario, "the logs"
    names = [p.lower() for p in _parts(folder)]
    folder_says = any("interactive" in re.split(r"[^a-z0-9]+", p) for p in names)
    ttft, tpot = settings.get("ttft_latency_ns"), settings.get("tpot_latency_ns")
    if finite(ttft) and finite(tpot):
        ttft, tpot = float(ttft), float(tpot)  # type: ignore[arg-type]
        interactive = any(ttft <= t and tpot <= p for t, p in _interactive_limits(folder, recorded))
        limits = f"TTFT/TPOT limits {ttft / 1e6:,.0f}/{tpot / 1e6:,.0f} ms"
        if interactive != folder_says and any(p in ("server", "interactive") for p in names[-4:]):
            return ("Interactive" if interactive else "Server"), f"{limits} (the folder name says otherwise)"
        return ("Interactive" if interactive else "Server"), limits
    return ("Interactive" if folder_says else "Server"), "the folder name (the logs carry no TTFT/TPOT limits)"


def _read_logs(folder: Path) -> tuple[Path, Path, dict[str, Any], dict[str, Any]]:
    """The summary and detail of the run, either one standing in for a missing other (a run killed before
    LoadGen wrote its summary still has a detail log with result_validity)."""
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder.", "check the path; `repro status` names the latest run folder")
    summary_path, detail_path = folder / SUMMARY, folder / DETAIL
    if not summary_path.is_file() and not detail_path.is_file():
        raise InputError(f"{folder}: no {SUMMARY} or {DETAIL} here.", "point `repro verify` at a LoadGen result folder")
    detail = parse_detail(detail_path) if detail_path.is_file() else {"values": {}, "errors": [], "warnings": []}
    v = detail["values"]
    if summary_path.is_file():
        summary = parse_summary(summary_path)
    elif "AccuracyOnly" in (v.get("effective_test_mode"), v.get("requested_test_mode")) and "result_validity" not in v:
        # an accuracy run's folder as v4.0 submissions published it: the detail log, no summary; LoadGen judges no
        # validity in AccuracyOnly mode, so there is none to miss (its scores are accuracy.txt's)
        summary = empty_summary()
    else:
        if "result_validity" not in v:
            raise InputError(
                f"{detail_path}: no result_validity entry and no summary; the run did not finish.",
                f"restore {SUMMARY} from the run, or re-run your own (`repro run offline`)",
            )
        summary = {**empty_summary(), "validity": str(v["result_validity"]).upper()}
    return summary_path, detail_path, summary, detail


def _scenario_and_mode(
    folder: Path, summary_path: Path, detail_path: Path, summary: dict[str, Any], v: dict[str, Any]
) -> tuple[str, str]:
    """The LoadGen scenario and mode, after checking the summary is whole: a truncated log is refused, not read."""
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
    return str(scenario), str(mode)


def _settings_and_latency(summary: dict[str, Any], v: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Effective settings from the detail, filled from the summary's parameters (the detail wins where both say);
    latencies from the summary, filled from the detail."""
    settings = {k[len("effective_") :]: val for k, val in v.items() if k.startswith("effective_")}
    for k, val in summary["params"].items():
        settings.setdefault(k.replace(" (ms)", "_ms").replace(" (ns)", "_ns").replace(" ", "_"), val)
    if "generated_samples_per_query" in v:
        settings["generated_samples_per_query"] = v["generated_samples_per_query"]
    if "ttft_latency_ns" not in settings and finite(v.get("requested_server_ttft_latency")):
        settings["ttft_latency_ns"] = v["requested_server_ttft_latency"]
    if "tpot_latency_ns" not in settings and finite(v.get("requested_server_tpot_latency")):
        settings["tpot_latency_ns"] = v["requested_server_tpot_latency"]
    latency = dict(summary["latency"])
    for k, val in v.items():
        if m := re.match(r"^result_(\d+\.\d+)_percentile_latency_ns$", k):
            latency.setdefault(stat_key(m.group(1)), val)
        elif m := re.match(r"^result_(min|max|mean)_latency_ns$", k):
            latency.setdefault(m.group(1), val)
    return settings, latency


def _throughput(
    folder: Path, summary_path: Path, detail_path: Path, summary: dict[str, Any], v: dict[str, Any]
) -> tuple[Any, Any]:
    """Tokens and samples per second, the summary's first; a figure that is not a finite number ≥ 0 is a corrupt log."""
    tokens = _first(
        summary.get("tokens_per_s"), v.get("result_tokens_per_second"), v.get("result_completed_tokens_per_second")
    )
    samples = _first(
        summary.get("samples_per_s"),
        v.get("result_samples_per_second"),
        v.get("result_completed_samples_per_second"),
        v.get("result_completed_samples_per_sec"),
    )
    for line, key, text in summary.get("not_numbers", []):
        if key.lower() in SUMMARY_FIGURES:
            raise InputError(
                f"{summary_path}: line {line}: {key} is {text!r}, not a number (LoadGen writes ASCII digits); "
                "the log is corrupt.",
                f"restore the complete log from the run, then `repro verify {folder}`",
            )
    for what, value in (("tokens per second", tokens), ("samples per second", samples)):
        if value is not None and not (finite(value) and value >= 0):
            raise InputError(
                f"{summary_path if summary_path.is_file() else detail_path}: {what} is {value!r}, "
                "not a finite number ≥ 0; the log is corrupt.",
                f"restore the complete log from the run, then `repro verify {folder}`",
            )
    return tokens, samples


def _accuracy_hash_check(
    accuracy_path: Path | None, hashes: list[str], contradictions: list[str], gaps: list[str]
) -> consistency.HashCheck | None:
    """Check accuracy.txt's hash against its log; a mismatch is a contradiction, and a hash our own run
    should have written but did not is a gap (appended to the lists given)."""
    if accuracy_path is None:
        return None
    acc_path = accuracy_path.parent / RUN_JSON
    acc_info = RunRecord.parse(read_json(acc_path)) if acc_path.is_file() else None
    ours = bool(acc_info and acc_info.repro_version)
    hash_check = consistency.accuracy_log_hash(accuracy_path, hashes, ours=ours)
    if hash_check and hash_check.ok is False:
        contradictions.append(hash_check.detail)
    elif hash_check and hash_check.ok is None and ours:
        gaps.append(hash_check.detail)
    return hash_check


def parse_run(folder: Path) -> LoadGenRun:
    folder = Path(folder)
    summary_path, detail_path, summary, detail = _read_logs(folder)
    v = detail["values"]
    scenario, mode = _scenario_and_mode(folder, summary_path, detail_path, summary, v)
    settings, latency = _settings_and_latency(summary, v)
    tokens, samples = _throughput(folder, summary_path, detail_path, summary, v)
    run_info = RunRecord.parse(read_json(folder / RUN_JSON)) if (folder / RUN_JSON).is_file() else None
    recorded = run_info.benchmark if run_info is not None else None
    bench_scenario, scenario_source = _benchmark_scenario(scenario, folder, settings, recorded)
    duration_s = latency["max"] / 1e9 if scenario == "Offline" and latency.get("max") else None
    min_duration_ms = settings.get("min_duration_ms")
    satisfied = {k.lower(): ok for k, ok in summary["satisfied"].items()}
    min_duration_met = satisfied.get("min duration satisfied", v.get("result_min_duration_met"))
    accuracy_path = _accuracy_for(folder)
    scores, hashes = read_accuracy_txt(accuracy_path) if accuracy_path else (None, [])
    system = find_system_json(folder)
    bench_name = benchmark_of_path(folder)
    summary_file = summary_path if summary_path.is_file() else None
    detail_file = detail_path if detail_path.is_file() else None
    contradictions = consistency.contradictions(summary_file, detail_file, summary, detail, scenario)
    summary["not_numbers"] = [n for n in summary.get("not_numbers", []) if n[1].lower() not in SUMMARY_FIGURES]
    gaps = consistency.evidence_gaps(summary_file, detail_file, summary, detail)
    hash_check = _accuracy_hash_check(accuracy_path, hashes, contradictions, gaps)
    sut_name = summary.get("sut_name") or v.get("sut_name")
    try:
        return LoadGenRun(
            folder=folder,
            summary_path=summary_file,
            detail_path=detail_file,
            scenario=scenario,
            mode=mode,
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
            test_datetime=str(v["test_datetime"]) if v.get("test_datetime") is not None else None,
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
            benchmark=bench_name,
            label=_label(run_info, sut_name),
            incomplete=run_info is not None and run_info.stopped_early,
            run_info=run_info,
            contradictions=contradictions,
            evidence_gaps=gaps,
            accuracy_log_hash=hash_check,
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


def require_paths(paths: list[Path]) -> None:
    """The one answer to a result path that is not there, for verify, explain, report and aggregate alike: a typo
    is bad input, never a VM folder to skip or a recipe to name."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise InputError(
            f"{', '.join(missing)}: no such file or folder.",
            "check the path; `repro status` names the latest run folder",
        )


def run_folders(root: Path) -> list[Path]:
    """Every folder holding LoadGen logs below root (root included), in path order."""
    root = Path(root)
    require_paths([root])
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
