"""What a result folder is, read once: its benchmark, scenario, division, accelerator and accelerator count, each
with where it came from, and the published record it is.

`identify` builds one `ResultIdentity` per run folder; verify, --against, aggregate and report pass it to every
check, the JSON and the views instead of asking the folder again (issue #33 item 5: one `repro verify` used to
re-derive the accelerator, the count, the submission path and the index match in four modules, many times over).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.accelerators import Accelerator, chips, same_accelerator
from repro.core.errors import InputError
from repro.core.published import PublishedIndex
from repro.core.recipes import Recipe
from repro.results.hardware import GpuCount, Identity, count_accelerators, run_accelerator
from repro.results.index_match import IndexMatch, match_run, path_identity
from repro.results.logs import LoadGenRun, benchmark_of_path


def benchmark_of(folder: Path) -> tuple[str | None, str | None]:
    """(MLPerf benchmark, where it came from) from the nearest folder that names one, as the benchmark files list
    their result-folder names (repro/data/benchmarks; `llama2-70b-interactive-99` is llama2-70b-99)."""
    name = benchmark_of_path(folder)
    return (name, f"{name} in the path") if name else (None, None)


def recipe_benchmark(recipe: Recipe) -> str:
    """The benchmark a recipe reproduces: its `benchmark:` field."""
    return recipe.benchmark


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
        out = GpuCount(found.total, found.source, list(found.notes))
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
    benchmark = run.benchmark  # read once, by the log parser, from the benchmark files' folder names
    benchmark_source = f"{benchmark} in the path" if benchmark else None
    record = match_run(run, index, where=where, benchmark=benchmark)
    if benchmark is None and record is not None and record.exact:
        benchmark = record.row.benchmark_name
        benchmark_source = f"the published record {record.row.ref} this log is"
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
        scenario=run.benchmark_scenario or run.scenario,
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
    )


def mixed_against(ident: ResultIdentity, row_accelerator: str, ref: str) -> Identity:
    """A mixed system (16 MI325X + 8 MI300X) is itself only with the same chips."""
    mixed = Accelerator(model="mixed")
    if ident.accelerator is None:
        return Identity(None, None, mixed, None, "nothing states the run's accelerator: unknown")
    same = set(chips(ident.accelerator)) == set(chips(row_accelerator))
    why = f"{'same' if same else 'not the same'} mixed system as {ref} ({row_accelerator})"
    return Identity(ident.accelerator, ident.accelerator_source, mixed, same, why)
