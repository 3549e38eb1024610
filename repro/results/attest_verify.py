"""`repro attest verify`: check an attestation offline, with no GPU: the signature by a trusted key, the hash of
every file, and the verdict `repro verify` gives on the logs now, which must be the one that was signed.

Exit codes: 0 every check holds; 1 the attestation does not hold for these logs (a signature by another key or
over edited content, a changed, removed or added file, another run's attestation, a different verdict); 2 the
input cannot be read as an attestation at all (missing, truncated, not JSON, not a DSSE envelope, no key to trust).
Nothing is written either way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro import __version__
from repro.core.errors import InputError, ReproError
from repro.core.signing import SignatureMismatch, open_envelope, read_envelope, trusted_key
from repro.results.attest import (
    ATTESTATION_NAME,
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    UNKNOWN,
    hash_tree,
    recipe_files,
    relocate,
)

MAX_DIFFS_SHOWN = 40


@dataclass
class Verification:
    """What `repro attest verify` found: `differences` empty means the attestation holds for the logs."""

    file: Path
    logs: Path
    kind: str = "run"
    keyid: str | None = None
    key_source: Path | None = None
    subjects: int = 0
    status: str | None = None
    label: str | None = None
    reasons: list[str] = field(default_factory=list)  # the attested verdict's own reasons, as verify prints them
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    vms: list[Verification] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences and all(v.ok for v in self.vms)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "verified": self.ok,
            "attestation": str(self.file),
            "logs": str(self.logs),
            "kind": self.kind,
            "signed_by": self.keyid,
            "trusted_key": str(self.key_source) if self.key_source else None,
            "subjects_checked": self.subjects,
            "attested_verdict": self.status,
            "attested_reasons": self.reasons,
            "label": self.label,
            "differences": self.differences,
            "notes": self.notes,
            "vms": [v.to_json() for v in self.vms],
        }


def compare(attested: Any, now: Any, where: str = "verdict") -> tuple[list[str], list[str]]:
    """(differences, notes) between two JSON documents, each as `where.key: attested X, now Y`.

    A value both hold that differs is a difference. A key only one side has is a note: a newer repro's verify
    reports more (or less) than the one that signed, which the attested figures neither confirm nor contradict.
    Lists of named items (the checks) are matched by name, so an added check is a note, not a shifted list."""
    if isinstance(attested, dict) and isinstance(now, dict):
        diffs: list[str] = []
        notes: list[str] = []
        for key in sorted(set(attested) | set(now), key=str):
            if key not in now:
                notes.append(
                    f"{where}.{key}: attested {_short(attested[key])}; this repro's verify no longer reports it"
                )
            elif key not in attested:
                notes.append(f"{where}.{key}: not attested; this repro's verify now also reports {_short(now[key])}")
            else:
                d, n = compare(attested[key], now[key], f"{where}.{key}")
                diffs += d
                notes += n
        return diffs, notes
    if isinstance(attested, list) and isinstance(now, list):
        named_a, named_n = _by_name(attested), _by_name(now)
        if named_a is not None and named_n is not None:
            return compare(named_a, named_n, where)
        if len(attested) == len(now):
            pairs = [compare(a, n, f"{where}[{i}]") for i, (a, n) in enumerate(zip(attested, now, strict=True))]
            return [d for p in pairs for d in p[0]], [n for p in pairs for n in p[1]]
    return ([] if attested == now else [f"{where}: attested {_short(attested)}, now {_short(now)}"]), []


def _by_name(items: list[Any]) -> dict[str, Any] | None:
    """{name: item} for a list of objects with distinct names (verify's checks); None for any other list."""
    if not items or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return None
    named = {i["name"]: i for i in items}
    return named if len(named) == len(items) else None


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _statement(payload: bytes, payload_type: str, source: Path) -> dict[str, Any]:
    """The signed statement, checked for the in-toto v1 shape and repro's predicate type."""
    bad = "signed, but not a repro attestation"
    if payload_type != PAYLOAD_TYPE:
        raise InputError(f"{source}: {bad} (payload type {payload_type!r}).", "`repro attest RUN_DIR`")
    try:
        doc = json.loads(payload)
    except (ValueError, RecursionError):
        raise InputError(f"{source}: {bad} (its payload is not JSON).", "`repro attest RUN_DIR`") from None
    ok = (
        isinstance(doc, dict)
        and doc.get("_type") == STATEMENT_TYPE
        and doc.get("predicateType") == PREDICATE_TYPE
        and isinstance(doc.get("subject"), list)
        and isinstance(doc.get("predicate"), dict)
        and all(
            isinstance(s, dict) and isinstance(s.get("name"), str) and isinstance(s.get("digest"), dict)
            for s in doc["subject"]
        )
    )
    if not ok:
        raise InputError(f"{source}: {bad} (not an in-toto Statement v1 of {PREDICATE_TYPE}).", "`repro attest`")
    return doc


def _file_differences(attested: dict[str, str], now: dict[str, str]) -> list[str]:
    out = [
        f"{rel}: changed since it was attested (sha256 {attested[rel][:12]}..., now {now[rel][:12]}...)"
        for rel in attested
        if rel in now and now[rel] != attested[rel]
    ]
    out += [f"{rel}: attested, now missing" for rel in attested if rel not in now]
    out += [f"{rel}: not in the attestation (added after it was signed)" for rel in now if rel not in attested]
    return out


def _other_run(predicate: dict[str, Any], now: dict[str, str], logs: Path) -> str | None:
    """A headline when the logs are plainly another run: its run.json differs, and so does the run folder's name
    or the start time it records."""
    from repro.core.record import RunRecord

    run = predicate.get("run") or {}
    attested_json = run.get("run_json_sha256")
    rel = run.get("run_json")
    now_json = now.get(rel) if isinstance(rel, str) else None
    if attested_json in (None, UNKNOWN) or now_json is None or now_json == attested_json:
        return None
    record = RunRecord.read(logs / rel) if rel else None
    started = record.started if record is not None else None
    folder = logs.resolve().name
    if run.get("folder") == folder and (started is None or started == run.get("started")):
        return None
    return (
        f"this attestation is of another run ({run.get('folder')}, started {run.get('started')}), "
        f"not of {folder}" + (f" (started {started})" if started else "")
    )


def _verdict_now(kind: str, predicate: dict[str, Any], logs: Path) -> tuple[Any, str | None]:
    """(verify's JSON on the logs now, relocated; or None and why it could not be produced)."""
    inputs = predicate.get("verify_inputs") or {}
    recipe, gpus, scenario = inputs.get("recipe"), inputs.get("gpus"), inputs.get("scenario")
    try:
        if kind == "rack":
            from repro.results.aggregate import aggregate

            report = aggregate([logs], recipe=recipe, gpus=gpus, scenario=scenario or "Offline")
            return relocate(report.to_json(), logs), None
        from repro.results.verify import verify_dir

        return relocate(verify_dir(logs, recipe=recipe, gpus=gpus, scenario=scenario).to_json(), logs), None
    except ReproError as exc:
        return None, exc.message


def verify_file(
    file: Path,
    logs: Path | None = None,
    key: Path | None = None,
    workspace_root: Path | None = None,
    *,
    trusted: tuple[Any, Path] | None = None,
) -> Verification:
    """Check one attestation against its logs (`logs`, else the attestation's own folder); see the module doc."""
    file = Path(file)
    if file.is_dir():
        file = file / ATTESTATION_NAME
    doc = read_envelope(file)
    logs = Path(logs) if logs is not None else file.parent
    if not logs.is_dir():
        raise InputError(f"{logs}: no such folder of logs.", "`repro attest verify FILE --logs RUN_DIR`")
    if trusted is None:
        trusted = trusted_key(key, workspace_root or Path.cwd())
    result = Verification(file, logs, key_source=trusted[1])
    try:
        payload, payload_type, keyid = open_envelope(doc, trusted[0], file)
    except SignatureMismatch as exc:
        result.differences.append(f"signature: {exc}")
        return result
    result.keyid = keyid
    statement = _statement(payload, payload_type, file)
    predicate = statement["predicate"]
    result.kind = str(predicate.get("kind") or "run")
    verdict = predicate.get("verdict") if isinstance(predicate.get("verdict"), dict) else {}
    result.status = verdict.get("status") or ("PASS" if verdict.get("all_pass") else "FAIL")
    result.label = (predicate.get("run") or {}).get("label")
    reasons = verdict.get("reasons")
    result.reasons = [str(r) for r in reasons] if isinstance(reasons, list) else []
    attested = {s["name"]: str(s["digest"].get("sha256")) for s in statement["subject"]}
    exclude = tuple(str(x) for x in predicate.get("excluded") or [])
    problems: list[str] = []
    now = hash_tree(logs, exclude, problems)
    result.subjects = len(attested)
    other = _other_run(predicate, now, logs)
    if other:
        result.differences.append(other)
    diffs = problems + _file_differences(attested, now)
    now_verdict, failed = _verdict_now(result.kind, predicate, logs)
    if failed is not None:
        diffs.append(f"repro verify cannot judge these logs now: {failed}")
    else:
        changed, extra = compare(verdict, now_verdict)
        diffs += changed
        result.notes += extra[:MAX_DIFFS_SHOWN]
        signed_by = predicate.get("repro_version")
        if (changed or extra) and signed_by != __version__:
            result.notes.append(f"attested by repro {signed_by}; checked with repro {__version__}")
    result.differences += diffs[:MAX_DIFFS_SHOWN]
    if len(diffs) > MAX_DIFFS_SHOWN:
        result.differences.append(f"... and {len(diffs) - MAX_DIFFS_SHOWN} more differences")
    _recipe_notes(predicate, result)
    if result.kind == "rack":
        for rel in sorted(predicate.get("vm_attestations") or {}):
            vm_file = logs / str(rel)
            if not vm_file.resolve().is_relative_to(logs.resolve()):
                result.differences.append(f"{rel}: a VM attestation outside the rack folder")
            elif vm_file.is_file():
                result.vms.append(verify_file(vm_file, trusted=trusted))
    return result


def _recipe_notes(predicate: dict[str, Any], result: Verification) -> None:
    """The recipe and benchmark files shipped with this repro against the attested ones (a note: the verdict,
    which carries the recipe's content hash, already says whether the judgement changed)."""
    files = predicate.get("files") or {}
    name = ((files.get("recipe") or {}).get("name")) if isinstance(files, dict) else None
    if not name or name == UNKNOWN:
        return
    now = recipe_files(name)
    for what in ("recipe", "benchmark"):
        a, n = (files.get(what) or {}).get("sha256"), (now.get(what) or {}).get("sha256")
        if a and n and a != n and UNKNOWN not in (a, n):
            result.notes.append(f"the {what} file {name} shipped with this repro differs from the attested one")
