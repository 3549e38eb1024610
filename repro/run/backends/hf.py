"""Hugging Face transformers on CPU or GPU: an fp16 baseline on a GPU VM, and the demo with `--backend hf` (its own
backend is numpy.py: no torch). Needs the `hf` extra.

Greedy decoding in batches with left padding; the first decoding step reports every sample's first
token, so TTFT and TPOT are measured, not inferred. On GPUs the model is spread over every visible GPU
with `device_map="auto"` (as the MLCommons reference SUT loads Llama-2-70B), after checking that their
free memory can hold the weights: 70B in fp16 is ~138 GB, more than one H100 or H200.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from repro.core.errors import InputError
from repro.run.backends.base import BackendContext, BatchQueueBackend, Request

WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.pt")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "int8": 1}
HEADROOM = 0.15
GB = 1e9


def weight_bytes(model_dir: Path, dtype: str) -> int:
    """The weights' size once loaded in `dtype`: the files' size, rescaled from the dtype they were saved in."""
    import json

    model_dir = Path(model_dir)
    files = [f for g in ("*.safetensors", "*.bin", "*.pt") for f in model_dir.glob(g)]
    if any(f.suffix == ".safetensors" for f in files):
        files = [f for f in files if f.suffix == ".safetensors"]
    on_disk = sum(f.stat().st_size for f in files)
    try:
        saved = json.loads((model_dir / "config.json").read_text()).get("torch_dtype") or "float16"
    except (OSError, ValueError):
        saved = "float16"
    return int(on_disk * DTYPE_BYTES.get(dtype, 2) / DTYPE_BYTES.get(str(saved), 2))


def check_gpu_memory(model_dir: Path, dtype: str, free_per_gpu: list[int]) -> int:
    """Refuse before loading when the visible GPUs together cannot hold the weights plus ~15% for activations."""
    need = weight_bytes(model_dir, dtype)
    have = sum(free_per_gpu)
    if need * (1 + HEADROOM) > have:
        raise InputError(
            f"{Path(model_dir).name} needs about {need / GB:,.0f} GB of GPU memory in {dtype} "
            f"(+{HEADROOM:.0%} for activations), but the {len(free_per_gpu)} visible GPU(s) have "
            f"{have / GB:,.0f} GB free, so the hf backend cannot hold it.",
            "use the recipe's TensorRT-LLM backend (`repro run offline` without --backend hf), or a VM with more GPUs",
        )
    return need


def check_model_dir(model_dir: Path) -> None:
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise InputError(f"{model_dir}: the model folder does not exist.", "`repro setup`")
    if not (model_dir / "config.json").exists():
        raise InputError(
            f"{model_dir}: no config.json; this is not a Hugging Face model folder.", "`repro setup --force`"
        )
    if not any(any(model_dir.glob(g)) for g in WEIGHT_GLOBS):
        raise InputError(
            f"{model_dir}: the model folder has no weights (*.safetensors or *.bin).", "`repro setup --force`"
        )


def cpu_threads() -> int:
    """Torch threads on CPU: REPRO_CPU_THREADS, else 1. The demo's ops are too small to split, and OpenMP's spinning
    workers then fight LoadGen's and the harness's threads for the cores: on 2 cores the demo Server run at 2 q/s
    completed 0.51 q/s with 2 threads and 2.0 with 1 (benchmarks/demo_server_threads.py)."""
    import os

    raw = os.environ.get("REPRO_CPU_THREADS", "").strip()
    try:
        return max(1, int(raw)) if raw else 1
    except ValueError:
        raise InputError(
            f"REPRO_CPU_THREADS={raw!r}: give a whole number of threads.", "unset REPRO_CPU_THREADS"
        ) from None


class HFBackend(BatchQueueBackend):
    join_timeout = 30.0
    name = "hf"

    def __init__(
        self, model_dir: Path, *, batch_size: int = 64, device: str | None = None, dtype: str | None = None
    ) -> None:
        super().__init__(batch_size)
        check_model_dir(model_dir)
        self.model_dir = Path(model_dir)
        self.device = device
        self.dtype = dtype
        self.model: Any = None
        self.eos_id: int | None = None
        self.pad_id = 0

    def load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        self.device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cpu":
            torch.set_num_threads(cpu_threads())
        name = self.dtype or ("float16" if self.device == "cuda" else "float32")
        dtype = getattr(torch, name)
        kwargs: dict[str, Any] = {"dtype": dtype}
        if self.device == "cuda":
            free = [torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())]
            check_gpu_memory(self.model_dir, name, free)
            try:
                import accelerate  # noqa: F401 - device_map needs it
            except ImportError:
                raise InputError(
                    "Spreading the model over the GPUs needs the `accelerate` package.", "`pip install 'repro[hf]'`"
                ) from None
            kwargs["device_map"] = "auto"
        try:
            model: Any = AutoModelForCausalLM.from_pretrained(self.model_dir, **kwargs)
            self.model = (model if self.device == "cuda" else model.to(self.device)).eval()
        except (OSError, ValueError) as exc:
            raise InputError(
                f"{self.model_dir}: the model cannot be loaded ({str(exc).splitlines()[0]}).", "`repro setup --force`"
            ) from None
        cfg = self.model.generation_config
        eos = cfg.eos_token_id if cfg.eos_token_id is not None else self.model.config.eos_token_id
        self.eos_id = eos[0] if isinstance(eos, list) else eos
        pad = cfg.pad_token_id if cfg.pad_token_id is not None else self.model.config.pad_token_id
        self.pad_id = int(pad if pad is not None else (self.eos_id or 0))

    def start(self, sink) -> None:
        if self.model is None:
            self.load()
        super().start(sink)

    def _generate(self, batch: list[Request]) -> None:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        assert self.sink is not None
        width = max(len(r.input_ids) for r in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, r in enumerate(batch):
            n = len(r.input_ids)
            ids[row, width - n :] = torch.as_tensor(np.asarray(r.input_ids, dtype=np.int64))
            mask[row, width - n :] = 1
        sink, stopping, eos = self.sink, self._stopping, self.eos_id
        answered: set[int] = set()  # rows completed at their EOS, before the batch ends

        class _Events(StoppingCriteria):
            reported = False
            go_on: Any = None  # one all-False tensor per batch, not one per decoding step

            def __call__(self, input_ids, scores, **kw):
                if not self.reported:
                    self.reported = True
                    sink.first_tokens(
                        [(r.id, int(t)) for r, t in zip(batch, input_ids[:, width].tolist(), strict=False)]
                    )
                if eos is not None:
                    # A sample is answered when it ends, as a serving engine answers it, not when the longest
                    # sample of its batch ends: otherwise a 2-token answer reports the whole batch as its TPOT.
                    ended = (input_ids[:, -1] == eos).nonzero().flatten().tolist()
                    made = input_ids.shape[1] - width
                    early = [row for row in ended if row not in answered and made <= batch[row].max_tokens]
                    if early:
                        answered.update(early)
                        sink.completed(
                            [(batch[row].id, input_ids[row, width:].cpu().numpy().astype(np.int32)) for row in early]
                        )
                if stopping.is_set():
                    return torch.ones((input_ids.shape[0],), dtype=torch.bool, device=input_ids.device)
                if self.go_on is None or self.go_on.shape[0] != input_ids.shape[0]:
                    self.go_on = torch.zeros((input_ids.shape[0],), dtype=torch.bool, device=input_ids.device)
                return self.go_on

        max_new = max(r.max_tokens for r in batch)
        with torch.inference_mode():
            first = self.model.device
            out = self.model.generate(
                input_ids=ids.to(first),
                attention_mask=mask.to(first),
                max_new_tokens=max_new,
                min_new_tokens=1,
                do_sample=False,
                eos_token_id=self.eos_id,
                pad_token_id=self.pad_id,
                stopping_criteria=StoppingCriteriaList([_Events()]),
            )
        gen = out[:, width:].cpu().numpy().astype(np.int32)
        done = []
        for row, r in enumerate(batch):
            if row in answered:
                continue
            toks = gen[row, : r.max_tokens]
            if self.eos_id is not None:
                hits = np.flatnonzero(toks == self.eos_id)
                if hits.size:
                    toks = toks[: hits[0] + 1]
            done.append((r.id, np.ascontiguousarray(toks[: max(1, len(toks))])))
        sink.completed(done)

    def describe(self) -> dict[str, Any]:
        spread = sorted({str(d) for d in (getattr(self.model, "hf_device_map", None) or {}).values()})
        return {
            "backend": self.name,
            "model_dir": str(self.model_dir),
            "device": self.device,
            "batch_size": self.batch_size,
            "devices": spread or [self.device],
        }


def create(ctx: BackendContext) -> HFBackend:
    if ctx.model_dir is None:
        raise InputError("The hf backend needs a model folder.", "`repro setup`")
    return HFBackend(ctx.model_dir)
