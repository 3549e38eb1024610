"""The index of every published MLPerf LLM result repro knows, shipped as package data and validated like recipes.

`repro/data/published/sources.json` names one CSV per model family (published-llama2-70b.csv,
published-llama3.1-405b.csv): the benchmark names its `benchmark` column may hold and its accuracy columns (the
family's own metrics: rouge1/rouge2/rougeL for Llama-2-70B, exact_match/rougeL for Llama-3.1-405B). Each file is read
once; each row becomes a `PublishedResult` with its benchmark and a metrics mapping. Counts that the system JSON wrote
as strings become integers, and the per-accelerator figure is recomputed from tokens/s / (accelerators per node x
nodes) and checked against the CSV, so a bad edit to the data fails loudly.

References (`repro published show REF`, `repro verify --against REF`, a recipe's `published.result_id`):
  * an official result ID, `5.1-0008`: one system of one round, every benchmark and scenario it submitted;
  * the ID narrowed by benchmark and/or scenario: `5.1-0008/99/Offline`, `5.1-0008/llama3.1-405b/Server`;
  * a key for rounds without IDs (v4.0, v4.1, v6.1), or any prefix of it:
    `ROUND/DIVISION/SUBMITTER/SYSTEM/BENCHMARK/SCENARIO`, e.g.
    `v4.1/closed/NVIDIA/DGX-H100_H100-SXM-80GBx8_TRT/99.9/Offline` (SYSTEM is the results folder name).
Matching is case-insensitive; BENCHMARK is the row's `benchmark` value (`99`, `99.9`, `llama3.1-405b`) or its full
name (`llama2-70b-99.9`); a row whose results folder is not named for its benchmark (open division variants such as
`llama3_1-405b_pruned`) has that folder name in its key instead.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from repro.core.benchmarks import impossible_score
from repro.core.errors import InputError

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "published"
INDEX_CSV = DATA_DIR / "published-llama2-70b.csv"
INDEX_405B_CSV = DATA_DIR / "published-llama3.1-405b.csv"
INDEX_DSR1_CSV = DATA_DIR / "published-deepseek-r1.csv"
SOURCES_JSON = DATA_DIR / "sources.json"
SCENARIOS = ("Offline", "Server", "Interactive")
_ID = re.compile(r"^\d+\.\d+-\d{4}$")
# A row read from the official results table alone (the build script's --table-only-rows), and its crosscheck
TABLE_ONLY_KIND = "results-table-only"
TABLE_ONLY_CHECK = "table_only"
_REINSTALL = "reinstall repro (`pip install --force-reinstall repro`)"


class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)


def _opt(value: Any) -> Any:
    return None if value == "" else value


class PublishedResult(_Row):
    """One published result: one system, one benchmark, one scenario of one round."""

    round: str = Field(pattern=r"^v\d+\.\d+$")
    division: Literal["closed", "open"]
    submitter: str = Field(min_length=1)
    system_folder: str = Field(min_length=1)
    system_name: str
    accelerator_model_name: str = Field(min_length=1)
    accelerators_per_node: int = Field(gt=0)
    number_of_nodes: int = Field(gt=0)
    total_accelerators: int = Field(gt=0)
    host_processor_model_name: str = ""
    framework: str = ""
    benchmark: str = Field(min_length=1, description="As the index file writes it: 99, 99.9, llama3.1-405b")
    benchmark_name: str = Field(min_length=1, description="The MLPerf benchmark, from the index file's declaration")
    model_folder: str
    scenario: Literal["Offline", "Server", "Interactive"]
    scenario_folder: str
    log_scenario: str
    result_validity: Literal["VALID", "INVALID"]
    tokens_per_second: float = Field(gt=0)
    tokens_per_second_per_accelerator: float = Field(gt=0, description="As written in the CSV; checked, not used")
    samples_per_second: float | None = None
    min_duration_ms_summary: int | None = None
    loadgen_version: str | None = None
    metrics: dict[str, float] = Field(
        default_factory=dict, description="accuracy.txt scores under the benchmark's own names (rouge1, exact_match)"
    )
    tokens_per_sample: float | None = None
    gen_num: int | None = None
    result_id: str | None = None
    summary_crosscheck: str
    source_repo: str
    source_commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    source_path: str
    source_kind: str

    @field_validator(
        "samples_per_second",
        "min_duration_ms_summary",
        "loadgen_version",
        "tokens_per_sample",
        "gen_num",
        "result_id",
        mode="before",
    )
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return _opt(value)

    @field_validator("accelerators_per_node", "number_of_nodes", mode="before")
    @classmethod
    def _string_counts(cls, value: Any) -> Any:
        """System JSONs write some counts as strings ("8"); the index keeps them as written."""
        return int(value.strip()) if isinstance(value, str) and value.strip().isdigit() else value

    @field_validator("result_id")
    @classmethod
    def _id_shape(cls, value: str | None) -> str | None:
        if value is not None and not _ID.match(value):
            raise ValueError(f"result ID '{value}' is not of the form 5.1-0008")
        return value

    @model_validator(mode="after")
    def _table_only_is_said(self) -> PublishedResult:
        """A row read from the official results table alone (no summary log stored) says so in source_kind and
        summary_crosscheck, and carries nothing a summary log would have given; no other row claims it."""
        if self.table_only != (self.summary_crosscheck == TABLE_ONLY_CHECK):
            raise ValueError(
                f"source_kind '{self.source_kind}' and summary_crosscheck '{self.summary_crosscheck}' disagree on "
                f"whether the row is read from the results table alone ({TABLE_ONLY_KIND} / {TABLE_ONLY_CHECK})"
            )
        if self.table_only and (self.log_scenario or self.samples_per_second is not None):
            raise ValueError("a results-table-only row has no summary log: log_scenario and samples/s must be empty")
        return self

    @model_validator(mode="after")
    def _scores_can_be(self) -> PublishedResult:
        """An accuracy figure no evaluation can print (exact_match 100.5, tokens/sample 0) is a broken row."""
        figures = dict(self.metrics)
        if self.tokens_per_sample is not None:
            figures["tokens_per_sample"] = self.tokens_per_sample
        for key, value in figures.items():
            if (why := impossible_score(key, value)) is not None:
                raise ValueError(f"{key} {why}")
        return self

    @model_validator(mode="after")
    def _figures_agree(self) -> PublishedResult:
        product = self.accelerators_per_node * self.number_of_nodes
        if product != self.total_accelerators:
            raise ValueError(
                f"total_accelerators {self.total_accelerators} != {self.accelerators_per_node} per node "
                f"x {self.number_of_nodes} nodes"
            )
        recomputed = self.tokens_per_second / product
        if abs(recomputed - self.tokens_per_second_per_accelerator) > 5e-6 + 1e-9 * recomputed:
            raise ValueError(
                f"tokens_per_second_per_accelerator {self.tokens_per_second_per_accelerator} != "
                f"{self.tokens_per_second} / {product} = {recomputed}"
            )
        return self

    @property
    def table_only(self) -> bool:
        """Read from the round's official results table alone: no summary log of it is stored anywhere."""
        return self.source_kind == TABLE_ONLY_KIND

    @property
    def rouge1(self) -> float | None:
        return self.metrics.get("rouge1")

    @property
    def rouge2(self) -> float | None:
        return self.metrics.get("rouge2")

    @property
    def rougeL(self) -> float | None:  # noqa: N802 - the metric's own name
        return self.metrics.get("rougeL")

    @property
    def per_accelerator(self) -> float:
        """Recomputed from the log's tokens/s and the system JSON's counts (the CSV column is only checked)."""
        return self.tokens_per_second / self.total_accelerators

    @property
    def per_node(self) -> float:
        return self.tokens_per_second / self.number_of_nodes

    @property
    def system_key(self) -> str:
        return f"{self.round}/{self.division}/{self.submitter}/{self.system_folder}"

    @property
    def standard_folder(self) -> bool:
        """The results folder is named for the benchmark (`_` read as `.`: Cisco's llama3_1-405b)."""
        return self.model_folder.replace("_", ".").lower() == self.benchmark_name.lower()

    @property
    def bench_part(self) -> str:
        """The BENCHMARK part of the key: the benchmark, or the folder name of a variant (llama3_1-405b_pruned)."""
        return self.benchmark if self.standard_folder else self.model_folder

    @property
    def key(self) -> str:
        """Stable key of this row, unique in the index; also a valid reference."""
        return f"{self.system_key}/{self.bench_part}/{self.scenario}"

    @property
    def ref(self) -> str:
        """The shortest unambiguous name a person would type: the official ID where there is one."""
        return f"{self.result_id}/{self.benchmark}/{self.scenario}" if self.result_id else self.key

    @property
    def label(self) -> str:
        return self.result_id or self.system_key

    @property
    def source(self) -> str:
        return f"{self.source_repo}@{self.source_commit[:12]} {self.source_path}"

    @property
    def round_tuple(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.round[1:].split("."))

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "ref": self.ref,
            **self.model_dump(mode="json"),
            "tokens_per_second_per_accelerator": self.per_accelerator,
        }


class IndexFile(_Row):
    """One CSV of the index: the benchmark values its rows may carry and its accuracy columns."""

    file: str = Field(pattern=r"^[\w.-]+\.csv$")
    benchmarks: dict[str, str] = Field(min_length=1, description="benchmark column value -> MLPerf benchmark name")
    metrics: list[str] = Field(min_length=1, description="accuracy columns, the benchmark's own metric names")


class IndexSource(_Row):
    round: str
    file: str
    repository: str
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    how: str
    results: int = Field(ge=0)


class Provenance(_Row):
    files: list[IndexFile] = Field(min_length=1)
    description: str
    coverage: str
    result_ids: str
    accelerators: str
    sources: list[IndexSource]


@dataclass(frozen=True)
class Filters:
    accelerator: str | None = None
    submitter: str | None = None
    round: str | None = None
    scenario: str | None = None
    benchmark: str | None = None
    division: str | None = None
    min_nodes: int | None = None

    def describe(self) -> str:
        parts = [f"{k.replace('_', ' ')} {v}" for k, v in self.__dict__.items() if v is not None]
        return ", ".join(parts) or "none"


SORTS = ("per-accelerator", "tokens", "round", "submitter")


@dataclass(frozen=True)
class LoadedFile:
    path: Path
    sha256: str
    rows: int


@dataclass(frozen=True)
class PublishedIndex:
    rows: tuple[PublishedResult, ...]
    provenance: Provenance
    files: tuple[LoadedFile, ...]

    def benchmark_names(self) -> dict[str, str]:
        """Every benchmark value of the index with its full name (99 -> llama2-70b-99)."""
        return {k: v for f in self.provenance.files for k, v in f.benchmarks.items()}

    def value_of(self, benchmark: str | None) -> str | None:
        """The `benchmark` value the index writes for a benchmark file's name (llama2-70b-99 -> 99); None if none."""
        return next((v for v, name in self.benchmark_names().items() if name == benchmark), None)

    def benchmark_value(self, text: str) -> str:
        """The `benchmark` value a user's word names (99, llama2-70b-99.9, llama3_1-405b); InputError if none."""
        want = text.strip().lower().replace("_", ".")
        for value, name in self.benchmark_names().items():
            if want in (value.lower(), name.lower()):
                return value
        known = ", ".join(f"{v} ({n})" if v != n else v for v, n in self.benchmark_names().items())
        raise InputError(f"unknown benchmark '{text}'; use one of {known}.", "`repro published --help`")

    def benchmark_filter(self, text: str) -> set[str]:
        """The benchmark values a --benchmark filter covers: one benchmark, or a model family by its prefix
        (llama2-70b: 99 and 99.9) or its last part (405b)."""
        want = text.strip().lower().replace("_", ".")
        names = self.benchmark_names()
        hit = {v for v, n in names.items() if n.lower().startswith(want + "-") or n.lower().endswith("-" + want)}
        try:
            hit.add(self.benchmark_value(text))
        except InputError:
            if not hit:
                raise
        return hit

    def select(self, f: Filters, sort: str = "per-accelerator") -> list[PublishedResult]:
        """Rows passing every filter, sorted (per-accelerator tokens/s, highest first, unless told otherwise)."""
        out = list(self.rows)
        if f.accelerator:
            want = Accelerator.parse(f.accelerator)
            out = [r for r in out if want.covers(Accelerator.parse(r.accelerator_model_name))]
        if f.submitter:
            out = [r for r in out if r.submitter.lower() == f.submitter.lower()]
        if f.round:
            out = [r for r in out if r.round == normalise_round(f.round)]
        if f.scenario:
            out = [r for r in out if r.scenario == normalise_scenario(f.scenario)]
        if f.benchmark:
            benches = self.benchmark_filter(f.benchmark)
            out = [r for r in out if r.benchmark in benches]
        if f.division:
            out = [r for r in out if r.division == f.division.lower()]
        if f.min_nodes:
            out = [r for r in out if r.number_of_nodes >= f.min_nodes]
        keys = {
            "per-accelerator": lambda r: (-r.per_accelerator, r.system_key, r.benchmark, r.scenario),
            "tokens": lambda r: (-r.tokens_per_second, r.system_key, r.benchmark, r.scenario),
            "round": lambda r: (tuple(-x for x in r.round_tuple), -r.per_accelerator, r.system_key, r.benchmark),
            "submitter": lambda r: (r.submitter.lower(), r.system_folder, r.benchmark, r.scenario, r.round),
        }
        if sort not in keys:
            raise InputError(f"unknown sort '{sort}'; use one of {', '.join(SORTS)}.", "`repro published --help`")
        return sorted(out, key=keys[sort])

    def resolve(self, ref: str) -> list[PublishedResult]:
        """Rows named by a reference (see the module docstring); an unknown reference is an InputError."""
        text = ref.strip().strip("/")
        parts = [p for p in text.split("/") if p]
        if not parts:
            raise InputError("an empty published-result reference.", "`repro published` lists the IDs and keys")
        if _ID.match(parts[0]):
            rows = [r for r in self.rows if r.result_id == parts[0]]
            rest = parts[1:]
            if len(rest) > 2:
                raise InputError(
                    f"'{ref}': after an ID only BENCHMARK and SCENARIO may follow (e.g. {parts[0]}/99/Offline).",
                    "`repro published show ID`",
                )
            for part in rest:
                if _is_scenario(part):
                    rows = [r for r in rows if r.scenario == normalise_scenario(part)]
                else:
                    rows = [r for r in rows if r.benchmark == self.benchmark_value(part)]
        else:
            if len(parts) > 6:
                raise InputError(
                    f"'{ref}' has {len(parts)} parts; a key has at most 6 "
                    "(ROUND/DIVISION/SUBMITTER/SYSTEM/BENCHMARK/SCENARIO).",
                    "`repro published --help`",
                )
            if _is_round(parts[0]):
                parts[0] = normalise_round(parts[0])
            if len(parts) >= 5:
                with contextlib.suppress(InputError):  # a variant's folder (llama3_1-405b_pruned) is its key part
                    parts[4] = self.benchmark_value(parts[4])
            want = [p.lower() for p in parts]
            rows = [r for r in self.rows if [p.lower() for p in r.key.split("/")][: len(want)] == want]
        if not rows:
            hint = "`repro published` lists every ID and key"
            if _ID.match(parts[0]) and not any(r.result_id == parts[0] for r in self.rows):
                raise InputError(
                    f"no published result has ID {parts[0]} (the index has IDs for v5.1 and v6.0 only; "
                    "older rounds are named by key).",
                    hint,
                )
            raise InputError(f"no published result matches '{ref}'.", hint)
        return sorted(rows, key=lambda r: (r.system_key, r.benchmark, r.scenario))

    def to_json(self) -> dict[str, Any]:
        return {
            "index_files": [{"file": f.path.name, "sha256": f.sha256, "rows": f.rows} for f in self.files],
            "rows": len(self.rows),
            **self.provenance.model_dump(mode="json"),
        }


def normalise_round(text: str) -> str:
    text = text.strip().lower()
    return text if text.startswith("v") else "v" + text


def normalise_scenario(text: str) -> str:
    for s in SCENARIOS:
        if s.lower() == text.strip().lower():
            return s
    raise InputError(f"unknown scenario '{text}'; use Offline, Server or Interactive.", "`repro published --help`")


def normalise_benchmark(text: str, index: PublishedIndex | None = None) -> str:
    """The `benchmark` value a user's word names, in the shipped index unless another is given."""
    return (index or load_index()).benchmark_value(text)


def _is_scenario(text: str) -> bool:
    return text.strip().lower() in (s.lower() for s in SCENARIOS)


def _is_round(text: str) -> bool:
    return bool(re.match(r"^v?\d+\.\d+$", text.strip(), re.I))


# Longest first so that GH200 is not read as H200 and GB300 not as B300 (word boundaries do the rest).
_MODELS = (
    "rtx pro 6000",
    "rtx 4090",
    "agx orin",
    "gb300",
    "gb200",
    "gh200",
    "b300",
    "b200",
    "h200",
    "h100",
    "l40s",
    "mi300x",
    "mi325x",
    "mi350x",
    "mi355x",
    "b60",
    "b70",
)
# H100/H200/B200/B300 without a form factor in the name are the SXM parts (NVML: 'NVIDIA H100 80GB HBM3').
_DEFAULT_VARIANT = {"h100": "sxm", "h200": "sxm", "b200": "sxm", "b300": "sxm"}


@dataclass(frozen=True)
class Accelerator:
    """Hardware identity: the GPU model and, where the name says it, the form factor (SXM, NVL, PCIe)."""

    model: str
    variant: str | None
    name: str

    @classmethod
    def parse(cls, name: str) -> Accelerator:
        low = re.sub(r"[^a-z0-9]+", " ", name.lower())
        found = {m for m in _MODELS if re.search(rf"\b{m}\b", low)}
        if len(found) > 1:
            model = "mixed: " + " + ".join(sorted(found))
        elif found:
            model = found.pop()
        else:
            model = re.sub(r"\b(nvidia|amd|intel|r|instinct|gpu)\b", " ", low).strip()
            model = re.sub(r"\s+", " ", model)
        variant = next(
            (
                v
                for v in ("nvl", "pcie", "sxm")
                if re.search(rf"\b{v}\d*\b", low) and not re.search(r"\bnvl\d{2}\b", low)
            ),
            None,
        )
        return cls(model, variant, name.strip())

    @property
    def effective_variant(self) -> str | None:
        return self.variant or _DEFAULT_VARIANT.get(self.model)

    def same_as(self, other: Accelerator) -> bool:
        """Same GPU for a per-accelerator comparison: same model and same form factor."""
        return self.model == other.model and self.effective_variant == other.effective_variant

    def covers(self, other: Accelerator) -> bool:
        """For filters: 'H100' covers every H100; 'H100 NVL' only the NVL part."""
        return self.model == other.model and (self.variant is None or self.variant == other.variant)


def _read_csv(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except OSError as exc:
        raise InputError(f"{path}: the published-results index cannot be read ({exc.strerror}).", _REINSTALL) from None


def _spec_of(path: Path, records: list[dict[str, str]], provenance: Provenance) -> IndexFile:
    """The declaration of an index file: by its name, else (a copy under another name) the one its columns fit."""
    for spec in provenance.files:
        if spec.file == path.name:
            return spec
    header = set(records[0]) if records else set()
    for spec in provenance.files:
        if set(spec.metrics) <= header:
            return spec
    raise InputError(f"{path}: the index provenance declares no file of that name or with its columns.", _REINSTALL)


def _read_rows(path: Path, provenance: Provenance) -> list[PublishedResult]:
    """One index file's rows; its metric columns become each row's metrics mapping, its benchmark gets its name."""
    records = _read_csv(path)
    spec = _spec_of(path, records, provenance)
    rows: list[PublishedResult] = []
    for n, record in enumerate(records, start=2):
        if missing := [m for m in spec.metrics if m not in record]:
            raise InputError(f"{path}: no '{missing[0]}' column (the index declares {spec.metrics}).", _REINSTALL)
        bench = record.get("benchmark", "")
        if bench not in spec.benchmarks:
            raise InputError(
                f"{path}: line {n}, field 'benchmark': '{bench}' is not one of {sorted(spec.benchmarks)}.", _REINSTALL
            )
        fields: dict[str, Any] = {k: v for k, v in record.items() if k not in spec.metrics}
        fields["metrics"] = {m: record[m] for m in spec.metrics if record[m] != ""}
        fields["benchmark_name"] = spec.benchmarks[bench]
        try:
            rows.append(PublishedResult.model_validate(fields))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "(row)"
            raise InputError(f"{path}: line {n}, field '{field}': {first['msg']}.", _REINSTALL) from None
    return rows


def load_index_file(
    path: Path, sources: Path, more: tuple[Path, ...] = (), own: tuple[tuple[Path, IndexFile], ...] = ()
) -> PublishedIndex:
    """The index read from `path` (and `more`), each file read as sources.json declares the file of that name, and
    `own`: benchmarks' own index files with their declarations (own_index_files)."""
    try:
        provenance = Provenance.model_validate(json.loads(sources.read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError) as exc:
        raise InputError(
            f"{sources}: the index provenance is unreadable ({str(exc).splitlines()[0]}).", _REINSTALL
        ) from None
    if own:
        provenance = provenance.model_copy(update={"files": [*provenance.files, *(spec for _, spec in own)]})
    rows: list[PublishedResult] = []
    loaded = []
    for one in (path, *more, *(p for p, _ in own)):
        read = _read_rows(one, provenance)
        rows += read
        raw = one.read_bytes() if one.is_file() else b""
        loaded.append(LoadedFile(one, hashlib.sha256(raw).hexdigest(), len(read)))
    keys: dict[str, int] = {}
    for r in rows:
        keys[r.key] = keys.get(r.key, 0) + 1
    if dupes := [k for k, c in keys.items() if c > 1]:
        raise InputError(f"{path}: the key {dupes[0]} names more than one row.", _REINSTALL)
    return PublishedIndex(tuple(rows), provenance, tuple(loaded))


OWN_INDEX = "published-{name}.csv"
"""A benchmark's own published results, beside its file in a folder of $REPRO_BENCHMARKS_PATH: rows in the shipped
index's columns, its accuracy columns the benchmark's judged metrics, `benchmark` its name."""


def own_index_files() -> tuple[tuple[Path, IndexFile], ...]:
    """Every benchmark's own index file on the search path (OWN_INDEX), with the declaration its file implies; the
    shipped benchmarks' rows are the shipped index's (sources.json)."""
    from repro.core.benchmarks import SHIPPED, load_benchmark, search_path

    out = []
    for folder in search_path():
        if not folder.is_dir() or folder.resolve() == SHIPPED.resolve():
            continue
        for csv_path in sorted(folder.glob(OWN_INDEX.format(name="*"))):
            name = csv_path.name[len("published-") : -len(".csv")]
            if not (folder / f"{name}.yaml").is_file():
                continue
            metrics = [m.name for m in load_benchmark(name).accuracy.targets()]
            out.append((csv_path, IndexFile(file=csv_path.name, benchmarks={name: name}, metrics=metrics)))
    return tuple(out)


def load_index() -> PublishedIndex:
    """The shipped index, every file sources.json names, and the benchmarks' own index files (own_index_files);
    read once per set of files as they are (package data never changes while repro runs)."""
    own = own_index_files()
    key = tuple((str(p), (st := p.stat()).st_mtime_ns, st.st_size) for p, _ in own)
    if key not in _INDEXES:
        _INDEXES.clear()
        _INDEXES[key] = _load_index(own)
    return _INDEXES[key]


_INDEXES: dict[tuple[tuple[str, int, int], ...], PublishedIndex] = {}


def _load_index(own: tuple[tuple[Path, IndexFile], ...]) -> PublishedIndex:
    try:
        files = [f.file for f in Provenance.model_validate_json(SOURCES_JSON.read_bytes()).files]
    except (OSError, ValueError, ValidationError):
        files = [INDEX_CSV.name]  # load_index_file names the unreadable provenance
    paths = [DATA_DIR / f for f in files]
    return load_index_file(paths[0], SOURCES_JSON, tuple(paths[1:]), own)


def rule_reference(
    accelerator: str, per_node: int, benchmark: str, scenario: str = "Offline", index: PublishedIndex | None = None
) -> PublishedResult | None:
    """The published result a recipe without its own compares with.

    Rule: same accelerator (model and form factor), same accelerators per node, closed division, and one node
    (a VM is one node; multi-node runs only when no single-node result exists, fewest nodes first); of those, the
    newest round; in that round NVIDIA's own submission (the TensorRT-LLM stack repro's recipes follow), else the
    median result per accelerator (a typical server of that round, not the best-tuned one). Only results whose
    summary log the index read qualify: a recipe cites its reference's log (`published.source`), which a row read
    from the results table alone does not have.
    """
    idx = index or load_index()
    want = Accelerator.parse(accelerator)
    pool = [
        r
        for r in idx.rows
        if r.division == "closed"
        and not r.table_only
        and r.result_validity == "VALID"
        and r.accelerators_per_node == per_node
        and r.benchmark == benchmark
        and r.scenario == scenario
        and want.same_as(Accelerator.parse(r.accelerator_model_name))
    ]
    if not pool:
        return None
    fewest = min(r.number_of_nodes for r in pool)
    pool = [r for r in pool if r.number_of_nodes == fewest]
    newest = max(r.round_tuple for r in pool)
    pool = sorted((r for r in pool if r.round_tuple == newest), key=lambda r: (r.per_accelerator, r.key))
    nvidia = [r for r in pool if r.submitter == "NVIDIA"]
    if nvidia:
        return max(nvidia, key=lambda r: (r.per_accelerator, r.key))
    return pool[(len(pool) - 1) // 2]


def reference_row(
    ref: str, benchmark: str, scenario: str = "Offline", index: PublishedIndex | None = None
) -> PublishedResult | None:
    """The row a recipe's `published.result_id` names for one scenario (an ID covers Offline, Server, ...)."""
    rows = [r for r in (index or load_index()).resolve(ref) if r.benchmark == benchmark and r.scenario == scenario]
    return rows[0] if len(rows) == 1 else None
