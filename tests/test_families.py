"""A benchmark is one data file plus one module (repro/core/families/): the registry, what each shipped family
provides, what a benchmark file may ask of its module, and the model shapes the memory arithmetic and the roofline
read (dense GQA; MLA and a mixture of experts for the DeepSeek-R1 family to come)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from repro.core import benchmarks as B
from repro.core import families as F
from repro.core.errors import RecipeError
from repro.core.feasibility import memory_fit
from repro.report.roofline import flops_per_output_token
from repro.setup.table import Table


def _table(columns: dict[str, list[object]]) -> Table:
    """A dataset table as setup's own decoder returns it (repro/setup/table.py)."""
    return Table(tuple(columns), dict(columns), range(len(next(iter(columns.values())))))


def test_every_shipped_benchmark_names_a_registered_module() -> None:
    assert F.SHIPPED == ("llama2_70b", "llama3_1_405b", "deepseek_r1")
    for name in F.SHIPPED:
        family = F.load_family(name)
        assert family.name == name and family is F.load_family(name)  # loaded once
    specs = {b.name: b.spec.name for b in B.all_benchmarks()}
    assert specs == {
        "llama2-70b-99": "llama2_70b",
        "llama2-70b-99.9": "llama2_70b",
        "llama3.1-405b": "llama3_1_405b",
        "deepseek-r1": "deepseek_r1",
    }


@pytest.mark.parametrize("benchmark", ["llama2-70b-99", "llama3.1-405b"])
def test_a_family_reads_the_columns_its_stand_in_writes(benchmark: str, tmp_path: Path) -> None:
    """The rehearsal's stand-in of a benchmark's dataset, read back by the same module's reader: every prompt, its
    length, the reference and each sample's scorer arrive as setup writes them."""
    spec = B.load_benchmark(benchmark).spec
    assert spec.stand_in is not None
    prompts = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
    tables = spec.stand_in(prompts, ["w5 w6 w7", "w8 w9", "w10 w11 w12 w13"], 4)
    assert set(tables) == {"sampled", "calibration"} and spec.calibration_column in tables["calibration"]
    rows = spec.read_dataset(_table(tables["sampled"]), tmp_path / "sampled.pkl")
    assert rows.prompts == prompts and rows.outputs == ["w3 w3 w3 w3"] * 3
    if benchmark == "llama2-70b-99":
        assert rows.output_lens == [4, 4, 4] and rows.sample_kinds is None  # tok_output_length
    else:
        assert rows.output_lens == [5, 5, 5]  # no token column: ~1.3 tokens per word
        assert rows.sample_kinds == ["rouge", "niah_em", "qa_em"]


def test_a_reader_refuses_another_benchmarks_table_naming_the_file(tmp_path: Path) -> None:
    from repro.core.errors import InputError

    spec = B.load_benchmark("llama3.1-405b").spec
    bad = _table({"tok_input": [[1, 2, 3]], "tok_input_len": [4]})
    with pytest.raises(InputError, match=r"sampled\.pkl: the stated input length disagrees"):
        spec.read_dataset(bad, tmp_path / "sampled.pkl")
    with pytest.raises(InputError, match=r"column 'tok_input' is missing; this is not MLPerf's processed Llama"):
        spec.read_dataset(_table({"input": ["a"]}), tmp_path / "sampled.pkl")


def _copy_405b(folder: Path, name: str, **changes: object) -> Path:
    data = yaml.safe_load((B.SHIPPED / "llama3.1-405b.yaml").read_text())
    data.update(name=name, result_names=[name], **changes)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_what_a_file_asks_of_its_module_is_checked_when_it_is_loaded(tmp_path: Path) -> None:
    """An unknown module, a metric kind or a per-sample kind the module does not provide: one error naming the file
    and the field, at load (never hours later when the accuracy run is scored)."""
    path = _copy_405b(tmp_path, "nomodule", module="llama9_1t")
    with pytest.raises(RecipeError) as exc:
        B.load_benchmark_file(path)
    assert f"{path}: field 'module': no benchmark module 'llama9_1t'" in exc.value.message
    assert "llama9_1t.py" in exc.value.message and "FAMILY" in str(exc.value.next_command)
    path = _copy_405b(tmp_path, "badkind")
    data = yaml.safe_load(path.read_text())
    data["accuracy"]["metrics"][1]["kind"] = "bleu"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError, match=r"badkind\.yaml: field 'accuracy\.metrics\.1\.kind': 'bleu' is not a metric"):
        B.load_benchmark_file(path)
    data["accuracy"]["metrics"][1].update(kind="exact_match", scorers=["niah_em", "sandbox"])
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError, match=r"field 'accuracy\.metrics\.1\.scorers': 'sandbox' is not a per-sample"):
        B.load_benchmark_file(path)
    data["accuracy"]["metrics"][1]["scorers"] = ["niah_em", "rouge"]  # 'rouge' samples have no exact-match scorer
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError, match=r"module llama3_1_405b has no scorer for 'rouge' samples"):
        B.load_benchmark_file(path)
    data["module"] = "Not/A/Name"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError, match=r"field 'module'"):  # a name, never a path
        B.load_benchmark_file(path)


def test_a_module_beside_its_file_is_the_benchmarks_own_and_its_errors_name_it(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from repro.core.families import Family, MetricKind\n"
        "from repro.core.families.llama3_1_405b import read_dataset\n"
        "def exact(reference: str, prediction: str) -> float:\n"
        "    return 100.0 if reference.strip() == prediction.strip() else 0.0\n"
        "FAMILY = Family(name='mine', read_dataset=read_dataset, kinds={'rougeL': MetricKind(rouge='rougeL'),\n"
        "    'exact_match': MetricKind()}, scorers={'niah_em': exact, 'qa_em': exact}, sample_kinds=('rouge',))\n"
    )
    bench = B.load_benchmark_file(_copy_405b(tmp_path, "mybench", module="mine"))
    assert bench.spec.name == "mine" and bench.spec.scorers["qa_em"]("a", " a ") == 100.0
    (tmp_path / "broken.py").write_text("import no_such_package_here\n")
    with pytest.raises(RecipeError) as exc:
        B.load_benchmark_file(_copy_405b(tmp_path, "other", module="broken"))
    assert f"{tmp_path / 'broken.py'}: cannot be imported (ModuleNotFoundError" in exc.value.message
    (tmp_path / "empty.py").write_text("X = 1\n")
    with pytest.raises(RecipeError, match=r"empty\.py: defines no FAMILY = Family\(name='empty'"):
        B.load_benchmark_file(_copy_405b(tmp_path, "third", module="empty"))


# ---------------------------------------------------------------- model shapes

# DeepSeek-V3/R1's architecture (671B): deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json, read in the copy
# Kwesik/DeepSeek-V3-Local-Setup @ ba511b5b: n_layers 61, dim 7168, kv_lora_rank 512, qk_rope_head_dim 64,
# n_routed_experts 256, n_activated_experts 8. Its ~37B active parameters: the figure (#45). A test's shape,
# not a benchmark file: the DeepSeek-R1 family's module will read its own file's figures.
MLA = F.ModelShape(671e9, layers=61, source="test", hidden=7168, active_params=37e9, kv_latent=512 + 64)


def test_mla_kv_cache_is_one_latent_per_layer_held_whole_by_every_tensor_parallel_rank() -> None:
    assert MLA.kv_bytes_per_token(1.0) == 61 * 576 == 35_136  # FP8 KV
    assert MLA.kv_bytes_per_token(1.0, tp=8) == 35_136  # not split by heads: every TP rank holds the latent
    assert MLA.kv_bytes_per_token(1.0, tp=8, pp=2) == 61 / 2 * 576
    gqa = F.ModelShape(405e9, layers=126, kv_heads=8, head_dim=128)
    assert gqa.kv_bytes_per_token(1.0, tp=8) == 2 * 126 * 1 * 128 and gqa.active == 405e9


def test_a_mixture_of_experts_holds_every_weight_and_computes_with_its_active_ones() -> None:
    fit = memory_fit(MLA, gpu_gb=186.0, weight_bytes=0.5625, kv_bytes=1.0, tp=8, pp=1, batch=256, max_seq_len=4096)
    assert fit.weights_gb == pytest.approx(671e9 * 0.5625 / 8 / 1e9)  # all 671B in memory, NVFP4, over 8 GPUs
    assert fit.kv_bytes_per_token == 35_136
    i, o = 800.0, 4000.0
    attention = 4 * 61 * 7168 * (i * i / 2 + o * (i + o / 2))
    assert flops_per_output_token(i, o, MLA) == pytest.approx((2 * 37e9 * (i + o) + attention) / o)


def test_a_whole_log_evaluator_scores_what_per_sample_functions_cannot(tmp_path: Path, monkeypatch) -> None:
    """A family naming an evaluator (DeepSeek-R1's sandboxed LiveCodeBench, at the results stage) hands the whole
    log to it; one repro does not have is one error naming the benchmark and the module."""
    import dataclasses
    import json

    from repro.core.errors import InputError
    from repro.results import accuracy as A

    # a copy: load_benchmark is cached for the process, and undoing a patched private attribute removes it
    bench = B.load_benchmark("llama3.1-405b").model_copy()
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps([{"qsl_idx": 0, "data": "05000000"}]))
    seen: list[object] = []

    def whole(path, refs, tok, b, kinds, workers):  # type: ignore[no-untyped-def]
        seen.append((path, refs, b.name, kinds))
        return {"exact_match": 100.0, "gen_num": 1, "tokens_per_sample": 1.0}

    monkeypatch.setattr(bench, "_spec", dataclasses.replace(bench.spec, evaluator="whole"))
    monkeypatch.setitem(A.EVALUATORS, "whole", f"{__name__}:_WHOLE")
    monkeypatch.setitem(globals(), "_WHOLE", whole)
    scores = A.evaluate_accuracy_log(log, ["ref"], None, bench=bench, sample_metrics=["qa_em"])
    assert scores["exact_match"] == 100.0 and seen == [(log, ["ref"], "llama3.1-405b", ["qa_em"])]
    monkeypatch.delitem(A.EVALUATORS, "whole")
    with pytest.raises(InputError, match=r"names the evaluator 'whole', which repro does not have"):
        A.evaluate_accuracy_log(log, ["ref"], None, bench=bench)
