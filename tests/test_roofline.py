"""The roofline bound, computed by hand from the documented formula and the recipe fields."""

from __future__ import annotations

import pytest

from repro.core.recipes import get_recipe
from repro.report.roofline import MEAN_INPUT_TOKENS, kv_bytes_per_token, roofline


def test_kv_bytes_for_llama2_70b_gqa() -> None:
    assert kv_bytes_per_token(1) == 80 * 8 * 128 * 2 == 163_840
    assert kv_bytes_per_token(2) == 327_680


def test_gb300_bound_by_hand() -> None:
    roof = roofline(get_recipe("nd-gb300-v6"), measured_per_gpu=15_200.0, output_tokens=280.0)
    weights = 70e9 * 4.5 / 8
    context = MEAN_INPUT_TOKENS + 140.0
    expected = 8.0e12 / (weights / 2048 + context * 163_840)
    assert roof is not None
    assert roof.bound_tokens_per_s == pytest.approx(expected)
    assert roof.fraction == pytest.approx(15_200.0 / expected)
    assert "bound = BW / (W / B + C x KV)" in roof.explanation and "B = 2048" in roof.explanation


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
    assert roof is not None and roof.weight_bytes == pytest.approx(70e9 / recipe.trtllm.tp_size)


def test_demo_has_no_bound() -> None:
    assert roofline(get_recipe("demo"), 10.0) is None
