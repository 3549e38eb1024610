"""`repro attest`: a signed record of one run (or a rack) that anyone can check offline, without rerunning it.

The attestation is an in-toto Statement v1 in a DSSE envelope signed with Ed25519 (core/signing.py). Its subjects
are the SHA-256 of every file of the result folder, so an edited, swapped, removed or added file is found; its
predicate records what the verdict rests on (recipe and benchmark files, image digest, software, GPUs as run.json
recorded them) and the verdict itself, exactly as `repro verify --json` gives it, so `repro attest verify` re-runs
verify on the logs and requires the same answer. Verifying lives in results/attest_verify.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro import __version__
from repro.core.clock import now_iso
from repro.core.errors import InputError
from repro.core.safeio import sha256_regular

ATTESTATION_NAME = "attestation.intoto.json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_TYPE = "urn:repro:mlperf-reproduction:v1"
MAX_FILES = 20_000
MAX_TOTAL_BYTES = 64 << 30
"""A run's logs are megabytes, its accuracy log a few hundred; 64 GiB is no result folder (and hours of hashing)."""
UNKNOWN = "unknown"
RUN_DIR_TOKEN = "RUN_DIR"
"""Stands for the attested folder's own path inside the recorded verdict, so the logs verify from any folder."""


def known(value: Any) -> Any:
    """A recorded value, or `unknown` (never a guess) where run.json has none."""
    return UNKNOWN if value is None or value == "" or value == [] else value


def hash_tree(root: Path, exclude: tuple[str, ...] = (), problems: list[str] | None = None) -> dict[str, str]:
    """{relative POSIX path: sha256} of every regular file under root, but root's own attestation and the
    `exclude`d top-level folders. A link, FIFO or device in a result folder is no evidence: refused (InputError),
    or, given `problems`, named there and skipped (what a verification reports as a difference)."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: not a folder.", "`repro attest RUN_DIR` with a result folder")
    found: dict[str, str] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d not in exclude]
        for name in sorted(dirnames):
            if os.path.islink(os.path.join(dirpath, name)):
                if problems is not None:
                    problems.append(f"{(rel_dir / name).as_posix()}: a link to a folder, not files of the run")
                    continue
                raise InputError(
                    f"{Path(dirpath) / name}: a link inside the result folder; an attestation covers files only.",
                    "replace the link with the files it points at, then `repro attest` again",
                )
        for name in filenames:
            rel = (rel_dir / name).as_posix()
            if rel == ATTESTATION_NAME:
                continue
            path = Path(dirpath) / name
            mode = os.lstat(path).st_mode
            if not stat.S_ISREG(mode):
                if problems is not None:
                    problems.append(f"{rel}: not a regular file (a link, FIFO or device)")
                    continue
                raise InputError(
                    f"{path}: not a regular file (a link, FIFO or device); an attestation covers files only.",
                    "remove it or replace it with the file it stands for",
                )
            total += os.lstat(path).st_size
            if total > MAX_TOTAL_BYTES:
                raise InputError(
                    f"{root}: more than {MAX_TOTAL_BYTES >> 30} GiB of files; not one result folder.",
                    "point at one run",
                )
            found[rel] = sha256_regular(path)
            if len(found) > MAX_FILES:
                raise InputError(f"{root}: more than {MAX_FILES:,} files; not one result folder.", "point at one run")
    return dict(sorted(found.items()))


def relocate(doc: Any, root: Path) -> Any:
    """`doc` with the folder's own path written as RUN_DIR, so the same logs elsewhere give the same document."""
    forms = sorted({str(root), str(root.absolute()), str(root.resolve())}, key=len, reverse=True)

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            for form in forms:
                node = node.replace(form, RUN_DIR_TOKEN)
            return node
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list | tuple):
            return [walk(v) for v in node]
        return node

    return json.loads(json.dumps(walk(doc), default=str))


def _file_entry(path: Path | None, what: str) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {"name": what, "path": UNKNOWN, "sha256": UNKNOWN}
    return {"name": what, "path": path.name, "sha256": sha256_regular(path)}


def recipe_files(recipe_name: str | None) -> dict[str, Any]:
    """The recipe's YAML and the benchmark file it names, by hash (files repro ships: recipes/, repro/data/)."""
    from repro.core.recipes import get_recipe, recipes_dir

    if not recipe_name:
        return {"recipe": _file_entry(None, UNKNOWN), "benchmark": _file_entry(None, UNKNOWN)}
    try:
        recipe = get_recipe(recipe_name)
    except InputError:
        return {"recipe": _file_entry(None, recipe_name), "benchmark": _file_entry(None, UNKNOWN)}
    path = next((p for p in recipes_dir().glob("*.yaml") if p.stem == recipe.name), None)
    out = {"recipe": {**_file_entry(path, recipe.name), "content_hash": recipe.hash()}}
    bench = getattr(recipe, "benchmark", None)
    bench_path: Path | None = None
    if isinstance(bench, str):
        data = Path(__file__).resolve().parent.parent / "data" / "benchmarks"
        bench_path = next((p for p in data.glob("*.y*ml") if p.stem == bench), None) if data.is_dir() else None
    out["benchmark"] = _file_entry(bench_path, bench if isinstance(bench, str) else UNKNOWN)
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("sha256:") and len(value) == 71


def _software(info: Any) -> dict[str, Any]:
    prov: dict[str, Any] = dict(info.provenance) if info is not None else {}
    packages = _dict(prov.get("packages"))
    digest = (info.container_digest if info is not None else None) or prov.get("container_digest")
    image: dict[str, Any] = {"digest": UNKNOWN, "recorded": known(digest), "from": "run.json container_digest"}
    servers = _dict(info.servers if info is not None else None)
    ids = {k: v for k, v in _dict(servers.get("image_ids")).items() if _is_digest(v)}
    if _is_digest(digest):
        image["digest"] = digest
    elif len(set(ids.values())) == 1:  # repro ran on the host; its servers ran this image
        tag, image["digest"] = next(iter(ids.items()))
        image.update({"recorded": tag, "from": "run.json servers.image_ids (the trtllm-serve image)"})
    return {
        "container_image": image,
        "tensorrt_llm": known(packages.get("tensorrt_llm") or packages.get("tensorrt-llm")),
        "loadgen": known((info.loadgen_version if info is not None else None) or prov.get("loadgen_version")),
        "driver": known((info.driver if info is not None else None) or prov.get("driver")),
        "cuda": known(prov.get("cuda_driver") or prov.get("cuda")),
        "repro_at_run": known(prov.get("repro_version")),
        "python": known(prov.get("python")),
        "hostname": known(prov.get("hostname")),
        "vm_size": known((info.vm_size if info is not None else None) or prov.get("vm_size")),
    }


GPU_FIELDS = (
    "power_limit_w",
    "enforced_power_limit_w",
    "sm_clock_max_mhz",
    "mem_clock_max_mhz",
    "app_sm_clock_mhz",
    "app_mem_clock_mhz",
    "ecc_mode",
    "mig_mode",
)


def _gpus(info: Any) -> dict[str, Any]:
    """GPU names and UUIDs, and per GPU what NVML reported at run time (provenance.gpus.details), else unknown."""
    prov: dict[str, Any] = dict(info.provenance) if info is not None else {}
    gpus = _dict(prov.get("gpus"))
    names = gpus.get("names") or (info.gpu_names if info is not None else [])
    details: list[Any] = _list(gpus.get("details"))
    uuids: list[Any] = _list(gpus.get("uuids"))
    per_gpu = []
    for i, name in enumerate(names or []):
        d = details[i] if i < len(details) and isinstance(details[i], dict) else {}
        per_gpu.append(
            {"index": i, "name": name, "uuid": known(uuids[i] if i < len(uuids) else None)}
            | {k: known(d.get(k)) for k in GPU_FIELDS}
        )
    cpu = prov.get("cpu") if isinstance(prov.get("cpu"), dict) else None
    return {"count": len(names or []), "devices": per_gpu, "cpu": cpu or UNKNOWN}


def _gpu_probe(info: Any) -> Any:
    """The GPU probe's figures when the run measured them (`repro doctor --probe`: run.json `probe`)."""
    if info is None:
        return None
    extra = info.model_extra or {}
    return getattr(info, "probe", None) or extra.get("gpu_probe") or _dict(info.provenance).get("gpu_probe")


def run_identity(root: Path, info: Any, subjects: dict[str, str], run_folder: Path) -> dict[str, Any]:
    """What says which run this is: its folder name, start time and the hash of the judged run's run.json."""
    try:
        rel = (Path(run_folder).resolve().relative_to(Path(root).resolve()) / "run.json").as_posix()
    except ValueError:
        rel = None
    return {
        "folder": root.resolve().name,
        "started": known(info.started if info is not None else None),
        "label": known(info.label if info is not None else None),
        "run_json": known(rel if rel in subjects else None),
        "run_json_sha256": known(subjects.get(rel) if rel else None),
    }


@dataclass
class Plan:
    """One attestation to write: the folder, its subjects and predicate; `vms` for a rack (written first)."""

    root: Path
    kind: str
    predicate: dict[str, Any]
    subjects: dict[str, str]
    exclude: tuple[str, ...] = ()
    vms: list[Plan] = field(default_factory=list)
    written: bool = False
    digest: str | None = None

    @property
    def path(self) -> Path:
        return self.root / ATTESTATION_NAME

    def statement(self, signer_keyid: str) -> dict[str, Any]:
        predicate = {**self.predicate, "signer": {"keyid": signer_keyid, "scheme": "ed25519"}}
        return {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": rel, "digest": {"sha256": h}} for rel, h in self.subjects.items()],
            "predicateType": PREDICATE_TYPE,
            "predicate": predicate,
        }

    def to_json(self) -> dict[str, Any]:
        verdict = self.predicate.get("verdict") or {}
        return {
            "kind": self.kind,
            "attestation": str(self.path),
            "written": self.written,
            "sha256": self.digest,
            "subjects": len(self.subjects),
            "status": verdict.get("status") or ("PASS" if verdict.get("all_pass") else "FAIL"),
            "label": self.predicate.get("run", {}).get("label"),
            "vms": [v.to_json() for v in self.vms],
        }


def verdict_inputs(recipe: str | None, gpus: int | None, scenario: str | None) -> dict[str, Any]:
    return {"recipe": recipe, "gpus": gpus, "scenario": scenario}


def plan_run(root: Path, recipe: str | None, gpus: int | None, scenario: str | None) -> Plan:
    """The attestation of one run folder: verify's verdict on it and the hash of every file (nothing written)."""
    from repro.results.verify import verify_dir

    root = Path(root)
    verdict = verify_dir(root, recipe=recipe, gpus=gpus, scenario=scenario)
    info = verdict.run.run_info
    subjects = hash_tree(root)
    vjson = relocate(verdict.to_json(), root)
    predicate = {
        "kind": "run",
        "repro_version": __version__,
        "attested": now_iso(),
        "verify_inputs": verdict_inputs(verdict.recipe.name if verdict.recipe else recipe, gpus, scenario),
        "run": run_identity(root, info, subjects, verdict.run.folder),
        "files": recipe_files(verdict.recipe.name if verdict.recipe else None),
        "software": _software(info),
        "gpus": _gpus(info),
        "gpu_probe": known(_gpu_probe(info)),
        "published": {
            "compared_with": verdict.reference,
            "figure": vjson.get("published"),
            "record": vjson.get("published_record"),
        },
        "verdict": vjson,
    }
    return Plan(root, "run", predicate, subjects)


def rack_vm_folders(root: Path, report: Any) -> dict[str, Path] | None:
    """{VM name: its top-level folder under root} when root is a rack: each counted VM in its own child folder."""
    root = Path(root)
    tops: dict[str, Path] = {}
    for row in report.rows:
        try:
            rel = Path(row.folder).resolve().relative_to(root.resolve())
        except ValueError:
            return None
        if not rel.parts or rel.parts[0] in tops.values():
            return None
        tops[row.name] = root / rel.parts[0]
    return tops if len(tops) >= 2 and len(set(tops.values())) == len(tops) else None


def plan(
    root: Path,
    recipe: str | None = None,
    gpus: int | None = None,
    scenario: str | None = None,
    exclude: tuple[str, ...] = (),
) -> Plan:
    """A run's attestation, or a rack's: one per VM folder and one over the rack's files and its aggregate."""
    from repro.core.errors import ReproError
    from repro.results.aggregate import aggregate

    root = Path(root)
    if not root.exists():
        raise InputError(f"{root}: no such file or folder.", "`repro status` lists your runs")
    if not root.is_dir():
        raise InputError(f"{root}: not a folder; attest the run's folder.", "`repro attest RUN_DIR`")
    try:
        rack = aggregate([root], recipe=recipe, gpus=gpus, scenario=scenario or "Offline")
        vms = rack_vm_folders(root, rack) if len(rack.rows) > 1 else None
    except ReproError:
        vms = None
    if not vms:
        return plan_run(root, recipe, gpus, scenario)
    vm_plans = [plan_run(folder, recipe, gpus, scenario) for folder in vms.values()]
    predicate = {
        "kind": "rack",
        "repro_version": __version__,
        "attested": now_iso(),
        "verify_inputs": verdict_inputs(rack.recipe.name if rack.recipe else recipe, gpus, rack.scenario),
        "run": {"folder": root.resolve().name, "vms": {name: str(f.relative_to(root)) for name, f in vms.items()}},
        "files": recipe_files(rack.recipe.name if rack.recipe else None),
        "verdict": relocate(rack.to_json(), root),
        "excluded": list(exclude),
    }
    return Plan(root, "rack", predicate, {}, exclude, vm_plans)


def write(plan: Plan, signer: Any, *, dry_run: bool = False) -> Plan:
    """Sign and write each VM's attestation, then the rack's over files that now include them (or, dry, count)."""
    from repro.core.fsutil import atomic_write_bytes
    from repro.core.signing import sign_envelope

    for vm in plan.vms:
        write(vm, signer, dry_run=dry_run)
    if plan.kind == "rack":
        plan.subjects = hash_tree(plan.root, plan.exclude)
        plan.predicate["vm_attestations"] = {str(vm.path.relative_to(plan.root)): vm.digest for vm in plan.vms}
    if dry_run or signer is None:
        return plan
    statement = plan.statement(signer.public_key.keyid)
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    envelope = sign_envelope(payload, PAYLOAD_TYPE, signer)
    data = (json.dumps(envelope, indent=2) + "\n").encode()
    atomic_write_bytes(plan.path, data)
    plan.written, plan.digest = True, hashlib.sha256(data).hexdigest()
    return plan


def digest_of(path: Path) -> str | None:
    """sha256 of an attestation file, as the report shows it; None when there is none."""
    path = Path(path)
    return sha256_regular(path) if path.is_file() else None


def claimed_keyid(path: Path) -> str | None:
    """The key id an attestation's envelope names (unverified: what it claims, for showing beside its digest)."""
    from repro.core.signing import read_envelope

    try:
        sigs = read_envelope(Path(path)).get("signatures") or []
    except InputError:
        return None
    first = sigs[0] if isinstance(sigs, list) and sigs and isinstance(sigs[0], dict) else {}
    keyid = first.get("keyid")
    return keyid if isinstance(keyid, str) else None


def verify_command(path: Path, keyid: str | None = None) -> str:
    """`repro attest verify FILE --key PUB`: this workspace's public key when it is the signer's, else a stand-in."""
    import shlex

    from repro.core.signing import default_key_path, load_public_key, public_path_of
    from repro.core.workspace import Workspace

    pub = public_path_of(default_key_path(Workspace.open().root))
    key = "SIGNER.pem.pub"
    if keyid and pub.is_file():
        with contextlib.suppress(InputError, ImportError):
            key = str(pub) if load_public_key(pub).keyid == keyid else key
    return shlex.join(["repro", "attest", "verify", str(path), "--key", key])


def find_attestations(dirs: list[Path], run_folders: list[Path]) -> list[tuple[Path, str, str | None]]:
    """(file, sha256, claimed key id) of each attestation in a folder given or between it and a run's folder."""
    found: list[Path] = []
    for d in dirs:
        for folder in run_folders:
            chain = [folder, *folder.parents]
            for p in chain[: chain.index(d) + 1] if d in chain else [d]:
                if (p / ATTESTATION_NAME).is_file() and p / ATTESTATION_NAME not in found:
                    found.append(p / ATTESTATION_NAME)
    return [(p, digest_of(p) or "", claimed_keyid(p)) for p in found]
