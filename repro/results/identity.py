"""What a result folder is, read once: its benchmark, scenario, division, accelerator and accelerator count, each
with where it came from, and the published record it is.

`identify` builds one `ResultIdentity` per run folder; verify, --against, aggregate and report pass it to every
check, the JSON and the views instead of asking the folder again (issue #33 item 5: one `repro verify` used to
re-derive the accelerator, the count, the submission path and the index match in four modules, many times over).

The benchmark is decided here and nowhere else, by one precedence rule: what the result states of itself outranks
what it is compared with.
  1. its path: a folder named as a benchmark file names its results (`llama3.1-405b`, `deepseek-r1`), whole or
     inside a longer name (results/logs.py benchmark_of_path);
  2. its run.json: the benchmark repro ran it by (`benchmark`, else the shipped recipe it names);
  3. the published record the index recognises the log as (an exact match);
  4. only when none of these says: the reference it is judged against, the recipe, else the published record
     (`ResultIdentity.judged_by`).
`ResultIdentity.bench` is that benchmark's file (None when repro holds none: its rules are unknown, never a PASS).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from repro.core.accelerators import Accelerator, chips, same_accelerator
from repro.core.benchmarks import Benchmark, benchmark_names, load_benchmark
from repro.core.errors import InputError, RecipeError
from repro.core.published import PublishedIndex, PublishedResult
from repro.core.recipes import Recipe, registry_recipe
from repro.results.hardware import GpuCount, Identity, count_accelerators, run_accelerator
from repro.results.index_match import IndexMatch, match_run, path_identity
from repro.results.logs import LoadGenRun


def _stated_benchmark(run: LoadGenRun, record: IndexMatch | None) -> tuple[str | None, str | None]:
    """Rules 1-3 of the module docstring: (the benchmark the result states of itself, where), or (None, None)."""
    if run.benchmark:
        return run.benchmark, f"{run.benchmark} in the path"
    info = run.run_info
    if info is not None and info.benchmark:
        return info.benchmark, "run.json"
    if info is not None and info.recipe:
        try:
            return registry_recipe(info.recipe).benchmark, f"run.json (recipe {info.recipe})"
        except RecipeError:
            pass  # a recipe given as a file, or since renamed: the name says nothing more
    if record is not None and record.exact:
        return record.row.benchmark_name, f"the published record {record.row.ref} this log is"
    return None, None


def stated_benchmark(run: LoadGenRun) -> tuple[str | None, str | None]:
    """What the result states of itself before the index is asked (rules 1 and 2): for a caller that needs the
    benchmark to find the recipe (results/verify.py resolve_recipe) and has no identity yet."""
    return _stated_benchmark(run, None)


def decide_benchmark(
    run: LoadGenRun,
    record: IndexMatch | None = None,
    recipe: Recipe | None = None,
    row: PublishedResult | None = None,
) -> tuple[str | None, str | None]:
    """(benchmark, where it came from) by the module docstring's rule, for a caller without a whole identity
    (`repro explain`); identify() and ResultIdentity.judged_by apply the same rule in two halves."""
    name, source = _stated_benchmark(run, record)
    return (name, source) if name is not None else _reference_benchmark(recipe, row)


def _reference_benchmark(recipe: Recipe | None, row: PublishedResult | None) -> tuple[str | None, str | None]:
    """Rule 4: the benchmark of what the result is judged against, the recipe first."""
    if recipe is not None:
        return recipe.benchmark, f"recipe {recipe.name}"
    if row is not None:
        return row.benchmark_name, f"published record {row.ref}"
    return None, None


def benchmark_file(name: str | None) -> Benchmark | None:
    """The benchmark file of that name on the search path; None when repro holds none (its rules are unknown)."""
    return load_benchmark(name) if name and name in benchmark_names() else None


@dataclass
class ResultIdentity:
    """One run folder's identity. A value that nothing states is None with source None; `count` is None when no
    file tells how many accelerators ran (a recipe or --gpus then decides, see count_for)."""

    folder: Path
    benchmark: str | None
    benchmark_source: str | None
    scenario: str
    scenario_source: str
    division: str
    division_source: str
    accelerator: str | None
    accelerator_source: str | None
    count: GpuCount | None
    count_notes: list[str] = field(default_factory=list)
    record: IndexMatch | None = None
    """The published result the run is (exact) or runs the system of."""
    submitter: str | None = None
    system: str | None = None
    round: str | None = None
    bench: Benchmark | None = None
    """The file of `benchmark` (its rules, metrics and limits); None when repro holds none or nothing states it."""

    def judged_by(self, recipe: Recipe | None, row: PublishedResult | None = None) -> ResultIdentity:
        """This identity as judged against a recipe or a published record: rule 4 of the module docstring fills the
        benchmark only when the result states none; what the result states is never overridden."""
        if self.benchmark is not None:
            return self
        name, source = _reference_benchmark(recipe, row)
        if name is None:
            return self
        return replace(self, benchmark=name, benchmark_source=source, bench=benchmark_file(name))

    def of_copy(self, copy: LoadGenRun) -> ResultIdentity:
        """An identical copy of this run (results/logs.py `copies`) in another folder: the benchmark its own path or
        run.json states, else this run's."""
        name, source = _stated_benchmark(copy, None)
        if name is None:
            return replace(self, folder=copy.folder)
        return replace(self, folder=copy.folder, benchmark=name, benchmark_source=source, bench=benchmark_file(name))

    def against(self, want: Accelerator, whose: str = "the recipe's") -> Identity:
        """The run's accelerator against `want` (a recipe's, or the published record's it is compared with)."""
        name, where = self.accelerator, self.accelerator_source
        if name is None:
            return Identity(
                None,
                None,
                want,
                None,
                "nothing states the run's accelerator (no system JSON, no run.json GPU names, no chip in the "
                "folder name): unknown, and an unknown accelerator is never a reproduction",
            )
        if " + " in name:
            return Identity(name, where, want, False, f"the run mixes accelerators ({name})")
        same, why = same_accelerator(name, want)
        if whose != "the recipe's":
            why = why.replace("the recipe's", whose).replace("the recipe", whose.removesuffix("'s"))
        return Identity(name, where, want, same, why)

    def count_for(self, recipe: Recipe | None) -> GpuCount:
        """The count per-GPU figures divide by: the folder's own (or --gpus), else the recipe's with a note; a note
        whenever the run's count differs from the recipe's or the record's."""
        found = self.count
        if found is None:
            if recipe is None:
                raise InputError(
                    f"{self.folder}: cannot tell how many accelerators ran (no system JSON, no run.json, no count in "
                    "the folder name).",
                    f"`repro verify {self.folder} --gpus N`",
                )
            note = (
                f"no system JSON or run.json gives the accelerator count: assumed {recipe.system.gpus_per_vm} from "
                f"recipe {recipe.name} (`--gpus N` if the run used another count)"
            )
            return GpuCount(recipe.system.gpus_per_vm, f"recipe {recipe.name}", [*self.count_notes, note])
        out = GpuCount(found.total, found.source, list(found.notes), found.stated, list(found.contradicts))
        if recipe is not None:
            if found.source != "--gpus" and found.total != recipe.system.gpus_per_vm and not recipe.demo:
                out.notes.append(
                    f"the run used {found.total} accelerators, recipe {recipe.name} "
                    f"{recipe.system.gpus_per_vm}; compared per GPU"
                )
        elif self.record is not None and found.source != "--gpus":
            row = self.record.row
            if found.total != row.total_accelerators:
                out.notes.append(
                    f"the run used {found.total} accelerators, {row.ref} {row.total_accelerators}; "
                    "compared per accelerator"
                )
        return out

    def accelerators_where(self) -> str:
        """The count and where it came from, in words."""
        return self.count.source if self.count is not None else "count unknown"

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "benchmark_source": self.benchmark_source,
            "scenario": self.scenario,
            "scenario_source": self.scenario_source,
            "division": self.division,
            "division_source": self.division_source,
            "accelerator": self.accelerator,
            "accelerator_source": self.accelerator_source,
            "accelerators": self.count.total if self.count else None,
            "accelerators_source": self.count.source if self.count else None,
            "submitter": self.submitter,
            "system": self.system,
            "round": self.round,
            "published_record": self.record.row.ref if self.record else None,
        }


def identify(run: LoadGenRun, gpus: int | None = None, index: PublishedIndex | None = None) -> ResultIdentity:
    """Read the run's identity once, in the order its own files outrank what is inferred: run.json and the system
    JSON, then the submission path, then the published record the index recognises it as."""
    where = path_identity(run.folder)
    stated, _ = _stated_benchmark(run, None)
    record = match_run(run, index, where=where, benchmark=stated)
    benchmark, benchmark_source = _stated_benchmark(run, record)
    stated = str((run.system or {}).get("division") or "").strip().lower()
    if stated in ("closed", "open"):
        division, division_source = stated, "system JSON"
    elif where.get("division") == "open":
        division, division_source = "open", "the submission path"
    else:
        division = "closed"
        division_source = "the submission path" if "division" in where else "assumed (nothing states it)"
    accelerator, accelerator_source = run_accelerator(run, record)
    count, notes = count_accelerators(run, gpus, record)
    submitter = (run.system or {}).get("submitter") or where.get("submitter")
    return ResultIdentity(
        folder=run.folder,
        benchmark=benchmark,
        benchmark_source=benchmark_source,
        scenario=run.effective_scenario,
        scenario_source=run.scenario_source,
        division=division,
        division_source=division_source,
        accelerator=accelerator,
        accelerator_source=accelerator_source,
        count=count,
        count_notes=notes,
        record=record,
        submitter=str(submitter) if submitter else None,
        system=run.system_path.stem if run.system_path else where.get("system"),
        round=where.get("round"),
        bench=benchmark_file(benchmark),
    )


def mixed_against(ident: ResultIdentity, row_accelerator: str, ref: str) -> Identity:
    """A mixed system (16 MI325X + 8 MI300X) is itself only with the same chips."""
    mixed = Accelerator(model="mixed")
    if ident.accelerator is None:
        return Identity(None, None, mixed, None, "nothing states the run's accelerator: unknown")
    same = set(chips(ident.accelerator)) == set(chips(row_accelerator))
    why = f"{'same' if same else 'not the same'} mixed system as {ref} ({row_accelerator})"
    return Identity(ident.accelerator, ident.accelerator_source, mixed, same, why)
