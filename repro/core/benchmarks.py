"""MLPerf benchmarks are data: one YAML per benchmark under repro/data/benchmarks/, validated by `Benchmark`.

A benchmark is what every system running it shares: the model (repo, pinned revision, architecture), the dataset,
the generation limits, the accuracy metrics and targets the submission checker applies, and the per-scenario
LoadGen rules of mlperf.conf. A recipe names its benchmark and keeps only what is system-specific. No figure of a
benchmark is written in repro's code; every one here names the source it was read from.

Search path: the folders in $REPRO_BENCHMARKS_PATH (os.pathsep-separated), then the shipped folder. A new benchmark
is a new file in one of them; a file in $REPRO_BENCHMARKS_PATH shadows a shipped one of the same name.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from repro.core.errors import RecipeError
from repro.core.safeio import read_text_bounded, safe_yaml

ENV_PATH = "REPRO_BENCHMARKS_PATH"
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "benchmarks"
MAX_BENCHMARK_BYTES = 1 << 20

Scenario = Literal["Offline", "Server", "Interactive"]
Unknown = Literal["unknown"]
MetricKind = Literal["rouge1", "rouge2", "rougeL", "rougeLsum", "exact_match"]
"""What results/accuracy.py computes for one metric: a ROUGE F-measure x 100, or a match score x 100."""
SampleScorer = Literal["rouge", "niah_em", "qa_em"]
"""Per-sample scorers a dataset's `metric` column may name (MLCommons' llama3.1-405b evaluation vocabulary)."""
DatasetFormat = Literal["mlperf-openorca-pkl", "mlperf-llama3.1-405b-pkl", "openorca-jsonl", "toy-jsonl"]
"""The columns a dataset file has, which setup's reader and the accuracy evaluator understand."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Source(_Strict):
    repo: str = Field(min_length=1, description="owner/name on GitHub, or a site")
    path: str = Field(min_length=1)
    commit: str = Field(description="The commit (or tag) read")
    note: str = ""


class Architecture(_Strict):
    """The model's shape as its published config.json gives it (num_hidden_layers, hidden_size, ...)."""

    layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    attention_heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    max_position_embeddings: int = Field(gt=0)

    def kv_bytes_per_token(self, bytes_per_value: float) -> float:
        """K and V of every layer for one token: what the KV cache holds per token in flight."""
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_value


class Model(_Strict):
    repo_id: str = Field(min_length=1)
    revision: str = Field(min_length=1, description="The commit the benchmark pins")
    gated: bool = False
    parameters: int = Field(gt=0, description="Parameter count (derived from the architecture, see sources)")
    architecture: Architecture | None = None
    allow_patterns: list[str] = Field(default_factory=list, description="The files setup downloads")
    size_gb: float = Field(gt=0, description="Download size of the original weights (GB, 1e9 bytes)")
    sources: list[str] = Field(default_factory=list)


class RawSource(_Strict):
    """The raw data the processed set is rebuilt from (llama2-70b: processorca.py on the OpenOrca parquet)."""

    repo: str = Field(min_length=1, description="Hugging Face dataset repo")
    file: str = Field(min_length=1)
    revision: str = Field(min_length=1)


class Dataset(_Strict):
    name: str = Field(min_length=1)
    samples: int = Field(gt=0)
    calibration_samples: int = Field(ge=0)
    files: dict[str, str] = Field(description="role -> file name (sampled, calibration)")
    sha256: dict[str, str] = Field(default_factory=dict, description="role -> published SHA-256, or 'unknown'")
    urls: dict[str, str] = Field(default_factory=dict, description="role -> direct URL, where one is published")
    r2_uri: dict[str, str] = Field(
        default_factory=dict, description="role -> MLCommons R2 downloader metadata URI (the official fetch)"
    )
    size_bytes: dict[str, int] = Field(default_factory=dict, description="role -> file size, where published")
    mean_input_tokens: float | Unknown = Field(
        default="unknown", description="Mean prompt tokens per sample, where stated (the roofline's default)"
    )
    format: DatasetFormat = "mlperf-openorca-pkl"
    raw: RawSource | None = Field(default=None, description="Where a rebuild starts; null: no rebuild is published")
    calibration_dir: str = Field(default="calibration", description="The folder the quantizer reads (data.parquet)")
    calibration_from_sampled: bool = Field(
        default=False, description="The calibration rows are a seeded draw of the sampled set (processorca.py)"
    )
    fetch: str = Field(default="", description="How MLCommons publishes it, in words")
    preprocessing: str = Field(default="", description="How it was made from the raw data")
    sources: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _roles(self) -> Dataset:
        for what, table in (("sha256", self.sha256), ("urls", self.urls), ("r2_uri", self.r2_uri)):
            extra = set(table) - set(self.files)
            if extra:
                raise ValueError(f"{what} names role(s) {', '.join(sorted(extra))} that 'files' does not have")
        for role, digest in self.sha256.items():
            if digest != "unknown" and (len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest)):
                raise ValueError(f"sha256.{role} is neither 64 lower-case hex digits nor 'unknown'")
        return self


class Generation(_Strict):
    decoding: Literal["greedy", "sampling"] = "greedy"
    min_new_tokens: int = Field(ge=0)
    max_new_tokens: int = Field(gt=0)
    sources: list[str] = Field(default_factory=list)


class Metric(_Strict):
    name: str = Field(min_length=1, description="Its key in accuracy.txt (the evaluation script's output)")
    kind: MetricKind
    reference: float | None = Field(
        default=None, gt=0, description="The reference implementation's score (the target's 100%); null: reported only"
    )
    digits: int | None = Field(default=None, ge=0, description="The evaluation rounds the mean to this; null: not")
    by_round: dict[str, float] = Field(
        default_factory=dict, description="round -> reference, for rounds where the checker used another one"
    )
    scorers: list[SampleScorer] = Field(
        default_factory=list,
        description="Samples whose dataset 'metric' column names one of these, each scored by it; empty: all",
    )
    how: str = Field(min_length=1, description="How MLCommons' evaluation computes it, in words")

    def reference_in(self, mlperf_round: str | None = None) -> float:
        ref = self.by_round.get(mlperf_round or "", self.reference)
        if ref is None:
            raise ValueError(f"metric {self.name} is reported only: it has no reference")
        return ref


class TokensPerSample(_Strict):
    reference: float = Field(gt=0)
    band: list[float] = Field(
        min_length=2, max_length=2, description="[low, high]: fractions of the reference the checker accepts"
    )

    @property
    def low(self) -> float:
        return self.reference * self.band[0]

    @property
    def high(self) -> float:
        return self.reference * self.band[1]


class Accuracy(_Strict):
    level: str = Field(pattern=r"^\d+(\.\d+)?$", description="The accuracy class: 99 or 99.9 (% of the reference)")
    factor: float = Field(gt=0, le=1, description="The fraction of each reference score a result must reach")
    metrics: list[Metric] = Field(min_length=1)
    tokens_per_sample: TokensPerSample
    samples: int = Field(gt=0, description="gen_num of a full accuracy run")
    sources: list[str] = Field(default_factory=list)

    def floor(self, metric: Metric, mlperf_round: str | None = None) -> float:
        return metric.reference_in(mlperf_round) * self.factor

    def targets(self) -> list[Metric]:
        """The metrics the checker holds to a floor (the others are printed by the evaluation, not judged)."""
        return [m for m in self.metrics if m.reference is not None]

    def keys(self) -> tuple[str, ...]:
        """Every judged score key an accuracy.txt of this benchmark carries."""
        return (*(m.name for m in self.targets()), "tokens_per_sample")


class ScenarioRules(_Strict):
    mlperf_model: str | None = Field(default=None, description="mlperf.conf's model key, when not the benchmark's")
    min_duration_ms: int = Field(ge=0)
    min_query_count: int = Field(ge=0)
    performance_sample_count: int = Field(gt=0)
    min_samples_per_query: int | None = Field(default=None, ge=0, description="Offline, closed division")
    ttft_ms: float | None = Field(default=None, gt=0, description="p99 time-to-first-token limit")
    tpot_ms: float | None = Field(default=None, gt=0, description="p99 time-per-output-token limit")
    result_names: list[str] = Field(default_factory=list, description="Extra result-folder names of this scenario")
    rounds: list[str] = Field(default_factory=list, description="Rounds it exists in; empty: every round")
    sources: list[str] = Field(default_factory=list)


class Benchmark(_Strict):
    schema_version: Literal[1]
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-_]*$")
    title: str
    mlperf_model: str = Field(description="The model key in mlperf.conf (e.g. llama3_1-405b)")
    result_names: list[str] = Field(min_length=1, description="Result-folder names: results/<system>/<this>/")
    rounds: list[str] = Field(min_length=1)
    model: Model
    dataset: Dataset
    generation: Generation
    accuracy: Accuracy
    scenarios: dict[Scenario, ScenarioRules]
    sources: dict[str, Source] = Field(min_length=1)
    demo: bool = Field(default=False, description="A stand-in for tests and demos, never a published benchmark")

    @model_validator(mode="after")
    def _consistent(self) -> Benchmark:
        if "Offline" not in self.scenarios:
            raise ValueError("scenarios must include Offline")
        for name, rules in self.scenarios.items():
            if name == "Offline" and rules.min_samples_per_query is None:
                raise ValueError("scenarios.Offline needs min_samples_per_query")
            if name != "Offline" and (rules.ttft_ms is None or rules.tpot_ms is None):
                raise ValueError(f"scenarios.{name} needs ttft_ms and tpot_ms")
        cited = [
            *self.model.sources,
            *self.dataset.sources,
            *self.generation.sources,
            *self.accuracy.sources,
            *(s for r in self.scenarios.values() for s in r.sources),
        ]
        missing = sorted({s for s in cited if s not in self.sources})
        if missing:
            raise ValueError(f"cites source(s) {', '.join(missing)} that 'sources' does not define")
        if len({m.name for m in self.accuracy.metrics}) != len(self.accuracy.metrics):
            raise ValueError("accuracy.metrics repeat a name")
        return self

    @property
    def family(self) -> str:
        """The mlperf.conf model key: benchmarks that differ only in accuracy class share it (llama2-70b)."""
        return self.mlperf_model

    def rules(self, scenario: str) -> ScenarioRules:
        try:
            return self.scenarios[scenario]  # type: ignore[index]
        except KeyError:
            raise RecipeError(
                f"benchmark {self.name} has no {scenario} scenario (it has {', '.join(self.scenarios)}).",
                f"`repro benchmarks show {self.name}`",
            ) from None

    def loadgen_model(self, scenario: str) -> str:
        """The model name LoadGen's FromConfig needs for this scenario (mlperf.conf keys are keyed on it)."""
        return self.rules(scenario).mlperf_model or self.mlperf_model

    def all_result_names(self) -> list[str]:
        return [*self.result_names, *(n for r in self.scenarios.values() for n in r.result_names)]


def search_path() -> list[Path]:
    extra = [Path(p) for p in os.environ.get(ENV_PATH, "").split(os.pathsep) if p.strip()]
    return [*extra, SHIPPED]


def _format_validation(path: Path, exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{path}: field '{field}': {first['msg']}{more}"


def load_benchmark_file(path: Path) -> Benchmark:
    """One benchmark file: a regular file of at most 1 MB, a mapping that `Benchmark` validates, named as its file."""
    path = Path(path)
    fix = f"fix it against repro/core/benchmarks.py's schema (see {SHIPPED / 'llama2-70b-99.yaml'})"
    try:
        raw: Any = safe_yaml(read_text_bounded(path, MAX_BENCHMARK_BYTES, what="benchmark"))
    except FileNotFoundError:
        raise RecipeError(f"{path}: no such benchmark file.", "`repro recipes list`") from None
    except OSError as exc:
        raise RecipeError(f"{path}: cannot be read as a benchmark ({exc.strerror or exc}).", fix) from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RecipeError(f"{path}: not valid YAML ({why}).", fix) from None
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}: a benchmark must be a mapping of fields (name, model, dataset, ...).", fix)
    try:
        bench = Benchmark.model_validate(raw)
    except ValidationError as exc:
        raise RecipeError(_format_validation(path, exc), fix) from None
    if bench.name != path.stem:
        raise RecipeError(f"{path}: field 'name' is '{bench.name}' but the file is named '{path.stem}'.", fix)
    return bench


@cache
def _load_cached(name: str, where: tuple[str, ...]) -> Benchmark:
    for folder in where:
        path = Path(folder) / f"{name}.yaml"
        if path.is_file():
            return load_benchmark_file(path)
    shown = name if len(name) <= 80 and name.isprintable() else ascii(name[:80])
    known = ", ".join(_names(where)) or "none"
    raise RecipeError(
        f"Unknown benchmark '{shown}': no {shown}.yaml in {', '.join(where)} (known: {known}).",
        f"add {shown}.yaml to a folder in ${ENV_PATH}, or name a known benchmark",
    )


def _names(where: tuple[str, ...]) -> list[str]:
    seen: dict[str, None] = {}
    for folder in where:
        p = Path(folder)
        if p.is_dir():
            for f in sorted(p.glob("*.yaml")):
                seen.setdefault(f.stem, None)
    return list(seen)


def load_benchmark(name: str) -> Benchmark:
    """The benchmark of that name from the search path, validated once and cached."""
    return _load_cached(name, tuple(str(p) for p in search_path()))


def benchmark_names() -> list[str]:
    """Every benchmark on the search path, the shipped ones included."""
    return _names(tuple(str(p) for p in search_path()))


def all_benchmarks() -> list[Benchmark]:
    return [load_benchmark(n) for n in benchmark_names()]


@cache
def _by_result_name(where: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in _names(where):
        for result_name in _load_cached(name, where).all_result_names():
            out.setdefault(result_name.lower(), name)
    return out


def benchmark_for_result_name(folder_name: str) -> Benchmark | None:
    """The benchmark a result folder's name states (`llama3.1-405b`, `llama2-70b-99.9`, `llama2-70b-interactive-99`);
    None when no benchmark file claims it."""
    where = tuple(str(p) for p in search_path())
    name = _by_result_name(where).get(folder_name.lower())
    return _load_cached(name, where) if name else None


def scenario_of_result_name(bench: Benchmark, folder_name: str) -> str | None:
    """The scenario a result-folder name implies on its own (the v5.0 `-interactive-` folders), else None."""
    for scenario, rules in bench.scenarios.items():
        if folder_name in rules.result_names:
            return scenario
    return None
