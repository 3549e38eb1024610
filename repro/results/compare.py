"""A run against any published result of the index: per-accelerator band check, rank, and recognising a published log.

Pure functions over a parsed `LoadGenRun` and `PublishedResult` rows; rendering lives in repro/ui/published.py.
A comparison is refused, with the reason, when the accelerator or the scenario differ: tokens/s per GPU of an
H100 NVL says nothing about an H100 SXM, and Server is not Offline. A different accuracy benchmark (99 vs 99.9)
is compared but noted. Matching a run to the index uses what any published bundle carries (system JSON file name
and fields, the results path, the benchmark and scenario folders, the printed tokens/s), never a fixture name.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repro.core.errors import InputError
from repro.core.published import Accelerator, PublishedIndex, PublishedResult, load_index
from repro.results.hardware import count_accelerators, count_value, run_accelerator
from repro.results.logs import LoadGenRun, benchmark_target, find_runs

BAND_PCT = 5.0
# MLPerf llama2-70b Interactive: TTFT 450 ms / TPOT 40 ms (Server: 2,000 / 200); the log prints "Scenario : Server".
_ROUND = re.compile(r"inference_results_(v\d+\.\d+)", re.I)
Status = Literal["PASS", "FAIL", "NOT A REPRODUCTION", "REFUSED"]
EXIT_CODES = {"PASS": 0, "FAIL": 1, "NOT A REPRODUCTION": 1, "REFUSED": 2}


def system_accelerators(system: dict[str, Any]) -> tuple[int, int] | None:
    """(accelerators per node, nodes) from a system JSON; nodes default to 1 when absent."""
    per_node = count_value(system.get("accelerators_per_node"))
    nodes = count_value(system.get("number_of_nodes", 1))
    return (per_node, nodes) if per_node and nodes else None


def effective_scenario(run: LoadGenRun) -> str:
    """The benchmark scenario as the verdict sees it (Interactive logs say Server; see results.logs)."""
    return run.benchmark_scenario or run.scenario


def _path_identity(folder: Path) -> dict[str, str]:
    """division/submitter/system from a submission tree: <division>/<submitter>/results/<system>/<benchmark>/..."""
    parts = folder.resolve().parts
    out: dict[str, str] = {}
    if "results" in parts:
        i = len(parts) - 1 - parts[::-1].index("results")
        if i >= 2 and i + 1 < len(parts) and parts[i - 2].lower() in ("closed", "open"):
            out = {"division": parts[i - 2].lower(), "submitter": parts[i - 1], "system": parts[i + 1]}
    for part in parts:
        if m := _ROUND.search(part):
            out["round"] = m.group(1).lower()
    return out


@dataclass(frozen=True)
class IndexMatch:
    """The index row a run corresponds to; `exact` when the run IS that published log (same tokens/s)."""

    row: PublishedResult
    how: str
    exact: bool
    also: tuple[PublishedResult, ...] = ()

    @property
    def note(self) -> str:
        if self.exact:
            more = f" (the same log is also published as {', '.join(r.ref for r in self.also)})" if self.also else ""
            return f"this is the published log of {self.row.ref}, matched by {self.how}{more}"
        return (
            f"same system as published result {self.row.ref} (matched by {self.how}), but not its published log: "
            f"tokens/s differ from the published {self.row.tokens_per_second:,.2f}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.row.ref,
            "key": self.row.key,
            "result_id": self.row.result_id,
            "how": self.how,
            "exact": self.exact,
            "also": [r.ref for r in self.also],
            "note": self.note,
        }


def _same_tokens(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def match_run(run: LoadGenRun, index: PublishedIndex | None = None) -> IndexMatch | None:
    """The published result this run is (or runs the system of); None when the index has nothing that fits.

    Identity first: the system JSON file name or results folder, and the submitter (system JSON or path) where one
    is stated, else the system name; then the scenario and benchmark folders. A match agrees on submitter and round:
    the round the path names (inference_results_vX.Y), else the one whose published tokens/s the log prints; a
    same-named system with other figures and no round is not this result (NVIDIA's v5.0 DGX-H100 is not v4.1's).
    Without any identity, a unique (scenario, benchmark, tokens/s) fingerprint, consistent with whatever the run
    states, identifies a published log.
    """
    idx = index or load_index()
    scenario = effective_scenario(run)
    bench = benchmark_target(run.folder)
    where = _path_identity(run.folder)
    system = run.system or {}
    folders = {n.lower() for n in (run.system_path.stem if run.system_path else None, where.get("system")) if n}
    submitters = {str(s).strip().lower() for s in (system.get("submitter"), where.get("submitter")) if s}
    names = {str(system.get("system_name", "")).strip().lower()} - {""}
    division = str(system.get("division") or where.get("division") or "").lower()

    rows = [r for r in idx.rows if r.scenario == scenario and (bench is None or r.benchmark == bench)]
    if "round" in where:
        rows = [r for r in rows if r.round == where["round"]]
    if submitters:
        rows = [r for r in rows if r.submitter.lower() in submitters]
    if division in ("closed", "open"):
        rows = [r for r in rows if r.division == division]
    ident = [
        r for r in rows if r.system_folder.lower() in folders and (submitters or r.system_name.strip().lower() in names)
    ]
    how = "system JSON and path" if ident else ""
    tokens = run.tokens_per_s
    if not ident and tokens is not None:
        counts = system_accelerators(system) if system else None
        finger = [
            r
            for r in rows
            if _same_tokens(r.tokens_per_second, tokens)
            and (counts is None or r.total_accelerators == counts[0] * counts[1])
        ]
        if len({r.system_key for r in finger}) == 1:
            ident, how = finger, "scenario, benchmark and tokens/s"
    if not ident:
        return None
    exact = [r for r in ident if tokens is not None and _same_tokens(r.tokens_per_second, tokens)]
    if not exact and "round" not in where:
        return None
    pool = exact or ident
    newest = max(r.round_tuple for r in pool)
    pool = sorted((r for r in pool if r.round_tuple == newest), key=lambda r: (r.benchmark, r.key))
    return IndexMatch(pool[0], how, bool(exact), tuple(pool[1:]))


@dataclass(frozen=True)
class RunFacts:
    """What a comparison needs from a run; verify's own accelerator count can be passed in instead."""

    folder: Path
    tokens_per_s: float
    accelerators: int
    accelerators_source: str
    scenario: str
    benchmark: str | None
    accelerator: str | None
    accelerator_source: str
    valid: bool
    label: str | None
    notes: tuple[str, ...] = ()

    @property
    def per_accelerator(self) -> float:
        return self.tokens_per_s / self.accelerators

    def to_json(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "tokens_per_s": self.tokens_per_s,
            "accelerators": self.accelerators,
            "accelerators_source": self.accelerators_source,
            "tokens_per_s_per_accelerator": self.per_accelerator,
            "scenario": self.scenario,
            "benchmark": self.benchmark,
            "accelerator": self.accelerator,
            "accelerator_source": self.accelerator_source,
            "valid": self.valid,
            "label": self.label,
            "notes": list(self.notes),
        }


def _recipe_count(run: LoadGenRun) -> tuple[int | None, str, str | None]:
    """The GPU count of the recipe run.json names (what plain `repro verify` assumes), or (None, '', None)."""
    from repro.core.errors import RecipeError
    from repro.core.recipes import registry_recipe

    name = run.run_info.recipe if run.run_info is not None else None
    if not name:
        return None, "", None
    try:
        recipe = registry_recipe(name)
    except RecipeError:
        return None, "", None
    n = recipe.system.gpus_per_vm
    note = f"no system JSON or run.json gives the accelerator count: assumed {n} from recipe {name}"
    return n, f"recipe {name}", note


def facts_from_run(
    run: LoadGenRun, gpus: int | None = None, match: IndexMatch | None = None, refs: list[str] | None = None
) -> RunFacts:
    """Accelerators: --gpus, else run.json, else system JSON per node x nodes, else the matched published record,
    else (as plain verify does) the count of the recipe run.json names, with a note."""
    if run.tokens_per_s is None:
        raise InputError(
            f"{run.summary_path or run.folder}: no tokens per second in the logs.",
            "re-run with use_token_latencies (`repro run offline` sets it)",
        )
    found, notes = count_accelerators(run, gpus)
    if found is None:
        total, source, note = _recipe_count(run)
        if note:
            notes.append(note)
    else:
        total, source = found.total, found.source
    if total is None:
        has_info = "run.json gives no GPU count" if run.run_info else "no run.json"
        hint = ["repro", "verify", str(run.folder), "--gpus", "N"]
        for ref in refs or []:
            hint += ["--against", ref]
        raise InputError(
            f"{run.folder}: cannot tell how many accelerators ran (no system JSON, {has_info}); pass the count the "
            f"run used with --gpus: {shlex.join(hint)}",
            "repro verify --help",
        )
    accel, accel_source = run_accelerator(run)
    return RunFacts(
        run.folder,
        float(run.tokens_per_s),
        total,
        source,
        effective_scenario(run),
        benchmark_target(run.folder),
        accel,
        accel_source or "unknown",
        run.valid and not run.contradictions,  # a folder that disagrees with itself is never a valid result
        run.label,
        tuple(notes) + tuple(f"the run's own files disagree: {c}" for c in run.contradictions),
    )


@dataclass(frozen=True)
class RowComparison:
    row: PublishedResult
    deviation_pct: float | None
    in_band: bool | None
    refused: str | None = None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        r = self.row
        return {
            "ref": r.ref,
            "key": r.key,
            "result_id": r.result_id,
            "submitter": r.submitter,
            "system": r.system_name,
            "accelerator": r.accelerator_model_name,
            "accelerators": r.total_accelerators,
            "round": r.round,
            "benchmark": r.benchmark_name,
            "scenario": r.scenario,
            "published_tokens_per_s": r.tokens_per_second,
            "published_tokens_per_s_per_accelerator": r.per_accelerator,
            "deviation_pct": None if self.deviation_pct is None else round(self.deviation_pct, 3),
            "in_band": self.in_band,
            "refused": self.refused,
            "notes": list(self.notes),
            "source": r.source,
        }


@dataclass
class Comparison:
    """A run against one or several published results: each band check, the rank, and the overall status."""

    facts: RunFacts
    band_pct: float
    entries: list[RowComparison]
    match: IndexMatch | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def compared(self) -> list[RowComparison]:
        return [e for e in self.entries if e.refused is None]

    @property
    def rank(self) -> tuple[int, int] | None:
        """(position of the run, field size) among the compared results and the run, by tokens/s per accelerator."""
        if not self.compared:
            return None
        above = sum(1 for e in self.compared if e.row.per_accelerator > self.facts.per_accelerator)
        return above + 1, len(self.compared) + 1

    @property
    def status(self) -> Status:
        if not self.compared:
            return "REFUSED"
        if self.facts.label:
            return "NOT A REPRODUCTION"
        ok = self.facts.valid and all(e.in_band for e in self.compared) and len(self.compared) == len(self.entries)
        return "PASS" if ok else "FAIL"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def to_json(self) -> dict[str, Any]:
        rank = self.rank
        refused = self.status == "REFUSED"
        return {
            "ok": not refused,
            **({"error": self.reasons[0] if self.reasons else "nothing to compare with"} if refused else {}),
            "status": self.status,
            "reproduction": self.status == "PASS",
            "reasons": self.reasons,
            "run": self.facts.to_json(),
            "band_pct": self.band_pct,
            "rank": None if rank is None else {"position": rank[0], "of": rank[1]},
            "match": self.match.to_json() if self.match else None,
            "against": [e.to_json() for e in self.entries],
        }


def compare(
    facts: RunFacts, rows: list[PublishedResult], band_pct: float = BAND_PCT, match: IndexMatch | None = None
) -> Comparison:
    """Band check of the run's tokens/s per accelerator against each row; refuse other accelerators and scenarios."""
    mine = Accelerator.parse(facts.accelerator) if facts.accelerator else None
    entries: list[RowComparison] = []
    for row in rows:
        theirs = Accelerator.parse(row.accelerator_model_name)
        refused = None
        if row.scenario != facts.scenario:
            refused = f"{row.ref} is a {row.scenario} result; this run is {facts.scenario}"
        elif mine is None:
            refused = "the run does not say which accelerator it used (no system JSON, no GPU names in run.json)"
        elif not mine.same_as(theirs):
            refused = f"different accelerator: the run used {facts.accelerator}, {row.ref} {row.accelerator_model_name}"
        if refused:
            entries.append(RowComparison(row, None, None, refused))
            continue
        dev = (facts.per_accelerator / row.per_accelerator - 1) * 100
        notes = []
        if facts.benchmark and facts.benchmark != row.benchmark:
            notes.append(f"accuracy benchmark differs: run {facts.benchmark}, published {row.benchmark}")
        if row.division != "closed":
            notes.append("open-division result: its rules differ from closed")
        entries.append(RowComparison(row, dev, abs(dev) <= band_pct + 1e-9, None, tuple(notes)))
    reasons: list[str] = []
    if facts.label:
        reasons.append(f"{facts.label} run: it rehearses the flow and is never a reproduction")
    if not facts.valid:
        reasons.append("LoadGen marked the run INVALID")
    for e in entries:
        if e.refused:
            reasons.append(f"refused: {e.refused}")
        elif not e.in_band and e.deviation_pct is not None:
            side = "below" if e.deviation_pct < 0 else "above"
            reasons.append(
                f"{abs(e.deviation_pct):.1f}% {side} {e.row.ref} "
                f"({e.row.per_accelerator:,.1f} per accelerator), "
                f"outside ±{band_pct:g}%"
            )
    return Comparison(facts, band_pct, entries, match, reasons)


def pick_row(rows: list[PublishedResult], facts: RunFacts, ref: str) -> PublishedResult:
    """Narrow a reference's rows (an ID covers up to 6) to the run's scenario, then its benchmark.

    When nothing has the run's scenario, the first row is returned and `compare` refuses it with the reason.
    """
    same = [r for r in rows if r.scenario == facts.scenario] or rows
    if facts.benchmark:
        same = [r for r in same if r.benchmark == facts.benchmark] or same
    figures = {r.per_accelerator for r in same}
    if len(figures) > 1 and len({r.benchmark for r in same}) > 1:
        options = ", ".join(sorted({f"{same[0].label}/{r.benchmark}/{r.scenario}" for r in same}))
        raise InputError(
            f"'{ref}' has different {same[0].scenario} results for llama2-70b-99 and 99.9 and the run "
            f"does not say which benchmark it ran.",
            f"name one: {options}",
        )
    return same[0]


def pick_perf_run(path: Path, scenario: str | None = None, parsed: list[LoadGenRun] | None = None) -> LoadGenRun:
    """The one performance run under `path`, picked as verify picks it (run_1 over a power submission's ranging run,
    compliance runs skipped); `parsed`: its runs, when the caller has already parsed them."""
    from repro.results.verify import pick_run

    return pick_run(find_runs(path) if parsed is None else parsed, Path(path), scenario)[0]


def verify_against(
    path: Path,
    refs: list[str],
    gpus: int | None = None,
    band_pct: float = BAND_PCT,
    index: PublishedIndex | None = None,
    scenario: str | None = None,
) -> Comparison:
    """`repro verify RUN --against REF...`: the run's tokens/s per accelerator against each named published result."""
    idx = index or load_index()
    run = pick_perf_run(Path(path), scenario)
    match = match_run(run, idx)
    facts = facts_from_run(run, gpus, match, refs)
    rows: list[PublishedResult] = []
    for ref in refs:
        row = pick_row(idx.resolve(ref), facts, ref)
        if row.key not in {r.key for r in rows}:
            rows.append(row)
    return compare(facts, rows, band_pct, match)
