"""The rack table: independent per-VM runs summed, as the published 1.1M tokens/s GB300 result was.

Only valid, complete, in-scenario VMs are summed; every other VM is listed with its status and reason. A run is
counted once however it is named (its content, not its path: results/combine.py), results of another kind than
the rack's (benchmark, round, division, submitter, system: the rule `verify A B` refuses by) are excluded naming
what differs, runs of different recipes are never summed together unless one --recipe judges them all, and a VM
folder that cannot be read is an error, not a missing row.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.accelerators import chips
from repro.core.errors import InputError, ReproError
from repro.core.fmt import fmt_num, fmt_rate
from repro.core.published import Accelerator
from repro.core.recipes import Recipe, get_recipe
from repro.core.textsafe import md_cell
from repro.results.combine import Kind, differences, unique_runs
from repro.results.identity import ResultIdentity, identify
from repro.results.index_match import IndexMatch, count_value
from repro.results.logs import LoadGenRun, parse_run, require_paths, run_folders
from repro.results.verify import NoRecipeFor, Verdict, evaluate, resolve_recipe

ERROR_EXIT = 2


@dataclass
class VMRow:
    name: str
    folder: Path
    verdict: Verdict | None = None
    problem: str | None = None
    excluded: str | None = None
    """Why a readable run is not summed: another system shape, benchmark or round, or not a reproduction."""
    whole_system: bool = False
    """Excluded as a multi-node system's own result (a published rack): its figure is already the system's."""

    @property
    def counted(self) -> bool:
        """Summed into the rack total: a readable, valid, complete run of the rack's own kind (band verdict aside)."""
        v = self.verdict
        return (
            v is not None
            and v.run.valid
            and not v.run.incomplete
            and v.run.tokens_per_s is not None
            and self.excluded is None
        )

    @property
    def status(self) -> str:
        """ERROR (unreadable), INVALID (LoadGen said so), else the verdict."""
        if self.verdict is None:
            return "ERROR"
        if not self.verdict.run.valid:
            return "INVALID"
        return self.verdict.status

    def to_json(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "vm": self.name,
            "folder": str(self.folder),
            "counted": self.counted,
            "problem": self.problem,
            "excluded": self.excluded,
            "status": self.status,
            "verdict": v.status if v else None,
            "label": v.run.label if v else None,
            "tokens_per_s": v.run.tokens_per_s if v else None,
            "tokens_per_s_per_gpu": round(v.per_gpu, 1) if v and v.per_gpu is not None else None,
            "deviation_pct": round(v.deviation_pct, 2) if v and v.deviation_pct is not None else None,
            "audit_2pct": v.audit.to_json() if v and v.audit else None,
            "gpus": v.gpus if v else None,
            "reasons": v.reasons if v else [self.problem],
        }


@dataclass
class RackReport:
    recipe: Recipe | None
    """None when no recipe fits: each VM is then judged against its own published record, as verify does."""
    rows: list[VMRow]
    expect: int | None = None
    stats: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    scenario: str = "Offline"

    @property
    def counted(self) -> list[VMRow]:
        return [r for r in self.rows if r.counted]

    @property
    def unit(self) -> str:
        """VM where a recipe for an Azure VM size judges the runs; node where the logs describe nodes of a system."""
        return "VM" if self.recipe is not None and self.recipe.system.vm_size else "node"

    @property
    def missing_count(self) -> int:
        return max(0, (self.expect or 0) - len(self.rows))

    @property
    def errors(self) -> list[VMRow]:
        return [r for r in self.rows if r.verdict is None]

    @property
    def exit_code(self) -> int:
        if self.errors:
            return ERROR_EXIT
        ok = all(r.verdict is not None and r.verdict.status == "PASS" for r in self.rows)
        # No evidence, no PASS: a rack where every folder is excluded (a whole multi-node system) summed nothing.
        return 0 if ok and self.missing_count == 0 and self.counted else 1

    @property
    def verdict_line(self) -> str:
        """The rack's verdict in one line, what the exit code says: every view prints it, the JSON carries it."""
        u = self.unit
        if self.exit_code == 0:
            return f"PASS: all {len(self.counted)} {u}(s) summed PASS"
        why = [f"{len(self.errors)} {u}(s) unreadable"] if self.errors else []
        for status in ("FAIL", "NOT A REPRODUCTION", "NO REFERENCE"):
            names = [r.name for r in self.rows if r.verdict is not None and r.verdict.status == status]
            if names:
                why.append(f"{status}: {', '.join(names)}")
        if self.missing_count:
            why.append(f"{self.missing_count} of {self.expect} expected {u}s missing")
        if not self.counted:
            why.append("nothing summed")
        return f"{'ERROR' if self.errors else 'not all PASS'}: {'; '.join(why)}"

    @property
    def title(self) -> str:
        return self.recipe.title if self.recipe else "each run against its own published record"

    def band(self) -> tuple[float, float] | None:
        pub = self.recipe.published_for(self.scenario) if self.recipe else None
        return pub.band() if pub else None

    def compute(self) -> RackReport:
        values = [float(r.verdict.run.tokens_per_s) for r in self.counted]  # type: ignore[union-attr,arg-type]
        gpus = sum(r.verdict.gpus for r in self.counted if r.verdict is not None)
        if values:
            mean = statistics.fmean(values)
            self.stats = {
                "vms": len(values),
                "gpus": gpus,
                "total": sum(values),
                "max": max(values),
                "min": min(values),
                "mean": mean,
                "median": statistics.median(values),
            }
            if mean > 0:
                self.stats["spread_pct"] = (max(values) - min(values)) / mean * 100
            if gpus > 0:
                self.stats["per_gpu"] = sum(values) / gpus
        return self

    def to_json(self) -> dict[str, Any]:
        rack = self.recipe.published.rack if self.recipe and self.scenario == "Offline" else None
        band = self.band()
        return {
            "recipe": self.recipe.name if self.recipe else None,
            "recipe_hash": self.recipe.hash() if self.recipe else None,
            "scenario": self.scenario,
            "stats": {k: round(v, 2) for k, v in self.stats.items()},
            "expected_vms": self.expect,
            "missing_vms": self.missing_count,
            "unit": self.unit,
            "excluded": [r.name for r in self.rows if not r.counted],
            "excluded_why": {r.name: r.excluded for r in self.rows if r.excluded},
            "errors": [{"vm": r.name, "problem": r.problem} for r in self.errors],
            "published_rack": rack.model_dump() if rack else None,
            "published_band_per_gpu": list(band) if band else None,
            "notes": self.notes,
            "vms": [r.to_json() for r in self.rows],
            "all_pass": self.exit_code == 0,
            "verdict": self.verdict_line,
        }

    def summary_rows(self) -> list[tuple[str, str, str]]:
        """(what, measured, published) for the summary table, in every view."""
        s = self.stats
        rack = self.recipe.published.rack if self.recipe and self.scenario == "Offline" else None
        pub_fig = self.recipe.published_for(self.scenario) if self.recipe else None

        def pub(attr: str) -> str:
            return fmt_num(getattr(rack, attr)) if rack else "-"

        u = self.unit
        if not s:
            return [(f"{u}s summed", "0", str(rack.vms) if rack else "-")]
        spread = f"{s['spread_pct']:.1f}%" if "spread_pct" in s else "-"
        pub_spread = (
            f"{(rack.max_tokens_per_s - rack.min_tokens_per_s) / rack.mean_tokens_per_s * 100:.1f}%" if rack else "-"
        )
        vms = f"{s['vms']:.0f} of {len(self.rows) + self.missing_count}"
        return [
            (f"{u}s summed", vms, f"{rack.vms}" if rack else "-"),
            ("total tokens/s", fmt_num(s["total"]), pub("total_tokens_per_s")),
            (f"max per {u}", fmt_num(s["max"]), pub("max_tokens_per_s")),
            (f"min per {u}", fmt_num(s["min"]), pub("min_tokens_per_s")),
            (f"average per {u}", fmt_num(s["mean"]), pub("mean_tokens_per_s")),
            (f"median per {u}", fmt_num(s["median"]), pub("median_tokens_per_s")),
            ("spread (max-min)/mean", spread, pub_spread),
            (
                "tokens/s per GPU",
                fmt_rate(s.get("per_gpu")),
                fmt_rate(pub_fig.tokens_per_s_per_gpu) if pub_fig else "-",
            ),
        ]

    def to_markdown(self) -> str:
        lines = [f"# Rack result: {md_cell(self.title)}", "", "| | measured | published |", "|---|---:|---:|"]
        lines += [f"| {a} | {b} | {c} |" for a, b, c in self.summary_rows()]
        lines += [
            "",
            f"| {self.unit} | tokens/s | per GPU | deviation | verdict | why |",
            "|---|---:|---:|---:|---|---|",
        ]
        for r in self.rows:
            v = r.verdict
            if v is None:
                lines.append(f"| {md_cell(r.name)} | - | - | - | ERROR | {md_cell(r.problem)} |")
            else:
                dev = f"{v.deviation_pct:+.1f}%" if v.deviation_pct is not None else "-"
                lines.append(
                    f"| {md_cell(r.name)} | {fmt_num(v.run.tokens_per_s)} | {fmt_rate(v.per_gpu)} | {dev} | "
                    f"{r.status} | {md_cell('; '.join(v.reasons))}{excluded_text(r)} |"
                )
        if self.missing_count:
            lines += ["", f"{self.missing_count} of {self.expect} expected {self.unit}s have no result folder."]
        lines += ["", f"**Rack verdict:** {md_cell(self.verdict_line)}"]
        if self.notes:
            lines += [""] + [f"- {md_cell(n)}" for n in self.notes]
        return "\n".join(lines) + "\n"


def excluded_text(row: VMRow) -> str:
    if row.counted:
        return ""
    return f" (excluded from the total: {row.excluded})" if row.excluded else " (excluded from the total)"


def _exclude(rows: list[VMRow], recipe: Recipe | None, unit: str) -> list[str]:
    """Mark every readable row that is not one more VM of the same result, with the reason: a multi-node system
    (its figure is a whole system's), a result of another kind than the rack's (benchmark, round, division,
    submitter, system: results/combine.py, the rule `verify A B` refuses by), or a row that is not a reproduction (a
    rack of rehearsal runs alone is summed, labelled). Returns notes; InputError when the rows are of different
    kinds and none is the most (which to sum would be a guess)."""
    judged = [r for r in rows if r.verdict is not None and r.verdict.identity is not None]
    labels = {r.verdict.run.label for r in judged}  # type: ignore[union-attr]
    all_labelled = len(labels) == 1 and None not in labels
    for r in judged:
        v = r.verdict
        assert v is not None and v.identity is not None
        nodes = count_value((v.run.system or {}).get("number_of_nodes", 1)) or 1
        if nodes > 1 and not v.run.system_node_of:
            r.whole_system = True
            r.excluded = (
                f"a system of {nodes} nodes and {v.gpus} accelerators ({v.identity.accelerators_where()}), not one "
                f"{unit}: its figure is already a whole system's"
            )
        elif recipe is not None and v.identity.benchmark and v.identity.benchmark != recipe.benchmark:
            r.excluded = (
                f"another benchmark: {v.identity.benchmark} ({v.identity.benchmark_source}), the rack's is "
                f"{recipe.benchmark}"
            )
    _exclude_other_kinds([r for r in judged if r.excluded is None])
    for r in judged:
        v = r.verdict
        assert v is not None
        # a VM that lacks only its accuracy run is summed (its throughput is measured) and never a PASS
        judged_only = v.status in ("PASS", "FAIL") or (all_labelled and v.run.label) or v.accuracy_command is not None
        if r.excluded is None and not judged_only:
            r.excluded = f"{v.status}: not a reproduction, never summed ({v.reasons[0] if v.reasons else v.status})"
    if all_labelled and judged:
        return [f"every run is a {next(iter(labels))} run: the total is labelled too, never a reproduction"]
    return []


def _exclude_other_kinds(rows: list[VMRow]) -> None:
    """The rack's kind is the one most rows are (in the order given on a tie of compatible rows); every row of
    another kind is excluded naming what differs. Rows of different kinds with none the most are refused."""
    if len(rows) < 2:
        return
    kinds = {id(r): Kind.of(r.verdict.identity) for r in rows}  # type: ignore[union-attr,arg-type]
    support = [sum(1 for o in rows if not differences(kinds[id(r)], kinds[id(o)])) for r in rows]
    best = max(support)
    leaders = [r for r, n in zip(rows, support, strict=True) if n == best]
    anchor = leaders[0]
    rivals = [r for r in leaders[1:] if differences(kinds[id(anchor)], kinds[id(r)])]
    if rivals:
        differ = {r.name: ", ".join(map(str, differences(kinds[id(anchor)], kinds[id(r)]))) for r in rivals}
        what = "; ".join(f"{name}: {why}" for name, why in differ.items())
        raise InputError(
            f"these folders hold results of different kinds, none of them the most, never summed: {anchor.name} "
            f"against {what}.",
            "aggregate the folders of one result (one benchmark, round, division and system): `repro aggregate DIR...`",
        )
    for r in rows:
        if r is not anchor and (why := differences(kinds[id(anchor)], kinds[id(r)])):
            r.excluded = "; ".join(f"another {d.what}: {d.theirs}, the rest {d.ours}" for d in why)


def _repeats(rows: list[VMRow]) -> list[str]:
    """Runs of one `repro run ... --repeat N` (the same command in run.json) are one machine's repeated runs, never
    VMs of a rack: the first is summed, the others excluded, and their spread is a note (results/series.py)."""
    from repro.results.series import combine

    groups: dict[tuple[str, ...], list[VMRow]] = {}
    for r in rows:
        info = r.verdict.run.run_info if r.verdict is not None else None
        if info is not None and "--repeat" in info.command and r.excluded is None:
            groups.setdefault(tuple(info.command), []).append(r)
    notes = []
    for command, group in groups.items():
        if len(group) < 2:
            continue
        for r in group[1:]:
            r.excluded = f"another run of `{' '.join(command)}` ({group[0].name}): repeated runs are not summed"
        series = combine([r.verdict for r in group if r.verdict is not None], [r.name for r in group])
        notes.append(f"repeated runs of one configuration: {series.spread_text}")
    return notes


def _natural(name: str) -> list[Any]:
    """VM 2 before VM 10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _vm_names(folders: list[Path]) -> list[str]:
    """Each VM named by the path parts that differ between the VMs (not the leaf, which is often 'Offline')."""
    parts = [f.absolute().parts for f in folders]
    if len(parts) < 2:
        return [f.name for f in folders]
    head = 0
    while all(len(p) > head + 1 for p in parts) and len({p[head] for p in parts}) == 1:
        head += 1
    tail = 0
    while all(len(p) > head + tail + 1 for p in parts) and len({p[-1 - tail] for p in parts}) == 1:
        tail += 1
    return ["/".join(p[head : len(p) - tail]) or p[-1] for p in parts]


def _names_per_argument(
    dirs: list[Path], runs: list[tuple[Path, LoadGenRun]], errors: list[tuple[str, Path, str]]
) -> dict[int, str]:
    """A VM is named by its argument when the argument holds one run, else by the path parts that differ inside it."""
    groups: dict[Path, list[Path]] = {}
    for arg, run in runs:
        groups.setdefault(arg, []).append(run.folder)
    for name, folder, _ in errors:
        if not name:
            arg = next((a for a in dirs if folder.is_relative_to(a)), folder)
            groups.setdefault(arg, []).append(folder)
    out = {id(folder): name for name, folder, _ in errors if name}
    single = [arg for arg, folders in groups.items() if len(folders) == 1]
    # one run per argument: its argument's name, unless two share it (each VM's copy of .../deepseek-r1/Offline),
    # then the path parts that differ between those arguments
    own = {a: a.name for a in single}
    if len(set(own.values())) < len(own):
        own = dict(zip(single, _vm_names(single), strict=True))
    for arg, folders in groups.items():
        names = [own[arg]] if len(folders) == 1 else _vm_names(folders)
        out.update({id(f): n for f, n in zip(folders, names, strict=True)})
    return out


def _official(runs: list[LoadGenRun], scenario: str) -> list[LoadGenRun]:
    """Performance runs of the scenario; compliance folders (TESTnn) and `ranging` beside a run_N are not results."""
    perf = [
        r
        for r in runs
        if r.mode == "PerformanceOnly"
        and r.benchmark_scenario == scenario
        and not any(p.upper().startswith("TEST") and p[4:].isdigit() for p in r.folder.parts)
    ]
    parents_with_runs = {r.folder.parent for r in perf if r.folder.name.lower() != "ranging"}
    return [r for r in perf if not (r.folder.name.lower() == "ranging" and r.folder.parent in parents_with_runs)]


def _system_key(run: LoadGenRun) -> str:
    """What identifies the system a run came from, for refusing to sum different systems."""
    if run.system_path:
        return f"system JSON {run.system_node_of or run.system_path.stem}"
    names = run.run_info.gpu_names if run.run_info is not None else []
    if names:
        return "GPUs " + " + ".join(sorted(set(names)))
    return "unknown system"


def _collect(
    dirs: list[Path], scenario: str
) -> tuple[list[tuple[Path, LoadGenRun]], list[tuple[str, Path, str]], list[str]]:
    """(argument, run) per VM; unreadable arguments as (name, folder, problem), unreadable run folders with name "";
    notes on what was counted once."""
    runs: list[tuple[Path, LoadGenRun]] = []
    errors: list[tuple[str, Path, str]] = []
    for arg in dirs:
        arg = Path(arg)
        try:
            folders = run_folders(arg)
        except ReproError as exc:
            errors.append((arg.name, arg, exc.message))
            continue
        parsed: list[LoadGenRun] = []
        for folder in folders:
            try:
                parsed.append(parse_run(folder))
            except ReproError as exc:
                errors.append(("", folder, exc.message))
        found = _official(parsed, scenario)
        if not found and not any(folder in (e[1] for e in errors) for folder in folders):
            errors.append((arg.name, arg, f"{arg}: no {scenario} performance run in this folder or below"))
            continue
        runs += [(arg, run) for run in found]
    # one run counts once however it is named: a copy, a hard link, a symlink, a/../a (results/combine.py)
    runs, _, notes = unique_runs(runs, lambda item: item[1], lambda item: str(item[1].folder))
    return runs, errors, notes


def _refuse_mixed(rows: list[VMRow]) -> None:
    """Tokens/s of different accelerators never add up to one system's figure, with or without --recipe."""
    named = [(r.name, r.verdict.hardware.run_name) for r in rows if r.verdict and r.verdict.hardware]
    kinds = {Accelerator.parse(n).model: n for _, n in named if n}
    mixed = [n for _, n in named if n and len(chips(n)) > 1]
    if len(kinds) > 1 or (mixed and len(named) > 1):
        what = "; ".join(f"{name}: {acc or 'unknown'}" for name, acc in named)
        raise InputError(
            f"these folders hold runs of different accelerators, never summed: {what}.",
            "aggregate the folders of one accelerator: `repro aggregate DIR...`",
        )


def _published_vm_notes(recipe: Recipe, rows: list[VMRow]) -> list[str]:
    """Compare VMs named like the recipe's published per-VM logs with those logs, and the rack claim with its logs."""
    rack = recipe.published.rack
    if rack is None:
        return []
    notes = list(rack.claim_vs_logs())
    named = [
        (r.name, r.verdict.run.tokens_per_s, rack.vm_tokens_per_s[r.name.split("/")[-1]])
        for r in rows
        if r.verdict is not None and r.name.split("/")[-1] in rack.vm_tokens_per_s
    ]
    if not named:
        return notes
    differ = [
        f"{name} logs {fmt_num(logged)} where the published log says {fmt_num(v)}"
        for name, logged, v in named
        if abs(float(logged or 0) - v) > 0.05
    ]
    if differ:
        notes.append("not the published logs: " + "; ".join(differ))
    elif len(named) < rack.vms:
        notes.append(
            f"compared {len(named)} of the {rack.vms} published VM logs, each equal to its published "
            f"value; the rack statistics (total, mean, median) need all {rack.vms}"
        )
    else:
        notes.append(f"all {rack.vms} published VM logs are here and equal to their published values")
    return notes


def aggregate(
    dirs: list[Path],
    recipe: str | Recipe | None = None,
    gpus: int | None = None,
    expect: int | None = None,
    scenario: str = "Offline",
) -> RackReport:
    if not dirs:
        raise InputError("no result folders given.", "`repro aggregate DIR...` with one folder per VM")
    chosen: Recipe | None = get_recipe(recipe) if isinstance(recipe, str) else recipe
    paths = [Path(d) for d in dirs]
    require_paths(paths)
    runs, errors, notes = _collect(paths, scenario)
    named = _names_per_argument(paths, runs, errors)
    rows: list[VMRow] = [VMRow(named[id(folder)], folder, problem=problem) for _, folder, problem in errors]
    resolved: list[tuple[VMRow, LoadGenRun, Recipe | None, IndexMatch | None]] = []
    identities: dict[int, ResultIdentity] = {}
    first_error: ReproError | None = None
    for _, run in runs:
        row = VMRow(named[id(run.folder)], run.folder)
        rows.append(row)
        try:
            ident = identities[id(run)] = identify(run, gpus)
        except ReproError as exc:
            row.problem = exc.message
            first_error = first_error or exc
            continue
        match = ident.record
        try:
            resolved.append((row, run, chosen or resolve_recipe(run, None, ident.benchmark), match))
        except NoRecipeFor as exc:
            if match is None:
                row.problem = exc.message
                first_error = first_error or exc
            else:
                resolved.append((row, run, None, match))
        except ReproError as exc:
            row.problem = exc.message
            first_error = first_error or exc
    if not resolved:
        if first_error is not None:
            raise first_error
        raise InputError(
            f"none of {len(rows)} folders holds a readable run: {rows[0].problem}",
            "check the folders, then `repro aggregate DIR...`",
        )
    if chosen is None:
        references = {rec.name if rec else "its own published record" for _, _, rec, _ in resolved}
        if len(references) > 1:
            what = "; ".join(
                f"{row.name}: {rec.name if rec else 'published record ' + m.row.ref if m else '?'}"
                for row, _, rec, m in resolved
            )
            raise InputError(
                f"these folders are judged against different references, never summed: {what}.",
                "aggregate each system separately, or judge all against one: `repro aggregate DIR... --recipe NAME`",
            )
        chosen = resolved[0][2]
    for row, run, _, _ in resolved:
        try:
            row.verdict = evaluate(run, identities[id(run)], chosen)
        except ReproError as exc:
            row.problem = exc.message
    _refuse_mixed(rows)
    notes += _exclude(rows, chosen, "VM" if chosen is not None and chosen.system.vm_size else "node")
    notes += _repeats(rows)
    if rows and not any(r.counted for r in rows):
        notes.append(
            "nothing summed: every folder is excluded (why: in the table); "
            "`repro verify DIR` judges a whole system's result on its own"
        )
    rows.sort(key=lambda r: _natural(r.name))
    nodes_of = {run.system_node_of for _, run, _, _ in resolved if run.system_node_of and run.system}
    if len(nodes_of) == 1 and (system := resolved[0][1].system):
        total_nodes = system.get("number_of_nodes")
        notes.append(
            f"the system JSON {next(iter(nodes_of))} describes {total_nodes} nodes; {len(resolved)} VM folder(s) given"
        )
    if scenario == "Offline" and chosen is not None:
        notes += _published_vm_notes(chosen, rows)
        if (outside := published_outside_band(chosen)) is not None and len(rows) > 1:
            notes.append(outside)
    return RackReport(chosen, rows, expect, notes=notes, scenario=scenario).compute()


def published_outside_band(recipe: Recipe) -> str | None:
    """The band is the brief's rule (±5% of the published per-GPU figure); Azure's own slowest or fastest VM
    can fall outside it, and the reader should see by how much rather than discover it."""
    rack, band = recipe.published.rack, recipe.published.band()
    gpus = recipe.system.gpus_per_vm
    if rack is None or band is None or not gpus:
        return None
    lo, hi = band[0] * gpus, band[1] * gpus
    per_vm = rack.vm_tokens_per_s or {"slowest": rack.min_tokens_per_s, "fastest": rack.max_tokens_per_s}
    out = []
    for name, value in sorted(per_vm.items(), key=lambda kv: _natural(kv[0])):
        if value < lo:
            out.append(f"{name} {fmt_num(value)} ({(1 - value / lo) * 100:.1f}% below it)")
        elif value > hi:
            out.append(f"{name} {fmt_num(value)} ({(value / hi - 1) * 100:.1f}% above it)")
    if not out:
        return None
    return (
        f"The band is ±5% of the published per-GPU figure ({fmt_num(lo)}–{fmt_num(hi)} tokens/s per VM). "
        f"Published VMs outside it: {'; '.join(out)}."
    )
