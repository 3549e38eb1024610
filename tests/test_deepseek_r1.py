"""Issue 45 item 2: the deepseek-r1 benchmark (repro/data/benchmarks/deepseek-r1.yaml and its module
repro/core/families/deepseek_r1.py) and Azure's seven published v6.1 DeepSeek-R1 results
(tests/fixtures/published/v6.1_Azure_deepseek-r1, read file by file from intel-ai-tce/inference_results_v6.1 @
5174fca8), which verify as themselves; a copy below the accuracy floor fails naming exact_match, and a Llama recipe
never judges them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import cli

from repro.core.benchmarks import load_benchmark
from repro.core.errors import InputError
from repro.results.verify import verify_dir
from repro.setup.table import Table

AZURE = Path(__file__).parent / "fixtures" / "published" / "v6.1_Azure_deepseek-r1" / "closed" / "Azure" / "results"
PUBLISHED = {  # per GPU as the index and Azure's summary.csv rows give them (issue 45's Done-when)
    ("Azure-GB300-NVL72_288GBx72", "Offline"): "9,182.5",
    ("Azure-GB300-NVL72_288GBx72", "Server"): "8,186.0",
    ("Azure-GB300-NVL72_288GBx72", "Interactive"): "3,612.5",
    ("Azure-GB200-NVL72_186GBx72", "Offline"): "7,528.8",
    ("Azure-GB200-NVL72_186GBx72", "Server"): "5,927.7",
    ("Azure-GB200-NVL72_186GBx288", "Offline"): "7,261.1",
    ("Azure-GB200-NVL72_186GBx288", "Server"): "5,550.4",
}


def test_the_benchmark_file_states_mlperfs_figures() -> None:
    b = load_benchmark("deepseek-r1")
    assert (b.module, b.mlperf_model, b.result_names, b.rounds) == (
        "deepseek_r1",
        "deepseek-r1",
        ["deepseek-r1"],
        ["v5.1", "v6.0", "v6.1"],
    )
    assert (b.model.repo_id, b.model.revision) == (
        "deepseek-ai/DeepSeek-R1",
        "56d4cbbb4d29f4355bab4b9a39ccb717a14ad5ad",
    )
    assert (b.dataset.samples, b.dataset.calibration_samples) == (4388, 500)
    assert b.dataset.files == {
        "sampled": "mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl",
        "calibration": "mlperf_deepseek_r1_calibration_dataset_500_fp8_eval.pkl",
    }
    g = b.generation
    assert (g.decoding, g.min_new_tokens, g.max_new_tokens) == ("greedy", 1, 20000)
    off, srv, inter = (b.rules(s) for s in ("Offline", "Server", "Interactive"))
    assert (off.min_duration_ms, off.min_query_count, off.min_samples_per_query) == (600000, 4388, 4388)
    assert (srv.ttft_ms, srv.tpot_ms, inter.ttft_ms, inter.tpot_ms) == (2000, 80, 1500, 15)
    assert inter.mlperf_model == "deepseek-r1-interactive" and inter.rounds == ["v6.0", "v6.1"]
    (metric,) = b.accuracy.targets()
    assert metric.name == "exact_match" and round(b.accuracy.floor(metric), 4) == 80.5446


def test_the_architecture_adds_up_to_the_stated_parameters() -> None:
    """The parameter count the file states is its architecture's sum (MLA attention, 3 dense and 58 MoE layers,
    untied embeddings); the module's active count passes 8 routed + 1 shared experts; the KV cache is MLA's latent,
    576 values per token and layer, held whole by every tensor-parallel rank."""
    b = load_benchmark("deepseek-r1")
    a, moe, mla = b.model.architecture, b.model.architecture.moe, b.model.architecture.mla
    h = a.hidden_size
    attention = (
        h * mla.q_lora_rank
        + mla.q_lora_rank
        + mla.q_lora_rank * a.attention_heads * a.head_dim
        + h * (mla.kv_lora_rank + mla.qk_rope_head_dim)
        + mla.kv_lora_rank
        + mla.kv_lora_rank * a.attention_heads * (mla.qk_nope_head_dim + mla.v_head_dim)
        + a.attention_heads * mla.v_head_dim * h
        + 2 * h
    )
    expert = 3 * h * moe.expert_intermediate_size
    moe_mlp = (moe.routed_experts + moe.shared_experts) * expert + moe.routed_experts * (h + 1)
    total = a.layers * attention + moe.dense_layers * 3 * h * a.intermediate_size
    total += (a.layers - moe.dense_layers) * moe_mlp + 2 * a.vocab_size * h + h
    assert total == b.model.parameters == 671_026_419_200
    shape = b.spec.model_shape(b.model, "test")
    assert shape.params == total and shape.active == 37_552_297_472
    assert shape.kv_latent == 576 and shape.kv_bytes_per_token(1.0) == 61 * 576
    assert shape.kv_bytes_per_token(1.0, tp=8) == shape.kv_bytes_per_token(1.0)  # not split by TP
    assert shape.kv_bytes_per_token(1.0, pp=61) == 576


def _table(columns: dict[str, list[object]]) -> Table:
    return Table(tuple(columns), dict(columns), range(len(next(iter(columns.values())))))


def test_the_module_reads_the_datasets_columns(tmp_path: Path) -> None:
    """tok_input / tok_input_len, the reference from gt_output (else ground_truth, as eval_accuracy.py reads it),
    the subset from `dataset`; the stand-in's columns read back; a table with no reference column is refused."""
    spec = load_benchmark("deepseek-r1").spec
    prompts = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
    tables = spec.stand_in(prompts, ["a b c", "d e", "f g h i"], 4)
    assert set(tables["calibration"]) == {"text_input", "templated_text_input"}
    assert spec.calibration_column == "templated_text_input"  # what NVIDIA's quantizer calibrates on
    rows = spec.read_dataset(_table(tables["sampled"]), tmp_path / "sampled.pkl")
    assert rows.prompts == prompts and rows.outputs == ["0", "1", "2"]
    assert rows.sample_kinds == ["gpqa", "mmlu_pro", "math500"]
    other = {"tok_input": prompts, "tok_input_len": [3, 2, 4], "ground_truth": ["A", "7", "x"], "dataset": ["a"] * 3}
    assert spec.read_dataset(_table(other), tmp_path / "s.pkl").outputs == ["A", "7", "x"]
    with pytest.raises(InputError, match=r"s\.pkl: neither 'gt_output' nor 'ground_truth' is a column"):
        spec.read_dataset(_table({"tok_input": prompts, "tok_input_len": [3, 2, 4]}), tmp_path / "s.pkl")
    assert spec.evaluator == "deepseek_r1"  # scored over the whole log (results/accuracy.py EVALUATORS), by subset


@pytest.mark.parametrize(("system", "scenario"), sorted(PUBLISHED))
def test_azures_seven_folders_verify_as_themselves(system: str, scenario: str) -> None:
    v = verify_dir(AZURE / system / "deepseek-r1" / scenario)
    assert v.status == "PASS" and v.deviation_pct == 0.0, v.reasons
    assert v.record is not None and v.record.row.key == f"v6.1/closed/Azure/{system}/deepseek-r1/{scenario}"
    assert f"{v.per_gpu:,.1f}" == PUBLISHED[(system, scenario)]
    rows = {c.name: c for c in v.checks}
    assert rows["accuracy exact_match"].ok is True and "≥ 80.5446" in rows["accuracy exact_match"].detail
    assert (
        rows["accuracy tokens_per_sample"].ok is True
        and "3497.605–4274.850" in rows["accuracy tokens_per_sample"].detail
    )
    assert rows["accuracy samples"].ok is True and "4,388 = 4,388" in rows["accuracy samples"].detail
    if scenario != "Offline":
        ttft, tpot = ("1,500 ms", "15.0 ms") if scenario == "Interactive" else ("2,000 ms", "80 ms")
        assert f"≤ {ttft} ({scenario})" in rows["TTFT p99"].detail and rows["TTFT p99"].ok is True
        assert f"≤ {tpot} ({scenario})" in rows["TPOT p99"].detail and rows["TPOT p99"].ok is True


def test_a_copy_below_the_floor_fails_naming_exact_match(tmp_path: Path) -> None:
    run = tmp_path / "closed" / "Azure" / "results" / "Azure-GB300-NVL72_288GBx72"
    shutil.copytree(AZURE / "Azure-GB300-NVL72_288GBx72", run)
    shutil.copytree(AZURE.parent / "systems", run.parent.parent / "systems")
    acc = run / "deepseek-r1" / "Interactive" / "accuracy" / "accuracy.txt"
    text = acc.read_text()
    assert text.count("80.81130355515042") == 1
    acc.write_text(text.replace("80.81130355515042", "80.5445"))
    res = cli("verify", str(run / "deepseek-r1" / "Interactive"), "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["status"] == "FAIL"
    assert doc["reasons"] == ["accuracy exact_match: 80.5445 < 80.5446 (99% target, deepseek-r1 in the path)"]


def test_a_llama_recipe_never_judges_a_deepseek_folder() -> None:
    """Named on the command line, Azure's Llama-2-70B GB300 recipe is refused as another benchmark, naming both;
    without it the folder is judged against its own published record."""
    res = cli(
        "verify",
        str(AZURE / "Azure-GB300-NVL72_288GBx72" / "deepseek-r1" / "Offline"),
        "--recipe",
        "nd-gb300-v6",
        "--json",
    )
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["status"] == "NOT A REPRODUCTION"
    assert (
        "a deepseek-r1 run (deepseek-r1 in the path) against recipe nd-gb300-v6's llama2-70b-99 result: another "
        "benchmark is never a reproduction" in doc["reasons"]
    )
