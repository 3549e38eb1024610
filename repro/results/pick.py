"""Which run of a result folder is the performance result verify is about (compliance and ranging runs aside)."""

from __future__ import annotations

from pathlib import Path

from repro.core.errors import InputError
from repro.results.combine import unique_runs
from repro.results.logfiles import SUMMARY
from repro.results.logs import LoadGenRun


def _is_compliance(run: LoadGenRun, root: Path) -> bool:
    """Compliance test folders (TEST01, TEST06, ...) inside a result tree are not the performance result."""
    try:
        parts = run.folder.relative_to(root).parts
    except ValueError:
        parts = run.folder.parts
    return any(p.upper().startswith("TEST") and p[4:].isdigit() for p in parts)


def pick_run(runs: list[LoadGenRun], root: Path, scenario: str | None = None) -> tuple[LoadGenRun, list[str]]:
    """The one performance run a verify is about, with notes on what else the folder holds."""
    notes: list[str] = []
    perf = [r for r in runs if r.mode == "PerformanceOnly" and not _is_compliance(r, root)]
    if not perf:
        raise InputError(
            f"{root}: only {runs[0].mode} logs here; verify needs a PerformanceOnly run.",
            "point `repro verify` at the folder that also holds performance/ (for your own runs: `repro run offline`)",
        )
    found = sorted({r.benchmark_scenario for r in perf})
    if scenario is None:
        if len(found) == 1:
            scenario = found[0]
        elif "Offline" in found:
            scenario = "Offline"
            others = [s for s in found if s != "Offline"]
            notes.append(f"{root} also holds {', '.join(others)} runs: `repro verify {root} --scenario {others[0]}`")
        else:
            raise InputError(
                f"{root}: holds {' and '.join(found)} runs; verify takes one.",
                f"`repro verify {root} --scenario {found[0]}`",
            )
    matching = [r for r in perf if r.benchmark_scenario.lower() == scenario.lower()]
    if not matching:
        raise InputError(
            f"{root}: holds {', '.join(found)} runs, not {scenario}.", f"`repro verify {root} --scenario {found[0]}`"
        )
    official = [r for r in matching if r.folder.name.lower() != "ranging"]
    if not official:
        notes.append(
            f"{matching[0].folder.name}: a power submission's ranging run, context for the result, not the result "
            "(that is performance/run_1)"
        )
    matching = official or matching
    unique, copies, _ = unique_runs(matching, lambda r: r, lambda r: str(r.folder))  # one run, however named
    for copy, kept in copies:
        kept.copies.append(copy)
    if copies:
        notes.append(
            f"{len(copies)} identical copies of the same {SUMMARY} counted once "
            "(the same run published under several benchmarks)"
        )
    matching = unique
    if len(matching) > 1:
        listing = ", ".join(str(r.folder.relative_to(root)) for r in matching[:4])
        best = next((r for r in reversed(matching) if r.is_reproduction_candidate), matching[-1])
        raise InputError(
            f"{root}: holds {len(matching)} different {scenario} runs ({listing}...); verify takes one.",
            f"`repro verify {best.folder}`, or `repro aggregate {root}` for several VMs",
        )
    return matching[0], notes
