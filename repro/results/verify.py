"""The verdict: is a run, per GPU, inside the published band for its scenario, and if not, why not.

A PASS needs evidence: the run's own accelerator is the reference's, LoadGen says VALID, the logs show the run was
long enough under MLPerf's settings, the scenario's own rules hold, accuracy and TEST06 (where the run has them)
pass, and tokens/s per GPU is inside the band. The reference is the recipe's published figure, or without a recipe
the published record the run is recognised as (repro.results.compare.match_run): recognising a published result
decides what the run is compared with, never which checks run. Each rule is one function returning Checks.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from repro.core.accelerators import accelerator_of
from repro.core.benchmarks import not_shipped_notes
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
from repro.results.checks import Check, Evidence, evidence_checks, failure_reasons
from repro.results.hardware import GpuCount, Identity
from repro.results.identity import ResultIdentity, identify, mixed_against, stated_benchmark
from repro.results.index_match import count_value
from repro.results.logs import LoadGenRun, find_runs, label_reason
from repro.results.pick import pick_run
from repro.results.stack import EngineCheck, StackDifference, engine_check, stack_differences

if TYPE_CHECKING:
    from repro.core.published import PublishedResult
    from repro.results.index_match import IndexMatch

Status = Literal["PASS", "FAIL", "NOT A REPRODUCTION", "NO REFERENCE"]
EXIT_CODES = {"PASS": 0, "FAIL": 1, "NOT A REPRODUCTION": 1, "NO REFERENCE": 1}


# The JSON keys of the accelerator comparison and of the published figure, each with the attribute it comes from
_ACCELERATOR_JSON = (
    ("run", "run_name"),
    ("from", "where"),
    ("same_as_recipe", "same"),
    ("recipe", "recipe"),
    ("detail", "why"),
)
_PUBLISHED_JSON = (
    ("scenario", "scenario"),
    ("status", "status"),
    ("tokens_per_s_per_gpu", "tokens_per_s_per_gpu"),
    ("tokens_per_s_per_vm", "tokens_per_s_per_vm"),
    ("band_pct", "band_pct"),
    ("mlperf_id", "mlperf_id"),
    ("round", "mlperf_round"),
    ("source", "source"),
)


def _fields_json(obj: object | None, keys: tuple[tuple[str, str], ...]) -> dict[str, Any] | None:
    """An optional part of the verdict as JSON, one key per attribute (a model as its dump); None when absent."""
    if obj is None:
        return None
    values = ((key, getattr(obj, attr)) for key, attr in keys)
    return {key: v.model_dump() if isinstance(v, BaseModel) else v for key, v in values}


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
    accuracy_command: str | None = None
    """When the accuracy run alone keeps the run from a PASS, the next command: the run that writes it (repro's own
    run), else verify again once the published accuracy files are copied back."""
    differences: list[StackDifference] = field(default_factory=list)
    """What this run's stack did otherwise than the published run (results.stack): repro's own runs only."""
    engine: EngineCheck | None = None
    """The run's engine layout against the published one for its scenario (repro's own runs only)."""

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
        return self.run.effective_scenario

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
            "gpus_override": self._override(),
            "accelerator": _fields_json(self.hardware, _ACCELERATOR_JSON),
            "tokens_per_s": _finite_or_none(self.run.tokens_per_s),
            "tokens_per_s_per_gpu": _finite_or_none(self.per_gpu, 2 if abs(self.per_gpu or 0) < 1000 else 1),
            "published": _fields_json(self.published, _PUBLISHED_JSON),
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
            "accuracy_run_command": self.accuracy_command,
            "engine": None if self.engine is None else {"state": self.engine.state, "detail": self.engine.detail},
            "known_differences": [d.to_json() for d in self.differences],
            "benchmark_file": self._benchmark_file(),
        }

    def _benchmark_file(self) -> dict[str, Any] | None:
        """The benchmark file the targets were read from when it is not the shipped one (its path, sha256, and the
        shipped file it shadows); None when they are the shipped file's."""
        bench = self.identity.bench if self.identity is not None else None
        bench = bench or (self.recipe.bench if self.recipe is not None else None)
        return bench.source.to_json() if bench is not None and not bench.source.shipped else None

    def _override(self) -> dict[str, Any] | None:
        """A --gpus count, what the run's own files give, and what of them it contradicts (the JSON and any
        attestation of it carry both: an override is never silent)."""
        count = self.identity.count if self.identity is not None else None
        if self.gpus_source != "--gpus" or count is None:
            return None
        return {"gpus": self.gpus, "files_give": count.stated, "contradicts": list(count.contradicts)}

    @property
    def accuracy_target(self) -> tuple[str, str]:
        """(the accuracy class, 99 or 99.9, or the benchmark's name when repro holds no file for it; its source)."""
        ident = self.identity
        if ident is None:
            return "unknown", "no identity"
        ident = ident.judged_by(self.recipe, self.record.row if self.record else None)
        return (ident.bench.accuracy.level if ident.bench else str(ident.benchmark)), str(ident.benchmark_source)


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


def resolve_recipe(run: LoadGenRun, recipe: str | Recipe | None, benchmark: str | None = None) -> Recipe:
    """The recipe named, else the one run.json records, else the recipe of the run's system for its benchmark
    (`benchmark`: the one its identity decided; default what the result states, results/identity.py)."""
    if isinstance(recipe, Recipe):
        return recipe
    if recipe:
        return get_recipe(recipe)
    if run.run_info is not None and run.run_info.recipe:
        return registry_recipe(run.run_info.recipe)  # a name from a result file, never a path (#16)
    names = [str(run.system.get("system_name", ""))] if run.system else []
    names += [run.system_path.stem] if run.system_path else []
    if benchmark is None:
        benchmark = stated_benchmark(run)[0]
    for name in filter(None, names):
        if found := by_system_name(name, benchmark):
            return found
    others = sorted({r.benchmark for n in filter(None, names) if (r := by_system_name(n)) is not None})
    if run.system:
        name = str(run.system.get("system_name", "")).strip() or (run.system_path.stem if run.system_path else "?")
        acc = str(run.system.get("accelerator_model_name", "")).strip()
        system = f"its system {name!r}{f' ({acc})' if acc else ''}"
        why = f"{system} matches no recipe"
        if others and benchmark:  # the system's recipes run another model: never this run's reference
            why = f"{system} has no recipe for {benchmark} (its recipe runs {', '.join(others)})"
    else:
        why = "no run.json and no system JSON name its system"
    raise NoRecipeFor(
        f"{run.folder}: {why}, so there is no published result to compare it with.",
        f"`repro verify {run.folder} --recipe NAME` (see `repro recipes list`)",
    )


# --- the checks against the reference: the accelerator, the band, the audit line ---------------------------------


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


def _published_loadgen(row: PublishedResult | None) -> str | None:
    """The published run's LoadGen version, from the shipped copy of its detail log (None where not shipped)."""
    from repro.results.audit import published_settings

    shipped = published_settings().get(row.key) if row is not None else None
    value = shipped.get("detail", {}).get("loadgen_version") if isinstance(shipped, dict) else None
    return str(value) if value else None


def _stack(
    run: LoadGenRun, recipe: Recipe | None, scenario: str, row: PublishedResult | None
) -> tuple[list[Check], EngineCheck | None]:
    """repro's own run (it has a run.json) against the recipe's published engine for its scenario: one row, and the
    check the status reads. A folder of someone else's logs (a published bundle) has no run.json: not compared."""
    if recipe is None or recipe.demo or recipe.trtllm is None or run.run_info is None:
        return [], None
    engine = engine_check(recipe, scenario, run.run_info)
    if engine.state == "not stated":
        return [], engine
    ok = {"same": True, "differs": False}.get(engine.state)
    return [Check("engine", ok, engine.detail)], engine


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


def _no_published_system(recipe: Recipe) -> Check:
    """A recipe whose published result the shipped index does not hold: its system is not compared, said once."""
    return Check(
        "system, not compared", None, f"the shipped index holds no published system for recipe {recipe.name}'s result"
    )


def _hardware(hw: Identity) -> list[Check]:
    if hw.same is None:
        return [Check("accelerator", None, hw.why)]
    detail = f"{hw.run_name} ({hw.where}): {hw.why}"
    return [Check("accelerator", hw.same, detail)]


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


# --- the verdict -------------------------------------------------------------------------------------------------


def _require_performance(run: LoadGenRun) -> float:
    """The run's tokens/s, refusing before any check what no verdict can be drawn from."""
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
    return run.tokens_per_s


def _reference(
    ident: ResultIdentity, recipe: Recipe | None, row: PublishedResult | None
) -> tuple[Published | None, Identity]:
    """The figure the run is compared with and its accelerator against the reference's: the recipe's, else the
    published record's."""
    if recipe is not None:
        return recipe.published_for(ident.scenario), ident.against(recipe.system.accelerator_identity())
    assert row is not None
    return published_of(row), _record_identity(ident, row)


def _run_notes(run: LoadGenRun, count_notes: list[str], ident: ResultIdentity, recipe: Recipe | None) -> list[str]:
    """What the verdict was told rather than read from the logs: the GPU count, the scenario, the benchmark."""
    notes = list(count_notes)
    if run.scenario_source != "the logs":
        notes.append(f"scenario {ident.scenario}: told by {run.scenario_source}")
    if not run.benchmark and run.accuracy and ident.bench is not None:
        notes.append(f"benchmark {ident.benchmark} from {ident.benchmark_source}: the run's path names no benchmark")
    notes += not_shipped_notes(ident.bench, recipe.bench if recipe is not None else None)
    return notes


@dataclass
class _Findings:
    """What the checks found, from which the status is decided (`_status`)."""

    evidence: Evidence
    hw: Identity
    published: Published | None
    band: tuple[float, float] | None
    failed: list[Check]
    reasons: list[str]
    other_benchmark: bool
    other_model: bool
    other_system: str | None = None
    """Why the run's system (nodes, accelerators) is not the recipe's one VM; None when it is, or nothing says."""
    contradicted: str | None = None
    """A --gpus count the run's own files contradict, in words: never a PASS."""
    engine: EngineCheck | None = None


def _status(
    run: LoadGenRun, ident: ResultIdentity, recipe: Recipe | None, row: PublishedResult | None, f: _Findings
) -> tuple[Status, list[str], str | None]:
    """The status, its reasons in the order they are printed, and the accuracy run's command when that run alone
    keeps the verdict from a PASS."""
    evidence, hw, reasons = f.evidence, f.hw, f.reasons
    status: Status
    lead = 1  # the reasons the branches below insert first (demo, accelerator, division) stay first
    accuracy_command = None
    if run.label or (recipe is not None and recipe.demo):
        # never a reproduction whatever its evidence: the accuracy run it lacks is not worth a line of its own
        reasons = [r for r in reasons if r != evidence.no_accuracy]
        reasons.insert(0, label_reason(run.label or "demo"))
        status = "NOT A REPRODUCTION"
    elif hw.same is False:
        reasons.insert(
            0,
            f"{hw.run_name} ({hw.where}) is not {'the recipe' if recipe else row.ref if row else '?'}'s "
            f"accelerator: {hw.why}; "
            "a different accelerator is never a reproduction",
        )
        status = "NOT A REPRODUCTION"
    elif f.other_system is not None:
        reasons.insert(0, f.other_system)
        status = "NOT A REPRODUCTION"
    elif recipe is not None and ident.division == "open":
        reasons.insert(
            0,
            f"an open-division result is never a reproduction of recipe {recipe.name}'s closed-division result "
            "(`repro verify` without --recipe judges it against its own published record)",
        )
        status = "NOT A REPRODUCTION"
    elif f.other_model and not evidence.failed:
        status, lead = "NOT A REPRODUCTION", 0
    elif f.engine is not None and f.engine.state == "differs" and not evidence.failed:
        reasons.insert(
            0,
            f"{f.engine.detail}: another engine is another configuration, never a reproduction of the "
            f"published {ident.scenario} result",
        )
        status = "NOT A REPRODUCTION"
    elif f.band is None:
        lead = 0
        if f.published is None:
            assert recipe is not None
            have = ", ".join(p.scenario for p in (recipe.published, *recipe.published_scenarios))
            reasons.append(f"recipe {recipe.name} has no published {ident.scenario} result (it has {have})")
        else:
            title = recipe.title if recipe else (row.ref if row else "?")
            reasons.append(f"no published result for {title} ({f.published.note or f.published.source})")
        status = "NO REFERENCE"
    elif f.failed:
        status, lead = "FAIL", 0
    elif hw.same is None:
        reasons.insert(0, f"accelerator unknown: {hw.why}")
        status = "NOT A REPRODUCTION"
    elif f.other_benchmark or evidence.lacking:
        # No evidence, no PASS: without its accuracy run a result is one MLPerf's submission checker rejects
        status, lead = "NOT A REPRODUCTION", 0
        if not (f.other_benchmark or evidence.missing or evidence.gaps):
            accuracy_command = evidence.accuracy_command
    else:
        status, lead = "PASS", 0
    if (f.other_benchmark or f.other_model) and recipe is not None:
        # Before the band's figures: against another benchmark's number they say nothing; the demo, accelerator or
        # division reason inserted first above stays first.
        reasons.insert(
            lead,
            f"a {ident.benchmark} run ({ident.benchmark_source}) against recipe {recipe.name}'s "
            f"{recipe.benchmark} result: another benchmark is never a reproduction",
        )
    if f.contradicted is not None:
        reasons.insert(0, f.contradicted)
        if status == "PASS":
            status, accuracy_command = "NOT A REPRODUCTION", None
    if run.incomplete:
        reasons.insert(0, "the run was interrupted or failed; its logs are partial (run.json)")
        if status == "PASS":
            status = "FAIL"
    return status, reasons, accuracy_command


def _other_system(run: LoadGenRun, count: GpuCount, recipe: Recipe | None) -> str | None:
    """Why the system the run's own files state (nodes, accelerators) is not the recipe's one VM of gpus_per_vm GPUs:
    a 72-GPU rack is never a reproduction of a 4-GPU VM's result, however its per-GPU figure compares."""
    if recipe is None or recipe.demo:
        return None
    ours = run.run_info.system if run.run_info is not None else None
    stated_nodes = (
        (run.system or {}).get("number_of_nodes", 1) if run.system else (ours or {}).get("number_of_nodes", 1)
    )
    nodes = 1 if run.system_node_of else count_value(stated_nodes) or 1
    scenario = run.benchmark_scenario or run.scenario
    layout = _system_layout(recipe, scenario)
    want_nodes = layout.nodes if layout is not None else 1
    want = recipe.system.gpus_per_vm * want_nodes
    differ = [f"{nodes} node{'s' if nodes != 1 else ''}"] if nodes != want_nodes else []
    if count.stated is not None and count.stated != want:
        differ.append(f"{count.stated} accelerators")
    if not differ:
        return None
    theirs = f"{want_nodes} nodes, {want} GPUs" if want_nodes > 1 else f"one VM, {want} GPUs"
    return (
        f"the run's system ({', '.join(differ)}, {count.source if count.source != '--gpus' else 'its own files'}) is "
        f"not recipe {recipe.name}'s ({theirs}): a result of another system is never a reproduction of it"
    )


def _system_layout(recipe: Recipe, scenario: str) -> Any:
    """The recipe's one-system layout of this scenario (trtllm.system: its nodes), or None for one VM's servers."""
    if recipe.trtllm is None or scenario not in ("Offline", "Server", "Interactive"):
        return None
    dep = recipe.deployment(scenario)
    return dep.trtllm.system if dep.trtllm is not None else None


def _contradicted(count: GpuCount) -> str | None:
    if count.source != "--gpus" or not count.contradicts:
        return None
    return (
        f"--gpus {count.total} contradicts the run's own files ({'; '.join(count.contradicts)}): a verdict on a "
        "count its files contradict is never a PASS"
    )


def evaluate(run: LoadGenRun, ident: ResultIdentity, recipe: Recipe | None) -> Verdict:
    """Pure: the verdict for one parsed performance run, for the run's own scenario, against the recipe's published
    figure, or without a recipe against the published record it is (`ident.record`). The checks are the same either
    way; what the run is (accelerator, count, division, benchmark) is read from `ident`, never from the folder."""
    tokens_per_s = _require_performance(run)
    record = ident.record
    if recipe is None and record is None:
        raise ValueError("evaluate needs a recipe or a published record")
    count = ident.count_for(recipe)
    scenario = ident.scenario
    row = record.row if record else None
    division = ident.division
    published, hw = _reference(ident, recipe, row)
    per_gpu = tokens_per_s / count.total
    ident = ident.judged_by(recipe, row)
    bench = ident.bench
    notes = _run_notes(run, count.notes, ident, recipe)

    evidence = evidence_checks(run, ident, recipe, row)
    throughput_checks, band, deviation = _throughput(run, per_gpu, published)
    if band is not None and per_gpu > band[1] and (software := _software_note(recipe)):
        notes.append(software)
    audit = AuditLine(deviation, float(published.tokens_per_s_per_gpu)) if deviation is not None and published else None
    ref_row = row if row is not None else reference_row(recipe, scenario) if recipe is not None else None
    # No published system (the demo's, a result the shipped index does not hold): nothing to compare item by item
    system = system_diff(run_system(run, ident, recipe), published_system(ref_row)) if ref_row is not None else []
    unheld = [] if ref_row is not None or recipe is None or recipe.demo else [_no_published_system(recipe)]
    stack, engine = _stack(run, recipe, scenario, ref_row)
    checks = evidence.with_band(_hardware(hw), throughput_checks + _audit_rows(audit, system) + unheld + stack)
    failed = [c for c in checks if c.fails and c.ok is False]
    # Another model's recipe (a 405B run against Llama-2-70B's): its band means nothing for this run, so the run is
    # judged by its own evidence only and is never a reproduction of that recipe.
    findings = _Findings(
        evidence=evidence,
        hw=hw,
        published=published,
        band=band,
        failed=failed,
        reasons=failure_reasons(failed, evidence),
        other_benchmark=recipe is not None and ident.benchmark is not None and ident.benchmark != recipe.benchmark,
        other_model=recipe is not None and bench is not None and bench.mlperf_model != recipe.bench.mlperf_model,
        other_system=_other_system(run, count, recipe),
        contradicted=_contradicted(count),
        engine=engine,
    )
    status, reasons, accuracy_command = _status(run, ident, recipe, row, findings)
    if division == "open":
        notes.insert(
            0,
            "open division: MLPerf sets no accuracy target there; judged against its own published accuracy and "
            "figure, never as a closed-division result",
        )
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
        accuracy_command,
        stack_differences(recipe, scenario, run.run_info, _published_loadgen(ref_row)) if engine and recipe else [],
        engine,
    )


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
        chosen = resolve_recipe(run, recipe, ident.benchmark)
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
        rows = tuple(r for r in rows if r.benchmark_name == ident.benchmark)  # a round may hold one model only
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
