"""The verdict: is a run, per GPU, inside the published band for its scenario, and if not, why not.

A PASS needs evidence: the run's own accelerator is the reference's, LoadGen says VALID, the logs show the run was
long enough under MLPerf's settings, the scenario's own rules hold, accuracy and TEST06 (where the run has them)
pass, and tokens/s per GPU is inside the band. The reference is the recipe's published figure, or without a recipe
the published record the run is recognised as (repro.results.compare.match_run): recognising a published result
decides what the run is compared with, never which checks run. Each rule is one function returning Checks.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from repro.core.accelerators import accelerator_of
from repro.core.benchmarks import Benchmark, benchmark_names, load_benchmark
from repro.core.errors import InputError
from repro.core.fmt import fmt_rate
from repro.core.recipes import Published, Recipe, by_system_name, get_recipe, registry_recipe
from repro.results.audit import (
    AuditLine,
    SystemItem,
    published_system,
    reference_row,
    run_system,
    system_diff,
)
from repro.results.hardware import Identity
from repro.results.identity import ResultIdentity, identify, mixed_against
from repro.results.logs import LoadGenRun, find_runs
from repro.results.pick import pick_run

if TYPE_CHECKING:
    from repro.core.published import PublishedResult
    from repro.results.index_match import IndexMatch

Status = Literal["PASS", "FAIL", "NOT A REPRODUCTION", "NO REFERENCE"]
EXIT_CODES = {"PASS": 0, "FAIL": 1, "NOT A REPRODUCTION": 1, "NO REFERENCE": 1}


@dataclass
class Check:
    name: str
    ok: bool | None
    detail: str
    fails: bool = False
    """True when ok is False and that alone makes the verdict FAIL."""
    closed: bool | None = None
    """An open-division run's closed-division accuracy rule, shown for information: did it hold?"""


@dataclass
class Verdict:
    run: LoadGenRun
    recipe: Recipe | None
    gpus: int
    gpus_source: str
    per_gpu: float | None
    band: tuple[float, float] | None
    deviation_pct: float | None
    status: Status
    reasons: list[str]
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    published: Published | None = None
    hardware: Identity | None = None
    record: IndexMatch | None = None
    """The published result the run is recognised as (the reference itself when there is no recipe)."""
    division: str = "closed"
    identity: ResultIdentity | None = None
    """What the folder is, read once (results.identity): every check, the JSON and the report read it."""
    audit: AuditLine | None = None
    """MLPerf's 2% audit line: within 2% of the published figure, or materially different."""
    system: list[SystemItem] = field(default_factory=list)
    """The run's system against the published system, item by item."""

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def reference(self) -> str:
        """What the run was compared with, in words."""
        if self.recipe is not None:
            return f"recipe {self.recipe.name}"
        assert self.record is not None
        return f"published record {self.record.row.ref}"

    @property
    def title(self) -> str:
        if self.recipe is not None:
            return self.recipe.title
        assert self.record is not None
        r = self.record.row
        return f"{r.submitter} {r.system_folder} ({r.round} {r.division}, published record {r.ref})"

    def _state(self, prefix: str) -> str:
        return check_state(self.checks, prefix)

    @property
    def scenario(self) -> str:
        return self.run.benchmark_scenario or self.run.scenario

    @property
    def headline(self) -> str:
        """The verdict as the text prints it: an open-division result says so in the same words."""
        return self.status + (f" ({self.division} division)" if self.division != "closed" else "")

    @property
    def closed_accuracy(self) -> str:
        """met, missed or 'not shown': MLPerf's closed-division accuracy targets, whatever the division."""
        return closed_accuracy(self.checks, self.division)

    @property
    def accuracy_verdict(self) -> str:
        """PASS/FAIL on the closed targets; in the open division never a bare PASS: what it was judged by."""
        return accuracy_verdict(self.checks, self.division)

    def to_json(self) -> dict[str, Any]:
        pub = self.published
        hw = self.hardware
        return {
            "status": self.headline,
            "reproduction": self.status == "PASS" and self.division == "closed",
            "label": self.run.label,
            "reasons": self.reasons,
            "notes": self.notes,
            "folder": str(self.run.folder),
            "division": self.division,
            "reference": self.reference,
            "recipe": self.recipe.name if self.recipe else None,
            "recipe_hash": self.recipe.hash() if self.recipe else None,
            "published_record": self.record.to_json() if self.record else None,
            "scenario": self.scenario,
            "scenario_source": self.run.scenario_source,
            "log_scenario": self.run.scenario,
            "validity": self.run.validity,
            "gpus": self.gpus,
            "gpus_source": self.gpus_source,
            "accelerator": None
            if hw is None
            else {
                "run": hw.run_name,
                "from": hw.where,
                "same_as_recipe": hw.same,
                "recipe": hw.recipe.model_dump(),
                "detail": hw.why,
            },
            "tokens_per_s": _finite_or_none(self.run.tokens_per_s),
            "tokens_per_s_per_gpu": _finite_or_none(self.per_gpu, 2 if abs(self.per_gpu or 0) < 1000 else 1),
            "published": None
            if pub is None
            else {
                "scenario": pub.scenario,
                "status": pub.status,
                "tokens_per_s_per_gpu": pub.tokens_per_s_per_gpu,
                "tokens_per_s_per_vm": pub.tokens_per_s_per_vm,
                "band_pct": pub.band_pct,
                "mlperf_id": pub.mlperf_id,
                "round": pub.mlperf_round,
                "source": pub.source,
            },
            "band_per_gpu": None if self.band is None else [round(self.band[0], 1), round(self.band[1], 1)],
            "deviation_pct": _finite_or_none(self.deviation_pct, 2),
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
            "contradictions": self.run.contradictions,
            "evidence_gaps": self.run.evidence_gaps,
            "accuracy": self.run.accuracy,
            "accuracy_target": self.accuracy_target[0],
            "accuracy_verdict": self.accuracy_verdict,
            "accuracy_closed_target": self.closed_accuracy,
            "test06": self._state("TEST06"),
            "min_duration": self._state("min duration"),
            "loadgen_version": self.run.loadgen_version,
            "identity": self.identity.to_json() if self.identity else None,
            "audit_2pct": self.audit.to_json() if self.audit else None,
            "system_diff": [i.to_json() for i in self.system],
        }

    @property
    def accuracy_target(self) -> tuple[str, str]:
        """(the accuracy class, 99 or 99.9, or the benchmark's name when repro holds no file for it; its source)."""
        bench, name, source = benchmark_of(self.run, self.recipe, self.record.row if self.record else None)
        return (bench.accuracy.level if bench else name), source


def check_state(checks: list[Check], prefix: str) -> str:
    """One family of checks (accuracy, TEST06, min duration) in a word: FAIL, PASS, or why neither."""
    found = [c for c in checks if c.name == prefix or c.name.startswith(prefix + " ")]
    if any(c.ok is False for c in found):
        return "FAIL"
    if any(c.ok for c in found):
        return "PASS"
    return "cannot be re-checked" if any("cannot be re-checked" in c.detail for c in found) else "not shown"


def closed_accuracy(checks: list[Check], division: str) -> str:
    """met, missed or 'not shown': MLPerf's closed-division accuracy targets, whatever the division."""
    if division == "closed":
        return {"PASS": "met", "FAIL": "missed"}.get(check_state(checks, "accuracy"), "not shown")
    found = [c.closed for c in checks if c.closed is not None]
    return "not shown" if not found else "met" if all(found) else "missed"


def accuracy_verdict(checks: list[Check], division: str) -> str:
    """PASS/FAIL on the closed targets; in the open division never a bare PASS: what the run was judged by."""
    state = check_state(checks, "accuracy")
    if division == "closed" or state != "PASS":
        return state
    return f"PASS against its own published accuracy; closed-division target {closed_accuracy(checks, division)}"


def benchmark_of(
    run: LoadGenRun, recipe: Recipe | None, row: PublishedResult | None = None
) -> tuple[Benchmark | None, str, str]:
    """(its benchmark file, the benchmark's name, where the name came from): the run's own path, else the recipe,
    else the published record. The file is None for a benchmark repro holds no file for (its rules are unknown)."""
    if run.benchmark:
        name, source = run.benchmark, f"{run.benchmark} in the path"
    elif recipe is not None:
        name, source = recipe.benchmark, f"recipe {recipe.name}"
    else:
        assert row is not None
        name, source = row.benchmark_name, f"published record {row.ref}"
    return (load_benchmark(name) if name in benchmark_names() else None), name, source


def _finite_or_none(value: float | None, digits: int | None = None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits) if digits is not None else value


def _within(per_gpu: float, band: tuple[float, float], centre: float) -> tuple[bool, str]:
    low, high = band
    dev = (per_gpu / centre - 1) * 100
    if per_gpu < low:
        return False, (
            f"{abs(dev):.1f}% below the published {fmt_rate(centre)} per GPU "
            f"({(1 - per_gpu / low) * 100:.1f}% under the band floor {fmt_rate(low)})"
        )
    if per_gpu > high:
        return False, (
            f"{dev:.1f}% above the published {fmt_rate(centre)} per GPU "
            f"({(per_gpu / high - 1) * 100:.1f}% over the band ceiling {fmt_rate(high)}); check the GPU count"
        )
    return True, f"{dev:+.1f}% vs the published {fmt_rate(centre)} per GPU, inside ±{(high / centre - 1) * 100:.0f}%"


class NoRecipeFor(InputError):
    """No recipe covers the run's system; the published index may still hold its own record.

    `runs` holds the runs verify_dir already parsed, so the caller looks for that record without parsing again."""

    runs: list[LoadGenRun] | None = None


def resolve_recipe(run: LoadGenRun, recipe: str | Recipe | None) -> Recipe:
    if isinstance(recipe, Recipe):
        return recipe
    if recipe:
        return get_recipe(recipe)
    if run.run_info is not None and run.run_info.recipe:
        return registry_recipe(run.run_info.recipe)  # a name from a result file, never a path (#16)
    names = [str(run.system.get("system_name", ""))] if run.system else []
    names += [run.system_path.stem] if run.system_path else []
    for name in filter(None, names):
        if found := by_system_name(name, run.benchmark):
            return found
    if run.system:
        name = str(run.system.get("system_name", "")).strip() or (run.system_path.stem if run.system_path else "?")
        acc = str(run.system.get("accelerator_model_name", "")).strip()
        why = f"its system {name!r}{f' ({acc})' if acc else ''} matches no recipe"
    else:
        why = "no run.json and no system JSON name its system"
    raise NoRecipeFor(
        f"{run.folder}: {why}, so there is no published result to compare it with.",
        f"`repro verify {run.folder} --recipe NAME` (see `repro recipes list`)",
    )


# --- the rules, one function each ------------------------------------------------------------------------------


def _validity(run: LoadGenRun) -> list[Check]:
    detail = "VALID" if run.valid else "INVALID: " + "; ".join(run.invalid_reasons)
    checks = [Check("LoadGen validity", run.valid, detail, fails=not run.valid)]
    if run.errors:
        checks.append(Check("LoadGen errors", False, "; ".join(run.errors[:3]), fails=True))
    return checks


def _duration(run: LoadGenRun, recipe: Recipe | None, rule_ms: float) -> tuple[list[Check], list[str]]:
    """The setting (≥ 600 s) and LoadGen's 'Min duration satisfied': both are the evidence the run was long enough."""
    missing: list[str] = []
    raw = run.settings.get("min_duration_ms")
    min_ms = float(raw) if isinstance(raw, (int, float)) and math.isfinite(raw) else None
    met = run.min_duration_met
    if met is None and run.duration_s is not None and min_ms is not None:
        met = run.duration_s * 1000 >= min_ms
    if min_ms is None:
        missing.append("the min_duration setting (summary 'min_duration (ms)' or detail effective_min_duration_ms)")
    if met is None:
        missing.append("'Min duration satisfied' (summary) or result_min_duration_met (detail)")
    if min_ms is None or met is None:
        return [Check("min duration", None, "not shown by the logs: " + "; ".join(missing))], missing
    detail = f"setting {min_ms / 1000:,.0f} s (MLPerf needs ≥ {rule_ms / 1000:,.0f} s" + (
        f"; recipe {recipe.loadgen.min_duration_ms / 1000:,.0f} s)" if recipe is not None else ")"
    )
    if run.duration_s is not None:
        detail += f", ran {run.duration_s:,.0f} s"
    checks = [Check("min duration", min_ms >= rule_ms and bool(met), detail, fails=not met)]
    if min_ms < rule_ms:
        checks.append(
            Check(
                "MLPerf min duration",
                False,
                f"min duration setting {min_ms / 1000:,.0f} s is below MLPerf's "
                f"{rule_ms / 1000:,.0f} s: a smoke run, not a reproduction",
                fails=True,
            )
        )
    return checks, []


def test06_checks(run: LoadGenRun) -> list[Check]:
    """TEST06 hook (issue 19): the compliance folder beside a run, published or ours, is shown; failed is never PASS."""
    from repro.results.compliance import find_test06, read_test06

    folder = find_test06(run.folder)
    if folder is None:
        return []
    try:
        result = read_test06(folder, run.scenario)
    except (OSError, InputError) as exc:
        return [Check("TEST06", False, f"{folder}: unreadable ({getattr(exc, 'message', exc)})", fails=True)]
    where = min(str(folder), os.path.relpath(folder, run.folder), key=len)
    ok = None if result.state == "cannot be re-checked" else result.passed
    return [Check("TEST06", ok, f"{result.detail} ({where})", fails=ok is False)]


def _issued_note(run: LoadGenRun, required: float) -> str:
    """The summary's samples_per_query is LoadGen's unpadded requirement (what MLPerf's checker judges); the detail
    log's generated_samples_per_query is what it issued, padded to whole shuffles of the loaded set. The progress
    bar counts the issued ones, so both are named here with the same words."""
    issued = run.settings.get("generated_samples_per_query")
    if not isinstance(issued, (int, float)) or issued == required:
        return ""
    return f"; {issued:,.0f} issued samples (padded to whole sets of the loaded samples)"


def _scenario_rules(run: LoadGenRun, scenario: str, bench: Benchmark) -> list[Check]:
    """The benchmark file's rules for the scenario. Offline: at least its samples per query (llama2-70b: 24,576).
    Server and Interactive: its TTFT/TPOT limits were the ones LoadGen enforced, p99 TTFT and TPOT are under them,
    and early stopping succeeded."""
    checks: list[Check] = []
    if scenario not in bench.scenarios:
        return [Check("scenario", False, f"{bench.name} has no {scenario} scenario in MLPerf", fails=True)]
    rules = bench.rules(scenario)
    if scenario == "Offline":
        spq = run.settings.get("samples_per_query")
        if isinstance(spq, (int, float)) and rules.min_samples_per_query is not None:
            ok = spq >= rules.min_samples_per_query
            checks.append(
                Check(
                    "samples per query",
                    ok,
                    f"{spq:,.0f} required {'≥' if ok else '<'} {rules.min_samples_per_query:,} "
                    f"(MLPerf closed division){_issued_note(run, spq)}",
                    fails=not ok,
                )
            )
        return checks
    assert rules.ttft_ms is not None and rules.tpot_ms is not None  # the schema requires both outside Offline
    for key, what, rule_ms, stats in (
        ("ttft_latency_ns", "TTFT", rules.ttft_ms, run.ttft_ns),
        ("tpot_latency_ns", "TPOT", rules.tpot_ms, run.tpot_ns),
    ):
        set_ns = run.settings.get(key)
        if isinstance(set_ns, (int, float)) and set_ns / 1e6 > rule_ms:
            checks.append(
                Check(
                    f"{what} limit",
                    False,
                    f"LoadGen enforced {set_ns / 1e6:,.0f} ms; MLPerf's {scenario} limit is {rule_ms:,.0f} ms",
                    fails=True,
                )
            )
        p99 = stats.get("p99")
        if isinstance(p99, (int, float)) and math.isfinite(p99):
            ok = p99 / 1e6 <= rule_ms
            checks.append(
                Check(
                    f"{what} p99",
                    ok,
                    f"{p99 / 1e6:,.1f} ms {'≤' if ok else '>'} {rule_ms:,.0f} ms ({scenario})",
                    fails=not ok,
                )
            )
        else:
            checks.append(Check(f"{what} p99", None, "not in the summary"))
    checks.append(
        Check(
            "early stopping",
            run.early_stopping_met,
            {True: "satisfied", False: "not satisfied", None: "not in the logs"}[run.early_stopping_met],
            fails=run.early_stopping_met is False,
        )
    )
    return checks


def _throughput(
    run: LoadGenRun, per_gpu: float | None, published: Published | None
) -> tuple[list[Check], tuple[float, float] | None, float | None]:
    checks: list[Check] = []
    if run.tokens_per_s == 0:
        checks.append(
            Check(
                "tokens/s",
                False,
                "0 tokens/s: the SUT reported no token counts (QuerySampleResponse without n_tokens)",
                fails=True,
            )
        )
    band = published.band() if published else None
    if band is None or per_gpu is None or published is None:
        return checks, None, None
    centre = float(published.tokens_per_s_per_gpu)
    inside, detail = _within(per_gpu, band, centre)
    checks.append(Check("inside band", inside, detail, fails=not inside))
    if published.status == "analog":
        checks.append(Check("reference", None, f"analog result: {published.note}"))
    return checks, band, (per_gpu / centre - 1) * 100


def _software_note(recipe: Recipe | None) -> str | None:
    """Above the band, newer software than the published run's is a likelier cause than a wrong GPU count; either way
    the run is another result, not the published one again."""
    trt = recipe.trtllm if recipe is not None else None
    if trt is None or trt.published_version == "unknown" or trt.version in trt.published_version:
        return None
    return (
        f"the published run used {trt.published_version}; this recipe runs TensorRT-LLM {trt.version}: newer "
        "software can be faster, and a run above the band is then a new result, not a reproduction"
    )


def _token_count(run: LoadGenRun) -> list[Check]:
    """Which count of output tokens LoadGen got from an HTTP server, and the other count the run saw (run.json).

    A server whose own two counts (its ids, its usage) disagree, or whose answers ran past max_tokens, gave LoadGen
    a figure it contradicts: that fails. Usage against re-tokenized text differs on honest servers (the text does
    not round-trip to the same ids), so that gap is stated, not failed.
    """
    stats = run.run_info.backend_stats if run.run_info is not None else None
    tokens = stats.get("tokens") if isinstance(stats, dict) else None
    count = tokens.get("loadgen_count") if isinstance(tokens, dict) else None
    if not isinstance(count, dict) or not count.get("source"):
        return []
    from repro.core.fmt import token_count_comparison

    pct = count.get("other_differs_pct")
    if isinstance(count.get("compared_tokens"), int):  # the two figures over the same samples, their gap from them
        parts = [token_count_comparison(count)]
    else:  # run.json from before compared_tokens: its percent compares with a figure it does not state
        parts = [f"LoadGen got {count.get('tokens', 0):,} tokens from {count['source']}"]
        if isinstance(pct, (int, float)) and count.get("other_source"):
            parts.append(f"{count['other_source']} gives {count.get('other_tokens', 0):,} (recorded gap {pct:+.1f}%)")
    clipped = count.get("clipped_samples") or 0
    if clipped:
        parts.append(f"{clipped} answer(s) ran past max_tokens ({count.get('clipped_tokens', 0):,} tokens not counted)")
    contradicts = clipped > 0 or (
        count["source"] == "server token ids" and isinstance(pct, (int, float)) and abs(pct) > 0.5
    )
    return [Check("token count", not contradicts, "; ".join(parts), fails=contradicts)]


def _audit_rows(audit: AuditLine | None, items: list[SystemItem]) -> list[Check]:
    """The audit line and every stated system item as rows of the verdict's table (never a FAIL on their own)."""
    rows = [Check("MLPerf 2% audit", audit.within, audit.text)] if audit is not None else []
    rows += [Check(f"system {i.item}", i.same, i.text) for i in items if i.same is not None]
    unrecorded = [i.item for i in items if i.same is None and i.published and not i.run]
    unpublished = [i.item for i in items if i.same is None and i.run and not i.published]
    why = [f"the run does not record {', '.join(unrecorded)}"] if unrecorded else []
    why += [f"the published system does not state {', '.join(unpublished)}"] if unpublished else []
    if why:
        rows.append(Check("system, not compared", None, "; ".join(why)))
    return rows


def _hardware(hw: Identity) -> list[Check]:
    if hw.same is None:
        return [Check("accelerator", None, hw.why)]
    detail = f"{hw.run_name} ({hw.where}): {hw.why}"
    return [Check("accelerator", hw.same, detail)]


def _accuracy(
    run: LoadGenRun, bench: Benchmark, source: str, division: str, own: PublishedResult | None
) -> list[Check]:
    """Every checker rule of the run's benchmark (its file): each metric's floor (the accuracy class's fraction of
    the reference), tokens per sample within the allowed band, and a full-size run (gen_num = the dataset). The open
    division has no accuracy target (the submission checker accepts any): there the closed targets are shown for
    information and a result is judged by its own published accuracy (`own`, the same fraction of it)."""
    if not run.accuracy:
        return [Check("accuracy", None, "no accuracy.txt next to this run (performance only)")]
    acc, spec = run.accuracy, bench.accuracy
    foreign = _foreign_keys(acc, bench)
    if foreign:
        raise InputError(
            f"{run.accuracy_path}: scores {', '.join(foreign)} belong to another benchmark; {bench.name} "
            f"({source}) is scored by {', '.join(spec.keys())}.",
            f"put {bench.name}'s own accuracy.txt next to the run, then `repro verify {run.folder}`",
        )
    is_open = division == "open"
    named = source if bench.name in source else f"{bench.name}, {source}"
    where = f"{spec.level}% target, {named}" + ("; open division: for information" if is_open else "")
    checks = []
    for metric in spec.targets():
        key, floor = metric.name, spec.floor(metric)
        if key not in acc:
            checks.append(Check(f"accuracy {key}", False, f"missing from {run.accuracy_path}", fails=True))
            continue
        ok = acc[key] >= floor
        detail = f"{acc[key]:.4f} {'≥' if ok else '<'} {floor:.4f} ({where})"
        checks.append(
            Check(f"accuracy {key}", None if is_open else ok, detail, not ok and not is_open, ok if is_open else None)
        )
    tps, band = acc.get("tokens_per_sample"), spec.tokens_per_sample
    if tps is None:
        checks.append(Check("accuracy tokens_per_sample", False, f"missing from {run.accuracy_path}", fails=True))
    else:
        ok = band.low <= tps <= band.high
        checks.append(
            Check(
                "accuracy tokens_per_sample",
                None if is_open else ok,
                f"{tps:.1f} {'within' if ok else 'outside'} {band.low:.3f}–{band.high:.3f} "
                f"({band.band[0] * 100:.0f}–{band.band[1] * 100:.0f}% of {band.reference})"
                + ("; open division: for information" if is_open else ""),
                fails=not ok and not is_open,
                closed=ok if is_open else None,
            )
        )
    if is_open:
        checks += _own_accuracy(acc, bench, own)
    gen_num = acc.get("gen_num")
    if gen_num is None:
        checks.append(Check("accuracy samples", None, "gen_num not in accuracy.txt: the run's size is not shown"))
    else:
        ok = gen_num == spec.samples
        checks.append(
            Check(
                "accuracy samples",
                ok,
                f"{gen_num:,.0f} {'=' if ok else '≠'} {spec.samples:,} (a full-size accuracy run)"
                if ok
                else f"{gen_num:,.0f} samples, not the full {spec.samples:,}: a short run, not an accuracy result",
                fails=not ok,
            )
        )
    hashes = run.accuracy_hashes
    if not hashes:
        checks.append(Check("accuracy hash", None, "no hash= line (the submission checker requires one)"))
    elif len(set(hashes)) > 1:
        checks.append(Check("accuracy hash", None, f"{len(hashes)} different hash= lines"))
    return checks


def _consistency(
    run: LoadGenRun, recipe: Recipe | None, row: PublishedResult | None, division: str
) -> tuple[list[Check], list[str]]:
    """The run's files against each other (results/consistency.py): a contradiction FAILs naming both files, a
    setting that is text is missing evidence; a de-duplicated copy's failing accuracy or TEST06 is shown too."""
    checks = [Check("consistency", False, text, fails=True) for text in run.contradictions]
    if run.accuracy_log_hash is not None and run.accuracy_log_hash.ok is not False:
        checks.append(Check("accuracy.txt hash", run.accuracy_log_hash.ok, run.accuracy_log_hash.detail))
    for copy in run.copies:
        bench, _, source = benchmark_of(copy, recipe, row)
        own = row if row and row.division == "open" else None
        for c in (
            (_accuracy(copy, bench, source, division, own) if bench is not None else [])
            + test06_checks(copy)
            + _consistency(copy, recipe, row, division)[0]
        ):
            if c.ok is False:
                checks.append(Check(c.name, False, f"{c.detail} (in the identical copy {copy.folder})", fails=True))
    checks += [Check("evidence", None, gap) for gap in run.evidence_gaps]
    return checks, run.evidence_gaps


def _foreign_keys(acc: dict[str, float], bench: Benchmark) -> list[str]:
    """Score keys of an accuracy.txt that another benchmark's metrics use and this one's do not, when this one's own
    are missing (a Llama-2 file next to a 405B run, or the reverse): the wrong file, never a score to judge."""
    from repro.core.benchmarks import all_benchmarks

    mine = {m.name for m in bench.accuracy.targets()}
    if mine <= set(acc):
        return []
    known = {m.name for b in all_benchmarks() for m in b.accuracy.targets()}
    return sorted(k for k in acc if k in known and k not in mine)


def _own_accuracy(acc: dict[str, float], bench: Benchmark, own: PublishedResult | None) -> list[Check]:
    """An open result against its own published accuracy: each metric at least the benchmark's fraction of it,
    tokens per sample within the benchmark's band of it. Without a published record there is nothing to judge by."""
    published_scores = {m.name: own.metrics.get(m.name) for m in bench.accuracy.targets()} if own else {}
    if own is None or all(v is None for v in published_scores.values()):
        return [Check("accuracy (open)", False, "open division: no published accuracy to judge this run by", True)]
    fraction, target = bench.accuracy.factor, bench.accuracy.level
    low, high = bench.accuracy.tokens_per_sample.band
    checks = []
    for key, published in published_scores.items():
        if published is None or key not in acc:
            continue
        floor = published * fraction
        ok = acc[key] >= floor
        checks.append(
            Check(
                f"accuracy {key} (open)",
                ok,
                f"{acc[key]:.4f} {'≥' if ok else '<'} {floor:.4f} ({target}% of its published {published:.4f}, "
                f"{own.ref})",
                fails=not ok,
            )
        )
    tps, published_tps = acc.get("tokens_per_sample"), own.tokens_per_sample
    if tps is not None and published_tps:
        ok = low * published_tps <= tps <= high * published_tps
        checks.append(
            Check(
                "accuracy tokens_per_sample (open)",
                ok,
                f"{tps:.1f} {'within' if ok else 'outside'} {low * 100:.0f}–{high * 100:.0f}% of its published "
                f"{published_tps:.1f}",
                fails=not ok,
            )
        )
    return checks


def published_of(row: PublishedResult) -> Published:
    """A published index row as the figure a verdict compares with (the same ±5% band a recipe's has)."""
    return Published(
        status="published",
        tokens_per_s_per_vm=row.tokens_per_second,
        tokens_per_s_per_gpu=row.per_accelerator,
        mlperf_round=row.round,
        mlperf_id=row.result_id or "unknown",
        result_id=row.ref,
        scenario=row.scenario,
        source=row.source,
    )


def _record_identity(ident: ResultIdentity, row: PublishedResult) -> Identity:
    """The run's accelerator against the published record's; a mixed system is itself only with the same chips."""
    want = accelerator_of(row.accelerator_model_name)
    if want is not None:
        return ident.against(want, f"{row.ref}'s")
    return mixed_against(ident, row.accelerator_model_name, row.ref)


@dataclass
class Evidence:
    """Every check of a run's own evidence, built by one function (evidence_checks) for every path that prints a
    verdict: plain verify, --against, aggregate and report. Only the reference it is compared with differs."""

    before_band: list[Check]
    after_band: list[Check]
    missing: list[str]
    """What the logs lack to show the run was long enough."""
    gaps: list[str]
    """Text where a number belongs, or evidence that was not kept."""

    @property
    def checks(self) -> list[Check]:
        return self.before_band + self.after_band

    def with_band(self, head: list[Check], band: list[Check]) -> list[Check]:
        """The checks in the order a verdict prints them: accelerator, the run's rules, the band, the rest."""
        return head + self.before_band + band + self.after_band

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.fails and c.ok is False]


def evidence_checks(run: LoadGenRun, recipe: Recipe | None, row: PublishedResult | None, division: str) -> Evidence:
    """The one place the run's checks are built: validity, duration, the scenario's rules, the token count,
    accuracy, TEST06 and the folder's agreement with itself. `row` is the published record the run is compared
    with or recognised as (its accuracy target when the path names none; an open result's own accuracy)."""
    scenario = run.benchmark_scenario or run.scenario
    bench, name, source = benchmark_of(run, recipe, row)
    consistency_checks, gaps = _consistency(run, recipe, row, division)
    own = row if row and row.division == "open" else None
    if bench is not None:
        rule = bench.scenarios.get(scenario) or bench.rules("Offline")  # type: ignore[call-overload]
        duration_checks, missing = _duration(run, recipe, rule.min_duration_ms)
        accuracy = _accuracy(run, bench, source, division, own)
        rules = _scenario_rules(run, scenario, bench)
    else:  # a benchmark repro holds no file for: shown, and never evidence of a PASS
        unjudged = f"no rules for benchmark {name} ({source}, not in repro/data/benchmarks/): not judged"
        duration_checks, missing, rules = [], [], []
        accuracy = [Check("accuracy", None, unjudged)]
        gaps = [*gaps, unjudged]
    return Evidence(
        _validity(run) + duration_checks + rules,
        _token_count(run) + accuracy + test06_checks(run) + consistency_checks,
        missing,
        gaps,
    )


def failure_reasons(failed: list[Check], evidence: Evidence) -> list[str]:
    """The reasons a verdict lists: each failed check, then missing evidence."""
    reasons = _dedupe(
        [
            c.detail
            if c.name in ("LoadGen validity", "inside band", "MLPerf min duration", "tokens/s")
            else f"{c.name}: {c.detail}"
            for c in failed
        ]
    )
    if evidence.missing:
        reasons.append("no evidence the run was long enough: the logs lack " + " and ".join(evidence.missing))
    if evidence.gaps:
        reasons.append("missing evidence: " + "; ".join(evidence.gaps[:3]))
    return reasons


# --- the verdict -------------------------------------------------------------------------------------------------


def evaluate(run: LoadGenRun, ident: ResultIdentity, recipe: Recipe | None) -> Verdict:
    """Pure: the verdict for one parsed performance run, for the run's own scenario, against the recipe's published
    figure, or without a recipe against the published record it is (`ident.record`). The checks are the same either
    way; what the run is (accelerator, count, division, benchmark) is read from `ident`, never from the folder."""
    if run.mode != "PerformanceOnly":
        raise InputError(
            f"{run.folder}: this is an {run.mode} run; verify needs a PerformanceOnly run.",
            f"`repro verify {run.folder.parent}` (the folder holding the performance run)",
        )
    if run.tokens_per_s is None:
        raise InputError(
            f"{run.summary_path or run.folder}: no tokens per second in the logs (token latencies were off).",
            "re-run with use_token_latencies (`repro run offline` sets it)",
        )
    record = ident.record
    if recipe is None and record is None:
        raise ValueError("evaluate needs a recipe or a published record")
    count = ident.count_for(recipe)
    scenario = ident.scenario
    row = record.row if record else None
    division = ident.division
    if recipe is not None:
        published = recipe.published_for(scenario)
        hw = ident.against(recipe.system.accelerator_identity())
    else:
        assert row is not None
        published = published_of(row)
        hw = _record_identity(ident, row)
    per_gpu = run.tokens_per_s / count.total
    bench, bench_name, bench_source = benchmark_of(run, recipe, row)
    notes = list(count.notes)
    if run.scenario_source != "the logs":
        notes.append(f"scenario {scenario}: told by {run.scenario_source}")
    if not run.benchmark and run.accuracy and bench is not None:
        notes.append(f"benchmark {bench_name} from {bench_source}: the run's path names no benchmark")

    evidence = evidence_checks(run, recipe, row, division)
    throughput_checks, band, deviation = _throughput(run, per_gpu, published)
    if band is not None and per_gpu > band[1] and (software := _software_note(recipe)):
        notes.append(software)
    audit = AuditLine(deviation, float(published.tokens_per_s_per_gpu)) if deviation is not None and published else None
    ref_row = row if row is not None else reference_row(recipe, scenario) if recipe is not None else None
    system = system_diff(run_system(run, ident, recipe), published_system(ref_row))
    checks = evidence.with_band(_hardware(hw), throughput_checks + _audit_rows(audit, system))
    failed = [c for c in checks if c.fails and c.ok is False]
    reasons = failure_reasons(failed, evidence)
    missing = evidence.missing + evidence.gaps
    other_benchmark = recipe is not None and ident.benchmark is not None and ident.benchmark != recipe.benchmark
    # Another model's recipe (a 405B run against Llama-2-70B's): its band means nothing for this run, so the run is
    # judged by its own evidence only and is never a reproduction of that recipe.
    other_model = recipe is not None and bench is not None and bench.mlperf_model != recipe.bench.mlperf_model

    status: Status
    lead = 1  # the reasons the branches below insert first (demo, accelerator, division) stay first
    if run.label or (recipe is not None and recipe.demo):
        reasons.insert(0, f"{run.label or 'demo'} run: it rehearses the flow and is never a reproduction")
        status = "NOT A REPRODUCTION"
    elif hw.same is False:
        reasons.insert(
            0,
            f"{hw.run_name} ({hw.where}) is not {'the recipe' if recipe else row.ref if row else '?'}'s "
            f"accelerator: {hw.why}; "
            "a different accelerator is never a reproduction",
        )
        status = "NOT A REPRODUCTION"
    elif recipe is not None and division == "open":
        reasons.insert(
            0,
            f"an open-division result is never a reproduction of recipe {recipe.name}'s closed-division result "
            "(`repro verify` without --recipe judges it against its own published record)",
        )
        status = "NOT A REPRODUCTION"
    elif other_model and not evidence.failed:
        status, lead = "NOT A REPRODUCTION", 0
    elif band is None:
        lead = 0
        if published is None:
            assert recipe is not None
            have = ", ".join(p.scenario for p in (recipe.published, *recipe.published_scenarios))
            reasons.append(f"recipe {recipe.name} has no published {scenario} result (it has {have})")
        else:
            title = recipe.title if recipe else (row.ref if row else "?")
            reasons.append(f"no published result for {title} ({published.note or published.source})")
        status = "NO REFERENCE"
    elif failed:
        status, lead = "FAIL", 0
    elif hw.same is None:
        reasons.insert(0, f"accelerator unknown: {hw.why}")
        status = "NOT A REPRODUCTION"
    elif other_benchmark or missing:
        status, lead = "NOT A REPRODUCTION", 0
    else:
        status, lead = "PASS", 0
    if (other_benchmark or other_model) and recipe is not None:
        # Before the band's figures: against another benchmark's number they say nothing; the demo, accelerator or
        # division reason inserted first above stays first.
        reasons.insert(
            lead,
            f"a {ident.benchmark} run ({ident.benchmark_source}) against recipe {recipe.name}'s "
            f"{recipe.benchmark} result: another benchmark is never a reproduction",
        )
    if division == "open":
        notes.insert(
            0,
            "open division: MLPerf sets no accuracy target there; judged against its own published accuracy and "
            "figure, never as a closed-division result",
        )
    if run.incomplete:
        reasons.insert(0, "the run was interrupted or failed; its logs are partial (run.json)")
        if status == "PASS":
            status = "FAIL"
    return Verdict(
        run,
        recipe,
        count.total,
        count.source,
        per_gpu,
        band,
        deviation,
        status,
        reasons,
        checks,
        notes,
        published,
        hw,
        record,
        division,
        ident,
        audit,
        system,
    )


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def verify_dir(
    path: Path, recipe: str | Recipe | None = None, gpus: int | None = None, scenario: str | None = None
) -> Verdict:
    """The one verdict path: the run against the recipe (named, recorded or detected), else against the published
    record the index recognises it as; NoRecipeFor when there is neither."""
    path = Path(path)
    runs = find_runs(path)
    run, notes = pick_run(runs, path, scenario)
    ident = identify(run, gpus)
    record = ident.record
    chosen: Recipe | None
    try:
        chosen = resolve_recipe(run, recipe)
    except NoRecipeFor as exc:
        if record is None:
            exc.runs = runs
            if outside := _outside_index(ident):
                exc.message = f"{exc.message.rstrip('.')}; {outside}."
                exc.args = (exc.message,)
            raise
        chosen = None
    verdict = evaluate(run, ident, chosen)
    if record is None and (said := _published_identity(ident)):
        listing = shlex.join(["repro", "published", "--submitter", said[0]])
        outside = _outside_index(ident)
        notes.append(
            f"{said[1]}: {outside or 'no published result in the index is this run'} (`{listing}` lists what it holds)"
        )
    verdict.notes = notes + verdict.notes
    return verdict


def _outside_index(ident: ResultIdentity) -> str | None:
    """A round the shipped index does not cover, or covers for a few submitters only, named as such."""
    from repro.core.published import load_index

    if not ident.round:
        return None
    rows = load_index().rows
    if ident.benchmark and any(r.benchmark_name == ident.benchmark for r in rows):
        rows = tuple(r for r in rows if r.benchmark_name == ident.benchmark)  # v5.0: 405B only, no Llama-2-70B
    rounds = sorted({r.round for r in rows}, key=lambda r: tuple(int(x) for x in re.findall(r"\d+", r)))
    if ident.round not in rounds:
        which = f" for {ident.benchmark}" if ident.benchmark else ""
        return f"round {ident.round} is outside the shipped index{which} (it holds {', '.join(rounds)})"
    submitters = sorted({r.submitter for r in rows if r.round == ident.round})
    if ident.submitter and ident.submitter.lower() not in {s.lower() for s in submitters} and len(submitters) <= 3:
        return (
            f"the shipped index holds round {ident.round} results of {', '.join(submitters)} only, "
            f"not {ident.submitter}'s"
        )
    return None


def _published_identity(ident: ResultIdentity) -> tuple[str, str] | None:
    """(submitter, how the run presents itself as a published result), when it does."""
    if not ident.submitter:
        return None
    said = f"submitter {ident.submitter}, system {ident.system or '?'}" + (
        f", round {ident.round}" if ident.round else ""
    )
    return ident.submitter, said
