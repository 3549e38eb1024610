"""Before a system's hour starts: every node checked at once, as one srun step with one task per node, and the node
that fails named (issue 46 item 7).

Each task (`python -m repro.run.launchers.preflight SPEC`) reports its host, its GPUs (nvidia-smi), the server image
as that node sees it (a squashfs file: readable, its size and SHA-256; a registry image: named, pulled by pyxis),
the shared storage (it writes a token file into the run folder, which node 0 must then see, and checks the
workspace's served model folder is there) and its clock. Node 0 reads every answer: a node missing, short of GPUs,
without the image, without the shared folders, or with a clock more than CLOCK_SKEW_S away is one error naming it.
The answers go into run.json (the image's digest on every node).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLOCK_SKEW_S = 2.0
"""Nodes whose clocks differ by more are named: every node's logs and LoadGen's are read on one time line."""
HASH_LIMIT_S = 600.0
"""A squashfs image is hashed within this long (tens of GB from shared storage), else its size and mtime stand."""
STEP_TIMEOUT_S = 900.0
TOKEN_DIR = "preflight"


@dataclass(frozen=True)
class NodeCheck:
    """What one node's task reads about itself (all standard library: it runs before anything is installed)."""

    host: str
    node: int
    gpus: int | None
    """GPUs nvidia-smi lists (None: no nvidia-smi)."""
    gpu_names: tuple[str, ...]
    image: dict[str, Any]
    storage: dict[str, Any]
    clock: float

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "node": self.node,
            "gpus": self.gpus,
            "gpu_names": list(self.gpu_names),
            "image": self.image,
            "storage": self.storage,
            "clock": self.clock,
        }


def _gpus() -> tuple[int | None, tuple[str, ...]]:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None, ()
    names = tuple(
        line.split(":", 1)[1].split("(UUID")[0].strip() for line in out.stdout.splitlines() if line.startswith("GPU ")
    )
    return (len(names), names) if out.returncode == 0 else (None, ())


def _image(image: str | None) -> dict[str, Any]:
    if not image:
        return {"kind": "none"}
    if not image.endswith(".sqsh"):
        return {"kind": "registry", "ref": image}
    path = Path(image)
    try:
        st = path.stat()
        with path.open("rb") as f:
            digest = hashlib.sha256()
            deadline = time.monotonic() + HASH_LIMIT_S
            while chunk := f.read(8 << 20):
                digest.update(chunk)
                if time.monotonic() > deadline:
                    return {"kind": "squashfs", "path": image, "size": st.st_size, "mtime": st.st_mtime, "sha256": None}
        return {"kind": "squashfs", "path": image, "size": st.st_size, "sha256": "sha256:" + digest.hexdigest()}
    except OSError as exc:
        return {"kind": "squashfs", "path": image, "error": exc.strerror or str(exc)}


def check_node(spec: dict[str, Any]) -> NodeCheck:
    """This node's answers (what the srun task runs)."""
    host = socket.gethostname().split(".")[0]
    node = int(os.environ.get("SLURM_NODEID", os.environ.get("SLURM_PROCID", "0")))
    gpus, names = _gpus() if spec.get("gpus") else (None, ())
    storage: dict[str, Any] = {}
    tokens = Path(spec["run_dir"]) / TOKEN_DIR
    try:
        tokens.mkdir(parents=True, exist_ok=True)
        (tokens / f"{host}.token").write_text(spec["token"], encoding="utf-8")
        storage["token"] = "written"
    except OSError as exc:
        storage["token"] = f"cannot write {tokens}: {exc.strerror or exc}"
    for label, folder in spec.get("folders", {}).items():
        storage[label] = "present" if Path(folder).is_dir() else f"missing: {folder}"
    return NodeCheck(host, node, gpus, names, _image(spec.get("image")), storage, time.time())


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    print(json.dumps(check_node(spec).to_json()), flush=True)
    return 0


@dataclass
class Preflight:
    """Every node's answers and what is wrong with them, node by node."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    started: float = 0.0
    finished: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def image_digests(self) -> dict[str, Any]:
        """host -> the image's digest as that node read it (the squashfs file's SHA-256, or the registry ref)."""
        out = {}
        for n in self.nodes:
            img = n.get("image") or {}
            out[str(n.get("host"))] = img.get("sha256") or img.get("ref") or img.get("error") or img.get("kind")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "problems": self.problems, "seconds": round(self.finished - self.started, 3)}


def judge(
    answers: list[dict[str, Any]],
    hosts: list[str],
    need_gpus: dict[str, int],
    token: str,
    run_dir: Path,
    started: float,
    finished: float,
) -> Preflight:
    """Each host's answer against what the plan needs there; every problem names the node."""
    pf = Preflight(answers, [], started, finished)
    by_host = {str(a.get("host")): a for a in answers}
    digests = {}
    for host in hosts:
        a = by_host.get(host)
        if a is None:
            pf.problems.append(f"{host}: no answer from the node's check (it did not run there)")
            continue
        want = need_gpus.get(host, 0)
        if want and (a.get("gpus") is None or a["gpus"] < want):
            pf.problems.append(
                f"{host}: {a.get('gpus') if a.get('gpus') is not None else 'no'} GPUs (nvidia-smi -L), the plan puts "
                f"{want} there"
            )
        img = a.get("image") or {}
        if img.get("error"):
            pf.problems.append(f"{host}: cannot read the server image {img.get('path')} ({img['error']})")
        elif img.get("sha256"):
            digests[host] = img["sha256"]
        for label, state in (a.get("storage") or {}).items():
            if label == "token":
                seen = run_dir / TOKEN_DIR / f"{host}.token"
                if state != "written":
                    pf.problems.append(f"{host}: {state}")
                elif not seen.is_file() or seen.read_text(encoding="utf-8") != token:
                    pf.problems.append(f"{host}: wrote into {run_dir}, which node 0 does not see (not shared storage)")
            elif state != "present":
                pf.problems.append(f"{host}: the shared {label} folder is {state}")
        clock = a.get("clock")
        if isinstance(clock, (int, float)) and not started - CLOCK_SKEW_S <= clock <= finished + CLOCK_SKEW_S:
            skew = clock - started if clock < started else clock - finished
            pf.problems.append(f"{host}: its clock is {skew:+.1f} s off node 0's (more than {CLOCK_SKEW_S:g} s)")
    if len(set(digests.values())) > 1:
        pf.problems.append(
            "the nodes read different server images: " + ", ".join(f"{h} {d[:19]}" for h, d in sorted(digests.items()))
        )
    return pf


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
