"""`repro report`: the published tables rebuilt from your own run folders, every number traced to a file.

Built on aggregate (which runs verify per VM): the comparison with every published system, the rack table,
the business translation, measured and TDP-based efficiency, and the roofline fraction.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.errors import InputError
from repro.core.fmt import fmt_num
from repro.core.published import Accelerator, PublishedResult, load_index
from repro.core.recipes import Published, Recipe, all_recipes
from repro.report.cost import TokenCost, token_cost
from repro.report.explain import Explanation, dataset_input_tokens, explain, refuse_another_model
from repro.report.roofline import Roofline, roofline
from repro.results.aggregate import RackReport, VMRow, aggregate, published_outside_band
from repro.results.attest import verify_command
from repro.results.verify import NoRecipeFor, Verdict
from repro.run.power import PowerSummary, read_power

PROFILES = (("Q&A", 650), ("RAG", 2500), ("summarisation", 2500), ("agentic", 10000))
TDP_LABEL = "TDP-based (published report)"


MAX_PLOTTED = 1e12  # tokens/s per GPU; more is not a measurement (issue #16)


def _probe_of(used: list[VMRow]) -> dict[str, Any] | None:
    """One run's `repro doctor --probe` ceilings (run.json `probe`); a rack's VMs each have their own."""
    info = _verdict(used[0]).run.run_info if len(used) == 1 else None
    return info.probe if info is not None else None


def _verdict(row: VMRow) -> Verdict:
    """The rows a report sums always carry a verdict (the others are listed as skipped)."""
    if row.verdict is None:
        raise ValueError(f"{row.name}: no verdict")
    return row.verdict


@dataclass
class Comparison:
    """The measured tokens/s per GPU against one recipe's published result."""

    recipe: str
    title: str
    gpu: str
    status: str
    published_per_gpu: float
    band: tuple[float, float]
    deviation_pct: float
    own: bool
    source: str

    @property
    def in_band(self) -> bool:
        return self.band[0] <= self.published_per_gpu * (1 + self.deviation_pct / 100) <= self.band[1]


@dataclass
class Standing:
    """Where the run's tokens/s per GPU falls among every published result for its accelerator (shipped index)."""

    accelerator: str
    scenario: str
    benchmark: str
    per_gpu: float
    rows: list[PublishedResult]

    @property
    def rank(self) -> int:
        return 1 + sum(1 for r in self.rows if r.per_accelerator > self.per_gpu)

    @property
    def sentence(self) -> str:
        return (
            f"Among {len(self.rows)} published {self.accelerator} results ({self.benchmark} "
            f"{self.scenario}, shipped index) your {self.per_gpu:,.1f} tokens/s per GPU would rank "
            f"{self.rank} of {len(self.rows) + 1}."
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator,
            "scenario": self.scenario,
            "benchmark": self.benchmark,
            "rank": self.rank,
            "of": len(self.rows) + 1,
            "sentence": self.sentence,
            "published": [
                {
                    "ref": r.ref,
                    "submitter": r.submitter,
                    "system": r.system_folder,
                    "round": r.round,
                    "division": r.division,
                    "accelerators": r.total_accelerators,
                    "tokens_per_s_per_gpu": r.per_accelerator,
                }
                for r in self.rows
            ],
        }


def standing_for(recipe: Recipe, per_gpu: float, scenario: str = "Offline") -> Standing | None:
    """Published results of the recipe's accelerator (same model and form factor) and accuracy benchmark."""
    want = Accelerator.parse(recipe.system.gpu_name)
    rows = [
        r
        for r in load_index().rows
        if r.scenario == scenario
        and r.benchmark_name == recipe.benchmark
        and want.same_as(Accelerator.parse(r.accelerator_model_name))
    ]
    if not rows:
        return None
    rows.sort(key=lambda r: (-r.per_accelerator, r.key))
    return Standing(recipe.system.gpu_name, scenario, recipe.benchmark, per_gpu, rows)


@dataclass
class Business:
    profile: str
    tokens_per_interaction: int
    per_gpu: float
    per_vm: float
    total: float


@dataclass
class Measured:
    vm: str
    power: PowerSummary
    tokens_per_s: float
    tokens_per_joule: float


@dataclass
class Report:
    rack: RackReport
    used: list[VMRow]
    per_gpu: float
    comparisons: list[Comparison]
    business: list[Business]
    measured: list[Measured]
    tdp: list[tuple[str, str, float]]
    roof: Roofline | None
    labels: list[str]
    notes: list[str]
    sources: list[Path]
    outputs: dict[str, str] = field(default_factory=dict)
    standing: Standing | None = None
    explanation: Explanation | None = None
    tune: dict[str, Any] | None = None
    """The `repro tune` search behind the run's target_qps (run.json target_qps_source), when it came from one."""
    cost: TokenCost | None = None
    attestations: list[tuple[Path, str, str | None]] = field(default_factory=list)
    """(attestation file, its sha256, the key id it claims) for each `repro attest` file found with the runs."""

    @property
    def recipe(self) -> Recipe:
        assert self.rack.recipe is not None, "build_report refuses a rack without a recipe"
        return self.rack.recipe

    @property
    def scenario(self) -> str:
        """The runs' scenario: every published figure the report sets beside them is of this scenario."""
        return self.rack.scenario

    @property
    def published(self) -> Published | None:
        """The recipe's published figure for the runs' scenario (a Server run beside the Server figure, never the
        Offline one); None when the recipe published none for it."""
        return self.recipe.published_for(self.scenario)

    @property
    def label(self) -> str | None:
        return ", ".join(self.labels) or None

    @property
    def title(self) -> str:
        head = f"repro report: {self.recipe.title}"
        return f"[{self.label.upper()}, NOT A REPRODUCTION] {head}" if self.label else head

    @property
    def banner(self) -> str | None:
        if not self.label:
            return None
        return (
            f"{self.label.upper()} run(s): these numbers rehearse the flow on a simulated or reduced setup "
            "and are never a reproduction of the published result."
        )

    @property
    def exit_code(self) -> int:
        """The verdict's, as `repro verify` and `repro aggregate` give it: 0 only when every run PASSes (a demo,
        smoke or rehearsal run never does), 1 otherwise, 2 when a folder is unreadable. Runs that are each a whole
        system's result (a published DeepSeek-R1 rack) sum nothing as VMs, yet PASS as `repro verify` judges them."""
        rows = self.rack.rows
        whole = bool(rows) and all(r.whole_system and r.verdict and r.verdict.status == "PASS" for r in rows)
        if whole and not self.rack.errors and self.rack.missing_count == 0:
            return 0
        return self.rack.exit_code

    @property
    def multi(self) -> bool:
        return len(self.rack.rows) > 1

    @property
    def total_tokens_per_s(self) -> float:
        return sum(_verdict(r).run.tokens_per_s or 0.0 for r in self.used)

    @property
    def tokens_per_vm(self) -> float:
        return self.total_tokens_per_s / len(self.used)

    @property
    def measured_tokens_per_joule(self) -> float | None:
        if not self.measured:
            return None
        return sum(m.tokens_per_s for m in self.measured) / sum(m.power.mean_watts_total for m in self.measured)

    def vm_rows(self) -> list[dict[str, Any]]:
        """One row per VM folder: the data behind the rack table in every view."""
        power = {m.vm: m for m in self.measured}
        rows = []
        for r in self.rack.rows:
            v = r.verdict
            m = power.get(r.name)
            rows.append(
                {
                    "vm": r.name,
                    "folder": str(r.folder),
                    "label": v.run.label if v else None,
                    "status": v.status if v else "MISSING",
                    "counted": r.counted,
                    "tokens_per_s": v.run.tokens_per_s if v else None,
                    "gpus": v.gpus if v else None,
                    "tokens_per_s_per_gpu": v.per_gpu if v else None,
                    "deviation_pct": v.deviation_pct if v else None,
                    "reasons": (v.reasons if v else [r.problem]),
                    "summary": str(v.run.summary_path) if v and v.run.summary_path else None,
                    "mean_watts": m.power.mean_watts_total if m else None,
                    "tokens_per_joule": m.tokens_per_joule if m else None,
                }
            )
        return rows

    def to_json(self) -> dict[str, Any]:
        pub = self.published
        band = pub.band() if pub is not None else None
        return {
            "report": "repro report",
            "label": self.label,
            "banner": self.banner,
            "reproduction": not self.label
            and all(r.verdict is not None and r.verdict.status == "PASS" for r in self.rack.rows),
            "recipe": self.recipe.name,
            "recipe_hash": self.recipe.hash(),
            "measured": {
                "vms": len(self.used),
                "gpus": sum(_verdict(r).gpus for r in self.used),
                "tokens_per_s_total": self.total_tokens_per_s,
                "tokens_per_s_per_vm": self.tokens_per_vm,
                "tokens_per_s_per_gpu": self.per_gpu,
                "from": [str(r.folder) for r in self.used],
            },
            "scenario": self.scenario,
            "published": None
            if pub is None
            else {
                "scenario": pub.scenario,
                "tokens_per_s_per_gpu": pub.tokens_per_s_per_gpu,
                "band_per_gpu": list(band) if band else None,
                "status": pub.status,
                "source": pub.source,
            },
            "comparisons": [
                {
                    "recipe": c.recipe,
                    "title": c.title,
                    "gpu": c.gpu,
                    "status": c.status,
                    "own": c.own,
                    "published_tokens_per_s_per_gpu": c.published_per_gpu,
                    "band_per_gpu": list(c.band),
                    "deviation_pct": round(c.deviation_pct, 2),
                    "in_band": c.in_band,
                    "source": c.source,
                }
                for c in self.comparisons
            ],
            "vms": self.vm_rows(),
            "rack": self.rack.to_json() if self.multi else None,
            "business": [
                {
                    "profile": b.profile,
                    "tokens_per_interaction": b.tokens_per_interaction,
                    "interactions_per_s_per_gpu": b.per_gpu,
                    "interactions_per_s_per_vm": b.per_vm,
                    "interactions_per_s_total": b.total,
                }
                for b in self.business
            ],
            "efficiency": {
                "measured": [
                    {
                        "vm": m.vm,
                        "tokens_per_joule": m.tokens_per_joule,
                        "tokens_per_s": m.tokens_per_s,
                        **m.power.to_json(),
                    }
                    for m in self.measured
                ],
                "measured_tokens_per_joule": self.measured_tokens_per_joule,
                "tdp_based": {
                    "label": TDP_LABEL,
                    "values": [{"recipe": n, "gpu": g, "tokens_per_watt": v} for n, g, v in self.tdp],
                },
            },
            "roofline": self.roof.to_json() if self.roof else None,
            "explain": self.explanation.to_json() if self.explanation else None,
            "published_standing": self.standing.to_json() if self.standing else None,
            "tune_search": self.tune,
            "cost": self.cost.to_json() if self.cost else None,
            "attestations": [
                {"file": str(p), "sha256": d, "signed_by": k, "verify": verify_command(p, k)}
                for p, d, k in self.attestations
            ],
            "notes": self.notes,
            "sources": [str(p) for p in self.sources],
            "outputs": self.outputs,
        }

    def chart_bars(self) -> tuple[list[str], list[float]]:
        names = [f"{r.name} (yours{', ' + lbl if (lbl := _verdict(r).run.label) else ''})" for r in self.used]
        values = [_verdict(r).per_gpu for r in self.used]
        names += [f"{c.recipe} (published)" for c in self.comparisons]
        values += [c.published_per_gpu for c in self.comparisons]
        # A log can claim any number (inf, -1e308): only plottable ones are drawn, the tables still show them.
        kept = [(n, float(v)) for n, v in zip(names, values, strict=True) if v is not None and 0 <= v <= MAX_PLOTTED]
        return [n for n, _ in kept], [v for _, v in kept]

    @property
    def unit(self) -> str:
        """The run's accelerator word: verify's rows and this report say the same "per CPU" for the demo."""
        return "CPU" if self.recipe.system.gpu_arch == "cpu" else "GPU"

    @property
    def headline(self) -> str:
        lab = f" [{self.label}]" if self.label else ""
        return (
            f"Measured: {fmt_num(self.per_gpu)} tokens/s per {self.unit} over {len(self.used)} VM(s), "
            f"{fmt_num(self.total_tokens_per_s)} tokens/s in total{lab}."
        )

    def own_in_band(self) -> bool | None:
        own = next((c for c in self.comparisons if c.own), None)
        return own.in_band if own else None

    def published_vms_outside_band(self) -> str | None:
        return published_outside_band(self.recipe)


def _comparisons(recipe: Recipe, per_gpu: float, scenario: str) -> list[Comparison]:
    """Every recipe's published figure of the same model and scenario (a Llama-2-70B run is never set beside a 405B
    figure, a Server run never beside an Offline one)."""
    out = []
    for r in all_recipes():
        pub = r.published_for(scenario)
        band = pub.band() if pub is not None else None
        if r.demo or pub is None or band is None or r.bench.mlperf_model != recipe.bench.mlperf_model:
            continue
        centre = float(pub.tokens_per_s_per_gpu)
        out.append(
            Comparison(
                r.name,
                r.title,
                r.system.gpu_name,
                pub.status,
                centre,
                band,
                (per_gpu / centre - 1) * 100,
                r.name == recipe.name,
                pub.source,
            )
        )
    return out


def _sources(rows: list[VMRow], recipe: Recipe) -> list[Path]:
    paths: list[Path] = []
    for r in rows:
        if r.verdict is None:
            continue
        run = _verdict(r).run
        paths += [p for p in (run.summary_path, run.detail_path, run.accuracy_path, run.system_path) if p]
        for extra in ("run.json", "power.csv"):
            if (run.folder / extra).is_file():
                paths.append(run.folder / extra)
    seen: dict[str, Path] = {}
    for p in paths:
        seen.setdefault(str(p), p)
    return list(seen.values())


def _attestations(dirs: list[Path], used: list[VMRow]) -> list[tuple[Path, str, str | None]]:
    from repro.results.attest import find_attestations

    return find_attestations(dirs, [_verdict(r).run.folder for r in used])


def build_report(
    dirs: list[Path], recipe: str | Recipe | None = None, gpus: int | None = None, price_per_hour: float | None = None
) -> Report:
    """Read the run folders (per VM, or one folder of VMs) and compute every table of the report."""
    try:
        rack = _aggregate_any([Path(d) for d in dirs], recipe, gpus)
    except NoRecipeFor as exc:
        raise InputError(f"{exc.message} Name the recipe with --recipe NAME.", "repro recipes list") from None
    chosen = rack.recipe
    if chosen is None:
        raise InputError(
            f"{dirs[0]}: no recipe covers these runs (verify judged them against their own published records); "
            "a report compares with a recipe.",
            "`repro report RESULT_DIR... --recipe NAME` (see `repro recipes list`)",
        )
    for r in rack.rows:
        if r.verdict is not None:
            refuse_another_model(r.verdict.run, chosen, "report")
    notes: list[str] = []
    used = rack.counted
    if not used:
        used = [r for r in rack.rows if r.verdict is not None and _verdict(r).run.tokens_per_s is not None]
        if not used:
            problems = "; ".join(filter(None, (r.problem for r in rack.rows)))
            raise InputError(
                f"no readable Offline performance run with tokens/s in {', '.join(map(str, dirs))}: {problems}",
                "`repro run offline`, then `repro report RESULT_DIR`",
            )
        whole = [r for r in used if r.whole_system and _verdict(r).run.valid and not _verdict(r).run.incomplete]
        if len(whole) == len(used):  # a published rack result (DeepSeek-R1 over 18 nodes): valid, just not one VM's
            notes.append(f"{len(used)} run(s) not summed as VMs: {used[0].excluded}; the figures below are its own")
        else:
            notes.append("no VALID complete run: the figures below come from INVALID or incomplete runs")
    for r in rack.rows:
        if r.problem:
            notes.append(f"{r.name}: skipped ({r.problem})")
    notes += [n for n in rack.notes if n.startswith("repeated runs")]  # the spread of `run --repeat N`
    gpus_total = sum(_verdict(r).gpus for r in used)
    total = sum(_verdict(r).run.tokens_per_s or 0.0 for r in used)
    per_gpu = total / gpus_total
    per_vm = total / len(used)

    labels = sorted({lbl for r in rack.rows if r.verdict and (lbl := r.verdict.run.label)})
    if chosen.demo and "demo" not in labels:
        labels.append("demo")

    measured: list[Measured] = []
    for r in used:
        run = _verdict(r).run
        power = read_power(run.folder)
        if power is None:
            continue
        if power.note:
            notes.append(power.note)
        if power.gpus != _verdict(r).gpus:
            notes.append(f"{run.folder / 'power.csv'}: {power.gpus} GPUs sampled but the run used {_verdict(r).gpus}")
        measured.append(
            Measured(
                r.name,
                power,
                float(run.tokens_per_s or 0.0),
                float(run.tokens_per_s or 0.0) / power.mean_watts_total,
            )
        )

    seen_tdp: set[tuple[str, float]] = set()
    tdp: list[tuple[str, str, float]] = []
    for rec in sorted(all_recipes(), key=lambda x: x.name != chosen.name):
        value = rec.system.tdp_tokens_per_watt
        if rec.bench.mlperf_model != chosen.bench.mlperf_model:  # tokens per joule of another model say nothing here
            continue
        if isinstance(value, (int, float)) and (rec.system.gpu_name, float(value)) not in seen_tdp:
            seen_tdp.add((rec.system.gpu_name, float(value)))
            tdp.append((rec.name, rec.system.gpu_name, float(value)))

    out_tokens = [
        (v.run.tokens_per_s or 0.0) / v.run.samples_per_s for v in (_verdict(r) for r in used) if v.run.samples_per_s
    ]
    explanation = _explanation(used, chosen, notes)
    roof = (
        explanation.roofline
        if explanation is not None and explanation.roofline is not None and len(used) == 1
        else roofline(chosen, per_gpu, statistics.fmean(out_tokens) if out_tokens else None, probe=_probe_of(used))
    )

    return Report(
        rack=rack,
        used=used,
        per_gpu=per_gpu,
        comparisons=_comparisons(chosen, per_gpu, rack.scenario),
        business=[Business(name, n, per_gpu / n, per_vm / n, total / n) for name, n in PROFILES],
        measured=measured,
        tdp=tdp,
        roof=roof,
        labels=labels,
        notes=notes,
        sources=_sources(rack.rows, chosen),
        standing=standing_for(chosen, per_gpu, rack.scenario),
        explanation=explanation,
        tune=_tune_source(used),
        cost=token_cost(
            [_verdict(r).run for r in used], chosen, price_per_hour, dataset_input_tokens(chosen, _verdict(used[0]).run)
        ),
        attestations=_attestations([Path(d) for d in dirs], used),
    )


def _explanation(used: list[VMRow], recipe: Recipe, notes: list[str]) -> Explanation | None:
    """One run against the recipe's published result; several VMs: the slowest against the fastest."""
    runs = sorted((_verdict(r).run for r in used), key=lambda run: run.tokens_per_s or 0.0)
    try:
        if len(runs) == 1:
            return explain(runs[0].folder, recipe=recipe)
        return explain(runs[0].folder, against=str(runs[-1].folder), recipe=recipe)
    except InputError as exc:
        notes.append(f"no explanation: {exc.message}")
        return None


def _aggregate_any(dirs: list[Path], recipe: str | Recipe | None, gpus: int | None) -> RackReport:
    """The folders' Offline runs; a Server or Interactive run folder (`repro run server` points here) is reported
    from its own scenario's run."""
    first: InputError | None = None
    for scenario in ("Offline", "Server", "Interactive"):
        try:
            return aggregate(dirs, recipe=recipe, gpus=gpus, scenario=scenario)
        except InputError as exc:
            first = first or exc
    assert first is not None
    raise first


def _tune_source(rows: list[VMRow]) -> dict[str, Any] | None:
    for r in rows:
        record = _verdict(r).run.run_info
        src = record.target_qps_source if record is not None else None
        if isinstance(src, dict) and src.get("from") == "repro tune" and isinstance(src.get("search"), list):
            return src
    return None
