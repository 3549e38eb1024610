"""DeepSeek-R1 (deepseek-r1): MLCommons' ensemble of AIME, MATH500, GPQA, MMLU-Pro and LiveCodeBench, each sample
scored by its subset's rule; a 671B mixture of experts with multi-head latent attention.

The dataset (mlcommons/inference @ b66003e1 `language/deepseek-r1/`): `mlperf/utils.py` sends `text_input` (with
DeepSeek-R1's chat template); NVIDIA's harness, which produced the published results, sends the pickle's own
`tok_input` ids, checked against `tok_input_len` (gbeezybez/inference_results_v6.0 @ 232fbf90
`closed/NVIDIA/code/deepseek-r1/tensorrt/preprocess_data.py`), and calibrates on the calibration pickle's
`templated_text_input`. `eval_accuracy.py` reads the reference answer from `gt_output`, else `ground_truth`, and the
subset from `dataset`. The pickle holds no reference output, so a sample's reference length here is its answer's
(a letter or a number), not the 3,886 tokens a reasoning answer averages: what replays answers (`sim`) is not a
stand-in for this benchmark's output lengths.

Scoring is repro/results/dsr1_score.py's (dsr1score's): every sample by its subset's rule, LiveCodeBench and MATH500
in the sandbox, over a whole accuracy log; not a function of one (reference, answer) pair, so the family names a
whole-log evaluator (`evaluator`, results/accuracy.py EVALUATORS) rather than per-sample scorers.

The shape: config.json's MLA keeps one latent of kv_lora_rank + qk_rope_head_dim values per token and layer, which
every tensor-parallel rank holds whole; each token passes the shared and `experts_per_token` routed experts of each
MoE layer. The figures are in repro/data/benchmarks/deepseek-r1.yaml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.core.errors import InputError
from repro.core.families import Family, MetricKind, ModelShape, PreparedRows
from repro.core.families.common import token_rows

SUBSETS = ("gpqa", "mmlu_pro", "math500", "aime", "livecodebench")
"""The evaluators eval_accuracy.py picks by the first of these a sample's `dataset` name contains."""


def read_dataset(frame: Any, source: Path) -> PreparedRows:
    """The dataset pickle (a row per sample, `dataset.samples` in all): tok_input / tok_input_len, the reference
    answer (gt_output, else ground_truth, as eval_accuracy.py reads it) and each sample's subset (`dataset`)."""
    truth = "gt_output" if "gt_output" in frame else "ground_truth"
    if truth not in frame:
        raise InputError(
            f"{source}: neither 'gt_output' nor 'ground_truth' is a column; this is not MLPerf's DeepSeek-R1 set.",
            "`repro setup --force`",
        )
    return token_rows(
        frame,
        source,
        what="MLPerf's DeepSeek-R1 set",
        input_length="tok_input_len",
        text=truth,
        kind="dataset",
    )


def model_shape(model: Any, source: str) -> ModelShape | None:
    """Total and active parameters and the MLA KV latent from the benchmark file's architecture; the total is the
    file's `parameters` (its derivation is written beside it), the active count the same sum with only the shared
    and `experts_per_token` routed experts of each MoE layer."""
    arch = model.architecture
    if arch is None:
        return None
    moe, mla = arch.moe, arch.mla
    active: float | None = None
    if moe is not None:
        expert = 3 * arch.hidden_size * moe.expert_intermediate_size
        idle = moe.routed_experts - moe.experts_per_token
        active = float(model.parameters - (arch.layers - moe.dense_layers) * idle * expert)
    return ModelShape(
        float(model.parameters),
        arch.layers,
        None if mla is not None else arch.kv_heads,
        None if mla is not None else arch.head_dim,
        source,
        vocab=arch.vocab_size,
        hidden=arch.hidden_size,
        active_params=active,
        kv_latent=(mla.kv_lora_rank + mla.qk_rope_head_dim) if mla is not None else None,
    )


def stand_in(prompts: list[list[int]], texts: list[str], out_len: int) -> dict[str, dict[str, list[Any]]]:
    """The two pickles' columns (preprocess_data.py, mlperf/utils.py, eval_accuracy.py): each sample's subset in turn
    as the real set mixes them, a letter or number for an answer; the calibration file's templated text."""
    n = len(prompts)
    sampled: dict[str, list[Any]] = {
        "text_input": texts,
        "tok_input": prompts,
        "tok_input_len": [len(p) for p in prompts],
        "dataset": [SUBSETS[i % len(SUBSETS)] for i in range(n)],
        "gt_output": [str(i % 4) for i in range(n)],
        "question": texts,
    }
    calibration: dict[str, list[Any]] = {"text_input": texts[:8], "templated_text_input": texts[:8]}
    return {"sampled": sampled, "calibration": calibration}


FAMILY = Family(
    name="deepseek_r1",
    read_dataset=read_dataset,
    kinds={"exact_match": MetricKind()},
    sample_kinds=SUBSETS,
    evaluator="deepseek_r1",
    model_shape=model_shape,
    stand_in=stand_in,
    calibration_column="templated_text_input",
)
