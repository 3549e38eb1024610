"""Issue #44 item 4: numbers that cannot be are never evidence.

`tokens_per_s_per_gpu: .nan` validated and a run 48.5% below got "inside ±nan%" PASS; `band_pct: 5` then
`band_pct: 60` took the 60; an `exact_match` of 100.5 or 1e308 passed. Here every float of a recipe and of a
benchmark file is given non-finite spellings, every scalar key of the shipped files is stated twice, and the
scores of a real published accuracy.txt are set to values no evaluation prints: each is one error naming the file
and the field, key or line, exit 2, and never a PASS.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import cli, copy_bundle, read_csv_rows, write_csv_rows

from repro.core.benchmarks import SHIPPED, impossible_score
from repro.core.errors import InputError
from repro.core.prices import PRICES_FILE, load_price_table
from repro.core.published import INDEX_CSV, SOURCES_JSON, load_index_file
from repro.core.recipes import recipes_dir
from repro.core.safeio import DuplicateKey, safe_yaml

GB200 = "azure-nd-gb200-v6-v5.1"
OFFLINE = f"{GB200}/llama2-70b-99/Offline"
NON_FINITE = [".nan", ".NaN", ".inf", ".Inf", "-.inf", "+.inf", "1.0e+400", "-1.0e+400"]

RECIPE_FLOATS = [
    "published.tokens_per_s_per_gpu",
    "published.tokens_per_s_per_vm",
    "published.band_pct",
    "loadgen.offline_expected_qps",
    "loadgen.server.target_qps",
    "system.gpu_memory_gb",
    "system.memory_bandwidth_tbps",
    "disk_needed_gb",
    "expected_runtime_min",
    "quantization.quantized_size_gb",
    "trtllm.serve_extra_options.kv_cache_config.free_gpu_memory_fraction",
    "trtllm.runtime_flags.max_num_tokens",
]
BENCHMARK_FLOATS = [
    "accuracy.factor",
    "accuracy.metrics.0.reference",
    "accuracy.tokens_per_sample.reference",
    "accuracy.tokens_per_sample.band.0",
    "model.size_gb",
    "scenarios.Server.ttft_ms",
    "scenarios.Server.tpot_ms",
    "dataset.mean_input_tokens",
]


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def _with(text: str, dotted: str, spelling: str) -> str:
    """The YAML text with one field set to a literal spelling (so `.nan` reaches the loader as YAML wrote it)."""
    data = yaml.safe_load(text)
    _set(data, dotted, "@@VALUE@@")
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).replace("'@@VALUE@@'", spelling)


def _validate(paths: list[Path], env: dict[str, str] | None = None) -> list[str]:
    res = cli("recipes", "validate", *map(str, paths), "--json", env=env)
    assert res.exit_code == 2, res.output
    rows = json.loads(res.stdout)["recipes"]
    assert not any(r["valid"] for r in rows), [r for r in rows if r["valid"]]
    return [r["error"] for r in rows]


# ---------------------------------------------------------------- nan and inf


def test_every_recipe_float_refuses_every_non_finite_spelling(tmp_path: Path) -> None:
    text = (recipes_dir() / "nd-h200-v5.yaml").read_text(encoding="utf-8")
    cases = [(f, s) for f in RECIPE_FLOATS for s in NON_FINITE]
    paths = []
    for i, (field, spelling) in enumerate(cases):
        path = tmp_path / str(i) / "nd-h200-v5.yaml"
        path.parent.mkdir()
        path.write_text(_with(text, field, spelling), encoding="utf-8")
        paths.append(path)
    for (field, spelling), path, error in zip(cases, paths, _validate(paths), strict=True):
        assert error.startswith(f"{path}: field '{field}'"), (spelling, error)
        assert "finite" in error, error


def test_every_benchmark_float_refuses_every_non_finite_spelling(tmp_path: Path) -> None:
    text = (SHIPPED / "llama2-70b-99.yaml").read_text(encoding="utf-8")
    recipe = yaml.safe_load((recipes_dir() / "nd-h200-v5.yaml").read_text(encoding="utf-8"))
    cases = [(f, s) for f in BENCHMARK_FLOATS for s in NON_FINITE]
    paths, benches = [], []
    for i, (field, spelling) in enumerate(cases):
        bench = tmp_path / "benchmarks" / f"nan-bench-{i}.yaml"
        bench.parent.mkdir(exist_ok=True)
        bench.write_text(_with(text, field, spelling).replace("name: llama2-70b-99\n", f"name: nan-bench-{i}\n", 1))
        recipe["benchmark"] = f"nan-bench-{i}"
        path = tmp_path / str(i) / "nd-h200-v5.yaml"
        path.parent.mkdir()
        path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
        paths.append(path)
        benches.append(bench)
    errors = _validate(paths, env={"REPRO_BENCHMARKS_PATH": str(tmp_path / "benchmarks")})
    for (field, _), path, bench, error in zip(cases, paths, benches, errors, strict=True):
        assert error.startswith(f"{path}: field 'benchmark': {bench}: field '{field}'"), error


def test_a_nan_reference_never_passes_a_run_far_below(fixtures: Path, tmp_path: Path) -> None:
    """The report's case: a copy of nd-gb200-v6 whose figure is .nan (no band holds anything against NaN, so a run
    48.5% below passed), against a real published run: refused naming the file and field, with the command to run
    next, exit 2, the bundle untouched."""
    from test_recipe_names import snapshot

    bundle = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    run = bundle / "llama2-70b-99" / "Offline"
    summary = run / "performance" / "run_1" / "mlperf_log_summary.txt"
    assert "Tokens per second: 52061.6" in summary.read_text()
    before = snapshot(bundle, ())
    text = (recipes_dir() / "nd-gb200-v6.yaml").read_text(encoding="utf-8")
    for spelling in NON_FINITE:
        copy = tmp_path / spelling.strip("+-.") / "nd-gb200-v6.yaml"
        copy.parent.mkdir(exist_ok=True)
        copy.write_text(_with(text, "published.tokens_per_s_per_gpu", spelling), encoding="utf-8")
        res = cli("verify", str(run), "--recipe", str(copy))
        assert res.exit_code == 2, res.output
        first = res.stderr.splitlines()[0]
        assert first.startswith(f"error: {copy}: field 'published.tokens_per_s_per_gpu'") and "finite" in first
        assert f"Next: repro recipes validate {copy}" in res.stderr and "PASS" not in res.output, res.stderr
    assert snapshot(bundle, ()) == before


def test_the_index_refuses_a_figure_that_cannot_be(tmp_path: Path) -> None:
    rows, fields = read_csv_rows(INDEX_CSV)
    row = next(i for i, r in enumerate(rows) if r.get("rouge1"))
    edits = [("tokens_per_second", v) for v in ("inf", "nan", "-inf", "1e400")]
    edits += [(k, v) for k in ("rouge1", "rougeL") for v in ("100.5", "1e308", "-0.1", "nan", "inf")]
    edits += [("tokens_per_sample", v) for v in ("0", "-3", "nan", "inf")]
    for column, value in edits:
        assert column in fields, column
        changed = [dict(r) for r in rows]
        changed[row][column] = value
        bad = write_csv_rows(tmp_path / "index.csv", fields, changed)
        with pytest.raises(InputError, match=rf"index.csv: line {row + 2}, .*{column}"):
            load_index_file(bad, SOURCES_JSON)


# ---------------------------------------------------------------- accuracy scores no evaluation prints


SCORE_EDITS = [
    ("rouge1", "44.7494", v) for v in ("100.5", "1e308", "1e+308", "-0.5", "nan", "inf", "-inf", "101", "1000000")
] + [
    ("rougeLsum", "42.2591", "100.0001"),
    ("tokens_per_sample", "273.4", "0"),
    ("tokens_per_sample", "273.4", "-273.4"),
    ("tokens_per_sample", "273.4", "nan"),
    ("tokens_per_sample", "273.4", "inf"),
    ("gen_num", "24576", "0"),
    ("gen_num", "24576", "24576.5"),
    ("gen_len", "26551226", "-1"),
    ("rouge1", "44.7494", "'nan'"),
    ("rouge1", "44.7494", "np.float64(100.5)"),
]


def test_scores_no_evaluation_prints_are_refused_never_passed(fixtures: Path, tmp_path: Path) -> None:
    base = copy_bundle(fixtures, GB200, tmp_path / "bundle") / "llama2-70b-99" / "Offline"
    accuracy = base / "accuracy" / "accuracy.txt"
    original = accuracy.read_text()
    ok = cli("verify", str(base), "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["status"] == "PASS", ok.output
    for key, old, new in SCORE_EDITS:
        accuracy.write_text(original.replace(f"'{key}': {old}", f"'{key}': {new}", 1))
        assert accuracy.read_text() != original, key
        res = cli("verify", str(base))
        assert res.exit_code == 2, (key, new, res.output)
        line = res.stderr.splitlines()[0]
        assert line.startswith(f"error: {accuracy}: line ") and f"'{key}'" in line, line
        assert f"Next: repro verify {base}" in res.stderr and "PASS" not in res.output, res.stderr
    accuracy.write_text(original)


def test_the_exact_match_of_a_405b_accuracy_txt_is_held_to_0_to_100() -> None:
    assert impossible_score("exact_match", 100.5) and impossible_score("exact_match", 1e308)
    assert impossible_score("exact_match", float("nan")) and impossible_score("exact_match", -1e-9)
    assert impossible_score("exact_match", 100.0) is None and impossible_score("exact_match", 0.0) is None
    assert impossible_score("tokens_per_sample", 684.68) is None and impossible_score("gen_num", 8313) is None


# ---------------------------------------------------------------- a key stated twice


def _scalar_key_lines(text: str) -> list[tuple[int, str, str]]:
    """(line index, indent, key) of every `key: scalar` line outside lists and flow collections."""
    out = []
    for i, line in enumerate(text.splitlines()):
        m = re.match(r"^( *)([A-Za-z_][A-Za-z0-9_.]*): +(?![|>\[{])\S", line)
        if m and not line.lstrip().startswith("#"):
            out.append((i, m.group(1), m.group(2)))
    return out


def _twice(text: str, index: int, indent: str, key: str) -> str:
    lines = text.splitlines(keepends=True)
    lines.insert(index + 1, f"{indent}{key}: 60\n")
    return "".join(lines)


@pytest.mark.parametrize("name", ["nd-h200-v5", "nd-gb200-v6-405b", "nd-gb300-v6"])
def test_every_key_of_a_shipped_recipe_stated_twice_is_refused(name: str, tmp_path: Path) -> None:
    text = (recipes_dir() / f"{name}.yaml").read_text(encoding="utf-8")
    cases = _scalar_key_lines(text)
    assert len(cases) > 40
    paths = []
    for n, (i, indent, key) in enumerate(cases):
        path = tmp_path / str(n) / f"{name}.yaml"
        path.parent.mkdir()
        path.write_text(_twice(text, i, indent, key), encoding="utf-8")
        paths.append(path)
    for (i, _, key), path, error in zip(cases, paths, _validate(paths), strict=True):
        assert error.startswith(f"{path}: not valid YAML (key '{key}' is stated twice"), error
        assert f"(lines {i + 1} and {i + 2})" in error, error


@pytest.mark.parametrize("name", ["llama2-70b-99", "llama3.1-405b"])
def test_every_key_of_a_shipped_benchmark_stated_twice_is_refused(name: str, tmp_path: Path) -> None:
    text = (SHIPPED / f"{name}.yaml").read_text(encoding="utf-8")
    cases = _scalar_key_lines(text)
    assert len(cases) > 60
    for i, indent, key in cases:
        with pytest.raises(DuplicateKey, match=rf"key '{re.escape(key)}' is stated twice .*lines {i + 1} and {i + 2}"):
            safe_yaml(_twice(text, i, indent, key))


def test_the_reported_band_and_whole_blocks_stated_twice(tmp_path: Path) -> None:
    text = (recipes_dir() / "nd-gb200-v6.yaml").read_text(encoding="utf-8")
    assert "  band_pct: 5\n" in text
    doubled = [
        text.replace("  band_pct: 5\n", "  band_pct: 5\n  band_pct: 60\n", 1),
        text + "published:\n  status: unknown\n",
        text + "name: nd-gb200-v6\n",
        text.replace("  band_pct: 5\n", "  band_pct: 5\n  'band_pct': 60\n", 1),
        text.replace("  band_pct: 5\n", '  band_pct: 5\n  "band_pct": 5\n', 1),
    ]
    paths = []
    for n, body in enumerate(doubled):
        path = tmp_path / str(n) / "nd-gb200-v6.yaml"
        path.parent.mkdir()
        path.write_text(body, encoding="utf-8")
        paths.append(path)
    errors = _validate(paths)
    assert all("is stated twice" in e for e in errors), errors
    res = cli("verify", str(Path(__file__).parent / "fixtures" / "published" / OFFLINE), "--recipe", str(paths[0]))
    assert res.exit_code == 2 and "key 'band_pct' is stated twice" in res.stderr, res.output


def test_flow_mappings_and_the_price_table_refuse_a_key_twice(tmp_path: Path) -> None:
    for text in ("a: {b: 1, b: 2}\n", "- {x: 1}\n- {y: 1, y: 1}\n", "a:\n  - b: 1\n    b: 2\n", "1: a\n1: b\n"):
        with pytest.raises(DuplicateKey):
            safe_yaml(text)
    assert safe_yaml("a: {b: 1}\nc: [{b: 1}, {b: 2}]\n") == {"a": {"b": 1}, "c": [{"b": 1}, {"b": 2}]}
    prices = PRICES_FILE.read_text(encoding="utf-8")
    m = re.search(r"^( +)usd_per_hour: .*$", prices, re.M)
    assert m is not None
    bad = tmp_path / "prices.yaml"
    bad.write_text(prices.replace(m.group(0), f"{m.group(0)}\n{m.group(1)}usd_per_hour: 0.01", 1))
    with pytest.raises(InputError, match="key 'usd_per_hour' is stated twice"):
        load_price_table(bad)


SERVE_OPTIONS = [
    ("kv_cache_config", [1, 2]),
    ("kv_cache_config", "0.9"),
    ("kv_cache_config", {"free_gpu_memory_fraction": {"x": [1]}}),
    ("kv_cache_config", {"free_gpu_memory_fraction": 0}),
    ("kv_cache_config", {"free_gpu_memory_fraction": 1.5}),
    ("kv_cache_config", {"free_gpu_memory_fraction": "0.9"}),
    ("kv_cache_config", {"free_gpu_memory_fraction": True}),
    ("scheduler_config", [1]),
    ("scheduler_config", {"capacity_scheduler_policy": ["MAX_UTILIZATION"]}),
    ("moe_expert_parallel_size", 0),
    ("moe_expert_parallel_size", 2.5),
    ("moe_expert_parallel_size", 10**6),
]


def test_serve_options_repro_reads_are_typed(tmp_path: Path) -> None:
    """The serve options doctor, the twin and explain read themselves (a free-form block otherwise): a fraction
    given as a mapping ended doctor in "repro hit a bug" (TypeError in float()); now validate names the option and
    doctor refuses the recipe, exit 2."""
    base = yaml.safe_load((recipes_dir() / "nd-h200-v5.yaml").read_text(encoding="utf-8"))
    paths = []
    for n, (key, value) in enumerate(SERVE_OPTIONS):
        data = json.loads(json.dumps(base))
        data["trtllm"]["serve_extra_options"][key] = value
        path = tmp_path / str(n) / "nd-h200-v5.yaml"
        path.parent.mkdir()
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        paths.append(path)
    for (key, _), path, error in zip(SERVE_OPTIONS, paths, _validate(paths), strict=True):
        assert error.startswith(f"{path}: field 'trtllm': serve_extra_options.{key}"), error
    res = cli("doctor", "--recipe", str(paths[2]))
    assert res.exit_code == 2 and "free_gpu_memory_fraction is {'x': [1]}" in res.stderr, res.output


COUNTS = [
    (("system", "gpus_per_vm"), True),
    (("system", "gpus_per_vm"), 1),
    (("system", "gpus_per_vm"), 8.0),
    (("trtllm", "tp_size"), True),
    (("trtllm", "servers_per_vm"), 9),
    (("trtllm", "pp_size"), "2"),
]


def test_counts_are_whole_numbers_and_the_servers_fit_the_vm(tmp_path: Path) -> None:
    """`gpus_per_vm: true` was taken as 1 GPU, and 8 servers of TP1 on it ended `run --dry-run` in "repro hit a
    bug" (PlanError: GPU 1 is not on node-00): a count is an integer (never a boolean, a float or text), and one
    VM's servers x TP x PP fit its GPUs."""
    base = yaml.safe_load((recipes_dir() / "nd-h200-v5.yaml").read_text(encoding="utf-8"))
    assert (base["system"]["gpus_per_vm"], base["trtllm"]["servers_per_vm"], base["trtllm"]["tp_size"]) == (8, 8, 1)
    paths = []
    for n, ((block, key), value) in enumerate(COUNTS):
        data = json.loads(json.dumps(base))
        data[block][key] = value
        path = tmp_path / str(n) / "nd-h200-v5.yaml"
        path.parent.mkdir()
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        paths.append(path)
    errors = _validate(paths)
    for ((block, key), value), error in zip(COUNTS, errors, strict=True):
        if type(value) is int and value in (1, 9):
            assert "servers x TP" in error and "need" in error, error
        else:
            assert f"field '{block}.{key}'" in error and "integer" in error, error
    res = cli("run", "offline", "--recipe", str(paths[0]), "--dry-run")
    assert res.exit_code == 2 and "nd-h200-v5.yaml" in res.stderr, res.output


def test_setup_and_run_of_an_impossible_recipe_write_nothing(tmp_path: Path, _isolated_home: Path) -> None:
    """`repro setup` and `repro run` (not dry runs) of a recipe with a .nan, a key twice or 1e308 GB of disk stop
    before anything is made: exit 2 naming the file, and the workspace holds no file afterwards."""
    text = (recipes_dir() / "nd-h200-v5.yaml").read_text(encoding="utf-8")
    bodies = {
        "nan": _with(text, "published.band_pct", ".nan"),
        "twice": text.replace("  band_pct: ", "  band_pct: 60\n  band_pct: ", 1),
        "disk": _with(text, "disk_needed_gb", "1.0e+308"),
    }
    for name, body in bodies.items():
        assert body != text, name
        path = tmp_path / name / "nd-h200-v5.yaml"
        path.parent.mkdir()
        path.write_text(body, encoding="utf-8")
        for argv in (["setup", "--recipe", str(path)], ["run", "offline", "--recipe", str(path), "--samples", "2"]):
            res = cli(*argv)
            assert res.exit_code == 2 and res.stderr.startswith(f"error: {path}: "), (name, argv, res.output)
            assert "Next: " in res.stderr, res.stderr
    made = [p for p in _isolated_home.rglob("*") if p.is_file()] if _isolated_home.exists() else []
    assert made == [], made
