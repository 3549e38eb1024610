"""`repro attest verify`: check an attestation offline, with no GPU: the signature by a trusted key, the hash of
every file, and the verdict `repro verify` gives on the logs now, which must be the one that was signed.

The verdict printed is always the one re-derived now from the files, never the statement's text: every field of the
attested verdict must equal it (every core field whichever repro signed, every field when this repro did), every
file the verdict reads must be a hashed subject (or, outside the folder, an `inputs_outside` entry), the statement
must list files at all, and only a rack's image archive may be left unhashed. The key trusted is --key, else this
workspace's own key, never one inside the folder being checked; the output names it and why it is trusted.

Exit codes: 0 every check holds; 1 the attestation does not hold for these logs (a signature by another key or
over edited content, a changed, removed or added file, another run's attestation, a different verdict); 2 the
input cannot be read as an attestation at all (missing, truncated, not JSON, not a DSSE envelope, no key to trust,
a key only the checked folder holds, a file past the hashing bounds).
Nothing is written either way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro import __version__
from repro.core.errors import InputError, ReproError
from repro.core.names import shown as shown_value
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
    key_origin: str | None = None
    """Why that key is trusted: given with --key, or this workspace's own key (outside the folder checked)."""
    subjects: int = 0
    status: str | None = None
    """The verdict repro verify gives on the logs now: what is printed, never the attested text."""
    attested_status: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    """The options the verdict was attested (and is now re-derived) with: recipe, --gpus, scenario."""
    gpus_override: dict[str, Any] | None = None
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
            "trusted_key_origin": self.key_origin,
            "subjects_checked": self.subjects,
            "verdict_now": self.status,
            "attested_verdict": self.attested_status,
            "verify_inputs": self.inputs,
            "gpus_override": self.gpus_override,
            "attested_reasons": self.reasons,
            "label": self.label,
            "differences": self.differences,
            "notes": self.notes,
            "vms": [v.to_json() for v in self.vms],
        }


CORE_FIELDS = {
    "run": (
        "status",
        "reproduction",
        "reasons",
        "checks",
        "folder",
        "recipe",
        "recipe_hash",
        "scenario",
        "gpus",
        "gpus_source",
        "tokens_per_s",
        "tokens_per_s_per_gpu",
        "published",
        "band_per_gpu",
        "deviation_pct",
        "accuracy",
        "accuracy_verdict",
        "test06",
    ),
    "rack": ("all_pass", "verdict", "recipe", "recipe_hash", "scenario", "stats", "vms", "excluded", "excluded_why"),
}
"""What every attested verdict must state, whichever repro signed it: a statement that leaves one out (a verdict of
just `{"all_pass": true}`) attests nothing about it, and is not verified."""


def compare(attested: Any, now: Any, where: str = "verdict", *, strict: bool = False) -> tuple[list[str], list[str]]:
    """(differences, notes) between two JSON documents, each as `where.key: attested X, now Y`.

    A value both hold that differs is a difference. A key only one side has is a difference when `strict` (the same
    repro signed: its verify reports exactly these fields), else a note: a newer repro's verify reports more (or
    less) than the one that signed, which the attested figures neither confirm nor contradict. Lists of named items
    (the checks) are matched by name, so an added check is a note, not a shifted list."""
    if isinstance(attested, dict) and isinstance(now, dict):
        diffs: list[str] = []
        notes: list[str] = []
        for key in sorted(set(attested) | set(now), key=str):
            if key not in now:
                said = f"{where}.{key}: attested {_short(attested[key])}; this repro's verify does not report it"
                (diffs if strict else notes).append(said)
            elif key not in attested:
                said = f"{where}.{key}: not attested; this repro's verify reports {_short(now[key])}"
                (diffs if strict else notes).append(said)
            else:
                d, n = compare(attested[key], now[key], f"{where}.{key}", strict=strict)
                diffs += d
                notes += n
        return diffs, notes
    if isinstance(attested, list) and isinstance(now, list):
        named_a, named_n = _by_name(attested), _by_name(now)
        if named_a is not None and named_n is not None:
            return compare(named_a, named_n, where, strict=strict)
        if len(attested) == len(now):
            pairs = [
                compare(a, n, f"{where}[{i}]", strict=strict)
                for i, (a, n) in enumerate(zip(attested, now, strict=True))
            ]
            return [d for p in pairs for d in p[0]], [n for p in pairs for n in p[1]]
    return ([] if attested == now else [f"{where}: attested {_short(attested)}, now {_short(now)}"]), []


def _verdict_differences(kind: str, attested: Any, now: Any, signed_by: Any) -> tuple[list[str], list[str]]:
    """Every field of the verdict re-derived now against the attested one: strict when this repro signed it, and
    whichever repro signed it, every core field (CORE_FIELDS) must be attested and equal."""
    if not isinstance(attested, dict):
        return [f"verdict: attested {_short(attested)}, not a verdict"], []
    diffs, notes = compare(attested, now, strict=signed_by == __version__)
    missing = [k for k in CORE_FIELDS.get(kind, ()) if k in now and k not in attested]
    diffs += [
        f"verdict.{k}: not attested, so nothing about it is verified"
        for k in missing
        if f"verdict.{k}:" not in " ".join(diffs)
    ]
    notes = [n for n in notes if not any(n.startswith(f"verdict.{k}:") for k in missing)]
    return diffs, notes


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


def _verdict_now(kind: str, predicate: dict[str, Any], logs: Path) -> tuple[Any, list[Path], str | None]:
    """(verify's JSON on the logs now, relocated; the files that verdict read; or None, [] and why it could not be
    produced). The logs are judged at their absolute path, as attesting judged them."""
    from repro.results.attest import verdict_files

    inputs = predicate.get("verify_inputs") or {}
    recipe, gpus, scenario = inputs.get("recipe"), inputs.get("gpus"), inputs.get("scenario")
    logs = logs.absolute()
    try:
        if kind == "rack":
            from repro.results.aggregate import aggregate

            report = aggregate([logs], recipe=recipe, gpus=gpus, scenario=scenario or "Offline")
            files = [f for r in report.rows if r.verdict is not None for f in verdict_files(r.verdict.run)]
            return relocate(report.to_json(), logs), files, None
        from repro.results.verify import verify_dir

        verdict = verify_dir(logs, recipe=recipe, gpus=gpus, scenario=scenario)
        return relocate(verdict.to_json(), logs), verdict_files(verdict.run), None
    except ReproError as exc:
        return None, [], exc.message


def _kind_now(predicate: dict[str, Any], logs: Path) -> str:
    """Whether these logs are a rack or one run, decided as attesting decides it (never by the statement)."""
    from repro.results.attest import rack_of

    inputs = predicate.get("verify_inputs") or {}
    return (
        "rack" if rack_of(logs.absolute(), inputs.get("recipe"), inputs.get("gpus"), inputs.get("scenario")) else "run"
    )


def _inputs_differences(files: list[Path], attested: dict[str, str], outside: Any, logs: Path) -> list[str]:
    """Every file the verdict reads must be one the attestation hashed: inside the folder a subject, outside it an
    entry of `inputs_outside` with the same SHA-256 (a rack VM's system JSON)."""
    from repro.results.attest import HashBudget

    out = []
    outside = outside if isinstance(outside, dict) else {}
    root, budget = logs.absolute(), HashBudget()
    for f in files:
        if f.is_relative_to(root):
            rel = f.relative_to(root).as_posix()
            if rel not in attested:
                out.append(f"{rel}: the verdict reads it, but the attestation does not list it")
            continue
        rel = os.path.relpath(f, root)
        if rel not in outside:
            out.append(f"{rel}: the verdict reads it (outside the folder), but the attestation does not list it")
        elif budget.sha256(f, str(f)) != outside[rel]:
            out.append(f"{rel}: changed since it was attested (outside the folder)")
    return out


def _trusted(key: Path | None, workspace_root: Path, logs: Path, file: Path) -> tuple[Any, Path, str]:
    """(the key, its file, why it is trusted): --key as given, else this workspace's own key, but never a key from
    the material being checked (a workspace inside the folder of logs, as a bundle ships one, proves nothing)."""
    from repro.core.signing import default_key_path, public_path_of

    if key is not None:
        found, path = trusted_key(key, workspace_root)
        return found, path, "given with --key"
    own = default_key_path(workspace_root)
    checked = {logs.resolve()}  # the folder of logs checked (an attestation kept in it is inside it too)
    for candidate in (public_path_of(own), own):
        where = candidate.resolve()
        inside = [c for c in checked if where == c or c in where.parents]
        if candidate.exists() and inside:
            raise InputError(
                f"the only key to check {file} with is {candidate}, inside the folder being checked ({inside[0]}): "
                "a key shipped with the material it signs proves nothing.",
                f"`repro attest verify {file} --key SIGNER.pem.pub` with the signer's public key from elsewhere",
            )
    found, path = trusted_key(None, workspace_root)
    return found, path, "this workspace's own key"


def _status_of(kind: str, verdict: Any) -> str | None:
    if not isinstance(verdict, dict):
        return None
    if kind == "rack":
        return "PASS" if verdict.get("all_pass") is True else "FAIL"
    status = verdict.get("status")
    return status if isinstance(status, str) else None


def verify_file(
    file: Path,
    logs: Path | None = None,
    key: Path | None = None,
    workspace_root: Path | None = None,
    *,
    trusted: tuple[Any, Path, str] | None = None,
    allowed_excludes: tuple[str, ...] = (),
) -> Verification:
    """Check one attestation against its logs (`logs`, else the attestation's own folder); see the module doc.
    `allowed_excludes`: the top-level folders a rack's attestation may leave unhashed (its image archive)."""
    file = Path(file)
    if file.is_dir():
        file = file / ATTESTATION_NAME
    doc = read_envelope(file)
    logs = Path(logs) if logs is not None else file.parent
    if not logs.is_dir():
        raise InputError(f"{logs}: no such folder of logs.", "`repro attest verify FILE --logs RUN_DIR`")
    if trusted is None:
        trusted = _trusted(key, workspace_root or Path.cwd(), logs, file)
    result = Verification(file, logs, key_source=trusted[1], key_origin=trusted[2])
    try:
        payload, payload_type, keyid = open_envelope(doc, trusted[0], file)
    except SignatureMismatch as exc:
        result.differences.append(f"signature: {exc}")
        return result
    result.keyid = keyid
    statement = _statement(payload, payload_type, file)
    predicate = statement["predicate"]
    attested_kind = str(predicate.get("kind") or "run")
    result.kind = _kind_now(predicate, logs)
    verdict = predicate.get("verdict") if isinstance(predicate.get("verdict"), dict) else {}
    result.attested_status = _status_of(attested_kind, verdict)
    result.inputs = {k: v for k, v in (predicate.get("verify_inputs") or {}).items() if v is not None}
    result.label = (predicate.get("run") or {}).get("label")
    reasons = verdict.get("reasons")
    result.reasons = [str(r) for r in reasons] if isinstance(reasons, list) else []
    attested = {s["name"]: str(s["digest"].get("sha256")) for s in statement["subject"]}
    stated = predicate.get("excluded") or []
    stated = [str(x) for x in stated] if isinstance(stated, list) else [str(stated)]
    diffs: list[str] = []
    if attested_kind != result.kind:
        diffs.append(f"kind: attested as a {attested_kind}, these logs are a {result.kind}")
    if unhashed := [x for x in stated if x not in allowed_excludes or result.kind != "rack"]:
        diffs.append(f"excluded: the attestation leaves {', '.join(unhashed)} unhashed; only a rack's image may be")
    exclude = tuple(x for x in stated if x in allowed_excludes) if result.kind == "rack" else ()
    problems: list[str] = []
    now = hash_tree(logs, exclude, problems)
    result.subjects = len(attested)
    if not attested:
        diffs.append("subject: the attestation lists no file, so no file of these logs is attested")
    other = _other_run(predicate, now, logs)
    if other:
        result.differences.append(other)
    diffs += problems + _file_differences(attested, now)
    now_verdict, files, failed = _verdict_now(result.kind, predicate, logs)
    if failed is not None:
        diffs.append(f"repro verify cannot judge these logs now: {failed}")
    else:
        result.status = _status_of(result.kind, now_verdict)
        result.gpus_override = now_verdict.get("gpus_override") if isinstance(now_verdict, dict) else None
        diffs += _inputs_differences(files, attested, predicate.get("inputs_outside"), logs)
        changed, extra = _verdict_differences(result.kind, verdict, now_verdict, predicate.get("repro_version"))
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
    files = predicate.get("files")
    files = files if isinstance(files, dict) else {}
    entries = {what: e if isinstance(e := files.get(what), dict) else {} for what in ("recipe", "benchmark")}
    names = {what: str(e["name"]) for what, e in entries.items() if e.get("name") not in (None, "", UNKNOWN)}
    if not names:
        return
    # without a recipe, the benchmark the verdict judged by (a published DeepSeek-R1 folder judged by its record)
    now = recipe_files(names.get("recipe"), None if "recipe" in names else names.get("benchmark"))
    for what, entry in entries.items():
        a, n = entry.get("sha256"), (now.get(what) or {}).get("sha256")
        if a and n and a != n and UNKNOWN not in (a, n):
            shown = shown_value(names.get(what, UNKNOWN))
            result.notes.append(f"the {what} file {shown} shipped with this repro differs from the attested one")
