"""`repro attest`: a signed record of one run (or a rack) that anyone can check offline, without rerunning it.

The attestation is an in-toto Statement v1 in a DSSE envelope signed with Ed25519 (core/signing.py). Its subjects
are the SHA-256 of every file of the result folder, so an edited, swapped, removed or added file is found; its
predicate records what the verdict rests on (recipe and benchmark files, image digest, software, GPUs as run.json
recorded them) and the verdict itself, exactly as `repro verify --json` gives it (a --gpus override and what it
contradicts included), so `repro attest verify` re-runs verify on the logs and requires the same answer. Paths in
the verdict are made relative to the folder as paths (RUN_DIR/...), never by replacing text; every file the verdict
reads outside the folder is hashed too (`inputs_outside`); every hash is bounded in bytes and time (HashBudget).
Verifying lives in results/attest_verify.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro import __version__
from repro.core.benchmarks import BenchmarkSource, benchmark_path
from repro.core.clock import now_iso
from repro.core.errors import InputError
from repro.core.safeio import sha256_regular

ATTESTATION_NAME = "attestation.intoto.json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_TYPE = "urn:repro:mlperf-reproduction:v1"
MAX_FILES = 20_000
MAX_FILE_BYTES = 4 << 30
"""The largest file of a result folder is its accuracy log: a whole Llama-2-70B set is tens of MB, the whole 405B
set at 20,000 tokens a sample at most 1.3 GB. A bigger file (a 40 GiB sparse one) is no log: refused by its size."""
MAX_TOTAL_BYTES = 16 << 30
"""Every file of one result folder together (a rack's image archive is not hashed)."""
HASH_SECONDS = 600.0
"""Hashing that takes longer than this (a disk far slower than any VM's) is stopped with one error, never a hang."""
UNKNOWN = "unknown"
RUN_DIR_TOKEN = "RUN_DIR"
"""Stands for the attested folder's own path inside the recorded verdict, so the logs verify from any folder."""


class HashBudget:
    """The bytes and seconds one attestation's hashing may take, shared by every file it hashes."""

    def __init__(self, max_bytes: int = MAX_TOTAL_BYTES, seconds: float = HASH_SECONDS):
        import time

        self.left, self.max_bytes, self.seconds = max_bytes, max_bytes, seconds
        self.deadline = time.monotonic() + seconds

    def sha256(self, path: Path, shown: str) -> str:
        """sha256 of a regular file, refused (InputError) past the per-file size, the total or the deadline; the
        size is read from the open handle (no swap between a check and the read)."""
        import time

        from repro.core.safeio import CHUNK, open_regular

        h = hashlib.sha256()
        with open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise InputError(
                    f"{shown}: {size / (1 << 30):,.1f} GiB, more than the {MAX_FILE_BYTES >> 30} GiB any file of a "
                    "result folder is (its accuracy log is the largest); not hashed.",
                    "remove the file from the result folder, then attest or verify again",
                )
            if size > self.left:
                raise InputError(
                    f"{shown}: the folder's files pass {self.max_bytes >> 30} GiB together; not one result folder.",
                    "point at one run",
                )
            self.left -= size
            read = 0
            while block := fh.read(CHUNK):
                read += len(block)
                if read > size:  # the file grew while it was read: not the file that was measured
                    raise InputError(f"{shown}: changed while it was hashed.", "attest or verify again")
                h.update(block)
                if time.monotonic() > self.deadline:
                    raise InputError(
                        f"{shown}: hashing the folder took more than {self.seconds:.0f} s; stopped.",
                        "check the disk (`df -h`), or attest a folder on local storage",
                    )
        return h.hexdigest()


def known(value: Any) -> Any:
    """A recorded value, or `unknown` (never a guess) where run.json has none."""
    return UNKNOWN if value is None or value == "" or value == [] else value


def hash_tree(
    root: Path, exclude: tuple[str, ...] = (), problems: list[str] | None = None, budget: HashBudget | None = None
) -> dict[str, str]:
    """{relative POSIX path: sha256} of every regular file under root, but root's own attestation and the
    `exclude`d top-level folders, within `budget` (bytes and seconds). A link, FIFO or device in a result folder is
    no evidence: refused (InputError), or, given `problems`, named there and skipped (what a verification reports
    as a difference)."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: not a folder.", "`repro attest RUN_DIR` with a result folder")
    budget = budget or HashBudget()
    found: dict[str, str] = {}
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
            found[rel] = budget.sha256(path, str(path))
            if len(found) > MAX_FILES:
                raise InputError(f"{root}: more than {MAX_FILES:,} files; not one result folder.", "point at one run")
    return dict(sorted(found.items()))


_ABSOLUTE_PATH = re.compile(r"(?<![\w.~-])/[^\s'\"`),;]*")
"""A path as verify's JSON writes one (verify is run on the absolute folder, so every path it names is absolute),
up to the quote, bracket, comma or space that ends it in a sentence."""


def relocate(doc: Any, root: Path) -> Any:
    """`doc` with every path inside the folder written relative to it, as RUN_DIR/..., so the same logs elsewhere give
    the same document. Structured: each absolute path in a string is read as a path and made relative to the folder
    when it is inside it (Path.relative_to); no other text is touched (a folder named `Offline` or `.` leaves the
    word Offline and every dot alone)."""
    forms = sorted({root.absolute(), root.resolve()}, key=lambda p: -len(p.parts))

    def relative(match: re.Match[str]) -> str:
        text = match.group(0)
        tail = text[len(text.rstrip(".:")) :]  # a sentence's full stop or colon after the path
        path = Path(text[: len(text) - len(tail)] or text)
        for form in forms:
            if path == form or form in path.parents:
                rel = path.relative_to(form).as_posix()
                return (RUN_DIR_TOKEN if rel == "." else f"{RUN_DIR_TOKEN}/{rel}") + tail
        return text

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            return _ABSOLUTE_PATH.sub(relative, node)
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list | tuple):
            return [walk(v) for v in node]
        return node

    return json.loads(json.dumps(walk(doc), default=str))


def verdict_files(run: Any) -> list[Path]:
    """Every file a verdict on `run` reads (absolute): its LoadGen logs, run.json, the system JSON, accuracy.txt and
    the accuracy log beside it, the TEST06 folder's files, and the same of each identical copy it counted once. An
    attestation must list and hash each, or the verdict rests on a file nobody checked."""
    from repro.core.record import RUN_JSON
    from repro.results.compliance import find_test06

    paths: list[Path | None] = [run.summary_path, run.detail_path, run.system_path, run.accuracy_path]
    paths.append(run.folder / RUN_JSON)
    if run.accuracy_path is not None:
        paths.append(Path(run.accuracy_path).with_name("mlperf_log_accuracy.json"))
    test06 = find_test06(run.folder)
    if test06 is not None:
        paths += [p for p in sorted(test06.rglob("*")) if p.is_file() or p.is_symlink()]
    for copy in run.copies:
        paths += verdict_files(copy)
    out: dict[str, Path] = {}
    for p in paths:
        if p is not None and (Path(p).is_file() or Path(p).is_symlink()):
            out.setdefault(str(Path(p).absolute()), Path(p).absolute())
    return sorted(out.values())


def outside_inputs(root: Path, files: list[Path], budget: HashBudget) -> dict[str, str]:
    """{path relative to root (with ..): sha256} of the files the verdict reads outside the attested folder (a rack
    VM's system JSON sits in the rack folder above it): hashed into the statement like every subject."""
    root = Path(root).absolute()
    out = {}
    for f in files:
        if not f.is_relative_to(root):
            out[os.path.relpath(f, root)] = budget.sha256(f, str(f))
    return dict(sorted(out.items()))


def _file_entry(path: Path | None, what: str) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {"name": what, "path": UNKNOWN, "sha256": UNKNOWN}
    return {"name": what, "path": path.name, "sha256": sha256_regular(path)}


def _source_entry(source: BenchmarkSource) -> dict[str, Any]:
    """The benchmark file the targets were read from, by the hash of the bytes parsed: a $REPRO_BENCHMARKS_PATH
    file that shadows the shipped one is named as such (and its own module, if one scores), never the shipped
    file's hash (core/benchmarks.py BenchmarkSource)."""
    return {
        "name": source.name,
        "path": Path(source.path).name if source.path else UNKNOWN,
        "sha256": source.sha256 or UNKNOWN,
        "shipped": source.shipped,
        **({"file": source.path, "shadows": source.shadows} if not source.shipped else {}),
        **({"module": source.module, "module_sha256": source.module_sha256 or UNKNOWN} if source.module else {}),
    }


def _benchmark_entry(name: str) -> dict[str, Any]:
    """The file of the benchmark a verdict without a recipe judged by, as it loads now."""
    from repro.core.benchmarks import load_benchmark

    try:
        return _source_entry(load_benchmark(name).source)
    except InputError:  # not a benchmark that loads: hashed as found, if found
        return _file_entry(benchmark_path(name), name)


def recipe_files(recipe_name: str | None, benchmark: str | None = None) -> dict[str, Any]:
    """The recipe's YAML and the benchmark file its targets were read from, by hash; without a recipe, the file of
    the benchmark the verdict judged by (`benchmark`: the one the result's identity states, a DeepSeek-R1 folder's
    deepseek-r1)."""
    from repro.core.recipes import get_recipe, recipes_dir

    if not recipe_name:
        bench = _benchmark_entry(benchmark) if benchmark else _file_entry(None, UNKNOWN)
        return {"recipe": _file_entry(None, UNKNOWN), "benchmark": bench}
    try:
        recipe = get_recipe(recipe_name)
    except InputError:
        return {"recipe": _file_entry(None, recipe_name), "benchmark": _file_entry(None, UNKNOWN)}
    path = next((p for p in recipes_dir().glob("*.yaml") if p.stem == recipe.name), None)
    out = {"recipe": {**_file_entry(path, recipe.name), "content_hash": recipe.hash()}}
    out["benchmark"] = _source_entry(recipe.bench.source)
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

    root = Path(root).absolute()  # every path in the verdict absolute, so relocate can make it relative
    verdict = verify_dir(root, recipe=recipe, gpus=gpus, scenario=scenario)
    info = verdict.run.run_info
    budget = HashBudget()
    subjects = hash_tree(root, budget=budget)
    vjson = relocate(verdict.to_json(), root)
    predicate = {
        "kind": "run",
        "repro_version": __version__,
        "attested": now_iso(),
        "verify_inputs": verdict_inputs(verdict.recipe.name if verdict.recipe else recipe, gpus, scenario),
        "run": run_identity(root, info, subjects, verdict.run.folder),
        "files": recipe_files(
            verdict.recipe.name if verdict.recipe else None, verdict.identity.benchmark if verdict.identity else None
        ),
        "software": _software(info),
        "gpus": _gpus(info),
        "gpu_probe": known(_gpu_probe(info)),
        "published": {
            "compared_with": verdict.reference,
            "figure": vjson.get("published"),
            "record": vjson.get("published_record"),
        },
        "verdict": vjson,
        "inputs_outside": outside_inputs(root, verdict_files(verdict.run), budget),
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


def rack_of(
    root: Path, recipe: str | None, gpus: int | None, scenario: str | None
) -> tuple[Any, dict[str, Path]] | None:
    """(the rack table, {VM: its folder}) when root is a rack (two or more VMs, each in its own child folder), else
    None: what decides whether a folder is attested, and verified, as a rack or as one run."""
    from repro.core.errors import ReproError
    from repro.results.aggregate import aggregate

    try:
        rack = aggregate([root], recipe=recipe, gpus=gpus, scenario=scenario or "Offline")
    except ReproError:
        return None
    vms = rack_vm_folders(root, rack) if len(rack.rows) > 1 else None
    return (rack, vms) if vms else None


def plan(
    root: Path,
    recipe: str | None = None,
    gpus: int | None = None,
    scenario: str | None = None,
    exclude: tuple[str, ...] = (),
) -> Plan:
    """A run's attestation, or a rack's: one per VM folder and one over the rack's files and its aggregate."""
    root = Path(root).absolute()
    if not root.exists():
        raise InputError(f"{root}: no such file or folder.", "`repro status` lists your runs")
    if not root.is_dir():
        raise InputError(f"{root}: not a folder; attest the run's folder.", "`repro attest RUN_DIR`")
    found = rack_of(root, recipe, gpus, scenario)
    if found is None:
        return plan_run(root, recipe, gpus, scenario)
    rack, vms = found
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
