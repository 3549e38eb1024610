"""The words a user reads name every shipped benchmark (#45 item 6): `repro --help`, `repro published --help` and its
--benchmark option, the package's description and docstring. A benchmark added to repro/data/benchmarks/ fails here
until they name it too. The model's name is its file's title before the parenthesis (Llama-3.1-405B)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import cli

import repro
from repro.core.benchmarks import SHIPPED, load_benchmark_file

REPO = Path(__file__).resolve().parents[1]
SHIPPED_BENCHMARKS = [load_benchmark_file(p) for p in sorted(SHIPPED.glob("*.yaml"))]
MODELS = sorted({b.title.split(" (")[0] for b in SHIPPED_BENCHMARKS})


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_shipped_models_are_what_the_files_say() -> None:
    # a new benchmark adds its model here and to the words below
    assert MODELS == ["DeepSeek-R1", "Llama-2-70B", "Llama-3.1-405B"]


@pytest.mark.parametrize("model", MODELS)
def test_every_model_is_named_where_a_user_reads_what_repro_is(model: str) -> None:
    found = re.search(r'^description = "(.*)"$', (REPO / "pyproject.toml").read_text(), re.M)
    description = found.group(1) if found else ""
    main_help = _flat(cli("--help", env={"COLUMNS": "200"}).output)
    published_help = _flat(cli("published", "--help", env={"COLUMNS": "200"}).output)
    for where, text in (
        ("pyproject.toml description", description),
        ("repro --help", main_help),
        ("repro published --help", published_help),
        ("repro/__init__.py", repro.__doc__ or ""),
    ):
        assert model in text, f"{where} does not name {model}: {text[:300]}"


def test_the_benchmark_option_names_every_benchmark() -> None:
    text = _flat(cli("published", "--help", env={"COLUMNS": "200"}).output)
    for bench in SHIPPED_BENCHMARKS:
        assert bench.name in text, bench.name
