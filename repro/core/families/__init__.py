"""A benchmark is one data file plus one module: the file (repro/data/benchmarks/<name>.yaml, validated by
core/benchmarks.py) holds its figures; the module it names (`module:`) holds its behaviour, as one `Family`.

The pipeline asks the family, never a benchmark's name, the way it asks core/backends.py's registrations:
  * setup: how the dataset file is read (its columns) into what setup writes (`read_dataset` -> `PreparedRows`),
    and which column the quantizer's calibration text is in;
  * results: how each metric kind is computed (`kinds`: ROUGE, or the mean of per-sample scorers) and the
    per-sample scorers by the name the dataset's per-sample column gives (`scorers`), after `postprocess`;
  * the memory arithmetic and the roofline: the model's shape (`model_shape` -> `ModelShape`: total and active
    parameters, KV bytes per token for GQA or MLA);
  * the rehearsal: the columns a stand-in dataset file of this benchmark holds (`stand_in`).
Figures (references, limits, the EOS id, result-folder names) stay in the file; a module holds no MLPerf figure.

Where a module comes from: the shipped ones registered in `SHIPPED` (repro/core/families/<name>.py), or a
`<name>.py` beside the benchmark file in a folder of $REPRO_BENCHMARKS_PATH; either ends with `FAMILY = Family(...)`.
So a new benchmark is two files in one folder: <benchmark>.yaml and <module>.py. A module is Python the user put on
their own search path, imported as a plugin is; a result folder never names one (only a benchmark file does, by a
name, never a path).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from repro.core.errors import RecipeError

SHIPPED: tuple[str, ...] = ("llama2_70b", "llama3_1_405b", "deepseek_r1")
"""The families repro ships, each the module repro/core/families/<name>.py: the registry, as core/backends.py's
BACKENDS is. A benchmark file outside repro names its own module beside it instead (module docstring)."""
MODULE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
"""A module is named, never pathed: lower-case letters, digits and underscores (`llama3_1_405b`)."""

Frame = Any
"""A dataset table as setup's own decoder returns it (repro/setup/table.py Table, decoded in the confined child):
`column in table`, `table.columns`, `table.rows()` (one dict per row) and `table.values(column)` are what a family's
reader may use."""

SampleScorer = Callable[[str, str], float]
"""(reference, prediction), both post-processed -> the sample's score x 100."""


@dataclass(frozen=True)
class PreparedRows:
    """What setup writes from a dataset file (repro/setup/dataset.py save_prepared): one entry per sample."""

    prompts: list[list[int]]
    output_lens: list[int]
    outputs: list[str]
    """Each sample's reference: what its metrics compare the answer with."""
    sample_kinds: list[str] | None = None
    """Each sample's scorer (the dataset's per-sample column), where the benchmark scores samples by kind."""


@dataclass(frozen=True)
class MetricKind:
    """How a metric of this kind is computed over the samples it covers (results/accuracy.py score_benchmark).

    `rouge`: a rouge_score key (rouge1, rouge2, rougeL, rougeLsum): their F-measures x 100. `scorer`: every
    covered sample scored by this one function. Neither: each covered sample by the scorer its dataset column
    names (`Family.scorers`), the metric's mean."""

    rouge: str | None = None
    scorer: SampleScorer | None = None

    @property
    def by_sample_kind(self) -> bool:
        return self.rouge is None and self.scorer is None


@dataclass(frozen=True)
class ModelShape:
    """What the memory arithmetic (core/feasibility.py) and the roofline (report/roofline.py) need of a model;
    layers/kv_heads/head_dim None when no source gives them.

    Dense attention (GQA): K and V of `kv_heads` x `head_dim` per layer, split over tensor-parallel ranks by head.
    Multi-head latent attention (MLA, DeepSeek): one compressed vector of `kv_latent` values per layer, which every
    tensor-parallel rank holds whole. A mixture of experts passes each token through `active_params` of `params`."""

    params: float
    """Every parameter: what the weights hold in memory."""
    layers: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    source: str = ""
    vocab: int | None = None
    hidden: int | None = None
    """With the vocabulary and hidden size the embedding and lm_head are weighed apart: TensorRT-LLM keeps both at
    16 bits, the embedding whole on every rank of the first pipeline stage (it is not vocab-parallel), the lm_head
    split over the tensor-parallel ranks of the last. The hidden size is also the roofline's attention width."""
    active_params: float | None = None
    """Parameters one token passes through (a mixture of experts: the shared ones and its routed experts'); None:
    every one (a dense model)."""
    kv_latent: int | None = None
    """MLA: values per token per layer of the compressed KV cache (kv_lora_rank + the rotary key dims)."""

    @property
    def has_kv(self) -> bool:
        return bool(self.layers and ((self.kv_heads and self.head_dim) or self.kv_latent))

    @property
    def embedding_params(self) -> float:
        return float(self.vocab * self.hidden) if self.vocab and self.hidden else 0.0

    @property
    def active(self) -> float:
        """Parameters per token: the matmul FLOPs of one token are 2 x this."""
        return self.params if self.active_params is None else self.active_params

    def kv_bytes_per_token(self, value_bytes: float, tp: int = 1, pp: int = 1) -> float | None:
        """The KV cache one token in flight holds on one GPU of a tp x pp server (tp = pp = 1: the whole model's).
        GQA: 2 x layers x kv_heads x head_dim x bytes, split over tp (KV heads) and pp (layers), one head per rank
        when there are fewer KV heads than ranks; MLA: layers x kv_latent x bytes, split over pp only. None without
        the shape."""
        if not self.has_kv:
            return None
        assert self.layers
        if self.kv_latent:
            return self.layers / pp * self.kv_latent * value_bytes
        assert self.kv_heads and self.head_dim
        heads = max(1.0, self.kv_heads / tp)
        return 2 * self.layers / pp * heads * self.head_dim * value_bytes


def dense_shape(model: Any, source: str) -> ModelShape | None:
    """A dense GQA decoder from its benchmark file's `model.architecture` (core/benchmarks.py Architecture); None
    when the file gives no architecture (the CPU demo's tiny model)."""
    arch = model.architecture
    if arch is None:
        return None
    return ModelShape(
        float(model.parameters),
        arch.layers,
        arch.kv_heads,
        arch.head_dim,
        source,
        vocab=arch.vocab_size,
        hidden=arch.hidden_size,
    )


StandIn = Callable[[list[list[int]], list[str], int], dict[str, dict[str, list[Any]]]]
"""(prompts' token ids, the same as text, reference output length) -> role (sampled, calibration) -> column ->
values: a stand-in of the benchmark's dataset files in their real columns (repro/rehearse/setup_step.py)."""


@dataclass(frozen=True)
class Family:
    """The behaviour one module gives the benchmarks that name it (`module:` in their files)."""

    name: str
    """The module's name: what a benchmark file's `module:` says."""
    read_dataset: Callable[[Frame, Path], PreparedRows]
    """The sampled dataset file's table (safely decoded) and its path -> what setup writes."""
    kinds: Mapping[str, MetricKind]
    """The metric kinds its benchmark files may name (`accuracy.metrics[].kind`)."""
    scorers: Mapping[str, SampleScorer] = field(default_factory=dict)
    """Per-sample scorers by the name the dataset's per-sample column gives (llama3.1-405b: niah_em, qa_em)."""
    sample_kinds: tuple[str, ...] = ()
    """Every value the dataset's per-sample column takes: the scorers' names and those a ROUGE metric covers."""
    postprocess: Callable[[str], str] | None = None
    """Applied to the answer and the reference before any metric (MLCommons' Llama evaluations: one sentence per
    line); None: compared as decoded."""
    model_shape: Callable[[Any, str], ModelShape | None] = dense_shape
    """(the recipe's model section, where its figures come from) -> the shape; None: not sized."""
    stand_in: StandIn | None = None
    evaluator: str | None = None
    """Scoring that needs more than per-sample functions of core code (DeepSeek-R1: LiveCodeBench's programs run in
    results/sandbox.py): the name of a whole-log evaluator in results/accuracy.py EVALUATORS, which then computes
    every metric; None: results/accuracy.py score_benchmark computes `kinds` with `scorers`."""
    calibration_column: str = "input"
    """The calibration file's column of prompt texts, which the quantizer's calibration set is made of."""
    origin: str = field(default="", compare=False)
    """The module's file (set when it is loaded): what the confined conversion child loads it from again."""

    def locator(self) -> dict[str, str | None]:
        """How another process loads this family again (`load_family(**locator)`): a shipped module by its name,
        a benchmark's own by the folder it sits in."""
        shipped = self.name in SHIPPED and Path(self.origin).parent == HERE
        return {"name": self.name, "beside": None if shipped or not self.origin else str(Path(self.origin).parent)}

    def problems(self, metrics: Sequence[tuple[str, Sequence[str]]]) -> list[tuple[str, str]]:
        """What a benchmark file's metrics ((kind, scorers) each, in order) ask of this family that it lacks, as
        (field, problem): `accuracy.metrics.N.kind` or `.scorers`."""
        out = []
        known = set(self.sample_kinds) | set(self.scorers)
        for n, (kind_name, scorers) in enumerate(metrics):
            at = f"accuracy.metrics.{n}"
            kind = self.kinds.get(kind_name)
            if kind is None:
                provides = ", ".join(self.kinds) or "none"
                out.append(
                    (f"{at}.kind", f"'{kind_name}' is not a metric kind module {self.name} provides ({provides})")
                )
                continue
            for scorer in scorers:
                if scorer not in known:
                    out.append(
                        (
                            f"{at}.scorers",
                            f"'{scorer}' is not a per-sample kind module {self.name} knows "
                            f"({', '.join(sorted(known)) or 'none'})",
                        )
                    )
                elif kind.by_sample_kind and scorer not in self.scorers:
                    out.append((f"{at}.scorers", f"module {self.name} has no scorer for '{scorer}' samples"))
        return out


HERE = Path(__file__).resolve().parent


def load_family(name: str, beside: Path | str | None = None) -> Family:
    """The family a benchmark file's `module:` names: `<name>.py` beside that file (`beside`, its folder), else the
    shipped module of that name; RecipeError naming what is missing otherwise. Loaded once per (name, folder)."""
    return _load(name, str(Path(beside).resolve()) if beside is not None else None)


@cache
def _load(name: str, beside: str | None) -> Family:
    if not MODULE_NAME.match(name):
        raise RecipeError(f"benchmark module {name[:80]!r} is not a module name (lower-case letters, digits, _).")
    own = Path(beside) / f"{name}.py" if beside is not None else None
    if own is not None and own.is_file():
        module, where = _import_file(name, own), str(own)
    elif name in SHIPPED:
        module, where = importlib.import_module(f"{__name__}.{name}"), str(HERE / f"{name}.py")
    else:
        in_folder = f" and no {name}.py beside the benchmark file in {beside}" if beside else ""
        raise RecipeError(
            f"no benchmark module '{name}': repro ships {', '.join(SHIPPED)}{in_folder}.",
            f"add {name}.py (ending with FAMILY = Family(name='{name}', ...)) beside the benchmark file",
        )
    family = getattr(module, "FAMILY", None)
    if not isinstance(family, Family) or family.name != name:
        raise RecipeError(
            f"{where}: defines no FAMILY = Family(name='{name}', ...).",
            f"see {HERE / 'llama3_1_405b.py'} for one",
        )
    return replace(family, origin=where)


def _import_file(name: str, path: Path) -> Any:
    """A benchmark's own module from its folder, under a name of its own (so that pickling by reference, as the
    accuracy workers do, finds it again); any error importing it is that file's, named."""
    key = f"repro_benchmark_{name}_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:
        raise RecipeError(f"{path}: not a Python module.", f"fix {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - a module of the user's: whatever it raises is that file's problem
        sys.modules.pop(key, None)
        why = str(exc).splitlines()[0] if str(exc) else ""
        raise RecipeError(f"{path}: cannot be imported ({type(exc).__name__}: {why[:200]}).", f"fix {path}") from None
    return module
