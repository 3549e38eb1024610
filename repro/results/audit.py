"""MLPerf's audit line beside the ±5% band: is the run within 2% of the published figure, and which items of its
system differ from the published system.

MLPerf's auditors call a re-run "materially different" when it is more than 2% from the published result
(MLPerf Inference rules, shared/reference). The band is the published guide's tolerance; the audit line is the
stricter question an auditor asks. The system is compared item by item (accelerator, count, memory, CPU, software
versions) from what the run recorded (its system JSON, else run.json) against the published system JSON's facts,
which repro ships as data: the index row (accelerator, count, CPU, framework) and the system JSON fields of
`repro/data/published/settings.json` (memory, software stack, OS) where that result is there.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro.core.accelerators import accelerator_of, chips
from repro.core.errors import InputError
from repro.core.fmt import fmt_rate
from repro.core.safeio import read_text_bounded

if TYPE_CHECKING:
    from repro.core.published import PublishedResult
    from repro.core.recipes import Recipe
    from repro.results.identity import ResultIdentity
    from repro.results.logs import LoadGenRun

AUDIT_PCT = 2.0
"""MLPerf's auditors: a re-run more than 2% from the published result is 'materially different'."""

VERSION_PATTERNS = {
    "TensorRT-LLM": r"TensorRT[- ]LLM[ /v]*([0-9][\w.+-]*)",
    "TensorRT": r"TensorRT(?![- ]LLM)[ /v]*([0-9][\w.+-]*)",
    "CUDA": r"CUDA[ /v]*([0-9][\w.]*)",
    "cuDNN": r"cuDNN[ /v]*([0-9][\w.]*)",
    "driver": r"Driver[ /v]*([0-9][\w.]*)",
    "vLLM": r"vLLM[ /v]*([0-9][\w.+-]*)",
    "PyTorch": r"PyTorch[ /v]*([0-9][\w.+-]*)",
    "ROCm": r"ROCm[ /v]*([0-9][\w.]*)",
    "power limit": r"TGP\s*([0-9]+\s*W)",
}
_MEMORY = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*GB", re.I)
SETTINGS_JSON = Path(__file__).resolve().parents[1] / "data" / "published" / "settings.json"


@functools.cache
def published_settings() -> dict[str, Any]:
    """The shipped effective settings and system JSON facts of indexed results (scripts/extract_published_settings.py),
    keyed like the index."""
    try:
        doc = json.loads(read_text_bounded(SETTINGS_JSON, 64 << 20, what="settings file"))
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{SETTINGS_JSON}: unreadable ({exc}).", "reinstall repro (`pip install --force-reinstall repro`)"
        ) from None
    results = doc.get("results") if isinstance(doc, dict) else None
    return results if isinstance(results, dict) else {}


def stack_of_system(system: dict[str, Any] | None) -> dict[str, str]:
    """Component versions named in a system JSON's framework, software and hardware notes."""
    if not system:
        return {}
    text = " ".join(
        str(system.get(k) or "") for k in ("framework", "other_software_stack", "sw_notes", "hw_notes")
    ).strip()
    out: dict[str, str] = {}
    for name, pattern in VERSION_PATTERNS.items():
        if m := re.search(pattern, text, re.I):
            out[name] = m.group(1).rstrip(",;").replace(" ", "")
    if system.get("operating_system"):
        out["OS"] = str(system["operating_system"]).strip()
    return out


@dataclass(frozen=True)
class AuditLine:
    """The run per accelerator against the published figure, by MLPerf's 2% audit threshold."""

    deviation_pct: float
    published_per_gpu: float

    @property
    def within(self) -> bool:
        return abs(self.deviation_pct) <= AUDIT_PCT + 1e-9

    @property
    def text(self) -> str:
        # + 0.0 turns a -0.0 left by float noise (the mean of identical runs) into the +0.0% the single run shows
        dev = round(self.deviation_pct, 1) + 0.0
        where = f"{dev:+.1f}% vs the published {fmt_rate(self.published_per_gpu)} per GPU"
        if self.within:
            return f"{where}: within MLPerf's {AUDIT_PCT:g}% audit threshold (not materially different)"
        return f"{where}: materially different (beyond MLPerf's {AUDIT_PCT:g}% audit threshold)"

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold_pct": AUDIT_PCT,
            "deviation_pct": round(self.deviation_pct, 2) + 0.0,
            "within": self.within,
            "verdict": "within 2%" if self.within else "materially different",
        }


@dataclass(frozen=True)
class SystemItem:
    """One item of the system description: the run's value, the published one, and whether they are the same
    (None when either side does not state it)."""

    item: str
    run: str | None
    published: str | None
    same: bool | None

    @property
    def text(self) -> str:
        mine, theirs = self.run or "not recorded", self.published or "not published"
        if self.same is None:
            return f"run {mine}; published {theirs}: not compared"
        return f"{'same' if self.same else 'differs'}: run {mine}; published {theirs}"

    def to_json(self) -> dict[str, Any]:
        return {"item": self.item, "run": self.run, "published": self.published, "same": self.same}


def _memory_gb(text: str | None) -> float | None:
    m = _MEMORY.search(text or "")
    return float(m.group(1)) if m else None


def _same_version(a: str, b: str) -> bool:
    """12.9 and 12.9.1 are the same release line; 12.8 and 12.9 are not."""
    pa, pb = re.findall(r"[0-9]+|[a-z]+", a.lower()), re.findall(r"[0-9]+|[a-z]+", b.lower())
    n = min(len(pa), len(pb))
    return n > 0 and pa[:n] == pb[:n]


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def _compare(item: str, mine: str | None, theirs: str | None) -> SystemItem:
    if not mine or not theirs:
        return SystemItem(item, mine, theirs, None)
    if item == "accelerator":
        a, b = accelerator_of(mine), accelerator_of(theirs)
        same = (a.model == b.model) if a and b else set(chips(mine)) == set(chips(theirs))
    elif item == "accelerators":
        same = mine == theirs
    elif item == "accelerator memory":
        ma, mb = _memory_gb(mine), _memory_gb(theirs)
        same = ma is not None and mb is not None and abs(ma - mb) <= 0.1 * mb
    elif item == "CPU":
        same = _norm(mine) == _norm(theirs) or _norm(mine) in _norm(theirs) or _norm(theirs) in _norm(mine)
    elif item == "OS":
        same = _norm(mine) == _norm(theirs)
    else:
        same = _same_version(mine, theirs)
    return SystemItem(item, mine, theirs, same)


def published_system(row: PublishedResult | None) -> dict[str, str]:
    """The published system's facts: the index row, then the system JSON fields shipped in settings.json."""
    if row is None:
        return {}
    stack = (published_settings().get(row.key) or {}).get("stack") or {}
    out = {
        "accelerator": row.accelerator_model_name,
        "accelerators": str(row.total_accelerators),
        "CPU": row.host_processor_model_name or "",
    }
    memory = stack.get("accelerator_memory_capacity") or (
        f"{m:g} GB" if (m := _memory_gb(row.accelerator_model_name)) else ""
    )
    out["accelerator memory"] = str(memory)
    out.update(stack_of_system({"framework": row.framework, **stack}))
    return {k: v for k, v in out.items() if v}


def run_system(run: LoadGenRun, ident: ResultIdentity, recipe: Recipe | None) -> dict[str, str]:
    """What the run recorded about its system: its own system JSON (a published bundle), else run.json (NVML, the
    driver, the image's versions)."""
    out: dict[str, str] = {}
    if ident.accelerator:
        out["accelerator"] = ident.accelerator
    if ident.count is not None and ident.count.source != "--gpus":
        out["accelerators"] = str(ident.count.total)
    system = run.system or {}
    memory = system.get("accelerator_memory_capacity") or (f"{m:g} GB" if (m := _memory_gb(ident.accelerator)) else "")
    if memory:
        out["accelerator memory"] = str(memory)
    if system.get("host_processor_model_name"):
        out["CPU"] = str(system["host_processor_model_name"])
    out.update(stack_of_system(system))
    info = run.run_info
    if info is not None:
        if info.driver:
            out.setdefault("driver", str(info.driver))
        prov = info.provenance if isinstance(info.provenance, dict) else {}
        for key, name in (("cuda", "CUDA"), ("tensorrt_llm", "TensorRT-LLM"), ("trtllm_version", "TensorRT-LLM")):
            if prov.get(key):
                out.setdefault(name, str(prov[key]))
        cpu = prov.get("cpu")
        if isinstance(cpu, dict) and cpu.get("model"):
            out.setdefault("CPU", str(cpu["model"]))
        packages = prov.get("packages")
        for package, name in (("tensorrt_llm", "TensorRT-LLM"), ("vllm", "vLLM"), ("torch", "PyTorch")):
            if isinstance(packages, dict) and packages.get(package):
                out.setdefault(name, str(packages[package]))
        if "TensorRT-LLM" not in out and recipe is not None and recipe.trtllm is not None and info.backend == "trtllm":
            out["TensorRT-LLM"] = recipe.trtllm.version
    return out


ITEMS = ("accelerator", "accelerators", "accelerator memory", "CPU")


def system_diff(mine: dict[str, str], theirs: dict[str, str]) -> list[SystemItem]:
    """Item by item: the hardware first, then every software version either side names."""
    versions = [k for k in (*VERSION_PATTERNS, "OS") if k in mine or k in theirs]
    return [_compare(item, mine.get(item), theirs.get(item)) for item in (*ITEMS, *versions)]


def reference_row(recipe: Recipe, scenario: str) -> PublishedResult | None:
    """The index row of the result a recipe reproduces (its published result_id, narrowed to the scenario and the
    recipe's benchmark); None when the recipe names none or the index does not hold it."""
    from repro.core.published import load_index

    pub = recipe.published_for(scenario)
    if pub is None or not pub.result_id:
        return None
    try:
        rows = load_index().resolve(pub.result_id)
    except InputError:
        return None
    bench = recipe.benchmark
    same = [r for r in rows if r.scenario == scenario and r.benchmark_name.lower() == bench]
    return same[0] if same else None
