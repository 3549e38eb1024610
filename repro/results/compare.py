"""A run against any published result of the index: per-accelerator band check, rank, and recognising a published log.

Pure functions over a parsed `LoadGenRun` and `PublishedResult` rows; rendering lives in repro/ui/published.py.
A comparison is refused, with the reason, when the accelerator or the scenario differ: tokens/s per GPU of an
H100 NVL says nothing about an H100 SXM, and Server is not Offline. A different accuracy benchmark (99 vs 99.9)
is compared but noted. Matching a run to the index uses what any published bundle carries (system JSON file name
and fields, the results path, the benchmark and scenario folders, the printed tokens/s), never a fixture name.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from repro.core.errors import InputError
from repro.core.published import Accelerator, PublishedIndex, PublishedResult, load_index
from repro.results.audit import AuditLine, SystemItem, published_system, run_system, system_diff
from repro.results.identity import ResultIdentity, identify
from repro.results.index_match import IndexMatch
from repro.results.logs import LoadGenRun, find_runs
from repro.results.pick import pick_run

if TYPE_CHECKING:
    from repro.results.checks import Evidence

BAND_PCT = 5.0
# MLPerf llama2-70b Interactive: TTFT 450 ms / TPOT 40 ms (Server: 2,000 / 200); the log prints "Scenario : Server".
Status = Literal["PASS", "FAIL", "NOT A REPRODUCTION", "REFUSED"]
EXIT_CODES = {"PASS": 0, "FAIL": 1, "NOT A REPRODUCTION": 1, "REFUSED": 2}


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


def facts_from_run(run: LoadGenRun, ident: ResultIdentity, refs: list[str] | None = None) -> RunFacts:
    """Accelerators: --gpus, else run.json, else system JSON per node x nodes, else the matched published record
    (all read once into `ident`), else (as plain verify does) the count of the recipe run.json names, with a note."""
    if run.tokens_per_s is None:
        raise InputError(
            f"{run.summary_path or run.folder}: no tokens per second in the logs.",
            "re-run with use_token_latencies (`repro run offline` sets it)",
        )
    found, notes = ident.count, list(ident.count_notes)
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
    return RunFacts(
        run.folder,
        float(run.tokens_per_s),
        total,
        source,
        ident.scenario,
        ident.benchmark,
        ident.accelerator,
        ident.accelerator_source or "unknown",
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
            "audit_2pct": None
            if self.deviation_pct is None
            else AuditLine(self.deviation_pct, r.per_accelerator).to_json(),
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
    evidence: Evidence
    """The run's own checks, from the same function plain verify uses (verify.evidence_checks)."""
    match: IndexMatch | None = None
    reasons: list[str] = field(default_factory=list)
    system: list[SystemItem] = field(default_factory=list)
    """The run's system against the published one it is (else the first named), item by item."""
    division: str = "closed"

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
        if not ok or self.evidence.failed:
            return "FAIL"
        return "NOT A REPRODUCTION" if self.evidence.lacking else "PASS"

    def state(self, prefix: str) -> str:
        """PASS, FAIL, 'cannot be re-checked' or 'not shown' for one family of checks (accuracy, TEST06)."""
        from repro.results.verify import check_state

        return check_state(self.evidence.checks, prefix)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def to_json(self) -> dict[str, Any]:
        from repro.results.verify import accuracy_verdict, closed_accuracy

        rank = self.rank
        refused = self.status == "REFUSED"
        return {
            "ok": not refused,
            **({"error": self.reasons[0] if self.reasons else "nothing to compare with"} if refused else {}),
            "status": self.status + (f" ({self.division} division)" if self.division != "closed" else ""),
            "reproduction": self.status == "PASS" and self.division == "closed",
            "division": self.division,
            "reasons": self.reasons,
            "run": self.facts.to_json(),
            "band_pct": self.band_pct,
            "rank": None if rank is None else {"position": rank[0], "of": rank[1]},
            "match": self.match.to_json() if self.match else None,
            "against": [e.to_json() for e in self.entries],
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.evidence.checks],
            "accuracy_verdict": accuracy_verdict(self.evidence.checks, self.division),
            "accuracy_closed_target": closed_accuracy(self.evidence.checks, self.division),
            "test06": self.state("TEST06"),
            "min_duration": self.state("min duration"),
            "system_diff": [i.to_json() for i in self.system],
        }


def compare(
    facts: RunFacts,
    rows: list[PublishedResult],
    evidence: Evidence,
    band_pct: float = BAND_PCT,
    match: IndexMatch | None = None,
) -> Comparison:
    """Band check of the run's tokens/s per accelerator against each row; refuse other accelerators and scenarios.
    `evidence` is the run's own checks (verify.evidence_checks): a comparison without them cannot be built."""
    mine = Accelerator.parse(facts.accelerator) if facts.accelerator else None
    entries: list[RowComparison] = []
    for row in rows:
        theirs = Accelerator.parse(row.accelerator_model_name)
        refused = None
        if row.scenario != facts.scenario:
            refused = f"{row.ref} is a {row.scenario} result; this run is {facts.scenario}"
        elif facts.benchmark and not same_model(facts.benchmark, row.benchmark_name):
            refused = (
                f"another benchmark: the run is {facts.benchmark}, {row.ref} is {row.benchmark_name}; tokens/s of "
                "another model say nothing about this run"
            )
        elif mine is None:
            refused = "the run does not say which accelerator it used (no system JSON, no GPU names in run.json)"
        elif not mine.same_as(theirs):
            refused = f"different accelerator: the run used {facts.accelerator}, {row.ref} {row.accelerator_model_name}"
        if refused:
            entries.append(RowComparison(row, None, None, refused))
            continue
        dev = (facts.per_accelerator / row.per_accelerator - 1) * 100
        notes = []
        if facts.benchmark and facts.benchmark != row.benchmark_name:
            notes.append(f"accuracy benchmark differs: run {facts.benchmark}, published {row.benchmark_name}")
        if row.division != "closed":
            notes.append("open-division result: its rules differ from closed")
        entries.append(RowComparison(row, dev, abs(dev) <= band_pct + 1e-9, None, tuple(notes)))
    reasons: list[str] = []
    if facts.label:
        from repro.results.logs import label_reason

        reasons.append(label_reason(facts.label))
    if not facts.valid:
        reasons.append("LoadGen marked the run INVALID")
    from repro.results.checks import failure_reasons

    reasons += [r for r in failure_reasons(evidence.failed, evidence) if r not in reasons]
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
    return Comparison(facts, band_pct, entries, evidence, match, reasons)


def same_model(a: str, b: str) -> bool:
    """Whether two benchmarks are one model's (llama2-70b-99 and -99.9 are; llama2-70b and llama3.1-405b are not):
    the benchmark files' mlperf.conf model key, else the names themselves for a benchmark repro holds no file for."""
    from repro.core.benchmarks import benchmark_names, load_benchmark

    known = benchmark_names()
    if a in known and b in known:
        return load_benchmark(a).family == load_benchmark(b).family
    return a == b


def _same_model(rows: list[PublishedResult], facts: RunFacts, scores: set[str]) -> list[PublishedResult]:
    """Rows of one model when an ID spans several (Azure's 5.1-0008: Llama-2-70B and Llama-3.1-405B) and the run
    does not name its benchmark: those whose accuracy metrics the run's accuracy.txt scores, else those nearest the
    run's tokens/s per accelerator (the models differ fifty-fold)."""
    groups: dict[frozenset[str], list[PublishedResult]] = {}
    for r in rows:
        groups.setdefault(frozenset(r.metrics), []).append(r)
    if len(groups) < 2:
        return rows
    scored = [g for k, g in groups.items() if k and k <= scores]
    if len(scored) == 1:
        return scored[0]
    return min(
        groups.values(), key=lambda g: abs(math.log(max(g[0].per_accelerator, 1e-9) / max(facts.per_accelerator, 1e-9)))
    )


def pick_row(rows: list[PublishedResult], facts: RunFacts, ref: str, scores: set[str] | None = None) -> PublishedResult:
    """Narrow a reference's rows (an ID covers every benchmark and scenario of its system) to the run's scenario,
    then its benchmark (`scores`: the score names of the run's accuracy.txt, when its benchmark is not named).

    When nothing has the run's scenario, the first row is returned and `compare` refuses it with the reason.
    """
    same = [r for r in rows if r.scenario == facts.scenario] or rows
    if facts.benchmark:
        # its own benchmark, else its model's other accuracy class; else one row, which compare refuses as another
        # benchmark (a DeepSeek-R1 run against Azure's Llama-only 5.1-0008 is not a choice between 99 and 99.9)
        own = [r for r in same if r.benchmark_name == facts.benchmark]
        same = own or [r for r in same if same_model(facts.benchmark, r.benchmark_name)] or same[:1]
    else:
        same = _same_model(same, facts, scores or set())
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
    return pick_run(find_runs(path) if parsed is None else parsed, Path(path), scenario)[0]


def verify_against(
    path: Path,
    refs: list[str],
    gpus: int | None = None,
    band_pct: float = BAND_PCT,
    index: PublishedIndex | None = None,
    scenario: str | None = None,
) -> Comparison:
    """`repro verify RUN --against REF...`: the run's tokens/s per accelerator against each named published result,
    with every check plain verify runs (validity, duration, scenario rules, accuracy, TEST06, consistency)."""
    from repro.results.checks import evidence_checks

    idx = index or load_index()
    run = pick_perf_run(Path(path), scenario)
    ident = identify(run, gpus, idx)
    match = ident.record
    facts = facts_from_run(run, ident, refs)
    rows: list[PublishedResult] = []
    for ref in refs:
        row = pick_row(idx.resolve(ref), facts, ref, set(run.accuracy or {}))
        if row.key not in {r.key for r in rows}:
            rows.append(row)
    # the record the run is (its own target and, when open, its own accuracy), else the first one named
    own = match.row if match is not None else rows[0] if rows else None
    evidence = evidence_checks(run, ident, None, own)
    result = compare(facts, rows, evidence, band_pct, match)
    result.system = system_diff(run_system(run, ident, None), published_system(own))
    result.division = ident.division
    return result
