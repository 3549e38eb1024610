"""A deterministic simulator: replays each sample's reference output length at a given token rate.

It rehearses the whole flow without a model and measures the harness itself (rate=None means as fast
as possible). Admitted samples get their first token at once, as under continuous batching; completions
follow a virtual clock so aggregate throughput is exactly the rate: a sample's work starts when the one before it
ended or when it arrived, whichever is later, never at the moment a late wake-up saw it (that lost every late
wake-up for good: 24,500 tokens/s ran at about 23,200 on a loaded machine). Every run it drives is labelled simulated.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from repro.run.backends.base import BackendContext, Request, WorkerBackend

CHUNK = 512
FILL_TOKEN = 29889


class SimBackend(WorkerBackend):
    name = "sim"
    label = "simulated"

    def __init__(
        self, output_lens: np.ndarray, *, rate_tokens_per_s: float | None = None, fail_after: int | None = None
    ) -> None:
        super().__init__()
        self.output_lens = np.asarray(output_lens, dtype=np.int64)
        self._lens: list[int] = self.output_lens.tolist()  # read once per sample; numpy scalars cost 2x
        self.rate = rate_tokens_per_s if rate_tokens_per_s and rate_tokens_per_s > 0 else None
        self.fail_after = fail_after
        self._cache: dict[int, np.ndarray] = {}
        self._done = 0

    def submit(self, requests: Sequence[Request]) -> None:
        arrived = time.monotonic()
        for i in range(0, len(requests), CHUNK):
            self._queue.put((arrived, requests[i : i + CHUNK]))

    def _tokens(self, n: int) -> np.ndarray:
        arr = self._cache.get(n)
        if arr is None:
            arr = self._cache[n] = np.full(n, FILL_TOKEN, dtype=np.int32)
        return arr

    def _work(self) -> None:
        assert self.sink is not None
        clock = time.monotonic()
        while True:
            item = self._queue.get()
            if item is None or self._stopping.is_set():
                return
            arrived, batch = item
            self.sink.first_tokens([(r.id, FILL_TOKEN) for r in batch])
            done: list[tuple[int, np.ndarray]] = []
            lens, tokens = self._lens, self._tokens
            for r in batch:
                n = max(1, min(lens[r.index], r.max_tokens))
                if self.rate is not None:
                    clock = max(clock, arrived) + n / self.rate
                    wait = clock - time.monotonic()
                    if wait > 0.002:
                        if done:
                            self.sink.completed(done)
                            done = []
                        if self._stopping.wait(wait):
                            return
                if self.fail_after is not None and self._done >= self.fail_after:
                    raise RuntimeError(f"simulated backend failure after {self._done} samples")
                done.append((r.id, tokens(n)))
                self._done += 1
            self.sink.completed(done)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "rate_tokens_per_s": self.rate}


def create(ctx: BackendContext) -> SimBackend:
    return SimBackend(ctx.dataset.output_lens, rate_tokens_per_s=ctx.sim_rate)
