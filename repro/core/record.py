"""`run.json`: what repro records beside LoadGen's logs about one run, as one typed, versioned document.

`repro run` writes it (first when the run starts, marked interrupted until LoadGen returns, then with the
outcome); `repro verify` and `repro report` read it back through the same type. A run.json comes from a
result folder, so reading never fails on it: a key whose value has the wrong type is dropped (and named in
`dropped`), an unknown key is kept as it is, a document that is not an object is no record at all.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from repro.core.fsutil import write_published_json
from repro.core.safeio import loads_json, read_text_bounded

RUN_JSON = "run.json"
SCHEMA_VERSION = 1
MAX_BYTES = 4 << 20  # a run.json is a few KB


class GpuFacts(BaseModel):
    """The GPUs NVML listed on the machine that ran (none: detection was off or found none)."""

    model_config = ConfigDict(extra="allow")

    count: int = 0
    names: list[str] = Field(default_factory=list)
    uuids: list[str | None] = Field(default_factory=list)

    @field_validator("count", mode="before")
    @classmethod
    def _not_a_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("a count, not true/false")
        return value


# Keys written only once the run reaches the point that knows them; absent (not null) before.
_LATE = (
    "compliance",
    "demo_calibration",
    "samples_in_dataset",
    "servers",
    "backend_details",
    "open_files",
    "measured_by_harness",
    "backend_stats",
    "power_file",
    "server_died",
    "signal",
    "loadgen_finished",
    "sim_pace",
    "serving",
    "warnings",
    "probe",
    "system",
)


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="allow", validate_assignment=False)

    schema_version: int = SCHEMA_VERSION
    repro_version: str | None = None
    recipe: str | None = None
    recipe_hash: str | None = None
    benchmark: str | None = None
    """The benchmark file the run ran by (its recipe's `benchmark:`): what results/identity.py reads first for a
    run whose folder names none (runs/<recipe>/<scenario>/<stamp>/)."""
    scenario: str | None = None
    mode: str | None = None
    backend: str | None = None
    label: str | None = None
    kind: str | None = None
    run_dir: str | None = None
    paired_with: str | None = None
    incomplete: bool | None = None
    status: str | None = None
    error: str | None = None
    gpus: GpuFacts | None = None
    driver: str | None = None
    vm_size: str | None = None
    container_digest: str | None = None
    loadgen_version: str | None = None
    command: list[str] = Field(default_factory=list)
    model_path: str | None = None
    dataset_path: str | None = None
    """The prepared dataset folder the run read: `repro explain` measures prompt lengths there, not in whatever
    workspace it is started from."""
    dataset_sha256: str | None = None
    started: str | None = None
    finished: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)
    compliance: dict[str, Any] | None = None
    demo_calibration: dict[str, Any] | None = None
    samples_in_dataset: int | None = None
    servers: dict[str, Any] | None = None
    backend_details: dict[str, Any] | None = None
    open_files: dict[str, Any] | None = None
    measured_by_harness: dict[str, int] | None = None
    backend_stats: dict[str, Any] | None = None
    power_file: str | None = None
    server_died: str | None = None
    signal: str | None = None
    serving: dict[str, Any] | None = None
    """The serving configuration the run used (max_tokens, client concurrency, the servers' options)."""
    target_qps_source: dict[str, Any] | None = None
    """Where target_qps came from when not the recipe (--target-qps, the rate `repro tune` saved)."""
    sim_pace: str | None = None
    """sim without --sim-rate: how its rate was chosen."""
    loadgen_finished: bool | None = None
    """After a signal: whether LoadGen returned (False: a Server run's schedule was left behind)."""
    warnings: list[str] | None = None
    probe: dict[str, Any] | None = None
    """`repro doctor --probe` on the same GPUs before this run: measured GEMM and HBM ceilings per GPU."""
    system: dict[str, Any] | None = None
    """A run of one system over many nodes (repro/run/launchers/srun.py SrunFleet.system): number_of_nodes,
    accelerators_per_node, each node's host, GPUs and server image digest, every instance's endpoint and ranks, and
    the node that ran LoadGen. Absent for a run on one VM."""
    boost_slider: dict[str, Any] | None = None
    """The host's GPU boost slider when the run started (`nvidia-smi boost-slider -l`: state, vboost, why, raw), which
    NVIDIA's harness sets where the published config says so and repro only reads."""
    dropped: list[str] | None = Field(default=None, exclude=True)
    """Keys of a read run.json whose values had the wrong type (never written back)."""

    @property
    def stopped_early(self) -> bool:
        """The logs beside it are partial: the run was interrupted, failed, or never marked complete."""
        return bool(self.incomplete) or self.status in ("interrupted", "failed")

    @property
    def gpu_names(self) -> list[str]:
        return list(self.gpus.names) if self.gpus is not None else []

    @property
    def ran_on_cpu(self) -> str | None:
        """The CPU's name (or "CPU") when the backend ran on the CPU: the demo's accelerator, even on a GPU VM
        (the numpy backend leaves the GPUs NVML lists idle, so they are not what the run measured)."""
        details = self.backend_details or {}
        devices = details.get("devices") or [details.get("device")]
        if not devices or any(d != "cpu" for d in devices):
            return None
        cpu = self.provenance.get("cpu") if isinstance(self.provenance, dict) else None
        model = cpu.get("model") if isinstance(cpu, dict) else None
        return model if isinstance(model, str) and model else "CPU"

    def to_json(self) -> dict[str, Any]:
        doc = self.model_dump(mode="json")
        return {k: v for k, v in doc.items() if not (v is None and k in _LATE)}

    def write(self, folder: Path) -> Path:
        path = Path(folder) / RUN_JSON
        write_published_json(path, self.to_json())
        return path

    @classmethod
    def parse(cls, doc: Any) -> RunRecord | None:
        """A record from a decoded run.json, keeping every key whose value fits (see the module docstring)."""
        if not isinstance(doc, dict):
            return None
        doc = copy.deepcopy({k: v for k, v in doc.items() if isinstance(k, str) and k != "dropped"})
        dropped: list[str] = []
        while True:
            try:
                record = cls.model_validate(doc)
            except (ValidationError, RecursionError) as exc:
                gone = [_drop(doc, e["loc"]) for e in exc.errors()] if isinstance(exc, ValidationError) else []
                if not any(gone):
                    return None
                dropped += [g for g in gone if g]
                continue
            record.dropped = sorted(set(dropped)) or None
            return record

    @classmethod
    def read(cls, path: Path) -> RunRecord | None:
        """The record in a run.json file; None when it is missing, too large, not JSON or not an object."""
        try:
            return cls.parse(loads_json(read_text_bounded(path, MAX_BYTES, what="run.json")))
        except (OSError, ValueError):
            return None


def _drop(doc: dict[str, Any], loc: tuple[int | str, ...]) -> str | None:
    """Remove the innermost object key on an error's path (a list with a bad item goes whole); its dotted name."""
    node: Any = doc
    path: list[str] = []
    for part in loc:
        if not (isinstance(node, dict) and isinstance(part, str) and part in node):
            break
        parent, key = node, part
        path.append(part)
        node = node[part]
    if not path:
        return None
    del parent[key]
    return ".".join(path)
