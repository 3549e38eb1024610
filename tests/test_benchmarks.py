"""Benchmarks are data: one validated file per MLPerf benchmark, read by every stage; none of its figures in code."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from repro.core import benchmarks as B
from repro.core.errors import RecipeError
from repro.core.recipes import get_recipe, load_recipe_file
from repro.results.verify import verify_dir
from tests.helpers import cli_process, one_line_error, toy_benchmark

REPO = Path(__file__).resolve().parents[1]


def test_shipped_benchmarks_carry_the_checkers_figures() -> None:
    assert set(B.benchmark_names()) >= {"llama2-70b-99", "llama2-70b-99.9", "llama3.1-405b"}
    l99, l999, b405 = (B.load_benchmark(n) for n in ("llama2-70b-99", "llama2-70b-99.9", "llama3.1-405b"))
    # submission_checker constants: 44.4312 / 22.0352 / 28.6162 x 0.99 (x 0.999), 294.45 x 0.9 .. x 1.1
    assert [round(l99.accuracy.floor(m), 6) for m in l99.accuracy.targets()] == [43.986888, 21.814848, 28.330038]
    assert [round(l999.accuracy.floor(m), 6) for m in l999.accuracy.targets()] == [44.386769, 22.013165, 28.587584]
    assert (l99.accuracy.tokens_per_sample.low, l99.accuracy.tokens_per_sample.high) == pytest.approx(
        (265.005, 323.895)
    )
    # llama3.1-405b: rougeL 21.6666 and exact_match 90.1335 x 0.99; tokens/sample 90-110% of 684.68
    assert [(m.name, m.kind, m.scorers) for m in b405.accuracy.metrics] == [
        ("rougeL", "rougeL", ["rouge"]),
        ("exact_match", "exact_match", ["niah_em", "qa_em"]),
    ]
    assert [round(b405.accuracy.floor(m), 4) for m in b405.accuracy.targets()] == [21.4499, 89.2322]
    assert b405.accuracy.tokens_per_sample.low == pytest.approx(616.212)
    assert (b405.accuracy.level, b405.accuracy.samples, b405.dataset.samples) == ("99", 8313, 8313)
    # mlperf.conf: model keys, counts and the TTFT/TPOT limits per scenario
    assert (l99.mlperf_model, l99.loadgen_model("Interactive")) == ("llama2-70b", "llama2-70b-interactive")
    assert (b405.mlperf_model, b405.loadgen_model("Interactive")) == ("llama3_1-405b", "llama3_1-405b-interactive")
    assert (l99.rules("Server").ttft_ms, l99.rules("Server").tpot_ms) == (2000, 200)
    assert (l99.rules("Interactive").ttft_ms, l99.rules("Interactive").tpot_ms) == (450, 40)
    assert (b405.rules("Server").ttft_ms, b405.rules("Server").tpot_ms) == (6000, 175)
    assert (b405.rules("Interactive").ttft_ms, b405.rules("Interactive").tpot_ms) == (4500, 80)
    assert b405.rules("Offline").min_samples_per_query == b405.rules("Offline").performance_sample_count == 8313
    assert l99.rules("Offline").min_samples_per_query == 24576
    assert (b405.generation.min_new_tokens, b405.generation.max_new_tokens) == (2, 20000)
    assert l99.generation.max_new_tokens == 1024
    # models: the pinned revisions, and parameter counts that follow from the architecture
    assert (b405.model.repo_id, b405.model.revision) == (
        "meta-llama/Llama-3.1-405B-Instruct",
        "be673f326cab4cd22ccfef76109faf68e41aa5f1",
    )
    for bench in (l99, b405):
        a = bench.model.architecture
        assert a is not None and a.hidden_size == a.attention_heads * a.head_dim
        kv = a.kv_heads * a.head_dim
        per_layer = 2 * a.hidden_size**2 + 2 * a.hidden_size * kv + 3 * a.hidden_size * a.intermediate_size
        per_layer += 2 * a.hidden_size
        assert bench.model.parameters == a.layers * per_layer + 2 * a.vocab_size * a.hidden_size + a.hidden_size


def test_every_figure_names_a_source_read_at_a_commit() -> None:
    for bench in B.all_benchmarks():
        if bench.demo:
            continue
        for key, src in bench.sources.items():
            assert src.repo and src.path and src.commit, (bench.name, key)
        for section in (bench.model, bench.dataset, bench.generation, bench.accuracy, *bench.scenarios.values()):
            assert section.sources, (bench.name, type(section).__name__)


def test_result_folder_names_map_to_benchmarks() -> None:
    assert B.benchmark_for_result_name("llama3.1-405b").name == "llama3.1-405b"  # type: ignore[union-attr]
    assert B.benchmark_for_result_name("llama2-70b-99.9").name == "llama2-70b-99.9"  # type: ignore[union-attr]
    bench = B.benchmark_for_result_name("llama2-70b-interactive-99")
    assert bench is not None and B.scenario_of_result_name(bench, "llama2-70b-interactive-99") == "Interactive"
    assert B.benchmark_for_result_name("resnet50") is None


_WRITTEN = re.compile(r"(?<![\w.])\d{1,3}(?:[,_]\d{3})+(?:\.\d+)?(?!\w)|(?<![\w.,])\d+(?:\.\d+)?(?!\w)")


def _numbers(path: Path) -> set[str]:
    """Every number written in a Python file, as code or as prose (a docstring's worked example with a reference
    score is a copy that goes stale when the benchmark file changes): thousands separators dropped, and a decimal
    also without its trailing zeros."""
    out = set()
    for m in _WRITTEN.finditer(path.read_text()):
        n = m.group().replace(",", "").replace("_", "")
        out |= {n, n.rstrip("0").rstrip(".") if "." in n else n}
    return out


def test_no_benchmark_constant_in_code() -> None:
    """grep for the reference scores, their floors, the tokens/sample references and the dataset sizes in
    repro/**/*.py finds none of them, in code or in prose: they live in repro/data/benchmarks/ only."""
    banned: set[str] = set()
    for bench in B.all_benchmarks():
        acc = bench.accuracy
        for m in acc.targets():
            banned |= {repr(m.reference), f"{acc.floor(m):.4f}", f"{acc.floor(m):.6f}".rstrip("0")}
        tps = acc.tokens_per_sample
        banned |= {repr(tps.reference), f"{tps.low:.3f}", f"{tps.high:.3f}", str(bench.dataset.samples)}
    found = {
        f"{path.relative_to(REPO)}: {n}" for path in (REPO / "repro").rglob("*.py") for n in _numbers(path) & banned
    }
    assert not found, sorted(found)


# ---------------------------------------------------------------- bad files


def test_a_missing_or_broken_benchmark_is_one_error_naming_the_file(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(B.ENV_PATH, str(tmp_path))
    with pytest.raises(RecipeError, match=r"Unknown benchmark 'nope': no nope\.yaml in .*known: .*llama3\.1-405b"):
        B.load_benchmark("nope")
    bad = tmp_path / "broken.yaml"
    data = yaml.safe_load((B.SHIPPED / "llama3.1-405b.yaml").read_text())
    data["name"] = "broken"
    data["scenarios"]["Server"].pop("ttft_ms")
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError) as exc:
        B.load_benchmark("broken")
    assert str(bad) in exc.value.message and "ttft_ms" in exc.value.message
    data["scenarios"]["Server"]["ttft_ms"] = 6000
    data["accuracy"]["metrics"][0]["kind"] = "bleu"
    bad.write_text(yaml.safe_dump(data))
    B._load_cached.cache_clear()
    with pytest.raises(RecipeError, match=r"broken\.yaml: field 'accuracy\.metrics\.0\.kind'"):
        B.load_benchmark("broken")
    data["accuracy"]["metrics"][0]["kind"] = "rougeL"
    data["model"]["sources"] = ["nowhere"]
    bad.write_text(yaml.safe_dump(data))
    B._load_cached.cache_clear()
    with pytest.raises(RecipeError, match="cites source.* nowhere"):
        B.load_benchmark("broken")


def test_a_recipe_naming_an_unknown_benchmark_is_one_error_naming_the_recipe(tmp_path) -> None:
    data = yaml.safe_load((REPO / "recipes" / "nd-gb200-v6.yaml").read_text())
    data["name"], data["benchmark"] = "mine", "llama9-1t"
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError, match=r"mine\.yaml: field 'benchmark': Unknown benchmark 'llama9-1t'"):
        load_recipe_file(path)
    err = one_line_error(cli_process("run", "offline", "--recipe", str(path), "--dry-run"))
    assert "mine.yaml" in err and "llama9-1t" in err


def test_recipes_keep_only_what_is_system_specific() -> None:
    """Model, dataset, LoadGen counts and max tokens come from the benchmark; the recipe file does not repeat them."""
    for path in sorted((REPO / "recipes").glob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        recipe = load_recipe_file(path)
        assert "accuracy" not in raw, path
        if recipe.demo:
            continue
        assert "model" not in raw and "dataset" not in raw, path
        bench = recipe.bench
        assert recipe.model == bench.model and recipe.dataset == bench.dataset
        # a recipe may stop generation earlier than MLPerf's ceiling where its source did (405B: 2,000 of 20,000)
        assert recipe.loadgen.max_tokens <= bench.generation.max_new_tokens
        assert recipe.loadgen.performance_sample_count == bench.rules("Offline").performance_sample_count


# ---------------------------------------------------------------- a benchmark of a shipped module: its file alone
# (one with its own module: tests/test_toy_benchmark.py)


def _toy(folder: Path) -> None:
    """A toy benchmark that reuses llama2-70b's module (`module: llama2_70b`, ROUGE): the llama2 file's shape with its
    own name, model key, limits and accuracy references."""
    data = toy_benchmark({"name": "rougeL", "kind": "rougeL", "reference": 10.0, "how": "toy"})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "toy-echo.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_toy_benchmark_file_flows_through_verify(tmp_path, monkeypatch, fixtures) -> None:
    """Azure's published GB200 bundle under a toy benchmark's folder name is judged by the toy file's rules alone:
    its samples per query, its accuracy references and its tokens/sample band."""
    _toy(tmp_path / "benchmarks")
    monkeypatch.setenv(B.ENV_PATH, str(tmp_path / "benchmarks"))
    bundle = tmp_path / "results" / "ND_GB200_v6"
    shutil.copytree(fixtures / "azure-nd-gb200-v6-v5.1" / "llama2-70b-99", bundle / "toy-echo")
    shutil.copy(fixtures / "azure-nd-gb200-v6-v5.1" / "ND_GB200_v6.json", bundle.parent)
    recipe = yaml.safe_load((REPO / "recipes" / "nd-gb200-v6.yaml").read_text())
    recipe.update(name="gb200-toy", benchmark="toy-echo")
    (tmp_path / "gb200-toy.yaml").write_text(yaml.safe_dump(recipe))
    v = verify_dir(bundle / "toy-echo" / "Offline", recipe=str(tmp_path / "gb200-toy.yaml"))
    checks = {c.name: c for c in v.checks}
    assert v.run.benchmark == "toy-echo" and v.recipe.loadgen.max_tokens == 8
    assert checks["samples per query"].ok is False and "700,000" in checks["samples per query"].detail
    assert checks["accuracy rougeL"].ok is True and "≥ 9.9000" in checks["accuracy rougeL"].detail
    assert "accuracy rouge1" not in checks  # the toy scores ROUGE-L only
    assert (
        checks["accuracy tokens_per_sample"].ok is False
        and "450.000–550.000" in checks["accuracy tokens_per_sample"].detail
    )
    assert v.status == "FAIL" and v.exit_code == 1


@pytest.mark.slow
def test_a_toy_benchmark_file_flows_through_the_demo_run(tmp_path, monkeypatch) -> None:
    """The demo recipe pointed at the toy benchmark: LoadGen is configured under the toy's model key, with its
    counts and max tokens, and verify judges the run by the toy's minimum duration."""
    _toy(tmp_path / "benchmarks")
    recipe = yaml.safe_load((REPO / "recipes" / "demo.yaml").read_text())
    recipe.update(name="toy-demo", benchmark="toy-echo")
    for key in ("max_tokens", "min_query_count", "performance_sample_count"):
        recipe["loadgen"].pop(key)
    (tmp_path / "toy-demo.yaml").write_text(yaml.safe_dump(recipe))
    env = {"REPRO_HOME": str(tmp_path / "home"), B.ENV_PATH: str(tmp_path / "benchmarks")}
    proc = cli_process("run", "offline", "--recipe", str(tmp_path / "toy-demo.yaml"), env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]  # the run succeeded; its verdict: never a reproduction
    assert "NOT A REPRODUCTION" in proc.stdout and "MLPerf needs ≥ 1 s" in proc.stdout
    conf = next((tmp_path / "home" / "runs" / "toy-demo").rglob("user.conf")).read_text()
    assert "toy-echo.Offline.min_query_count = 16" in conf and "FromConfig(path, 'toy-echo', 'Offline')" in conf
    monkeypatch.setenv(B.ENV_PATH, str(tmp_path / "benchmarks"))
    assert get_recipe(str(tmp_path / "toy-demo.yaml")).loadgen.max_tokens == 8
