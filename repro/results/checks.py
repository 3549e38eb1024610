"""The checks a verdict is built from, one function per rule, and evidence_checks(): the one place every path that
prints a verdict (verify, --against, aggregate, report, attest) gets a run's checks from.

Each rule reads the parsed run (results/logs.py) and the benchmark file's rules (core/benchmarks.py) and returns
Checks; results/verify.py turns them into a Verdict against a recipe or a published record.
"""

from __future__ import annotations

import math
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repro.core.benchmarks import Benchmark
from repro.core.errors import InputError
from repro.core.fmt import fmt_compared
from repro.core.recipes import Recipe
from repro.results.identity import ResultIdentity
from repro.results.logfiles import ACCURACY_TXT
from repro.results.logs import LoadGenRun

if TYPE_CHECKING:
    from repro.core.published import PublishedResult


@dataclass
class Check:
    name: str
    ok: bool | None
    detail: str
    fails: bool = False
    """True when ok is False and that alone makes the verdict FAIL."""
    closed: bool | None = None
    """An open-division run's closed-division accuracy rule, shown for information: did it hold?"""


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


def test06_checks(run: LoadGenRun, bench: Benchmark | None) -> list[Check]:
    """TEST06 hook (issue 19): the compliance folder beside a run, published or ours, is shown; failed is never PASS.
    Its EOS check counts the benchmark file's EOS id; a benchmark repro holds no file for has none to count."""
    from repro.results.compliance import find_test06, read_test06

    folder = find_test06(run.folder)
    if folder is None:
        return []
    where = min(str(folder), os.path.relpath(folder, run.folder), key=len)
    if bench is None:
        return [Check("TEST06", None, f"cannot be re-checked: no benchmark file names its EOS token id ({where})")]
    try:
        result = read_test06(folder, run.scenario, eos_id=bench.model.eos_token_id)
    except (OSError, InputError) as exc:
        return [Check("TEST06", False, f"{folder}: unreadable ({getattr(exc, 'message', exc)})", fails=True)]
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
    """The benchmark file's rules for the scenario. Offline: at least its samples per query
    (`min_samples_per_query`). Server and Interactive: its TTFT/TPOT limits were the ones LoadGen enforced, p99 TTFT
    and TPOT are under them, and early stopping succeeded."""
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
            shown, limit = fmt_compared(p99 / 1e6, rule_ms, 1, limit_digits=0, comma=True)
            checks.append(
                Check(
                    f"{what} p99",
                    ok,
                    f"{shown} ms {'≤' if ok else '>'} {limit} ms ({scenario})",
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


SAMPLE_COUNT_KEYS = ("gen_num", "num-samples")
"""The key an evaluation prints its scored sample count under: Llama's evaluate-accuracy.py `gen_num`, DeepSeek-R1's
eval_accuracy.py `num-samples` (mlcommons/inference @ b66003e1 language/deepseek-r1/eval_accuracy.py)."""


def _accuracy(
    run: LoadGenRun, bench: Benchmark, source: str, division: str, own: PublishedResult | None
) -> list[Check]:
    """Every checker rule of the run's benchmark (its file): each metric's floor (the accuracy class's fraction of
    the reference), tokens per sample within the allowed band, and a full-size run (gen_num = the dataset). The open
    division has no accuracy target (the submission checker accepts any): there the closed targets are shown for
    information and a result is judged by its own published accuracy (`own`, the same fraction of it)."""
    if not run.accuracy:
        beside = "accuracy/accuracy.txt beside performance/" if run.folder.parent.name == "performance" else ""
        where = beside or f"{ACCURACY_TXT} in the run's folder"
        return [Check("accuracy", None, f"no accuracy run (performance only): no {where}")]
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
        shown, limit = fmt_compared(acc[key], floor)
        detail = f"{shown} {'≥' if ok else '<'} {limit} ({where})"
        checks.append(
            Check(f"accuracy {key}", None if is_open else ok, detail, not ok and not is_open, ok if is_open else None)
        )
    tps, band = acc.get("tokens_per_sample"), spec.tokens_per_sample
    if tps is None:
        checks.append(Check("accuracy tokens_per_sample", False, f"missing from {run.accuracy_path}", fails=True))
    else:
        ok = band.low <= tps <= band.high
        near_low = tps < (band.low + band.high) / 2
        shown, edge = fmt_compared(tps, band.low if near_low else band.high, 1, limit_digits=3)
        low, high = (edge, f"{band.high:.3f}") if near_low else (f"{band.low:.3f}", edge)
        checks.append(
            Check(
                "accuracy tokens_per_sample",
                None if is_open else ok,
                f"{shown} {'within' if ok else 'outside'} {low}–{high} "
                f"({band.band[0] * 100:.0f}–{band.band[1] * 100:.0f}% of {band.reference})"
                + ("; open division: for information" if is_open else ""),
                fails=not ok and not is_open,
                closed=ok if is_open else None,
            )
        )
    if is_open:
        checks += _own_accuracy(acc, bench, own)
    counted = next((k for k in SAMPLE_COUNT_KEYS if k in acc), None)
    gen_num = acc[counted] if counted else None
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


def _consistency(run: LoadGenRun, ident: ResultIdentity, row: PublishedResult | None) -> tuple[list[Check], list[str]]:
    """The run's files against each other (results/consistency.py): a contradiction FAILs naming both files, a
    setting that is text is missing evidence; a de-duplicated copy's failing accuracy or TEST06 is shown too."""
    checks = [Check("consistency", False, text, fails=True) for text in run.contradictions]
    if run.accuracy_log_hash is not None and run.accuracy_log_hash.ok is not False:
        checks.append(Check("accuracy.txt hash", run.accuracy_log_hash.ok, run.accuracy_log_hash.detail))
    for copy in run.copies:
        mine = ident.of_copy(copy)
        bench, source = mine.bench, mine.benchmark_source or ""
        own = row if row and row.division == "open" else None
        for c in (
            (_accuracy(copy, bench, source, ident.division, own) if bench is not None else [])
            + test06_checks(copy, bench)
            + _consistency(copy, mine, row)[0]
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
        shown, limit = fmt_compared(acc[key], floor)
        checks.append(
            Check(
                f"accuracy {key} (open)",
                ok,
                f"{shown} {'≥' if ok else '<'} {limit} ({target}% of its published {published:.4f}, {own.ref})",
                fails=not ok,
            )
        )
    tps, published_tps = acc.get("tokens_per_sample"), own.tokens_per_sample
    if tps is not None and published_tps:
        ok = low * published_tps <= tps <= high * published_tps
        edge = low * published_tps if tps < published_tps else high * published_tps
        shown = fmt_compared(tps, edge, 1, limit_digits=3)[0]
        checks.append(
            Check(
                "accuracy tokens_per_sample (open)",
                ok,
                f"{shown} {'within' if ok else 'outside'} {low * 100:.0f}–{high * 100:.0f}% of its published "
                f"{published_tps:.1f}",
                fails=not ok,
            )
        )
    return checks


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
    no_accuracy: str | None = None
    """Why there is no accuracy evidence (no accuracy.txt), naming the file and the command that writes it."""
    accuracy_command: str | None = None
    """That command alone: the `Next:` of a verdict that lacks only its accuracy run."""

    @property
    def lacking(self) -> bool:
        """Evidence a PASS needs is missing: the duration's, a setting's, or the accuracy run."""
        return bool(self.missing or self.gaps or self.no_accuracy)

    @property
    def checks(self) -> list[Check]:
        return self.before_band + self.after_band

    def with_band(self, head: list[Check], band: list[Check]) -> list[Check]:
        """The checks in the order a verdict prints them: accelerator, the run's rules, the band, the rest."""
        return head + self.before_band + band + self.after_band

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.fails and c.ok is False]


def evidence_checks(
    run: LoadGenRun, ident: ResultIdentity, recipe: Recipe | None, row: PublishedResult | None
) -> Evidence:
    """The one place the run's checks are built: validity, duration, the scenario's rules, the token count,
    accuracy, TEST06 and the folder's agreement with itself, by the rules of the benchmark its identity decided
    (results/identity.py; `recipe` or `row` only where the result states none). `row` is the published record the
    run is compared with or recognised as (an open result's own accuracy)."""
    ident = ident.judged_by(recipe, row)
    scenario, division = ident.scenario, ident.division
    bench, name, source = ident.bench, ident.benchmark, ident.benchmark_source or ""
    consistency_checks, gaps = _consistency(run, ident, row)
    own = row if row and row.division == "open" else None
    if bench is not None:
        rule = bench.scenarios.get(scenario) or bench.rules("Offline")  # type: ignore[call-overload]
        duration_checks, missing = _duration(run, recipe, rule.min_duration_ms)
        accuracy = _accuracy(run, bench, source, division, own)
        rules = _scenario_rules(run, scenario, bench)
    elif name is None:  # nothing states the benchmark: no rules to judge by, and never evidence of a PASS
        unjudged = "no benchmark: neither the path, run.json, a published record nor a recipe names one: not judged"
        duration_checks, missing, rules = [], [], []
        accuracy = [Check("accuracy", None, unjudged)]
        gaps = [*gaps, unjudged]
    else:  # a benchmark repro holds no file for: shown, and never evidence of a PASS
        unjudged = f"no rules for benchmark {name} ({source}, not in repro/data/benchmarks/): not judged"
        duration_checks, missing, rules = [], [], []
        accuracy = [Check("accuracy", None, unjudged)]
        gaps = [*gaps, unjudged]
    no_accuracy = accuracy_command = None
    if not run.accuracy:
        no_accuracy, accuracy_command = _no_accuracy(run)
    return Evidence(
        _validity(run) + duration_checks + rules,
        _token_count(run) + accuracy + test06_checks(run, bench) + consistency_checks,
        missing,
        gaps,
        no_accuracy,
        accuracy_command,
    )


def expected_accuracy_txt(run: LoadGenRun) -> Path:
    """Where the run's accuracy.txt belongs (results/logs.py looks there): RUN_DIR/accuracy/ beside a
    performance/run_N (a submission's layout and repro's), else the run's own folder."""
    if run.folder.parent.name == "performance":
        return run.folder.parent.parent / "accuracy" / ACCURACY_TXT
    return run.folder / ACCURACY_TXT


_PASSED_ON = ("--backend", "--endpoint", "--workspace")
"""Flags of the performance run's own command its accuracy run needs too (the same servers, the same workspace)."""


def _no_accuracy(run: LoadGenRun) -> tuple[str, str]:
    """(the reason, the command): no accuracy.txt means no evidence the outputs are right, and MLPerf's submission
    checker rejects a result without its accuracy run. repro's own run gets the `repro run ... --accuracy --into`
    that pairs one with it; a result from elsewhere gets its accuracy folder copied back, then verify again."""
    expected = expected_accuracy_txt(run)
    why = f"no accuracy run: {expected} is missing (MLPerf's submission checker rejects a result without one)"
    info = run.run_info
    if info is None or not info.recipe:
        command = shlex.join(["repro", "verify", str(run.folder)])
        return f"{why}; copy the result's accuracy.txt and mlperf_log_accuracy.json there, then `{command}`", command
    run_dir = expected.parent.parent if expected.parent.name == "accuracy" else run.folder
    scenario = run.effective_scenario.lower()
    argv = ["repro", "run", scenario if scenario in ("offline", "server", "interactive") else "offline"]
    argv += ["--accuracy", "--into", str(run_dir), "--recipe", info.recipe]
    command_line = [str(a) for a in info.command]
    for i, flag in enumerate(command_line[:-1]):
        if flag in _PASSED_ON:
            argv += [flag, command_line[i + 1]]
    command = shlex.join(argv)
    return f"{why}; `{command}` writes it", command


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
    if evidence.no_accuracy:
        reasons.append(evidence.no_accuracy)
    return reasons


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
