"""The feasibility arithmetic doctor shows (repro/core/feasibility.py), on every benchmark's model shape.

Shapes are read from the benchmark files (repro/data/benchmarks/: Llama-2-70B 80 layers, 8 KV heads, head dim 128,
68.98e9 parameters; Llama-3.1-405B 126 layers, 8 KV heads, head dim 128, 405.85e9 parameters)."""

from __future__ import annotations

import pytest

from repro.core.benchmarks import load_benchmark
from repro.core.feasibility import GB, RESERVE_GB, ModelShape, kv_bytes_per_token, memory_fit, server_fit


def _shape(name: str) -> ModelShape:
    model = load_benchmark(name).model
    assert model.architecture is not None
    a = model.architecture
    return ModelShape(float(model.parameters), a.layers, a.kv_heads, a.head_dim, f"benchmark {name}")


L70 = _shape("llama2-70b-99")
L405 = _shape("llama3.1-405b")


def test_server_fit_counts_whole_servers():
    assert server_fit(1, 2, 1, 4).fit == 0
    assert server_fit(5, 2, 1, 4).fit == 2
    assert server_fit(8, 2, 1, 4).fit == 4 and server_fit(8, 2, 1, 4).needed == 8
    assert server_fit(16, 2, 1, 4).fit == 4  # more GPUs than the recipe's servers use
    assert server_fit(8, 4, 2, 1).fit == 1


def test_kv_cache_per_token_is_two_x_layers_x_kv_heads_x_head_dim_x_bytes_split_over_tp():
    assert kv_bytes_per_token(L70, 1.0, 1) == 2 * 80 * 8 * 128 == 163_840
    assert kv_bytes_per_token(L70, 2.0, 2) == 163_840
    assert kv_bytes_per_token(L405, 1.0, 16) == 2 * 126 * 1 * 128  # fewer KV heads than ranks: one head each
    assert kv_bytes_per_token(ModelShape(1e9), 1.0, 1) is None


def test_70b_fp8_on_one_h100_does_not_fit_and_on_two_it_does():
    """70B FP8 on one 80 GB H100: 69 GB of weights leave 8 GB for everything else, under one full-length sequence
    of KV at 2048 tokens? No: 6.5 GB x 0.9 holds 35,000 tokens; a full batch of 896 cannot run (WARN)."""
    one = memory_fit(
        L70, gpu_gb=80.0, weight_bytes=1, kv_bytes=1, tp=1, pp=1, batch=896, max_seq_len=2048, typical_tokens=265
    )
    assert one.weights_gb == pytest.approx(68.976648192)
    assert one.pool_gb == pytest.approx((80 - 68.976648192 - RESERVE_GB) * 0.9)
    assert one.pool_tokens == int(one.pool_gb * GB / 163_840)
    assert one.level == "WARN" and "265" in one.detail()
    two = memory_fit(
        L70, gpu_gb=80.0, weight_bytes=1, kv_bytes=1, tp=2, pp=1, batch=896, max_seq_len=2048, typical_tokens=265
    )
    assert two.level == "PASS" and two.weights_gb == pytest.approx(34.488324096)
    assert two.full_batch_kv_gb == pytest.approx(896 * 2048 * 81_920 / GB)


def test_70b_fp16_on_one_h100_fails_on_the_weights():
    fit = memory_fit(L70, gpu_gb=80.0, weight_bytes=2, kv_bytes=2, tp=1, pp=1, batch=64, max_seq_len=2048)
    assert fit.level == "FAIL" and "the weights alone do not fit" in fit.detail()


@pytest.mark.parametrize(
    "gpu_gb,tp,weight,level",
    [
        (80.0, 8, 1.0, "PASS"),  # 8 x H100 FP8: 50.7 GB of weights per GPU, 23.6 GB of KV pool
        (141.0, 8, 1.0, "PASS"),  # 8 x H200 FP8
        (186.0, 4, 0.5625, "PASS"),  # 4 x GB200 NVFP4 (Azure's v5.1 405B ran 4 GPUs a node)
        (80.0, 4, 1.0, "FAIL"),  # 4 x H100 FP8: 101 GB of weights per GPU
    ],
)
def test_405b_on_every_system(gpu_gb: float, tp: int, weight: float, level: str):
    """batch 512 and an output of 684 tokens are illustrative limits, not a recipe's (no 405B recipe ships)."""
    fit = memory_fit(
        L405,
        gpu_gb=gpu_gb,
        weight_bytes=weight,
        kv_bytes=1,
        tp=tp,
        pp=1,
        batch=512,
        max_seq_len=20_000,
        typical_tokens=684,
    )
    assert fit.level == level, fit.detail()
    assert fit.weights_gb == pytest.approx(405.85 * weight / tp, rel=1e-3)


def test_no_model_shape_says_the_kv_cache_was_not_sized():
    fit = memory_fit(
        ModelShape(68.98e9), gpu_gb=80.0, weight_bytes=1, kv_bytes=1, tp=2, pp=1, batch=896, max_seq_len=2048
    )
    assert fit.level == "PASS" and "KV cache not sized" in fit.detail() and fit.pool_tokens is None


def test_405b_stage_weights_count_the_embedding_where_it_lives():
    """gpu-path-check-3 §4: NVFP4 layers split over the GPUs, the 16-bit embedding whole on each first-stage GPU
    (not vocab-parallel), the 16-bit lm_head split over the last stage's tensor-parallel GPUs."""
    from repro.core.feasibility import stage_weights_gb

    shape = ModelShape(L405.params, L405.layers, L405.kv_heads, L405.head_dim, vocab=128256, hidden=16384)
    emb = 128256 * 16384 * 2 / GB
    layers = (L405.params - 2 * 128256 * 16384) * 0.5625 / 4 / GB
    assert emb == pytest.approx(4.2, abs=0.01) and layers == pytest.approx(56.5, abs=0.1)
    assert stage_weights_gb(shape, 0.5625, 2, 2, 2.0) == pytest.approx(layers + emb)  # stage 0: 60.7
    assert stage_weights_gb(shape, 0.5625, 4, 1, 2.0) == pytest.approx(layers + emb + emb / 4)  # TP4: 61.7
    assert round(stage_weights_gb(shape, 0.5625, 2, 2, 2.0), 1) == 60.7
    assert round(stage_weights_gb(shape, 0.5625, 4, 1, 2.0), 1) == 61.7
    assert stage_weights_gb(L405, 0.5625, 2, 2, 2.0) == pytest.approx(L405.params * 0.5625 / 4 / GB)  # no vocab


def test_the_405b_pool_holds_prompts_and_outputs_not_outputs_only():
    """With prompts of ~10k tokens (synthetic here; doctor reads the prepared dataset's own input_lens.npy) the KV
    pool of a TP2xPP2 GPU, ~1.80 M tokens, holds ~170 sequences of the 2,048 the engine was built for."""
    from repro.core.feasibility import recipe_memory_fit
    from repro.core.recipes import get_recipe

    recipe = get_recipe("nd-gb200-v6-405b")
    without = recipe_memory_fit(recipe, 186.0)
    assert without is not None and without.level == "PASS" and "prompts not counted" in without.detail()
    fit = recipe_memory_fit(recipe, 186.0, input_tokens=(10_000.0, "test prompts"))
    assert fit is not None and fit.pool_tokens == pytest.approx(1.80e6, rel=0.01)
    assert fit.typical_tokens == pytest.approx(10_000 + 684.68)
    assert fit.sequences_at_once == fit.pool_tokens // (10_000 + 684.68) and 160 < fit.sequences_at_once < 180
    assert fit.level == "WARN" and fit.weights_gb == pytest.approx(60.7, abs=0.05)
    text = fit.detail()
    head = f"{fit.sequences_at_once} sequences of 10,685 tokens fit at once (mean prompt 10,000 from test prompts"
    assert head in text
    assert "the engine batches at most" in text and "of the client's 256 in flight per server" in text
    server = recipe_memory_fit(recipe.deployment("Server"), 186.0, input_tokens=(10_000.0, "test prompts"))
    assert server is not None and server.weights_gb == pytest.approx(61.7, abs=0.05)
    assert server.kv_bytes_per_token == fit.kv_bytes_per_token == 2 * 63 * 4 * 128  # TP2xPP2 and TP4 alike
