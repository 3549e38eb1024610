"""MLPerf benchmarks are data: one YAML per benchmark under repro/data/benchmarks/, validated by `Benchmark`.

A benchmark is what every system running it shares: the model (repo, pinned revision, architecture), the dataset,
the generation limits, the accuracy metrics and targets the submission checker applies, and the per-scenario
LoadGen rules of mlperf.conf. A recipe names its benchmark and keeps only what is system-specific. No figure of a
benchmark is written in repro's code; every one here names the source it was read from.

Search path: the folders in $REPRO_BENCHMARKS_PATH (os.pathsep-separated), then the shipped folder. A new benchmark
is a new file in one of them; a file in $REPRO_BENCHMARKS_PATH shadows a shipped one of the same name.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from repro.core.errors import RecipeError
from repro.core.families import Family, load_family
from repro.core.names import Name, RepoId, Revision, Role, Url, text_problem
from repro.core.names import shown as shown_value
from repro.core.safeio import read_bytes_bounded, safe_yaml, yaml_kind, yaml_problem

ENV_PATH = "REPRO_BENCHMARKS_PATH"
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "benchmarks"
MAX_BENCHMARK_BYTES = 1 << 20
BENCHMARK_NAME = r"^[a-z0-9][a-z0-9.\-_]*$"
"""A benchmark's name, which is also its file's name (NAME.yaml) in a folder of the search path."""
NAME_LEN = 64

Scenario = Literal["Offline", "Server", "Interactive"]
Unknown = Literal["unknown"]
KindName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")]
"""A metric kind or per-sample kind: a name its benchmark's module provides (repro/core/families/), checked when the
file is loaded."""
SubsetEvaluator = Literal["gpqa", "mmlu_pro", "math500", "aime", "livecodebench"]
"""Per-subset answer rules of MLCommons' DeepSeek-R1 evaluation (eval_accuracy.py DATASET_EVALUATORS), as
repro/results/dsr1_answers.py implements them; a dataset name is scored by the first key it contains."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class Source(_Strict):
    repo: str = Field(min_length=1, description="owner/name on GitHub, or a site")
    path: str = Field(min_length=1)
    commit: str = Field(description="The commit (or tag) read")
    note: str = ""


class MixtureOfExperts(_Strict):
    """A mixture-of-experts MLP as config.json gives it (DeepSeek-V3: n_routed_experts, n_shared_experts,
    num_experts_per_tok, moe_intermediate_size, first_k_dense_replace)."""

    routed_experts: int = Field(gt=0)
    shared_experts: int = Field(ge=0)
    experts_per_token: int = Field(gt=0, description="Routed experts each token passes through")
    expert_intermediate_size: int = Field(gt=0)
    dense_layers: int = Field(ge=0, description="The first layers, whose MLP is dense (intermediate_size)")

    @model_validator(mode="after")
    def _fits(self) -> MixtureOfExperts:
        if self.experts_per_token > self.routed_experts:
            raise ValueError("experts_per_token is more than routed_experts")
        return self


class LatentAttention(_Strict):
    """Multi-head latent attention as config.json gives it (q_lora_rank, kv_lora_rank, qk_nope_head_dim,
    qk_rope_head_dim, v_head_dim): the KV cache holds kv_lora_rank + qk_rope_head_dim values per token and layer."""

    q_lora_rank: int = Field(gt=0)
    kv_lora_rank: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    qk_rope_head_dim: int = Field(gt=0)
    v_head_dim: int = Field(gt=0)


class Architecture(_Strict):
    """The model's shape as its published config.json gives it (num_hidden_layers, hidden_size, ...); its module
    reads it into a ModelShape (repro/core/families/). A mixture of experts (`moe`) and latent attention (`mla`) add
    their own blocks; a dense GQA model has neither."""

    layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    attention_heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    max_position_embeddings: int = Field(gt=0)
    moe: MixtureOfExperts | None = None
    mla: LatentAttention | None = None
    mtp_layers: int = Field(
        default=0, ge=0, description="Multi-token-prediction layers beside the model's (num_nextn_predict_layers)"
    )

    @model_validator(mode="after")
    def _layers(self) -> Architecture:
        if self.moe is not None and self.moe.dense_layers > self.layers:
            raise ValueError("moe.dense_layers is more than layers")
        if self.mla is not None and self.head_dim != self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim:
            raise ValueError("with mla, head_dim is a query/key head's width: qk_nope_head_dim + qk_rope_head_dim")
        return self


class Model(_Strict):
    repo_id: RepoId = Field(description="owner/name on the hub; its last part is the model's folder under models/")
    revision: Revision = Field(description="The commit the benchmark pins")
    gated: bool = False
    parameters: int = Field(gt=0, description="Parameter count (derived from the architecture, see sources)")
    architecture: Architecture | None = None
    allow_patterns: list[str] = Field(default_factory=list, description="The files setup downloads")
    size_gb: float = Field(gt=0, description="Download size of the original weights (GB, 1e9 bytes)")
    eos_token_id: int = Field(
        ge=0,
        description="The end-of-sequence token id the published harness stops on: TEST06's EOS check counts it "
        "(Llama-2: 2, Llama-3.1: 128009)",
    )
    sources: list[str] = Field(default_factory=list)


class RawSource(_Strict):
    """The raw data the processed set is rebuilt from (llama2-70b: processorca.py on the OpenOrca parquet)."""

    repo: RepoId = Field(description="Hugging Face dataset repo")
    file: Name = Field(description="A file at the repo's top level; its name under data/raw/<repo>/")
    revision: Revision


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Hosts a checksum list may come from over plain http: a local mirror or stand-in on this machine."""


class Md5Pin(_Strict):
    """A dataset file's MD5 as published somewhere other than the download (`value`, read from `sources`), and
    MLCommons' md5sum-format list served beside the dataset's .uri (`list_url`): setup requires the value, the
    list's entry and the bytes to agree, then records the bytes' SHA-256. No `value` means no checksum independent
    of MLCommons' bucket is published; `note` says so, and setup says it once."""

    value: str | None = Field(default=None, description="32 lower-case hex digits, or null: none is published")
    sources: list[str] = Field(default_factory=list, description="Keys of `sources` the value was read from")
    list_url: Url | None = Field(
        default=None, description="MLCommons' <dataset>.md5 (as md5sum writes it), fetched over HTTPS at setup"
    )
    note: str = Field(default="", description="Why there is no published value (required without one)")

    @model_validator(mode="after")
    def _consistent(self) -> Md5Pin:
        if self.value is not None and (len(self.value) != 32 or any(c not in "0123456789abcdef" for c in self.value)):
            raise ValueError("value is not 32 lower-case hex digits")
        if self.value is not None and not self.sources:
            raise ValueError("a published value names the sources it was read from")
        if self.value is None and not self.note:
            raise ValueError("without a published value, 'note' says why none is published")
        if self.value is None and self.list_url is None:
            raise ValueError("needs a published value or MLCommons' list_url (or both)")
        if self.list_url is not None:
            parts = urlsplit(self.list_url)
            if not parts.hostname or not (
                parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS)
            ):
                raise ValueError("list_url is fetched over https (plain http only from this machine's loopback)")
        return self


class Dataset(_Strict):
    name: Name = Field(description="The dataset's folder name under data/ and preprocessed/")
    samples: int = Field(gt=0)
    calibration_samples: int = Field(ge=0)
    files: dict[Role, Name] = Field(description="role -> file name in data/<name>/ (sampled, calibration)")
    sha256: dict[Role, str] = Field(default_factory=dict, description="role -> published SHA-256, or 'unknown'")
    urls: dict[Role, Url] = Field(default_factory=dict, description="role -> direct URL, where one is published")
    r2_uri: dict[Role, Url] = Field(
        default_factory=dict, description="role -> MLCommons R2 downloader metadata URI (the official fetch)"
    )
    md5: dict[Role, Md5Pin] = Field(
        default_factory=dict,
        description="role -> its MD5 from a source other than the download and MLCommons' .md5 list (see Md5Pin)",
    )
    size_bytes: dict[Role, int] = Field(default_factory=dict, description="role -> file size, where published")
    mean_input_tokens: float | Unknown = Field(
        default="unknown", description="Mean prompt tokens per sample, where stated (the roofline's default)"
    )
    format: Name = Field(
        default="mlperf-openorca-pkl",
        description="The dataset file's format, in a word; its benchmark's module reads its columns",
    )
    raw: RawSource | None = Field(default=None, description="Where a rebuild starts; null: no rebuild is published")
    calibration_dir: Name = Field(
        default="calibration", description="The folder under preprocessed/<name>/ the quantizer reads (data.parquet)"
    )
    calibration_from_sampled: bool = Field(
        default=False, description="The calibration rows are a seeded draw of the sampled set (processorca.py)"
    )
    fetch: str = Field(default="", description="How MLCommons publishes it, in words")
    preprocessing: str = Field(default="", description="How it was made from the raw data")
    sources: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _roles(self) -> Dataset:
        tables = (("sha256", self.sha256), ("md5", self.md5), ("urls", self.urls), ("r2_uri", self.r2_uri))
        for what, table in tables:
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
    reference_min_new_tokens: int | None = Field(
        default=None, ge=0, description="The reference implementation's, where it is not the rules table's"
    )
    reference_max_new_tokens: int | None = Field(
        default=None, gt=0, description="The reference implementation's, where it is not the rules table's"
    )
    sources: list[str] = Field(default_factory=list)

    @property
    def reference_max(self) -> int:
        """The maximum output length 'as in the benchmark reference' (MLPerf's rule): the reference
        implementation's where the benchmark file states one, else the rules table's."""
        return self.reference_max_new_tokens or self.max_new_tokens

    @property
    def allowed_min_tokens(self) -> tuple[int, ...]:
        """The minimum output lengths a request may ask for: the rules table's and the reference's."""
        extra = () if self.reference_min_new_tokens is None else (self.reference_min_new_tokens,)
        return tuple(sorted({self.min_new_tokens, *extra}))


class StatedElsewhere(_Strict):
    """A reference value another source states for the same metric, recorded and not applied."""

    value: float = Field(gt=0)
    source: str = Field(min_length=1, description="A key of the file's sources")
    note: str = Field(min_length=1, description="Why it is not the one applied")


class Metric(_Strict):
    name: str = Field(min_length=1, description="Its key in accuracy.txt (the evaluation script's output)")
    kind: KindName = Field(description="How it is computed: a metric kind its benchmark's module provides")
    reference: float | None = Field(
        default=None, gt=0, description="The reference implementation's score (the target's 100%); null: reported only"
    )
    digits: int | None = Field(default=None, ge=0, description="The evaluation rounds the mean to this; null: not")
    by_round: dict[str, float] = Field(
        default_factory=dict, description="round -> reference, for rounds where the checker used another one"
    )
    scorers: list[KindName] = Field(
        default_factory=list,
        description="Samples whose dataset 'metric' column names one of these, each scored by it; empty: all",
    )
    how: str = Field(min_length=1, description="How MLCommons' evaluation computes it, in words")
    stated_elsewhere: list[StatedElsewhere] = Field(
        default_factory=list, description="Other sources' reference values for it (the checker's is applied)"
    )

    def reference_in(self, mlperf_round: str | None = None) -> float:
        ref = self.by_round.get(mlperf_round or "", self.reference)
        if ref is None:
            raise ValueError(f"metric {self.name} is reported only: it has no reference")
        return ref


def impossible_score(key: str, value: float) -> str | None:
    """Why a value of accuracy.txt cannot be (a score outside 0..100, a count or length that is not positive,
    anything not finite), or None. evaluate-accuracy.py prints ROUGE F-measures and match rates x 100."""
    if not math.isfinite(value):
        return f"is {value!r}, not a finite number"
    if (key.startswith("rouge") or key == "exact_match") and not 0 <= value <= 100:
        return f"is {value:g}; a score is a percentage between 0 and 100"
    if key in ("tokens_per_sample", "gen_num") and value <= 0:
        return f"is {value:g}; it counts generated tokens or samples, so it is above 0"
    if key in ("gen_len", "gen_tok_len") and value < 0:
        return f"is {value:g}; a length is never negative"
    if key == "gen_num" and value != int(value):
        return f"is {value:g}; a count of samples is a whole number"
    return None


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


class SubsetRule(_Strict):
    """How one subset of a mixed dataset is scored (DeepSeek-R1's five), in words."""

    how: str = Field(min_length=1)


class Sandbox(_Strict):
    """Limits on one generated program (or one batch of MATH500 answers) in repro's sandbox."""

    memory_bytes: int = Field(gt=0, description="RLIMIT_AS")
    cpu_s: int = Field(gt=0, description="RLIMIT_CPU (raised to the run's wall bound when that is longer)")
    nproc: int = Field(gt=0, description="Processes and threads: RLIMIT_NPROC, or the pids cgroup for root")
    file_bytes: int = Field(gt=0, description="RLIMIT_FSIZE")
    open_files: int = Field(gt=0, description="RLIMIT_NOFILE")
    note: str = Field(min_length=1, description="Where each differs from the reference, which sets none")


class CodeExecution(_Strict):
    """Subsets scored by running the model's code against tests (LiveCodeBench)."""

    problems: str = Field(min_length=1, description="The tests' dataset, as the reference loads it")
    version: str = Field(min_length=1, description="Its release tag")
    file: Name = Field(description="The JSON-lines file of that release the loading script reads")
    problem_count: int = Field(gt=0)
    test_timeout_s: int = Field(gt=0, description="Per test case, and (x tests + 1 each, + 5) per program")
    math_grader_timeout_s: int = Field(gt=0, description="Per MATH500 answer (the reference has no bound)")
    sandbox: Sandbox
    sources: list[str] = Field(default_factory=list)


class Accuracy(_Strict):
    level: str = Field(pattern=r"^\d+(\.\d+)?$", description="The accuracy class: 99 or 99.9 (% of the reference)")
    factor: float = Field(gt=0, le=1, description="The fraction of each reference score a result must reach")
    metrics: list[Metric] = Field(min_length=1)
    tokens_per_sample: TokensPerSample
    samples: int = Field(gt=0, description="gen_num of a full accuracy run")
    subsets: dict[SubsetEvaluator, SubsetRule] = Field(
        default_factory=dict, description="A mixed dataset's subsets by their evaluator (a dataset name contains it)"
    )
    code_execution: CodeExecution | None = None
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
    mlperf_model: Name | None = Field(default=None, description="mlperf.conf's model key, when not the benchmark's")
    min_duration_ms: int = Field(ge=0)
    min_query_count: int = Field(ge=0)
    performance_sample_count: int = Field(gt=0)
    min_samples_per_query: int | None = Field(default=None, ge=0, description="Offline, closed division")
    ttft_ms: float | None = Field(default=None, gt=0, description="p99 time-to-first-token limit")
    tpot_ms: float | None = Field(default=None, gt=0, description="p99 time-per-output-token limit")
    result_names: list[Name] = Field(default_factory=list, description="Extra result-folder names of this scenario")
    rounds: list[str] = Field(default_factory=list, description="Rounds it exists in; empty: every round")
    sources: list[str] = Field(default_factory=list)


class Benchmark(_Strict):
    schema_version: Literal[1]
    name: str = Field(pattern=BENCHMARK_NAME, max_length=NAME_LEN)
    title: str
    module: str = Field(
        pattern=r"^[a-z][a-z0-9_]{0,63}$",
        description="The module that holds its behaviour (repro/core/families/<module>.py, or <module>.py beside this "
        "file): its dataset reader, metric kinds and scorers, model shape",
    )
    mlperf_model: Name = Field(description="The model key in mlperf.conf (e.g. llama3_1-405b); a folder of engines/")
    result_names: list[Name] = Field(min_length=1, description="Result-folder names: results/<system>/<this>/")
    rounds: list[str] = Field(min_length=1)
    model: Model
    dataset: Dataset
    generation: Generation
    accuracy: Accuracy
    scenarios: dict[Scenario, ScenarioRules]
    sources: dict[str, Source] = Field(min_length=1)
    demo: bool = Field(default=False, description="A stand-in for tests and demos, never a published benchmark")
    _spec: Family | None = PrivateAttr(default=None)

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
            *(s for pin in self.dataset.md5.values() for s in pin.sources),
            *self.generation.sources,
            *self.accuracy.sources,
            *(e.source for m in self.accuracy.metrics for e in m.stated_elsewhere),
            *(self.accuracy.code_execution.sources if self.accuracy.code_execution else []),
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

    @property
    def spec(self) -> Family:
        """Its behaviour: the module `module` names (repro/core/families/), which the pipeline asks, never a name."""
        if self._spec is None:
            self._spec = load_family(self.module)  # a file validated elsewhere (a test's): the shipped module
        return self._spec

    def rules(self, scenario: str) -> ScenarioRules:
        try:
            return self.scenarios[scenario]  # type: ignore[index]
        except KeyError:
            raise RecipeError(
                f"benchmark {self.name} has no {scenario} scenario (it has {', '.join(self.scenarios)}).",
                f"run one of its scenarios ({', '.join(s.lower() for s in self.scenarios)}): `repro run offline`",
            ) from None

    def loadgen_model(self, scenario: str) -> str:
        """The model name LoadGen's FromConfig needs for this scenario (mlperf.conf keys are keyed on it)."""
        return self.rules(scenario).mlperf_model or self.mlperf_model

    def all_result_names(self) -> list[str]:
        return [*self.result_names, *(n for r in self.scenarios.values() for n in r.result_names)]

    _source: BenchmarkSource | None = PrivateAttr(default=None)

    @property
    def source(self) -> BenchmarkSource:
        """The file these targets were read from (set by the loader; a model built in code has none)."""
        if self._source is None:
            return BenchmarkSource(self.name, None, None, shipped=False, shadows=None)
        return self._source


@dataclass(frozen=True)
class BenchmarkSource:
    """Which file a benchmark's targets came from and its SHA-256: part of what a result was judged by. A file in
    $REPRO_BENCHMARKS_PATH of a shipped benchmark's name shadows it and changes its targets, so it is named (and
    hashed as used) by verify, explain and attest, never taken for the shipped one."""

    name: str
    path: str | None
    sha256: str | None
    shipped: bool
    shadows: str | None
    """The shipped file of the same name this one hides, or None."""
    module: str | None = None
    """The benchmark's own module (`module:`, a .py beside the file) when it is not one repro ships: it scores."""
    module_sha256: str | None = None

    def words(self) -> str | None:
        """One sentence for a verdict's notes when the targets are not the shipped file's; None when they are."""
        if self.shipped:
            return None
        if self.path is None:
            return f"benchmark {self.name}: built in code, not read from a file"
        digest = f"sha256 {self.sha256[:12]}…" if self.sha256 else "sha256 unknown"
        scored = f"; scored by {self.module} (sha256 {(self.module_sha256 or '?')[:12]}…)" if self.module else ""
        if self.shadows:
            return (
                f"benchmark {self.name}: targets from {self.path} ({digest}, via ${ENV_PATH}), which shadows the "
                f"shipped {self.shadows}{scored}"
            )
        return (
            f"benchmark {self.name}: targets from {self.path} ({digest}, via ${ENV_PATH}); not a shipped "
            f"benchmark{scored}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "sha256": self.sha256,
            "shipped": self.shipped,
            "shadows": self.shadows,
            "module": self.module,
            "module_sha256": self.module_sha256,
        }


def _file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(read_bytes_bounded(path, MAX_BENCHMARK_BYTES, what="benchmark module")).hexdigest()
    except (OSError, ValueError):
        return None


def not_shipped_notes(*benches: Benchmark | None) -> list[str]:
    """One note per benchmark (once each) whose targets come from a file repro does not ship: which file, its
    sha256, the shipped file it shadows. Nothing when every one is the shipped file."""
    used = {b.name: b for b in benches if b is not None}
    return [w for b in used.values() if (w := b.source.words()) is not None]


def search_path() -> list[Path]:
    extra = [Path(p) for p in os.environ.get(ENV_PATH, "").split(os.pathsep) if p.strip()]
    return [*extra, SHIPPED]


def _union_tag(part: object) -> bool:
    """A step pydantic adds to an error's location for one member of a union (`float`, `literal['unknown']`)."""
    return isinstance(part, str) and (part in ("float", "int", "str", "bool", "none") or "[" in part)


def format_validation(path: Path, exc: ValidationError) -> str:
    """One line: the file, the first bad field (as the file spells it) and why. A union field (a number or
    'unknown') reports the number's error, not one per member."""
    errors = exc.errors()
    real = [e for e in errors if e["type"] != "literal_error"] or errors
    first = real[0]
    field = ".".join(str(p) for p in first["loc"] if not _union_tag(p))
    places = {tuple(p for p in e["loc"] if not _union_tag(p)) for e in errors}
    more = f" (and {len(places) - 1} more)" if len(places) > 1 else ""
    msg = str(first["msg"]).removeprefix("Value error, ")
    if not field:  # the file as a whole (its parts disagree, or it breaks an MLPerf rule): say it plainly
        return f"{path}: {msg}{more}"
    return f"{path}: field '{field}': {msg}{more}"


def load_benchmark_file(path: Path) -> Benchmark:
    """One benchmark file: a regular file of at most 1 MB, a mapping that `Benchmark` validates, named as its file."""
    path = Path(path)
    fix = (
        f"fix it against repro/core/benchmarks.py's schema (see {SHIPPED / 'llama2-70b-99.yaml'}), "
        "then `repro recipes validate`"
    )
    try:
        data = read_bytes_bounded(path, MAX_BENCHMARK_BYTES, what="benchmark")
        raw: Any = safe_yaml(data.decode("utf-8"))
    except FileNotFoundError:
        raise RecipeError(f"{path}: no such benchmark file.", "`repro recipes list`") from None
    except OSError as exc:
        raise RecipeError(f"{path}: cannot be read as a benchmark ({exc.strerror or exc}).", fix) from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise RecipeError(f"{path}: {yaml_problem(exc)}.", fix) from None
    if not isinstance(raw, dict):
        raise RecipeError(
            f"{path}: a benchmark must be a mapping of fields (name, model, dataset, ...), not {yaml_kind(raw)}.", fix
        )
    bad_text = text_problem(raw)
    if bad_text is not None:
        raise RecipeError(f"{path}: field '{bad_text[0]}' {bad_text[1]}.", fix)
    try:
        bench = Benchmark.model_validate(raw)
    except ValidationError as exc:
        raise RecipeError(format_validation(path, exc), fix) from None
    if bench.name != path.stem:
        raise RecipeError(f"{path}: field 'name' is '{bench.name}' but the file is named '{path.stem}'.", fix)
    try:
        family = load_family(bench.module, path.parent)
    except RecipeError as exc:
        raise RecipeError(f"{path}: field 'module': {exc.message}", exc.next_command) from None
    problems = family.problems([(m.kind, m.scorers) for m in bench.accuracy.metrics])
    if problems:
        field, why = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise RecipeError(f"{path}: field '{field}': {why}{more}.", fix)
    bench._spec = family
    shipped_file = SHIPPED / path.name
    own = Path(family.origin) if family.locator()["beside"] else None  # a module of the benchmark's own folder
    is_shipped_file = path.resolve() == shipped_file.resolve()
    bench._source = BenchmarkSource(
        bench.name,
        str(path.absolute()),
        hashlib.sha256(data).hexdigest(),
        shipped=is_shipped_file and own is None,
        shadows=str(shipped_file) if not is_shipped_file and shipped_file.is_file() else None,
        module=str(own) if own is not None else None,
        module_sha256=_file_sha256(own) if own is not None else None,
    )
    return bench


def _is_name(name: object) -> bool:
    """A benchmark's name, as a file or run.json gives it: a name, never a path."""
    return isinstance(name, str) and len(name) <= NAME_LEN and re.fullmatch(BENCHMARK_NAME, name) is not None


def _file_in(name: str, where: tuple[str, ...]) -> Path | None:
    """The first NAME.yaml in the folders `where`: a $REPRO_BENCHMARKS_PATH file before the shipped one it shadows."""
    return next((f for folder in where if (f := Path(folder) / f"{name}.yaml").is_file()), None)


def benchmark_path(name: str) -> Path | None:
    """The file load_benchmark(name) reads, whether or not it validates; None for no benchmark name or no file."""
    return _file_in(name, tuple(str(p) for p in search_path())) if _is_name(name) else None


@cache
def _load_cached(name: str, where: tuple[str, ...]) -> Benchmark:
    if not _is_name(name):
        raise RecipeError(
            f"{shown_value(str(name))} is not a benchmark name (lower-case letters, digits, '.', '-', '_'; a file "
            "NAME.yaml in a folder of the search path, never a path).",
            f"name a known benchmark ({', '.join(_names(where)) or 'none'})",
        )
    path = _file_in(name, where)
    if path is not None:
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
