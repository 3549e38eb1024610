"""The roofline bound, computed by hand from the documented formula and the recipe fields."""

from __future__ import annotations

import pytest

from repro.core.benchmarks import load_benchmark
from repro.core.recipes import get_recipe
from repro.report.roofline import flops_per_output_token, kv_bytes_per_token, model_shape, roofline

LLAMA2_BENCH = load_benchmark("llama2-70b-99")
LLAMA2 = model_shape(LLAMA2_BENCH, LLAMA2_BENCH.model)  # the shape its module (core/families/llama2_70b.py) reads
P70 = 68_976_648_192  # 80 x (2 x 8192^2 + 2 x 8192 x 1024 + 3 x 8192 x 28672 + 2 x 8192) + 2 x 32000 x 8192 + 8192
MEAN_INPUT_TOKENS = 222.33  # the llama2-70b benchmark file's mean prompt of the published set (source openorca-lengths)


def test_kv_bytes_for_llama2_70b_gqa() -> None:
    assert LLAMA2 is not None
    assert kv_bytes_per_token(1, LLAMA2) == 80 * 8 * 128 * 2 == 163_840
    assert kv_bytes_per_token(2, LLAMA2) == 327_680
    assert LLAMA2.params == LLAMA2.active == P70


def test_405b_bound_uses_the_405b_model_and_measured_lengths() -> None:
    """A 405B recipe's roofline: 405.85e9 parameters, 126 layers x 8 KV heads x 128; no assumed prompt length."""
    b405 = load_benchmark("llama3.1-405b")
    m405 = model_shape(b405, b405.model)
    assert m405 is not None and m405.params == 405_853_388_800
    assert kv_bytes_per_token(1, m405) == 126 * 8 * 128 * 2
    per_token = 2 * 405_853_388_800 * (9000 + 650) + 4 * 126 * 16384 * (9000**2 / 2 + 650 * (9000 + 650 / 2))
    assert flops_per_output_token(9000, 650, m405) == pytest.approx(per_token / 650)


def test_gb300_bound_by_hand() -> None:
    roof = roofline(get_recipe("nd-gb300-v6"), measured_per_gpu=15_200.0, output_tokens=280.0)
    weights = P70 * 4.5 / 8
    context = MEAN_INPUT_TOKENS + 140.0
    expected = 8.0e12 / (weights / 2048 + context * 163_840)
    assert roof is not None
    assert roof.hbm_tokens_per_s == pytest.approx(expected)
    assert "bound = BW / (W / B + C x KV)" in roof.explanation and "B = 2048" in roof.explanation


def test_gb300_ceiling_is_the_tensor_core_bound_not_the_hbm_one() -> None:
    """Issue 27: 15.2k tokens/s per GPU read as 28% of an HBM-only bound (3.6x headroom that does not exist)."""
    roof = roofline(get_recipe("nd-gb300-v6"), measured_per_gpu=15_200.0)
    assert roof is not None and roof.limiter == "compute"
    i, o = MEAN_INPUT_TOKENS, 294.45
    per_token = 2 * P70 * (i + o) + 4 * 80 * 8192 * (i * i / 2 + o * (i + o / 2))
    assert flops_per_output_token(i, o, LLAMA2) == pytest.approx(per_token / o)
    assert roof.compute_tokens_per_s == pytest.approx(15_000e12 / (per_token / o))
    assert roof.bound_tokens_per_s == roof.compute_tokens_per_s < roof.hbm_tokens_per_s
    assert roof.fraction == pytest.approx(15_200.0 / roof.compute_tokens_per_s)  # of the compute bound, not HBM's
    assert "datasheet" in roof.peak_source and "benchmark file" in roof.input_source


def test_measured_lengths_replace_the_assumed_ones() -> None:
    roof = roofline(
        get_recipe("nd-h200-v5"), 4_000.0, 290.0, input_tokens=500.0, input_source="measured: 24,576 prompts"
    )
    assert roof is not None and roof.input_tokens == 500.0 and roof.output_tokens == 290.0
    assert roof.input_source.startswith("measured") and "I = 500.0" in roof.explanation
    assert roof.compute_tokens_per_s == pytest.approx(1979e12 / flops_per_output_token(500.0, 290.0, LLAMA2))


def test_fp16_kv_cache_doubles_kv_bytes_and_bound_grows_with_batch() -> None:
    gb200 = roofline(get_recipe("nd-gb200-v6"))
    assert gb200 is not None and gb200.kv_bytes == 2.0 and gb200.fraction is None
    assert (
        gb200.bound_at(64)
        < gb200.bound_at(2048)
        < gb200.bandwidth_bytes_s / (gb200.context_tokens * gb200.kv_bytes_per_token)
    )


def test_h100_fp8_tensor_parallel_splits_weights() -> None:
    recipe = get_recipe("dgx-h100")
    roof = roofline(recipe)
    assert roof is not None and roof.weight_bytes == pytest.approx(P70 / recipe.trtllm.tp_size)


def test_demo_has_no_bound() -> None:
    assert roofline(get_recipe("demo"), 10.0) is None


def test_405b_recipe_roofline_by_hand_from_measured_lengths() -> None:
    """nd-gb200-v6-405b: 405.85e9 parameters at NVFP4 (4.5 bits) over TP 2 x PP 2, FP8 KV of 126 layers x 8 x 128;
    the benchmark states no mean prompt, so without a measured input length there is no bound to draw."""
    recipe = get_recipe("nd-gb200-v6-405b")
    assert roofline(recipe, 211.81, 652.6) is None
    roof = roofline(recipe, 211.81, 652.6, input_tokens=9000.0, input_source="measured: 8,313 prompts")
    assert roof is not None
    weights = 405_853_388_800 * 4.5 / 8 / 4
    kv = 126 * 8 * 128 * 2 * 1
    assert roof.weight_bytes == pytest.approx(weights) and roof.kv_bytes_per_token == kv
    assert roof.hbm_tokens_per_s == pytest.approx(8.0e12 / (weights / 2048 + (9000.0 + 652.6 / 2) * kv))
    assert "KV = 126 x 8 x 128 x 2 x 1 B" in roof.explanation and "L x D = 126 x 16384" in roof.compute_explanation
