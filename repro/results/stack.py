"""Every known difference between what a recipe runs (or what one run used) and the published run, for one scenario:
the recipe's own list (`known_differences`: a serving stack or private branch repro cannot follow, with sources) and
the ones derived here from the recipe's data and the run's record (TensorRT-LLM release, engine layout, the GPU boost
slider, LoadGen). verify and explain both show this list; verify also holds the engine layout to the published one.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Literal

from repro.core.recipes import EngineLayout, Recipe
from repro.core.record import RunRecord

EngineState = Literal["same", "differs", "not recorded", "not stated"]


@dataclass(frozen=True)
class StackDifference:
    key: str
    here: str
    published: str
    effect: Literal["moves", "may move", "none"]
    source: str
    derived: bool
    """Read from the recipe's fields and the run (True), or stated in the recipe's known_differences (False)."""

    def text(self) -> str:
        return f"{self.key}: {self.here}; published: {self.published} ({self.source})"

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "here": self.here,
            "published": self.published,
            "effect": self.effect,
            "source": self.source,
            "derived": self.derived,
        }


@dataclass(frozen=True)
class EngineCheck:
    """The engine layout a run used against the published one for its scenario."""

    state: EngineState
    used: EngineLayout | None
    published: EngineLayout | None
    detail: str


_FLAGS = {"--tp_size": "tp_size", "--pp_size": "pp_size", "--max_num_tokens": "max_num_tokens"}
_LAYOUT_KEYS = ("tp_size", "pp_size", "max_num_tokens", "gpu_batch_size", "servers_per_vm")


def run_engine_layout(record: RunRecord | None) -> EngineLayout | None:
    """The engine a run's servers used, as its run.json says: `serving.engine`, else the flat serving keys older runs
    wrote, else the first server's command line; None when repro did not start the servers (nothing recorded)."""
    if record is None:
        return None
    serving = record.serving if isinstance(record.serving, dict) else {}
    found: dict[str, Any] = {}
    engine = serving.get("engine")
    if isinstance(engine, dict):
        found = {k: engine.get(k) for k in ("tp_size", "pp_size", "max_num_tokens", "gpu_batch_size", "servers_per_vm")}
    elif "tp_size" in serving:
        found = {
            k: serving.get(k) for k in ("tp_size", "pp_size", "max_num_tokens", "gpu_batch_size", "servers_per_vm")
        }
    else:
        servers = record.servers.get("servers") if isinstance(record.servers, dict) else None
        first = servers[0] if isinstance(servers, list) and servers and isinstance(servers[0], dict) else {}
        argv = first.get("command") or []
        argv = shlex.split(argv) if isinstance(argv, str) else [str(a) for a in argv] if isinstance(argv, list) else []
        for i, arg in enumerate(argv[:-1]):
            if arg in _FLAGS and argv[i + 1].isdigit():
                found[_FLAGS[arg]] = int(argv[i + 1])
    clean = {k: v for k, v in found.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0}
    if "tp_size" not in clean or "pp_size" not in clean:
        return None
    return EngineLayout.model_validate(clean)


def engine_check(recipe: Recipe, scenario: str, record: RunRecord | None) -> EngineCheck:
    """Whether a run's engine is the one the published run of its scenario used."""
    pub = recipe.published_for(scenario)
    published = pub.engine if pub is not None else None
    used = run_engine_layout(record)
    if published is None:
        return EngineCheck("not stated", used, None, f"recipe {recipe.name} states no published {scenario} engine")
    where = f"published {scenario} engine {published.text()} ({published.source})"
    if used is None:
        return EngineCheck(
            "not recorded",
            None,
            published,
            f"the run records no engine layout (repro did not start its servers): not compared with the {where}",
        )
    diffs = used.differences(published)
    if diffs:
        return EngineCheck("differs", used, published, f"engine {used.text()} is not the {where}: {', '.join(diffs)}")
    return EngineCheck("same", used, published, f"engine {used.text()}, as the {where}")


def _trtllm(recipe: Recipe, record: RunRecord | None) -> StackDifference | None:
    trt = recipe.trtllm
    if trt is None:
        return None
    prov = record.provenance if record is not None and isinstance(record.provenance, dict) else {}
    here = str(prov.get("tensorrt_llm") or prov.get("trtllm_version") or trt.version)
    published = trt.published_version
    if published != "unknown" and here in published:
        return None
    return StackDifference(
        "TensorRT-LLM",
        f"{here} ({trt.base_image})",
        "unknown (its sources do not say)" if published == "unknown" else published,
        "may move",
        f"recipe {recipe.name} trtllm.published_version",
        True,
    )


def vboost_words(state: dict[str, Any] | None) -> str:
    """'vboost 1', or why it is not known (run.json `boost_slider`), for verify, explain and doctor."""
    if not isinstance(state, dict):
        return "not recorded"
    if state.get("state") == "read" and isinstance(state.get("vboost"), int):
        return f"vboost {state['vboost']}"
    return f"{state.get('state', 'unknown')} ({state.get('why', 'no reason recorded')})"


def vboost_command(value: int) -> str:
    """The host command that sets what the published run's harness set (NVIDIA's `Vboost` sets it before the run
    and 0 after); repro only names it."""
    return f"sudo nvidia-smi boost-slider --vboost {value}"


def vboost_advice(recipe: Recipe, state: dict[str, Any] | None) -> str | None:
    """One sentence when the host's boost slider is not the published run's (or is not known); None when it is, or
    when the published run set none."""
    host = recipe.published_host
    if host is None or host.vboost_slider is None:
        return None
    if isinstance(state, dict) and state.get("state") == "read" and state.get("vboost") == host.vboost_slider:
        return None
    return (
        f"the host's boost slider is {vboost_words(state)}; the published run's harness set vboost "
        f"{host.vboost_slider} around the run ({host.source}). To match it: `{vboost_command(host.vboost_slider)}` "
        "before the run, `--vboost 0` after; repro never changes it"
    )


def _vboost(recipe: Recipe, record: RunRecord | None) -> StackDifference | None:
    host = recipe.published_host
    if host is None or host.vboost_slider is None:
        return None
    state = record.boost_slider if record is not None else None
    if isinstance(state, dict) and state.get("state") == "read" and state.get("vboost") == host.vboost_slider:
        return None
    here = (
        f"the host's own boost slider: {vboost_words(state)}"
        if record is not None
        else "the host's own boost slider (repro never sets it; run.json records it)"
    )
    return StackDifference(
        "vboost",
        here,
        f"vboost {host.vboost_slider}, set by NVIDIA's harness around the run",
        "may move",
        host.source,
        True,
    )


def _loadgen(record: RunRecord | None, published_loadgen: str | None) -> StackDifference | None:
    if record is None or not record.loadgen_version or not published_loadgen:
        return None
    here, there = str(record.loadgen_version).split(" @")[0], str(published_loadgen).split(" @")[0]
    if here.strip() == there.strip():
        return None
    return StackDifference(
        "LoadGen",
        here,
        published_loadgen,
        "none",
        "run.json loadgen_version; the published mlperf_log_detail.txt",
        True,
    )


def _engine(recipe: Recipe, scenario: str, record: RunRecord | None) -> StackDifference | None:
    check = engine_check(recipe, scenario, record)
    if check.published is None:
        return None
    if record is None:  # what the recipe would run
        layout = recipe.deployment(scenario).layout
        diffs = layout.differences(check.published) if layout is not None else []
        if not diffs:
            return None
        return StackDifference(
            "engine", layout.text() if layout else "-", check.published.text(), "moves", check.published.source, True
        )
    if check.state == "same":
        return None
    here = check.used.text() if check.used is not None else "not recorded (servers not started by repro)"
    return StackDifference(
        "engine", here, check.published.text(), "moves" if check.used else "may move", check.published.source, True
    )


def stack_differences(
    recipe: Recipe, scenario: str, record: RunRecord | None = None, published_loadgen: str | None = None
) -> list[StackDifference]:
    """Every known difference for one scenario: derived ones first (the run's own record where there is one, else
    what the recipe would run), then the recipe's stated ones for that scenario."""
    derived = [
        _engine(recipe, scenario, record),
        _trtllm(recipe, record),
        _vboost(recipe, record),
        _loadgen(record, published_loadgen),
    ]
    out = [d for d in derived if d is not None]
    for known in recipe.known_differences:
        if known.scenarios and scenario not in known.scenarios:
            continue
        out.append(StackDifference(known.key, known.here, known.published, known.effect, known.source, False))
    return out
