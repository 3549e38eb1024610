"""The verdict: is a run, per GPU, inside the published band, and if not, why not."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from repro.core.errors import InputError
from repro.results.logs import LoadGenRun, find_runs
from repro.core.recipes import Recipe, by_system_name, get_recipe, registry_recipe
from repro.ui.views import fmt_num

Status = Literal["PASS", "FAIL", "NOT A REPRODUCTION", "NO REFERENCE"]
MLPERF_MIN_DURATION_MS = 600_000
EXIT_CODES = {"PASS": 0, "FAIL": 1, "NOT A REPRODUCTION": 1, "NO REFERENCE": 1}
_STYLE = {"PASS": "bold green", "FAIL": "bold red", "NOT A REPRODUCTION": "bold yellow", "NO REFERENCE": "bold yellow"}


@dataclass
class Check:
    name: str
    ok: bool | None
    detail: str


@dataclass
class Verdict:
    run: LoadGenRun
    recipe: Recipe
    gpus: int
    gpus_source: str
    per_gpu: float | None
    band: tuple[float, float] | None
    deviation_pct: float | None
    status: Status
    reasons: list[str]
    checks: list[Check] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def to_json(self) -> dict[str, Any]:
        pub = self.recipe.published
        return {
            "status": self.status,
            "reproduction": self.status == "PASS",
            "label": self.run.label,
            "reasons": self.reasons,
            "folder": str(self.run.folder),
            "recipe": self.recipe.name,
            "recipe_hash": self.recipe.hash(),
            "scenario": self.run.scenario,
            "validity": self.run.validity,
            "gpus": self.gpus,
            "gpus_source": self.gpus_source,
            "tokens_per_s": self.run.tokens_per_s,
            "tokens_per_s_per_gpu": None if self.per_gpu is None else round(self.per_gpu, 1),
            "published": {"status": pub.status, "tokens_per_s_per_gpu": pub.tokens_per_s_per_gpu,
                          "tokens_per_s_per_vm": pub.tokens_per_s_per_vm, "band_pct": pub.band_pct,
                          "mlperf_id": pub.mlperf_id, "round": pub.mlperf_round, "source": pub.source},
            "band_per_gpu": None if self.band is None else [round(self.band[0], 1), round(self.band[1], 1)],
            "deviation_pct": None if self.deviation_pct is None else round(self.deviation_pct, 2),
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
            "accuracy": self.run.accuracy,
            "loadgen_version": self.run.loadgen_version,
        }

    def __rich__(self) -> Group:
        pub = self.recipe.published
        table = Table(title=f"repro verify: {self.recipe.title}", title_justify="left", show_lines=False)
        table.add_column("check", no_wrap=True)
        table.add_column("result", no_wrap=True)
        table.add_column("detail")
        table.add_row("tokens/s (VM)", fmt_num(self.run.tokens_per_s), f"{self.gpus} GPUs ({self.gpus_source})")
        table.add_row("tokens/s per GPU", fmt_num(self.per_gpu),
                      f"published {fmt_num(pub.tokens_per_s_per_gpu)} ({pub.status}, MLPerf {pub.mlperf_round}, ID {pub.mlperf_id})")
        if self.band:
            table.add_row(f"band ±{pub.band_pct:g}%", f"{fmt_num(self.band[0])}–{fmt_num(self.band[1])}",
                          "deviation " + (f"{self.deviation_pct:+.1f}%" if self.deviation_pct is not None else "unknown"))
        for c in self.checks:
            mark = "[green]ok[/]" if c.ok else "[red]no[/]" if c.ok is False else "[dim]n/a[/]"
            table.add_row(c.name, mark, escape(c.detail))
        head = Text.assemble(("Verdict: ", "bold"), (self.status, _STYLE[self.status]))
        why = [Text(f"  - {r}") for r in self.reasons]
        return Group(table, head, *why)


def _within(per_gpu: float, band: tuple[float, float], centre: float) -> tuple[bool, str]:
    low, high = band
    dev = (per_gpu / centre - 1) * 100
    if per_gpu < low:
        return False, f"{abs(dev):.1f}% below the published {centre:,.1f} per GPU ({(1 - per_gpu / low) * 100:.1f}% under the band floor {low:,.1f})"
    if per_gpu > high:
        return False, f"{dev:.1f}% above the published {centre:,.1f} per GPU ({(per_gpu / high - 1) * 100:.1f}% over the band ceiling {high:,.1f}); check the GPU count"
    return True, f"{dev:+.1f}% vs the published {centre:,.1f} per GPU, inside ±{(high / centre - 1) * 100:.0f}%"


def resolve_recipe(run: LoadGenRun, recipe: str | Recipe | None) -> Recipe:
    if isinstance(recipe, Recipe):
        return recipe
    if recipe:
        return get_recipe(recipe)
    if run.run_info and run.run_info.get("recipe"):
        return registry_recipe(str(run.run_info["recipe"]))  # a name from a result file, never a path (#16)
    names = [str(run.system.get("system_name", ""))] if run.system else []
    names += [run.system_path.stem] if run.system_path else []
    for name in filter(None, names):
        if found := by_system_name(name):
            return found
    raise InputError(f"{run.folder}: cannot tell which published result to compare with (no run.json, no known system JSON).",
                     f"`repro verify {run.folder} --recipe NAME` (see `repro recipes list`)")


def resolve_gpus(run: LoadGenRun, recipe: Recipe, flag: int | None) -> tuple[int, str]:
    """--gpus, else the system JSON, else run.json, else the recipe; a disagreement is an error, not a guess."""
    sources: list[tuple[int, str]] = []
    if run.system and isinstance(run.system.get("accelerators_per_node"), int):
        sources.append((run.system["accelerators_per_node"], f"system JSON {run.system_path.name if run.system_path else ''}".strip()))
    gpus_info = (run.run_info or {}).get("gpus")
    if isinstance(gpus_info, dict) and isinstance(gpus_info.get("count"), int) and gpus_info["count"] > 0:
        sources.append((gpus_info["count"], "run.json"))
    if flag is not None:
        for count, where in sources:
            if count != flag:
                raise InputError(f"{run.folder}: conflicting GPU counts: --gpus {flag} but {where} says {count}.",
                                 f"drop --gpus or fix it: `repro verify {run.folder} --gpus {count}`")
        return flag, "--gpus"
    if sources:
        count, where = sources[0]
        for other, other_where in sources[1:]:
            if other != count:
                raise InputError(f"{run.folder}: conflicting GPU counts: {where} says {count}, {other_where} says {other}.",
                                 f"`repro verify {run.folder} --gpus N` with the count the run used")
        if count != recipe.system.gpus_per_vm and not recipe.demo:
            raise InputError(f"{run.folder}: {where} says {count} GPUs but recipe {recipe.name} has {recipe.system.gpus_per_vm}.",
                             f"`repro verify {run.folder} --recipe NAME` for the right system, or `--gpus {count}`")
        return count, where
    return recipe.system.gpus_per_vm, f"recipe {recipe.name}"


def _accuracy_checks(run: LoadGenRun, recipe: Recipe) -> list[Check]:
    if not run.accuracy:
        return [Check("accuracy", None, "no accuracy result next to this run")]
    acc, target = run.accuracy, recipe.accuracy
    checks = []
    for key, floor in (("rouge1", target.rouge1), ("rouge2", target.rouge2), ("rougeL", target.rougeL),
                       ("tokens_per_sample", target.tokens_per_sample)):
        if key not in acc:
            checks.append(Check(f"accuracy {key}", False, f"missing from {run.accuracy_path}"))
            continue
        ok = acc[key] >= floor
        checks.append(Check(f"accuracy {key}", ok, f"{acc[key]:.4f} {'≥' if ok else '<'} {floor:.4f} ({target.target}% target)"))
    return checks


def evaluate(run: LoadGenRun, recipe: Recipe, gpus: int, gpus_source: str) -> Verdict:
    """Pure: the verdict for one parsed run against one recipe."""
    pub = recipe.published
    reasons: list[str] = []
    checks: list[Check] = []
    per_gpu = run.tokens_per_s / gpus if run.tokens_per_s is not None else None

    if run.scenario != pub.scenario:
        raise InputError(f"{run.folder}: this is a {run.scenario} run; the published {recipe.name} result is {pub.scenario}.",
                         f"`repro run {pub.scenario.lower()}`, or point at the {pub.scenario} folder")
    if run.mode != "PerformanceOnly":
        raise InputError(f"{run.folder}: this is an {run.mode} run; verify needs a PerformanceOnly run.",
                         "point `repro verify` at the performance folder")

    valid_detail = "VALID" if run.valid else "INVALID: " + "; ".join(run.invalid_reasons)
    checks.append(Check("LoadGen validity", run.valid, valid_detail))
    if not run.valid:
        reasons.append(valid_detail)

    min_ms = run.settings.get("min_duration_ms")
    if isinstance(min_ms, (int, float)):
        long_enough = min_ms >= MLPERF_MIN_DURATION_MS
        met = run.min_duration_met is not False
        detail = f"setting {min_ms / 1000:,.0f} s (MLPerf needs ≥ {MLPERF_MIN_DURATION_MS / 1000:,.0f} s; recipe {recipe.loadgen.min_duration_ms / 1000:,.0f} s)"
        if run.duration_s is not None:
            detail += f", ran {run.duration_s:,.0f} s"
        checks.append(Check("min duration", long_enough and met, detail))
        if not long_enough:
            reasons.append(f"min duration setting {min_ms / 1000:,.0f} s is below MLPerf's {MLPERF_MIN_DURATION_MS / 1000:,.0f} s: a smoke run, not a reproduction")
    else:
        checks.append(Check("min duration", run.min_duration_met, "setting not in the logs"))

    if run.tokens_per_s is None:
        raise InputError(f"{run.summary_path or run.folder}: no tokens per second in the logs (token latencies were off).",
                         "re-run with use_token_latencies (`repro run offline` sets it)")

    band = pub.band()
    deviation = None
    if band and per_gpu is not None:
        centre = float(pub.tokens_per_s_per_gpu)
        deviation = (per_gpu / centre - 1) * 100
        inside, detail = _within(per_gpu, band, centre)
        checks.append(Check("inside band", inside, detail))
        if not inside:
            reasons.append(detail)
        if pub.status == "analog":
            checks.append(Check("reference", None, f"analog result: {pub.note}"))

    checks += _accuracy_checks(run, recipe)
    reasons += [f"{c.name}: {c.detail}" for c in checks if c.name.startswith("accuracy ") and c.ok is False]

    if run.incomplete:
        reasons.insert(0, "the run was interrupted or failed; its logs are partial (run.json)")
    if run.label or recipe.demo:
        label = run.label or "demo"
        reasons.insert(0, f"{label} run: it rehearses the flow and is never a reproduction")
        status: Status = "NOT A REPRODUCTION"
    elif band is None:
        reasons.append(f"no published result for {recipe.title} ({pub.note or pub.source})")
        status = "NO REFERENCE"
    else:
        status = "FAIL" if reasons else "PASS"
    return Verdict(run, recipe, gpus, gpus_source, per_gpu, band, deviation, status, reasons, checks)


def pick_run(runs: list[LoadGenRun], root: Path, scenario: str) -> LoadGenRun:
    perf = [r for r in runs if r.mode == "PerformanceOnly"]
    if not perf:
        raise InputError(f"{root}: only {runs[0].mode} logs here; verify needs a PerformanceOnly run.",
                         "`repro run offline` (performance mode), then `repro verify`")
    matching = [r for r in perf if r.scenario == scenario]
    if not matching:
        found = ", ".join(sorted({r.scenario for r in perf}))
        raise InputError(f"{root}: holds {found} runs, not {scenario}.", f"`repro run {scenario.lower()}`, or `--scenario {found}`")
    if len(matching) > 1:
        listing = ", ".join(str(r.folder.relative_to(root)) for r in matching[:4])
        raise InputError(f"{root}: holds {len(matching)} {scenario} runs ({listing}...); verify takes one.",
                         f"`repro verify {matching[0].folder}`, or `repro aggregate {root}` for several VMs")
    return matching[0]


def verify_dir(path: Path, recipe: str | Recipe | None = None, gpus: int | None = None,
               scenario: str = "Offline") -> Verdict:
    path = Path(path)
    run = pick_run(find_runs(path), path, scenario)
    chosen = resolve_recipe(run, recipe)
    count, source = resolve_gpus(run, chosen, gpus)
    return evaluate(run, chosen, count, source)
