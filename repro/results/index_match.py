"""Recognising a published log in the index: the match hardware, compare and verify all ask, so it sits below them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.published import PublishedIndex, PublishedResult, load_index
from repro.results.logs import LoadGenRun

_ROUND = re.compile(r"inference_results_(v\d+\.\d+)", re.I)


def count_value(value: Any) -> int | None:
    """A positive whole count from a number or a numeric string ("4", " 18 "); anything else is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and value > 0 else None
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):  # ASCII: int() also reads "٤"
        return int(value) or None
    return None


def system_accelerators(system: dict[str, Any]) -> tuple[int, int] | None:
    """(accelerators per node, nodes) from a system JSON; nodes default to 1 when absent."""
    per_node = count_value(system.get("accelerators_per_node"))
    nodes = count_value(system.get("number_of_nodes", 1))
    return (per_node, nodes) if per_node and nodes else None


def effective_scenario(run: LoadGenRun) -> str:
    """The benchmark scenario as the verdict sees it (Interactive logs say Server; see results.logs)."""
    return run.effective_scenario


def path_identity(folder: Path) -> dict[str, str]:
    """division/submitter/system from a submission tree: <division>/<submitter>/results/<system>/<benchmark>/..."""
    parts = folder.resolve().parts
    out: dict[str, str] = {}
    if "results" in parts:
        i = len(parts) - 1 - parts[::-1].index("results")
        if i >= 2 and i + 1 < len(parts) and parts[i - 2].lower() in ("closed", "open"):
            out = {"division": parts[i - 2].lower(), "submitter": parts[i - 1], "system": parts[i + 1]}
    for part in parts:
        if m := _ROUND.search(part):
            out["round"] = m.group(1).lower()
    return out


@dataclass(frozen=True)
class IndexMatch:
    """The index row a run corresponds to; `exact` when the run IS that published log (same tokens/s)."""

    row: PublishedResult
    how: str
    exact: bool
    also: tuple[PublishedResult, ...] = ()

    @property
    def note(self) -> str:
        if self.exact:
            more = f" (the same log is also published as {', '.join(r.ref for r in self.also)})" if self.also else ""
            return f"this is the published log of {self.row.ref}, matched by {self.how}{more}"
        return (
            f"same system as published result {self.row.ref} (matched by {self.how}), but not its published log: "
            f"tokens/s differ from the published {self.row.tokens_per_second:,.2f}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.row.ref,
            "key": self.row.key,
            "result_id": self.row.result_id,
            "how": self.how,
            "exact": self.exact,
            "also": [r.ref for r in self.also],
            "note": self.note,
        }


def _same_tokens(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def match_run(
    run: LoadGenRun,
    index: PublishedIndex | None = None,
    where: dict[str, str] | None = None,
    benchmark: str | None = None,
) -> IndexMatch | None:
    """The published result this run is (or runs the system of); None when the index has nothing that fits.

    Identity first: the system JSON file name or results folder, and the submitter (system JSON or path) where one
    is stated, else the system name; then the scenario and benchmark folders. A match agrees on submitter and round:
    the round the path names (inference_results_vX.Y), else the one whose published tokens/s the log prints; a
    same-named system with other figures and no round is not this result (NVIDIA's v5.0 DGX-H100 is not v4.1's).
    Without any identity, a unique (scenario, benchmark, tokens/s) fingerprint, consistent with whatever the run
    states, identifies a published log. `where` and `benchmark` (the MLPerf name, llama2-70b-99.9): the folder's
    path identity and benchmark when the caller (results.identity) has read them already.
    """
    idx = index or load_index()
    scenario = effective_scenario(run)
    if benchmark is None:
        benchmark = run.benchmark
    where = path_identity(run.folder) if where is None else where
    system = run.system or {}
    folders = {n.lower() for n in (run.system_path.stem if run.system_path else None, where.get("system")) if n}
    submitters = {str(s).strip().lower() for s in (system.get("submitter"), where.get("submitter")) if s}
    names = {str(system.get("system_name", "")).strip().lower()} - {""}
    division = str(system.get("division") or where.get("division") or "").lower()

    rows = [
        r for r in idx.rows if r.scenario == scenario and (benchmark is None or r.benchmark_name.lower() == benchmark)
    ]
    if "round" in where:
        rows = [r for r in rows if r.round == where["round"]]
    if submitters:
        rows = [r for r in rows if r.submitter.lower() in submitters]
    if division in ("closed", "open"):
        rows = [r for r in rows if r.division == division]
    ident = [
        r for r in rows if r.system_folder.lower() in folders and (submitters or r.system_name.strip().lower() in names)
    ]
    how = "system JSON and path" if ident else ""
    tokens = run.tokens_per_s
    if not ident and tokens is not None:
        counts = system_accelerators(system) if system else None
        finger = [
            r
            for r in rows
            if _same_tokens(r.tokens_per_second, tokens)
            and (counts is None or r.total_accelerators == counts[0] * counts[1])
        ]
        if len({r.system_key for r in finger}) == 1:
            ident, how = finger, "scenario, benchmark and tokens/s"
    if not ident:
        return None
    exact = [r for r in ident if tokens is not None and _same_tokens(r.tokens_per_second, tokens)]
    if not exact and "round" not in where:
        return None
    pool = exact or ident
    newest = max(r.round_tuple for r in pool)
    pool = sorted((r for r in pool if r.round_tuple == newest), key=lambda r: (r.benchmark, r.key))
    return IndexMatch(pool[0], how, bool(exact), tuple(pool[1:]))
