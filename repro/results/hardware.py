"""Which accelerators, and how many, a run used: from its system JSON or its own provenance (run.json).

Published system JSONs write counts as numbers or strings ("8", "11") and describe multi-node systems as
accelerators_per_node x number_of_nodes (up to 18 nodes). A folder named `<system>_<N>` beside a
multi-node `<system>.json` is one node of it (the Azure GB300 rack publishes one folder per VM).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from repro.core.accelerators import Accelerator, chips, model_token
from repro.core.errors import InputError
from repro.results.index_match import IndexMatch, count_value
from repro.results.logs import LoadGenRun


@dataclass
class GpuCount:
    total: int
    source: str
    notes: list[str] = field(default_factory=list)
    stated: int | None = None
    """What the run's own files (run.json, system JSON) give, whatever --gpus says; None when they say nothing."""
    contradicts: list[str] = field(default_factory=list)
    """A --gpus count the run's own files contradict: each file and its count (a contradiction is never a PASS)."""


@dataclass
class Identity:
    """The run's accelerator compared with the recipe's: same is None when the run does not name one."""

    run_name: str | None
    where: str | None
    recipe: Accelerator
    same: bool | None
    why: str


def run_accelerator(run: LoadGenRun, match: IndexMatch | None) -> tuple[str | None, str | None]:
    """The accelerator name the run's own files state: its provenance (run.json) first, then the system JSON, then
    the published record the log is (`match`, read once by results.identity), then the folder name."""
    names = run.run_info.gpu_names if run.run_info is not None else []
    if run.run_info is not None and (cpu := run.run_info.ran_on_cpu):
        named = f", {cpu}" if cpu != "CPU" else ""
        idle = f"; {', '.join(sorted(set(names)))} idle" if names and all(names) else ""
        return "CPU", f"run.json: the {run.run_info.backend or 'run'} backend ran on the CPU{named}{idle}"
    if names and all(names):
        distinct = sorted(set(names))
        return " + ".join(distinct), "run.json (NVML)"
    name = run.system.get("accelerator_model_name") if run.system else None
    if isinstance(name, str) and name.strip():
        return name.strip(), _system_where(run)
    if match is not None and match.exact:
        return match.row.accelerator_model_name, f"the published record {match.row.ref} this log is"
    if folder := _named_folder(run):
        return folder, f"folder {folder}"
    return None, None


def _named_folder(run: LoadGenRun) -> str | None:
    """A submission folder whose name states the chip (`B200-SXM-180GBx8_TRT`, `v5.1_..._H100-SXM-80GBx32_...`):
    the results/<system> folder, else the folder that names the benchmark. Evidence when no file names the GPU."""
    names = [run.system_folder] if run.system_folder else []
    if run.benchmark:
        names += [p for p in reversed(run.folder.absolute().parts) if run.benchmark.lower() in p.lower()][:1]
    return next((n for n in names if n and chips(n)), None)


def _system_where(run: LoadGenRun) -> str:
    return f"system JSON {run.system_path.name}" if run.system_path else "system JSON"


_CHIP_AT = re.compile(r"(?<![A-Z0-9])([A-Z]{1,4}\d{2,4}[A-Z]?)(?=SXM|PCIE|NVL|[^A-Z0-9]|$)")
_COUNT_FIRST = re.compile(r"(?:^|-)((?:\d+\s*X\s*)+)-?(?=[A-Z])(.*)$")  # 32xMI355X, 2x8xH100, 1-node-4x-BMG-B60
_COUNT_LAST = re.compile(r"(.*?[A-Z0-9])X(\d+)")  # H200x8, B200SXMx8, H100-SXM-80GBx8, aarch64x72 (no chip)


def _chips_in(text: str) -> list[str]:
    """Chips a name part states, also glued to a form factor (B200SXM); NVL72 is a rack, not a chip."""
    found = [c for c in _CHIP_AT.findall(text.upper()) if not c.startswith("NVL") and chips(c)]
    return list(dict.fromkeys(found))


def name_count(text: str) -> tuple[int, list[str]] | None:
    """(accelerators, chips) as a system name writes them, read part by part as the system JSON counts them: each
    `<N>x<chip>` or `<chip>...x<N>` is one group, a count with no chip of its own (`aarch64x72`, `141GBx16`) belongs to
    the chip named just before it, and groups add up (16xMI325X_8xMI300X is 24; H200x8 with MI350Xx8 is 16).
    None when the name states no count, or a count no chip comes before: then the name says nothing."""
    groups: list[tuple[str, int]] = []
    last: str | None = None
    text = re.sub(r"(\d)\s*[X×]\s+(?=[A-Z])", r"\1X", text.upper())  # "8x MI300X" is one group
    for part in (p for p in re.split(r"[_\s,()/+]+", text) if p):
        if (m := _COUNT_FIRST.search(part)) and (named := _chips_in(m.group(2))):
            n = 1
            for factor in re.findall(r"\d+", m.group(1)):
                n *= int(factor)
            groups.append((named[0], n))
            last = named[-1]
            continue
        if m := _COUNT_LAST.fullmatch(part):
            named = _chips_in(m.group(1)) or ([last] if last else [])
            if not named:
                return None
            groups.append((named[-1], int(m.group(2))))
            last = named[-1]
            continue
        if named := _chips_in(part):
            last = named[-1]
    if not groups:
        return None
    return sum(n for _, n in groups), list(dict.fromkeys(c for c, _ in groups))


def _name_counts(
    run: LoadGenRun, chip: str | None, texts: list[tuple[str, str]] | None = None
) -> list[tuple[str, int]]:
    """Accelerator counts a system name or results folder states for the system's chip ('32xH100', 'B200...x8');
    a name whose count is about other chips, or that states none, says nothing."""
    if not chip:
        return []
    if texts is None:
        texts = []
        if run.system and isinstance(run.system.get("system_name"), str):
            texts.append((f"system name {run.system['system_name'].strip()!r}", run.system["system_name"]))
        if run.system_folder:
            texts.append((f"folder {run.system_folder}", run.system_folder))
    out = []
    for where, text in texts:
        found = name_count(text)
        if found is not None and chip.upper() in found[1]:
            out.append((where, found[0]))
    return out


def count_accelerators(
    run: LoadGenRun, flag: int | None, match: IndexMatch | None
) -> tuple[GpuCount | None, list[str]]:
    """--gpus, else the run's provenance, else the system JSON (per node x nodes), else the published record the
    log is; (None, notes) when nothing tells. Every disagreement is a note; provenance vs system JSON without --gpus
    is an error."""
    sources: list[tuple[int, str]] = []
    notes: list[str] = []
    gpus_info = run.run_info.gpus if run.run_info is not None else None
    if run.run_info is not None and run.run_info.ran_on_cpu:
        sources.append((1, "run.json: one CPU"))
    elif gpus_info is not None and (n := count_value(gpus_info.count)):
        sources.append((n, "run.json"))
    chip = None
    if run.system:
        per_node, nodes = (
            count_value(run.system.get("accelerators_per_node")),
            count_value(run.system.get("number_of_nodes", 1)),
        )
        where = _system_where(run)
        raw = (run.system.get("accelerators_per_node"), run.system.get("number_of_nodes", 1))
        if per_node is None or nodes is None:
            notes.append(
                f"{where}: unusable accelerator count (accelerators_per_node {raw[0]!r}, "
                f"number_of_nodes {raw[1]!r}); not used"
            )
        elif run.system_node_of:
            sources.append(
                (per_node, f"{where}: folder {run.system_folder} is one node of {nodes}, {per_node} per node")
            )
        else:
            text = f"{per_node} per node x {nodes} nodes" if nodes > 1 else f"{per_node} per node"
            sources.append((per_node * nodes, f"{where}: {text}"))
        name = run.system.get("accelerator_model_name")
        chip = model_token(name) if isinstance(name, str) else None
        counts_ok = {per_node, nodes, (per_node or 0) * (nodes or 0)}
        for where_name, n in _name_counts(run, chip):
            if n not in counts_ok:
                notes.append(
                    f"the {where_name} says {n} accelerators but {where} gives "
                    f"{per_node} per node x {nodes} nodes = {(per_node or 0) * (nodes or 0)}; "
                    f"per GPU uses the JSON (`--gpus {n}` to use the name's count)"
                )
    if flag is not None:
        contradicts = [f"{where} gives {n}" for n, where in sources if n != flag]
        notes.insert(0, f"--gpus {flag} overrides the count" + (f" ({', '.join(contradicts)})" if contradicts else ""))
        stated = sources[0][0] if sources and len({n for n, _ in sources}) == 1 else None
        return GpuCount(flag, "--gpus", notes, stated, contradicts), notes
    if sources:
        count, where = sources[0]
        for other, other_where in sources[1:]:
            if other != count:
                raise InputError(
                    f"{run.folder}: conflicting GPU counts: {where} says {count}, {other_where} says {other}.",
                    f"`repro verify {run.folder} --gpus N` with the count the run used",
                )
        return GpuCount(count, where, notes, count), notes
    if match is not None and match.exact:
        total = match.row.total_accelerators
        return GpuCount(total, f"the published record {match.row.ref} this log is", notes, total), notes
    if (folder := _named_folder(run)) and (named := _name_counts(run, chips(folder)[0], [("", folder)])):
        return GpuCount(named[0][1], f"folder {folder}", notes, named[0][1]), notes
    return None, notes
