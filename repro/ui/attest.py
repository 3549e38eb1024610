"""Views of `repro attest` (what was signed, where the key is) and `repro attest verify` (what holds, what differs)."""

from __future__ import annotations

import shlex
from typing import Any

from rich.console import Group
from rich.text import Text

from repro.core.signing import KeyInfo
from repro.core.textsafe import one_line
from repro.results.attest import Plan
from repro.results.attest_verify import Verification
from repro.ui.wrap import Prose


class Attested:
    """An attestation written (or, with --dry-run, what would be), the key that signed it and how to check it."""

    def __init__(self, plan: Plan, key: KeyInfo, dry_run: bool):
        self.plan, self.key, self.dry_run = plan, key, dry_run
        pub = key.public_path or key.path
        self.next_command = shlex.join(["repro", "attest", "verify", str(plan.path), "--key", str(pub)])

    def to_json(self) -> dict[str, Any]:
        return {
            **self.plan.to_json(),
            "dry_run": self.dry_run,
            "key": self.key.to_json(),
            "next_command": self.next_command,
        }

    def __rich__(self) -> Group:
        lines: list[Any] = []
        if self.key.created:
            verb = "would generate" if self.dry_run else "generated"
            lines.append(
                Prose(
                    Text(
                        f"Key: {verb} an Ed25519 key at {one_line(self.key.path)} (0600, private: keep it on this "
                        f"host); its public half is {one_line(self.key.public_path)}."
                    )
                )
            )
        else:
            lines.append(Prose(Text(f"Key: {one_line(self.key.path)} (key id {self.key.keyid[:16]}).")))
        for vm in self.plan.vms:
            lines.append(_line(vm, self.dry_run, "  VM "))
        lines.append(_line(self.plan, self.dry_run, "Rack " if self.plan.kind == "rack" else ""))
        return Group(*lines)


def _line(plan: Plan, dry_run: bool, prefix: str) -> Prose:
    data = plan.to_json()
    label = f", {data['label']} (never a reproduction)" if data.get("label") not in (None, "unknown") else ""
    head = f"{prefix}{'would write' if dry_run else 'wrote'} {one_line(plan.path)}"
    digest = f", sha256 {plan.digest}" if plan.digest else ""
    return Prose(Text(f"{head}: {data['subjects']} files, verdict {data['status']}{label}{digest}."))


def _inputs(v: Verification) -> str:
    """The options the verdict was attested with, as flags (what `repro verify` would be given)."""
    flags = [f"--{k} {val}" for k, val in v.inputs.items() if k in ("recipe", "gpus", "scenario")]
    return one_line(f" {' '.join(flags)}") if flags else ""


def _override(v: Verification) -> list[Prose]:
    o = v.gpus_override
    if not o:
        return []
    against = f"; the run's files contradict it ({'; '.join(o['contradicts'])})" if o.get("contradicts") else ""
    return [Prose(Text(f"  --gpus {o.get('gpus')} was given when attesting{against}", style="yellow"))]


def verification(v: Verification) -> Group:
    lines: list[Any] = []
    for vm in v.vms:
        lines.append(verification(vm))
    key = one_line(f"key {str(v.keyid or '?')[:16]} ({v.key_source}, trusted as {v.key_origin})")
    if v.ok:
        what = "rack attestation" if v.kind == "rack" else "attestation"
        text = Text("Verified: ", style="bold green") + Text(
            f"the {what} {one_line(v.file)} holds for {one_line(v.logs)}: signed by {key}, {v.subjects} files "
            f"unchanged, and `repro verify{_inputs(v)}` on them gives {v.status} again, as attested."
        )
        lines.append(Prose(text))
        lines += [Prose(Text(f"  - {r}")) for r in v.reasons]
    else:
        where = f"{one_line(v.file)} does not hold for {one_line(v.logs)}:"
        text = Text("Not verified: ", style="bold red") + Text(where)
        lines.append(Prose(text))
        lines += [Prose(Text(f"  - {d}")) for d in v.differences]
        if v.keyid:
            lines.append(Prose(Text(f"  signed by {key}; repro verify{_inputs(v)} on these logs now: {v.status}")))
    lines += _override(v)
    if v.label not in (None, "unknown"):
        lines.append(Prose(Text(f"label: {v.label} (never counted as a reproduction)")))
    lines += [Prose(Text(f"note: {n}")) for n in v.notes]
    return Group(*lines)
