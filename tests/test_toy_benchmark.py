"""A new benchmark is one module and one data file (issue #45 item 1, Done-when 3): a toy benchmark, `toy-echo`, is
added by exactly two files in one folder of $REPRO_BENCHMARKS_PATH (its YAML and its module, which brings its own
metric kind and per-sample scorer), and walks verify, the CPU demo run (real LoadGen) and the published index.

What else the walk takes is not the benchmark: a recipe to run it on a system (the demo recipe pointed at it), the
LoadGen logs verify reads (the demo run writes them) and published rows (a CSV beside the benchmark's file)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml

from repro.core import benchmarks as B
from repro.results.logfiles import parse_accuracy_txt
from repro.results.verify import NoRecipeFor, verify_dir
from tests.helpers import cli, cli_process, toy_benchmark

REPO = Path(__file__).resolve().parents[1]

TOY_MODULE = '''"""toy-echo's behaviour: an answer scores the share of its reference's words it says back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.core.families import Family, MetricKind, PreparedRows
from repro.core.families.common import token_rows


def echo(reference: str, prediction: str) -> float:
    words, said = reference.split(), set(prediction.split())
    return 100.0 * sum(w in said for w in words) / len(words) if words else 0.0


def read_dataset(table: Any, source: Path) -> PreparedRows:
    return token_rows(table, source, what="a toy-echo set", input_length="n_tokens", text="reference")


FAMILY = Family(name="toy_echo", read_dataset=read_dataset, kinds={"echo": MetricKind(scorer=echo)})
'''


def _toy(folder: Path) -> Path:
    """toy-echo: its own name, module, model key, result-folder name, limits and accuracy (one 'echo' metric of its
    module's kind); the model and dataset sections are a placeholder (llama2-70b-99's), which a recipe overrides."""
    data = toy_benchmark({"name": "echo", "kind": "echo", "reference": 10.0, "how": "toy"}, module="toy_echo")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "toy-echo.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (folder / "toy_echo.py").write_text(TOY_MODULE)
    assert sorted(p.name for p in folder.iterdir()) == ["toy-echo.yaml", "toy_echo.py"]  # the two files it takes
    return folder


def _echo(reference: str, prediction: str) -> float:
    """The toy's scorer written again here, so the test does not check the module with itself."""
    words = reference.split()
    return 100.0 * sum(w in prediction.split() for w in words) / len(words) if words else 0.0


def test_the_toy_loads_as_its_module_says(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(B.ENV_PATH, str(_toy(tmp_path / "benchmarks")))
    bench = B.load_benchmark("toy-echo")
    assert bench.spec.name == "toy_echo" and bench.spec.origin == str(tmp_path / "benchmarks" / "toy_echo.py")
    assert bench.spec.kinds["echo"].scorer is not None and bench.spec.kinds["echo"].scorer("a b", "b c") == 50.0
    assert bench.spec.locator() == {"name": "toy_echo", "beside": str(tmp_path / "benchmarks")}
    assert "toy-echo" in B.benchmark_names() and B.benchmark_for_result_name("toy-echo") == bench


def test_a_toy_benchmark_flows_through_verify(tmp_path, monkeypatch, fixtures) -> None:
    """Azure's published GB200 bundle under the toy's folder name, its accuracy.txt scored by the toy's metric: the
    path names the benchmark, which is judged by the toy file's rules alone (its samples per query, its echo floor,
    its tokens/sample band), and no Llama recipe of that system is ever its reference."""
    monkeypatch.setenv(B.ENV_PATH, str(_toy(tmp_path / "benchmarks")))
    bundle = tmp_path / "results" / "ND_GB200_v6"
    shutil.copytree(fixtures / "azure-nd-gb200-v6-v5.1" / "llama2-70b-99", bundle / "toy-echo")
    shutil.copy(fixtures / "azure-nd-gb200-v6-v5.1" / "ND_GB200_v6.json", bundle.parent)
    acc = bundle / "toy-echo" / "Offline" / "accuracy" / "accuracy.txt"
    acc.write_text(
        acc.read_text().replace(
            "'rouge1': 44.7494, 'rouge2': 22.3586, 'rougeL': 29.1373, 'rougeLsum': 42.2591", "'echo': 12.5"
        )
    )
    with pytest.raises(NoRecipeFor, match=r"has no recipe for toy-echo \(its recipe runs llama2-70b-99\)"):
        verify_dir(bundle / "toy-echo" / "Offline")
    recipe = yaml.safe_load((REPO / "recipes" / "nd-gb200-v6.yaml").read_text())
    recipe.update(name="gb200-toy", benchmark="toy-echo")
    (tmp_path / "gb200-toy.yaml").write_text(yaml.safe_dump(recipe))
    v = verify_dir(bundle / "toy-echo" / "Offline", recipe=str(tmp_path / "gb200-toy.yaml"))
    checks = {c.name: c for c in v.checks}
    assert v.identity is not None and (v.identity.benchmark, v.identity.benchmark_source) == (
        "toy-echo",
        "toy-echo in the path",
    )
    assert v.recipe is not None and v.recipe.loadgen.max_tokens == 8
    assert checks["samples per query"].ok is False and "700,000" in checks["samples per query"].detail
    assert checks["accuracy echo"].ok is True and "12.5000 ≥ 9.9000" in checks["accuracy echo"].detail
    assert not any(name.startswith("accuracy rouge") for name in checks)
    assert (
        checks["accuracy tokens_per_sample"].ok is False
        and "450.000–550.000" in checks["accuracy tokens_per_sample"].detail
    )
    assert v.status == "FAIL" and v.exit_code == 1


def _index_row(tokens_per_s: float, echo: float, tps: float) -> dict[str, object]:
    """One published toy-echo result in the shipped index's columns, its accuracy column the toy's metric."""
    return {
        "round": "v0.1",
        "division": "closed",
        "submitter": "Toy",
        "system_folder": "ToyBox",
        "system_name": "Toy box (1x CPU)",
        "accelerator_model_name": "CPU",
        "accelerators_per_node": 1,
        "number_of_nodes": 1,
        "total_accelerators": 1,
        "host_processor_model_name": "",
        "framework": "numpy",
        "benchmark": "toy-echo",
        "model_folder": "toy-echo",
        "scenario": "Offline",
        "scenario_folder": "Offline",
        "log_scenario": "Offline",
        "result_validity": "VALID",
        "tokens_per_second": tokens_per_s,
        "tokens_per_second_per_accelerator": tokens_per_s,
        "samples_per_second": "",
        "min_duration_ms_summary": "",
        "loadgen_version": "",
        "echo": echo,
        "tokens_per_sample": tps,
        "gen_num": 64,
        "result_id": "",
        "summary_crosscheck": "ok",
        "source_repo": "test/toy",
        "source_commit": "0" * 40,
        "source_path": "closed/Toy/results/ToyBox/toy-echo/Offline/performance/run_1/mlperf_log_summary.txt",
        "source_kind": "test",
    }


@pytest.mark.slow
def test_a_toy_benchmark_walks_the_demo_run_verify_and_the_index(tmp_path) -> None:
    """The demo recipe pointed at the toy: LoadGen runs under the toy's model key and counts; the accuracy run is
    scored by the toy module's own scorer (recomputed here from the log, the tokenizer and the references); verify
    reads the benchmark from run.json and judges by the toy's rules; then a published row of it, beside its file,
    is listed by `repro published` and is what verify recognises a submission-shaped copy of the logs as."""
    benchmarks = _toy(tmp_path / "benchmarks")
    recipe = yaml.safe_load((REPO / "recipes" / "demo.yaml").read_text())
    recipe.update(name="toy-demo", benchmark="toy-echo")
    for key in ("max_tokens", "min_query_count", "performance_sample_count"):
        recipe["loadgen"].pop(key)
    recipe_path = tmp_path / "toy-demo.yaml"
    recipe_path.write_text(yaml.safe_dump(recipe))
    home = tmp_path / "home"
    env = {"REPRO_HOME": str(home), B.ENV_PATH: str(benchmarks)}
    proc = cli_process("run", "offline", "--recipe", str(recipe_path), env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]  # the run succeeded; its verdict: never a reproduction
    assert "NOT A REPRODUCTION" in proc.stdout and "MLPerf needs ≥ 1 s" in proc.stdout
    conf = next((home / "runs" / "toy-demo").rglob("user.conf")).read_text()
    assert "toy-echo.Offline.min_query_count = 16" in conf and "FromConfig(path, 'toy-echo', 'Offline')" in conf
    proc = cli_process("run", "offline", "--accuracy", "--recipe", str(recipe_path), env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    perf = next((home / "runs" / "toy-demo").rglob("performance/run_1"))
    acc_dir = perf.parent.parent / "accuracy"
    scores = parse_accuracy_txt(acc_dir / "accuracy.txt")
    assert set(scores) >= {"echo", "gen_num", "tokens_per_sample"} and not any(k.startswith("rouge") for k in scores)

    from repro.results.accuracy import load_tokenizer, read_accuracy_log

    outputs = [json.loads(line)["output"] for line in next(home.rglob("outputs.jsonl")).read_text().splitlines()]
    entries = read_accuracy_log(acc_dir / "mlperf_log_accuracy.json", len(outputs))
    tok = load_tokenizer(next(p.parent for p in (home / "models").rglob("tokenizer_config.json")))
    said = tok.batch_decode([ids.tolist() for _, ids in entries], skip_special_tokens=True)
    expected = sum(_echo(outputs[i], s) for (i, _), s in zip(entries, said, strict=True)) / len(entries)
    assert scores["echo"] == pytest.approx(expected, rel=1e-12) and scores["gen_num"] == len(entries)

    res = cli("verify", str(perf), "--recipe", str(recipe_path), "--json", env=env)
    doc = json.loads(res.output)
    assert doc["identity"]["benchmark"] == "toy-echo" and doc["identity"]["benchmark_source"] == "run.json"
    echo = next(c for c in doc["checks"] if c["name"] == "accuracy echo")
    assert "≥ 9.9000" in echo["detail"] or "< 9.9000" in echo["detail"]
    assert doc["status"] == "NOT A REPRODUCTION" and any("demo run" in r for r in doc["reasons"])

    # the index: the toy's published results, a CSV beside its file (data, like the logs: not the benchmark)
    run = json.loads((perf / "run.json").read_text())
    assert run["benchmark"] == "toy-echo"
    tokens = doc["tokens_per_s"]
    row = _index_row(tokens, scores["echo"], scores["tokens_per_sample"])
    with (benchmarks / "published-toy-echo.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    listed = json.loads(cli("published", "--benchmark", "toy-echo", "--json", env=env).output)
    assert [r["key"] for r in listed["results"]] == ["v0.1/closed/Toy/ToyBox/toy-echo/Offline"]
    assert listed["results"][0]["metrics"] == {"echo": scores["echo"]}
    sub = tmp_path / "sub" / "closed" / "Toy"
    run_1 = sub / "results" / "ToyBox" / "toy-echo" / "Offline" / "performance" / "run_1"
    run_1.mkdir(parents=True)
    for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
        shutil.copy(perf / name, run_1)
    shutil.copytree(acc_dir, run_1.parent.parent / "accuracy")
    (sub / "systems").mkdir()
    system = {"accelerator_model_name": "CPU", "accelerators_per_node": 1, "number_of_nodes": 1}
    (sub / "systems" / "ToyBox.json").write_text(json.dumps({**system, "submitter": "Toy", "division": "closed"}))
    res = cli("verify", str(run_1.parent.parent), "--json", env=env)
    doc = json.loads(res.output)
    assert doc["published_record"]["ref"] == "v0.1/closed/Toy/ToyBox/toy-echo/Offline", doc
    assert doc["reference"] == "published record v0.1/closed/Toy/ToyBox/toy-echo/Offline"
    assert doc["identity"]["benchmark"] == "toy-echo" and doc["identity"]["benchmark_source"] == "toy-echo in the path"
