"""`repro explain`: why a run is below (or above) the figure it is compared with, as ranked causes with evidence.

A run is compared with one reference: a published result of the index (its effective LoadGen settings, stack and
accuracy figures ship in data/published/settings.json), another run folder (a rack's best VM, a colleague's
bundle), or the recipe's published figure. Causes come from, in order of how surely they move the figure:
the LoadGen settings diff, the serving configuration (own runs: run.json against the recipe), output length
(tokens per sample; a server that stops early looks fast), the machine during the run (NVML, harness CPU time),
the software stack, and what is left once those are accounted for. Nothing here judges PASS/FAIL; verify does.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repro.core.benchmarks import Benchmark, not_shipped_notes
from repro.core.errors import InputError
from repro.core.published import DATA_DIR, Accelerator, load_index
from repro.core.recipes import Recipe
from repro.core.serving import gpus_served, serving_text
from repro.report.roofline import flops_per_output_token, model_shape, roofline
from repro.report.sides import (
    Diff,
    Effect,
    Side,
    serving_diffs,
    serving_of_recipe,
    settings_diffs,
    side_of_published,
    side_of_recipe,
    side_of_run,
    stack_diffs,
)
from repro.results.compare import pick_perf_run, same_model
from repro.results.identity import benchmark_file, decide_benchmark
from repro.results.index_match import effective_scenario
from repro.results.logs import LoadGenRun, find_runs

SETTINGS_JSON = DATA_DIR / "settings.json"
NOISE_PCT = 2.0  # run-to-run spread of one system (MLPerf reruns differ by 1-2%): a smaller gap needs no cause
CLIENT_BOUND_SHARE = 0.85  # the harness's busiest thread runnable this share of the run: it cannot keep up
OUTPUT_SHIFT_PCT = 2.0  # tokens/sample differences above this change what a token costs
TTFT_SHIFT_PCT = 20.0  # p99 first-token latency this much above the reference's
_RANK = {"moves": 0, "may move": 1, "none": 2}

_GROUP = {
    k: "target_qps"
    for k in ("offline_expected_qps", "samples_per_query", "min_sample_count", "generated_samples_per_query")
}


@dataclass(frozen=True)
class Cause:
    """A reason the figure differs, with what shows it and the figure it moves (by how much, where measurable)."""

    title: str
    area: str
    effect: Effect
    evidence: tuple[str, ...]
    moves: str
    impact_pct: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "area": self.area,
            "effect": self.effect,
            "evidence": list(self.evidence),
            "moves": self.moves,
            "impact_pct": None if self.impact_pct is None else round(self.impact_pct, 2),
        }


@dataclass
class TokenStats:
    """Output and input lengths of the run, and where each figure came from."""

    output_per_sample: float | None
    output_source: str
    reference_output: float | None = None
    input_per_sample: float | None = None
    input_source: str = "not measured: no dataset in the workspace"
    max_tokens: int | None = None
    share_at_max: float | None = None
    share_source: str = "not measured: no per-sample output lengths (repro run offline --accuracy logs them)"
    ttft_ns: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "output_tokens_per_sample": self.output_per_sample,
            "output_source": self.output_source,
            "reference_output_tokens_per_sample": self.reference_output,
            "output_vs_reference_pct": _pct(self.output_per_sample, self.reference_output),
            "input_tokens_per_sample": self.input_per_sample,
            "input_source": self.input_source,
            "max_tokens": self.max_tokens,
            "share_at_max_tokens": self.share_at_max,
            "share_source": self.share_source,
            "ttft_ns": self.ttft_ns,
        }


@dataclass
class RackRow:
    name: str
    tokens_per_s: float | None
    samples_per_s: float | None
    tokens_per_sample: float | None
    deviation_pct: float | None
    differs: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "vm": self.name,
            "tokens_per_s": self.tokens_per_s,
            "samples_per_s": self.samples_per_s,
            "tokens_per_sample": self.tokens_per_sample,
            "deviation_from_median_pct": None if self.deviation_pct is None else round(self.deviation_pct, 2),
            "differs": self.differs,
        }


@dataclass
class Explanation:
    """`repro explain`'s result: the two sides, the ranked causes, and the material they were drawn from."""

    run: Side
    reference: Side
    deviation_pct: float | None
    compared_per: Literal["gpu", "system"]
    causes: list[Cause]
    diffs: list[Diff]
    tokens: TokenStats
    roofline: Any = None
    rack: list[RackRow] = field(default_factory=list)
    straggler: str | None = None
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    @property
    def label(self) -> str | None:
        return self.run.label

    @property
    def headline(self) -> str:
        if self.deviation_pct is None:
            return f"{self.run.name} against {self.reference.name}: no figure to compare"
        side = "below" if self.deviation_pct < 0 else "above"
        what = "per GPU" if self.compared_per == "gpu" else "per system"
        return f"{self.run.name} is {abs(self.deviation_pct):.1f}% {side} {self.reference.name} (tokens/s {what}); " + (
            f"{len(self.causes)} cause(s), most likely first" if self.causes else "no cause found"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "explain": "repro explain",
            "label": self.label,
            "reproduction": False if self.label else None,
            "headline": self.headline,
            "run": self.run.to_json(),
            "reference": self.reference.to_json(),
            "deviation_pct": None if self.deviation_pct is None else round(self.deviation_pct, 3),
            "compared_per": self.compared_per,
            "causes": [c.to_json() for c in self.causes],
            "diffs": [d.to_json() for d in self.diffs],
            "tokens": self.tokens.to_json(),
            "roofline": self.roofline.to_json() if self.roofline is not None else None,
            "rack": [r.to_json() for r in self.rack],
            "straggler": self.straggler,
            "notes": self.notes,
            "sources": self.sources,
        }


# --- figures (each side and what differs are read in report/sides.py) -------------------------------------------------


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _pct(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or not math.isfinite(a) or not math.isfinite(b):
        return None
    return (a / b - 1) * 100


def _output_lengths(folder: Path) -> tuple[list[int], Path] | None:
    """Per-sample output token counts from the run's accuracy log (the sibling accuracy/ run of an own run)."""
    from repro.results.accuracy import read_accuracy_log

    for cand in (folder / "mlperf_log_accuracy.json", folder.parent.parent / "accuracy" / "mlperf_log_accuracy.json"):
        if not cand.is_file() or cand.stat().st_size < 8:
            continue
        try:
            entries = read_accuracy_log(cand)
        except InputError:
            continue
        if entries:
            return [len(ids) for _, ids in entries], cand
    return None


# --- the comparison ------------------------------------------------------------------------------------------------


def _benchmark(run: LoadGenRun, recipe: Recipe | None) -> Benchmark | None:
    """The run's benchmark file, decided as verify decides it (results/identity.py); None when nothing says."""
    return benchmark_file(decide_benchmark(run, recipe=recipe)[0])


def _token_stats(
    run: LoadGenRun, side: Side, recipe: Recipe | None, input_tokens: float | None, input_src: str
) -> TokenStats:
    found = _output_lengths(run.folder)
    bench = _benchmark(run, recipe)
    max_tokens = side.serving.get("max_tokens") or (
        recipe.loadgen.max_tokens if recipe is not None else bench.generation.max_new_tokens if bench else None
    )
    stats = TokenStats(
        reference_output=bench.accuracy.tokens_per_sample.reference if bench else None,
        output_per_sample=side.tokens_per_sample,
        output_source=side.tokens_source or "not measured (no tokens per second in the logs)",
        input_per_sample=input_tokens,
        input_source=input_src,
        max_tokens=max_tokens,
        ttft_ns=dict(run.ttft_ns),
    )
    if found and max_tokens:
        lengths, path = found
        stats.share_at_max = sum(1 for n in lengths if n >= max_tokens) / len(lengths)
        stats.share_source = f"{len(lengths):,} samples of {path}"
        if stats.output_per_sample is None:
            stats.output_per_sample = statistics.fmean(lengths)
            stats.output_source = stats.share_source
    if stats.output_per_sample is None and run.accuracy and run.accuracy.get("tokens_per_sample"):
        stats.output_per_sample = float(run.accuracy["tokens_per_sample"])
        stats.output_source = f"{run.accuracy_path}: tokens_per_sample"
    return stats


def dataset_input_tokens(recipe: Recipe | None, run: LoadGenRun) -> tuple[float | None, str]:
    """Mean prompt length of the prepared dataset the run read (nothing is built): the folder its run.json names,
    else the recipe's dataset in the workspace whose runs/ holds it; never the workspace explain is started from."""
    if recipe is None:
        return None, "not measured: no recipe"
    from repro.core.workspace import workspace_of

    record = run.run_info
    home = workspace_of(run.folder)
    if record is not None and record.dataset_path:
        folder = Path(record.dataset_path)
    elif home is not None:
        name = recipe.dataset.name
        if recipe.demo:
            from repro.setup.demo import DATASET_NAME

            name = DATASET_NAME
        folder = home.preprocessed / name
    else:
        return None, (
            f"not measured: {run.folder} names no dataset (run.json dataset_path) and is in no repro workspace's "
            "runs/ folder"
        )
    from repro.setup.dataset import load_prepared  # numpy: only where there is a dataset to read

    try:
        data = load_prepared(folder, verify=False)
    except InputError as exc:
        if not (folder / "manifest.json").exists():
            return None, f"not measured: the run's dataset is gone: no prepared dataset at {folder}"
        return None, f"not measured: the run's dataset cannot be read: {exc.message}"
    if record is not None and record.dataset_sha256 and data.sha256 != record.dataset_sha256:
        return None, f"not measured: {folder} is no longer the dataset the run read (its checksum differs)"
    lens = data.input_lens
    return float(lens.mean()), f"measured: mean of {len(lens):,} prompts in {folder}"


def _causes(
    run: Side,
    ref: Side,
    deviation: float | None,
    diffs: list[Diff],
    tokens: TokenStats,
    per: str,
    mlperf_data: bool = True,
    bench: Benchmark | None = None,
) -> list[Cause]:
    """Every cause, measured ones before the inferred rest ("server"), then by size."""
    figure = f"tokens/s per {'GPU' if per == 'gpu' else 'system'}"
    causes = _settings_causes(run, ref, deviation, diffs, figure)
    output, out_shift = _output_causes(run, ref, tokens, mlperf_data, bench)
    causes += output
    causes += _machine_causes(run, ref, figure)
    causes += _ttft_causes(run, ref)
    causes += _residual_cause(run, ref, deviation, diffs, causes, out_shift, figure)
    causes.sort(key=lambda c: (_RANK[c.effect], c.area == "server", -abs(c.impact_pct or 0), c.area))
    return causes


def _settings_causes(run: Side, ref: Side, deviation: float | None, diffs: list[Diff], figure: str) -> list[Cause]:
    """One cause per group of differing settings that moves the figure (Offline's query size only the right way)."""
    causes: list[Cause] = []
    grouped: dict[str, list[Diff]] = {}
    for d in diffs:
        if d.effect != "none":
            grouped.setdefault(_GROUP.get(d.key, d.key), []).append(d)
    for group, members in grouped.items():
        head = next((d for d in members if d.key == group), members[0])
        evidence = [head.why] + [f"{d.key}: yours {d.yours}, reference {d.reference}" for d in members]
        effect = head.effect
        if group == "target_qps" and run.scenario == "Offline" and deviation is not None:
            bigger = _as_float(head.yours) > _as_float(head.reference)
            if bigger == (deviation < 0):
                effect = "none"
                evidence.append(
                    "a larger query shrinks the drain share, so it does not explain a lower figure"
                    if bigger
                    else "a smaller query grows the drain share, so it does not explain a higher figure"
                )
        if effect == "none":
            continue
        causes.append(
            Cause(
                f"{head.area}: {head.key} is {head.yours} here, {head.reference} in {ref.name}",
                head.area,
                effect,
                tuple(evidence),
                figure,
            )
        )
    return causes


def _output_causes(
    run: Side, ref: Side, tokens: TokenStats, mlperf_data: bool, bench: Benchmark | None
) -> tuple[list[Cause], float | None]:
    """Output length: shorter answers put more prefill behind every output token (and finish samples sooner).
    Also returns the output-length shift in %, which the residual cause needs."""
    causes: list[Cause] = []
    out_shift = _pct(run.tokens_per_sample, ref.tokens_per_sample)
    ref_out, ref_src, measured_ref = ref.tokens_per_sample, ref.name, True
    if out_shift is None and run.tokens_per_sample is not None and mlperf_data and tokens.reference_output:
        ref_out, ref_src, measured_ref = tokens.reference_output, "the MLPerf reference (FP16)", False
        out_shift = _pct(run.tokens_per_sample, ref_out)
    assumed = bench.dataset.mean_input_tokens if bench is not None else "unknown"
    inp = tokens.input_per_sample or (float(assumed) if assumed != "unknown" else None)
    if (
        out_shift is not None
        and ref_out
        and run.tokens_per_sample
        and abs(out_shift) > OUTPUT_SHIFT_PCT
        and inp
        and bench is not None
        and (m := model_shape(bench, bench.model)) is not None
    ):
        shorter = out_shift < 0
        impact = flops_per_output_token(inp, ref_out, m) / flops_per_output_token(inp, run.tokens_per_sample, m) - 1
        impact *= 100
        evidence = [
            f"{run.tokens_per_sample:,.1f} output tokens per sample vs {ref_out:,.1f} in {ref_src} ({out_shift:+.1f}%)",
            f"at {inp:,.0f} input tokens each output token carries {'more' if shorter else 'less'} prefill: "
            f"{impact:+.1f}% tokens/s where compute bounds the run (samples/s moves {-out_shift:+.1f}% the other way)",
        ]
        if not measured_ref:
            evidence.append(
                f"{ref.name} publishes no output length; NVFP4 runs publish about 272-276 tokens/sample, FP8 290-294"
            )
        if tokens.share_at_max is not None:
            evidence.append(
                f"{tokens.share_at_max * 100:.1f}% of samples hit max_tokens {tokens.max_tokens} "
                f"({tokens.share_source})"
            )
        causes.append(
            Cause(
                "output length: the server stops early" if shorter else "output length: answers run longer",
                "tokens",
                "moves" if measured_ref else "may move",
                tuple(evidence),
                "tokens/s and samples/s",
                impact,
            )
        )
    if tokens.share_at_max is not None and tokens.share_at_max > 0.05 and not causes:
        causes.append(
            Cause(
                "output length: many samples stop at max_tokens",
                "tokens",
                "moves",
                (f"{tokens.share_at_max * 100:.1f}% of samples hit max_tokens {tokens.max_tokens}",),
                "samples/s and tokens/s",
            )
        )
    return causes, out_shift


def _ttft_causes(run: Side, ref: Side) -> list[Cause]:
    """A Server run whose p99 first-token latency is well above the reference's."""
    ttft, ref_ttft = run.ttft_ns.get("p99"), ref.ttft_ns.get("p99")
    if run.scenario == "Offline" or not isinstance(ttft, (int, float)) or not isinstance(ref_ttft, (int, float)):
        return []
    if not ref_ttft or (shift := (ttft / ref_ttft - 1) * 100) <= TTFT_SHIFT_PCT:
        return []
    limit = run.settings.get("ttft_latency_ns")
    return [
        Cause(
            "first tokens wait longer",
            "tokens",
            "may move",
            (
                f"p99 time to first token {ttft / 1e6:,.0f} ms vs {ref_ttft / 1e6:,.0f} ms in {ref.name} "
                f"({shift:+.0f}%)"
                + (f"; the limit is {float(limit) / 1e6:,.0f} ms" if isinstance(limit, (int, float)) else ""),
                "a Server run near its first-token limit must be run at a lower target QPS to stay valid",
            ),
            "completed tokens/s (Server)",
        )
    ]


def _residual_cause(
    run: Side,
    ref: Side,
    deviation: float | None,
    diffs: list[Diff],
    causes: list[Cause],
    out_shift: float | None,
    figure: str,
) -> list[Cause]:
    """What is left: the run produced tokens more slowly with nothing in `causes` to account for it."""
    moving = [c for c in causes if c.effect == "moves"]
    residual = None if deviation is None else deviation - sum(c.impact_pct or 0 for c in moving)
    if residual is None or abs(residual) <= NOISE_PCT or any(c.impact_pct is None for c in moving):
        return []
    rate = _pct(run.samples_per_s, ref.samples_per_s)
    evidence = [f"{figure}: {deviation:+.1f}% against {ref.name}"]
    if moving:
        evidence.append(f"{residual:+.1f}% left after the causes above")
    if rate is not None and out_shift is not None and abs(out_shift) <= OUTPUT_SHIFT_PCT:
        evidence.append(
            f"samples/s {rate:+.1f}% with output tokens per sample {out_shift:+.1f}%: each sample took longer, "
            "the answers did not change"
        )
    if run.settings and ref.settings and not any(d.area == "settings" and d.effect == "moves" for d in diffs):
        evidence.append("every LoadGen setting that moves the figure is the same")
    what = "slower" if residual < 0 else "faster"
    evidence.append(
        f"no setting, serving option or output length accounts for it: the serving engine or the GPUs ran {what}"
        + ("" if run.machine else " (the run recorded no NVML samples or harness CPU time to say which)")
    )
    return [
        Cause(
            f"the server or its GPUs are {what} ({abs(residual):.1f}%)",
            "server",
            "moves",
            tuple(evidence),
            figure,
            residual,
        )
    ]


def _machine_causes(run: Side, ref: Side, figure: str) -> list[Cause]:
    m = run.machine
    out: list[Cause] = []
    share = m.get("harness_thread_runnable_share")
    if isinstance(share, (int, float)) and share >= CLIENT_BOUND_SHARE:
        waiting = m.get("harness_thread_wait_share", 0.0)
        out.append(
            Cause(
                "client-bound: the harness could not keep up",
                "machine",
                "moves",
                (
                    f"the harness's threads were runnable {share * 100:.0f}% of a core over the "
                    f"{m.get('harness_wall_s', 0):,.1f} s run "
                    f"(on a CPU {m.get('harness_thread_cpu_share', 0) * 100:.0f}%, "
                    f"waiting for one {waiting * 100:.0f}%)",
                    "LoadGen and the client share one Python interpreter: a saturated harness issues and answers "
                    "samples late, so the server idles"
                    + ("; other processes held the CPUs most of that time" if waiting > 0.3 else ""),
                ),
                figure,
            )
        )
    throttle = m.get("throttle_share")
    if isinstance(throttle, (int, float)) and throttle > 0.05:
        out.append(
            Cause(
                "GPU throttling during the run",
                "machine",
                "moves",
                (f"{throttle * 100:.0f}% of NVML samples report a slowdown reason ({m.get('throttle_reasons', '')})",),
                figure,
            )
        )
    clock, ref_clock = m.get("sm_clock_mhz_mean"), ref.machine.get("sm_clock_mhz_mean")
    if isinstance(clock, (int, float)) and isinstance(ref_clock, (int, float)) and ref_clock:
        shift = (clock / ref_clock - 1) * 100
        if shift < -3:
            out.append(
                Cause(
                    "lower GPU clocks",
                    "machine",
                    "moves",
                    (f"mean SM clock {clock:,.0f} MHz vs {ref_clock:,.0f} MHz in {ref.name} ({shift:+.1f}%)",),
                    figure,
                    shift,
                )
            )
    return out


def _rack_rows(runs: list[LoadGenRun]) -> tuple[list[RackRow], str | None, LoadGenRun | None, LoadGenRun | None]:
    """Each VM against the rack median; the slowest VM more than the noise below it is the straggler."""
    figures = [r.tokens_per_s for r in runs if r.tokens_per_s]
    if len(figures) < 2:
        return [], None, None, None
    median = statistics.median(figures)
    best = max(runs, key=lambda r: r.tokens_per_s or 0)
    best_side = side_of_run(best, None)
    rows = []
    for r in runs:
        side = side_of_run(r, None)
        differs = [
            f"{d.key}: {d.yours} (best VM {d.reference})"
            for d in settings_diffs(side, best_side) + stack_diffs(side, best_side)
        ]
        differs += [c.evidence[0] for c in _machine_causes(side, best_side, "tokens/s")]
        rows.append(
            RackRow(
                _vm_name(r),
                r.tokens_per_s,
                r.samples_per_s,
                side.tokens_per_sample,
                _pct(r.tokens_per_s, median),
                differs,
            )
        )
    slowest = min(runs, key=lambda r: r.tokens_per_s or math.inf)
    dev = _pct(slowest.tokens_per_s, median)
    straggler = _vm_name(slowest) if dev is not None and dev < -NOISE_PCT else None
    return rows, straggler, slowest, best


def _display_name(run: LoadGenRun) -> str:
    """An own run's recipe/scenario/stamp, a VM folder's name (ND_GB300_v6_16), a bundle's system folder."""
    if run.run_info is not None and run.run_info.run_dir:
        return "/".join(Path(run.run_info.run_dir).parts[-3:])
    for part in reversed(run.folder.parts[-4:]):
        if re.search(r"_\d+$", part) and not part.startswith("run_"):
            return part
    return run.system_folder or str(run.folder)


def _vm_name(run: LoadGenRun) -> str:
    for part in reversed(run.folder.parts):
        if re.search(r"_\d+$", part) or part.lower().startswith("vm"):
            return part
    return run.folder.name


def _fill_from_index(run: LoadGenRun, side: Side, notes: list[str]) -> None:
    """A published bundle without its detail log (fixtures keep them small) takes the shipped settings of its log."""
    if run.detail_path is not None:
        return
    from repro.results.index_match import match_run

    match = match_run(run)
    if match is None or not match.exact:
        return
    shipped = side_of_published(match.row)
    if shipped.settings:
        side.settings = {**side.settings, **shipped.settings}
        for key, value in shipped.stack.items():
            side.stack.setdefault(key, value)
        notes.append(f"this is the published log of {match.row.ref}: its effective settings come from the shipped copy")


def _known_diffs(run: LoadGenRun, recipe: Recipe | None, mine: Side, ref: Side, have: list[Diff]) -> list[Diff]:
    """The recipe's known differences from the published run (results.stack: serving stack, engine layout, boost
    slider, ...) for repro's own run, each a stack diff not already found by comparing the two sides."""
    if recipe is None or run.run_info is None or ref.kind == "run":
        return []
    from repro.results.stack import stack_differences

    seen = {d.key for d in have}
    known = stack_differences(recipe, mine.scenario, run.run_info, ref.stack.get("LoadGen"))
    return [
        Diff("stack", k.key, k.here, k.published, k.effect, f"known difference from the published run ({k.source})")
        for k in known
        if k.key not in seen
    ]


def refuse_another_model(run: LoadGenRun, recipe: Recipe | None, command: str) -> None:
    """A result is never explained or reported against a recipe of another model (a DeepSeek-R1 folder with a
    Llama-2-70B recipe): its figure says nothing about it. The benchmark is the one the result states (its path or
    run.json); 99 and 99.9 of one model are one model."""
    stated, source = decide_benchmark(run)
    mine = benchmark_file(stated)
    if recipe is None or mine is None or stated == recipe.benchmark or mine.model.repo_id == recipe.model.repo_id:
        return
    raise InputError(
        f"{run.folder}: a {stated} run ({source}), and recipe {recipe.name} runs {recipe.benchmark} "
        f"({recipe.model.repo_id}): another model's figure says nothing about this run.",
        f"`repro {command} RESULT_DIR --recipe NAME` with a recipe of {stated} (see `repro recipes list`)",
    )


def _resolve_recipe(run: LoadGenRun, recipe: str | Recipe | None) -> Recipe | None:
    from repro.results.verify import resolve_recipe

    try:
        return resolve_recipe(run, recipe)
    except InputError:
        if recipe:
            raise
        return None


def _reference(against: str | None, run: LoadGenRun, recipe: Recipe | None) -> tuple[Side, LoadGenRun | None]:
    """--against: a run folder, an index reference, or (default) the recipe's published result."""
    if against and Path(against).exists():
        other = pick_perf_run(Path(against), effective_scenario(run))
        return side_of_run(other, recipe, name=_display_name(other)), other
    idx = load_index()
    if against:
        rows = idx.resolve(against)
        same = [r for r in rows if r.scenario == effective_scenario(run)] or rows
        name = decide_benchmark(run, recipe=recipe)[0]
        bench = idx.value_of(name)
        own = [r for r in same if bench is None or r.benchmark == bench]
        if not own and name and not any(same_model(name, r.benchmark_name) for r in same):
            theirs = ", ".join(sorted({r.benchmark_name for r in same}))
            raise InputError(
                f"{against}: no {name} result ({theirs} only): another model's figure says nothing about this run.",
                f"`repro published --benchmark {name}` lists the results to explain it against",
            )
        return side_of_published((own or same)[0]), None
    if recipe is None:
        from repro.results.index_match import match_run

        match = match_run(run, idx)
        if match is not None:
            return side_of_published(match.row), None
        raise InputError(
            f"{run.folder}: no recipe, no --against and no published record of this system, so nothing to "
            "compare it with; pick a published result of the same accelerator.",
            f"repro published --scenario {effective_scenario(run)}",
        )
    scenario = effective_scenario(run)
    pub = recipe.published_for(scenario)
    if pub is None:  # another scenario's figure says nothing about this run (a Server run is not an Offline one)
        have = ", ".join(p.scenario for p in (recipe.published, *recipe.published_scenarios))
        raise InputError(
            f"recipe {recipe.name} has no published {scenario} result to explain {run.folder} against (it has {have}).",
            f"repro published --scenario {scenario}",
        )
    if pub.result_id:
        rows = idx.resolve(pub.result_id)
        same = [r for r in rows if r.scenario == effective_scenario(run) and r.benchmark_name == recipe.benchmark]
        if same:
            return side_of_published(same[0]), None
    return side_of_recipe(recipe, effective_scenario(run)), None


def _served_from(recipe: Recipe, scenario: str | None) -> str | None:
    """Where the recipe's published config served a scenario from fewer GPUs than its system has (Azure's GB300
    Interactive: 64 of 72), the note that says so: MLPerf divides by the system's count all the same."""
    if scenario not in ("Offline", "Server", "Interactive") or recipe.trtllm is None:
        return None
    dep = recipe.deployment(scenario)
    used, total = gpus_served(dep)
    if not 0 < used < total:
        return None
    layout = serving_text(dep)
    return f"recipe {recipe.name} serves {scenario} with {layout}; per GPU is over all {total}, as MLPerf counts"


def explain(
    result_dir: Path,
    against: str | None = None,
    recipe: str | Recipe | None = None,
    *,
    input_tokens: tuple[float | None, str] | None = None,
) -> Explanation:
    """Ranked causes for one run (or, for a folder of VMs, its straggler) against a reference."""
    result_dir = Path(result_dir)
    runs = [r for r in find_runs(result_dir) if r.mode == "PerformanceOnly"]
    notes: list[str] = []
    rack: list[RackRow] = []
    straggler = None
    if len(runs) > 1 and len({effective_scenario(r) for r in runs}) == 1:
        rack, straggler, slowest, best = _rack_rows(runs)
        run = slowest if slowest is not None else runs[0]
        if against is None and best is not None and best is not run:
            against = str(best.folder)
            notes.append(
                f"{len(runs)} VM runs here: the slowest ({_vm_name(run)}) against the fastest ({_vm_name(best)})"
            )
    else:
        run = pick_perf_run(result_dir)
    chosen = _resolve_recipe(run, recipe)
    refuse_another_model(run, chosen, "explain")
    ref, other = _reference(against, run, chosen)
    mine = side_of_run(run, chosen, name=_display_name(run))
    _fill_from_index(run, mine, notes)
    if chosen is not None and (served := _served_from(chosen, mine.scenario)):
        notes.append(served)
    if chosen is not None and ref.kind != "run" and not mine.serving:
        notes.append("the run recorded no serving configuration: serving options not compared")
    if chosen is not None and ref.kind == "published" and mine.serving:
        ref.serving = serving_of_recipe(chosen)
        ref.name = f"{ref.name} (serving: recipe {chosen.name})"
    per: Literal["gpu", "system"] = "gpu" if mine.per_gpu is not None and ref.per_gpu is not None else "system"
    deviation = _pct(mine.per_gpu, ref.per_gpu) if per == "gpu" else _pct(mine.tokens_per_s, ref.tokens_per_s)
    if (
        mine.accelerator
        and ref.accelerator
        and not Accelerator.parse(mine.accelerator).same_as(Accelerator.parse(ref.accelerator))
    ):
        notes.append(
            f"different accelerators ({mine.accelerator} vs {ref.accelerator}): the gap measures the chips first"
        )
    if mine.scenario != ref.scenario:
        notes.append(f"scenarios differ ({mine.scenario} vs {ref.scenario}): the figures are not comparable")
    diffs = settings_diffs(mine, ref) + serving_diffs(mine, ref) + stack_diffs(mine, ref)
    diffs += _known_diffs(run, chosen, mine, ref, diffs)
    if not ref.settings:
        notes.append(
            f"no effective LoadGen settings for {ref.name}: settings not compared "
            f"(point --against at its result folder to compare them)"
        )
    inp, inp_src = input_tokens if input_tokens is not None else dataset_input_tokens(chosen, run)
    tokens = _token_stats(run, mine, chosen, inp, inp_src)
    causes = _causes(
        mine,
        ref,
        deviation,
        diffs,
        tokens,
        per,
        mlperf_data=not (chosen and chosen.demo),
        bench=_benchmark(run, chosen),
    )
    roof = None
    if chosen is not None:
        roof = roofline(
            chosen,
            mine.per_gpu,
            tokens.output_per_sample,
            input_tokens=inp,
            input_source=inp_src,
            output_source=tokens.output_source,
            probe=run.run_info.probe if run.run_info is not None else None,
        )
    if run.incomplete:
        notes.insert(
            0,
            "the run did not finish (stopped or interrupted): samples still in flight were answered with a "
            "placeholder token, so output length and samples/s describe only the part that ran",
        )
    if mine.label:
        notes.insert(
            0, f"{mine.label} run: it rehearses the flow; its causes describe the rehearsal, never a reproduction"
        )
    notes += not_shipped_notes(_benchmark(run, chosen), chosen.bench if chosen else None)
    sources = [s for s in (mine.source, ref.source) if s]
    return Explanation(mine, ref, deviation, per, causes, diffs, tokens, roof, rack, straggler, notes, sources)
