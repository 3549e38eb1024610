"""Which results may be combined, decided here once for every path that combines them (`verify A B` and the
statistics of repeated runs, `aggregate`, `report`, `attest` of a rack).

Two rules. A run counts once however it is named: its identity is its content, never its path, so a copy, a hard
link, a symlink or `a/../a` of one run is that run again, named as a duplicate and dropped. And results are
combined only when they are one kind of result: the same benchmark, scenario, round, division, accelerator and
system (for repeated runs also the same reference and count); every other mix is refused or excluded with the
reason, by the same words on every path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from repro.results.identity import ResultIdentity
    from repro.results.logs import LoadGenRun

T = TypeVar("T")


def fingerprints(run: LoadGenRun) -> frozenset[str]:
    """What makes a run this run: the SHA-256 of its detail log and of its summary, and LoadGen's own stamps of it
    (the time it started, its measured latencies to the nanosecond, its throughput). Two folders that share any of
    these hold the same run: two runs never log the same bytes, nor the same latencies at the same second."""
    out = set()
    for what, path in (("detail", run.detail_path), ("summary", run.summary_path)):
        if path is not None and path.is_file():
            out.add(f"{what} sha256 {_bounded_digest(path)}")
    figures = {k: run.latency_ns.get(k) for k in ("min", "max", "mean")}
    if all(v is not None for v in figures.values()):
        stamp = {"started": run.test_datetime, **figures, "tokens_per_s": run.tokens_per_s, "mode": run.mode}
        out.add("stamps " + json.dumps(stamp, sort_keys=True, default=str))
    if not out:  # nothing to read the run's content from: its real folder is all there is
        out.add(f"folder {run.folder.resolve()}")
    return frozenset(out)


HASHED_HEAD = 64 << 20
"""A log's identity reads at most its first 64 MiB and last 1 MiB with its size: two different runs' logs differ in
their first lines already (LoadGen's start time, its seeds' output), and a 40 GiB file costs 65 MiB, not 40 GiB."""


def _bounded_digest(path: Path) -> str:
    """SHA-256 over a log's size, its first HASHED_HEAD bytes and its last MiB (all of it when smaller)."""
    import hashlib
    import os

    from repro.core.safeio import CHUNK, open_regular

    h = hashlib.sha256()
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        h.update(str(size).encode() + b"\n")
        read = 0
        while read < min(size, HASHED_HEAD) and (block := fh.read(min(CHUNK, HASHED_HEAD - read))):
            h.update(block)
            read += len(block)
        if size > HASHED_HEAD:
            fh.seek(max(HASHED_HEAD, size - (1 << 20)))
            h.update(fh.read(1 << 20))
    return h.hexdigest()


def _why_same(a: frozenset[str], b: frozenset[str]) -> str:
    shared = sorted(a & b)
    if any(s.startswith("detail") for s in shared):
        return "the same mlperf_log_detail.txt"
    if any(s.startswith("summary") for s in shared):
        return "the same mlperf_log_summary.txt"
    if any(s.startswith("stamps") for s in shared):
        return "the same run by LoadGen's own stamps (start time, latencies, throughput)"
    return "the same folder"


def unique_runs(
    items: Sequence[T], run_of: Callable[[T], LoadGenRun], name_of: Callable[[T], str]
) -> tuple[list[T], list[tuple[T, T]], list[str]]:
    """(the items that are distinct runs, in order; each duplicate dropped with the item it repeats; a note naming
    each duplicate and the run it repeats). The first name given is kept."""
    kept: list[tuple[T, frozenset[str]]] = []
    dropped: list[tuple[T, T]] = []
    notes: list[str] = []
    for item in items:
        prints = fingerprints(run_of(item))
        first = next(((k, p) for k, p in kept if p & prints), None)
        if first is None:
            kept.append((item, prints))
            continue
        dropped.append((item, first[0]))
        notes.append(
            f"{name_of(item)} is the run {name_of(first[0])} again ({_why_same(first[1], prints)}): counted once"
        )
    return [k for k, _ in kept], dropped, notes


# ---------------------------------------------------------------- one kind of result


@dataclass(frozen=True)
class Kind:
    """What a result is, for deciding whether results may be combined (from its identity, read once)."""

    benchmark: str | None
    scenario: str
    round: str | None
    division: str
    accelerator: str | None
    system: str | None
    submitter: str | None
    accelerator_model: str | None = None
    """The chip the accelerator name states (NVIDIA B200-SXM-180GB and B200 are one): what is compared."""

    @classmethod
    def of(cls, ident: ResultIdentity) -> Kind:
        from repro.core.published import Accelerator

        acc = ident.accelerator
        model = Accelerator.parse(acc).model if acc and " + " not in acc else acc
        return cls(
            ident.benchmark,
            ident.scenario,
            ident.round,
            ident.division,
            acc,
            ident.system,
            ident.submitter,
            model,
        )

    def key(self, what: str) -> str | None:
        """The value compared for `what`: the chip for the accelerator, a name without its case for a submitter."""
        if what == "accelerator":
            return self.accelerator_model
        value = getattr(self, what)
        return value.lower() if what == "submitter" and value else value


_WHAT = {
    "benchmark": "benchmark",
    "scenario": "scenario",
    "round": "round",
    "division": "division",
    "accelerator": "accelerator",
    "submitter": "submitter",
    "system": "system",
}


@dataclass(frozen=True)
class Difference:
    """One way a result is not of another's kind: `what` (round, benchmark, ...), its value and the other's."""

    what: str
    theirs: str
    ours: str

    def __str__(self) -> str:
        return f"{self.what} {self.theirs} vs {self.ours}"


def differences(ours: Kind, theirs: Kind) -> list[Difference]:
    """Why `theirs` is not of `ours`' kind; empty when they may be combined. A value only one side states (a round
    the path does not name) is no difference: nothing says they differ."""
    out = []
    for key, what in _WHAT.items():
        x, y = ours.key(key), theirs.key(key)
        if x is not None and y is not None and x != y:
            out.append(Difference(what, str(getattr(theirs, key)), str(getattr(ours, key))))
    return out
