"""Inference backends behind one small interface (base.py), registered here by name: sim, hf, trtllm.

Each backend module imports only base.py; this package is the one place that knows them all.
"""

from __future__ import annotations

from typing import Any

from repro.core.errors import InputError
from repro.run.backends.base import Backend, Request, Sink

NAMES = ("sim", "hf", "trtllm")

__all__ = ["Backend", "Request", "Sink", "make_backend", "recipe_backend_name"]


def recipe_backend_name(recipe_backend: str) -> str:
    return "trtllm" if recipe_backend.startswith("trtllm") else recipe_backend


def make_backend(
    name: str,
    *,
    recipe: Any,
    dataset: Any,
    model_dir: Any = None,
    rate_tokens_per_s: float | None = None,
    endpoints: list[str] | None = None,
    **kw: Any,
) -> Backend:
    if name == "sim":
        from repro.run.backends.sim import SimBackend

        return SimBackend(dataset.output_lens, rate_tokens_per_s=rate_tokens_per_s, **kw)
    if name == "hf":
        from repro.run.backends.hf import HFBackend

        return HFBackend(model_dir, **kw)
    if name == "trtllm":
        from repro.run.backends.trtllm import DEFAULT_CONCURRENCY, TrtllmBackend, endpoints_for

        trt = getattr(recipe, "trtllm", None)
        kw.setdefault("max_concurrency", trt.gpu_batch_size if trt is not None else DEFAULT_CONCURRENCY)
        return TrtllmBackend(endpoints or endpoints_for(recipe), **kw)
    raise InputError(
        f"Unknown backend '{name}'; choose one of {', '.join(NAMES)}.", "`repro run offline --backend sim`"
    )
