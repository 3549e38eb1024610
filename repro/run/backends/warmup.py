"""NVIDIA's warm-up, done as NVIDIA's harness does it, before LoadGen starts: a burst of random queries to every server.

egmsft/AI-benchmarking-guide @ 3371c0c3, `Azure_Results/1M_ND_GB300_v6_Inference/code/llmlib/` (GB300G), the harness
Azure's ND GB300 v6 result ran:
- `server.py:114-136` `LLMServer.warm_up`: `max(core.get_num_warmup_iters())` queries, each of random token ids
  `np.random.randint(1, 100)` (ids 1-99) and a random length `np.random.randint(90, 300)` (90-299 tokens);
- `cores/base.py:458-460`: `get_num_warmup_iters()` is 10 (the endpoint core does not override it);
- `warmup.py:89-133` `WarmupManager.warmup`: after the health checks, every core gets the same list at once, in
  parallel across cores, and the harness waits for all of them; `cores/base.py:126-140` `warmup_mode` keeps their
  answers from LoadGen;
- the queries go through the core's own request path (`cores/http_async_client.py:655-690`): the run's max_tokens
  and sampling, streamed exactly when the run streams.
repro's readiness probe (one 10-token request per server) is NVIDIA's health check; this is the burst after it. It is
labelled in the run's log and run.json (`backend_stats.warmup`), answered to nobody (LoadGen has not started, so
none of it is timed), and bounded: each query by the client's stall deadlines and the whole burst by 1.5 of them,
or the run stops there, naming it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from repro.run.backends.base import Request
from repro.run.backends.http_client import BackendError, Endpoint

WARMUP_QUERIES = 10
"""Per server: `get_num_warmup_iters()` of NVIDIA's endpoint core (GB300G `code/llmlib/cores/base.py:458-460`)."""
WARMUP_INPUT_TOKENS = (90, 300)
"""`np.random.randint(90, 300)`: prompt lengths 90 to 299 tokens (GB300G `code/llmlib/server.py:129`)."""
WARMUP_TOKEN_IDS = (1, 100)
"""`np.random.randint(1, 100, ...)`: token ids 1 to 99 (GB300G `code/llmlib/server.py:129`)."""
SOURCE = (
    "egmsft/AI-benchmarking-guide @ 3371c0c3 Azure_Results/1M_ND_GB300_v6_Inference/code/llmlib/server.py:114-136, "
    "warmup.py:89-133, cores/base.py:458-460"
)
BACKSTOP = 1.5
"""The burst's deadline, in stall timeouts: beyond each query's own, which names the stall more precisely."""
LABEL = "warm-up (NVIDIA's burst; not timed by LoadGen)"


@dataclass(frozen=True)
class Warmup:
    """The burst one run sends: `queries` random prompts to every server, each asking for `max_tokens`."""

    max_tokens: int
    queries: int = WARMUP_QUERIES
    seed: int = 0
    """NVIDIA draws from numpy's global generator; repro draws the same distribution from a fixed seed, so two runs
    send the same burst."""

    def prompts(self) -> list[np.ndarray]:
        rng = np.random.default_rng(self.seed)
        return [
            rng.integers(*WARMUP_TOKEN_IDS, size=int(rng.integers(*WARMUP_INPUT_TOKENS))).astype(np.int32)
            for _ in range(self.queries)
        ]

    def describe(self, servers: int) -> str:
        lo, hi = WARMUP_INPUT_TOKENS
        return (
            f"{LABEL}: {self.queries} random queries of {lo}-{hi - 1} tokens to each of {servers} server(s) at once, "
            f"up to {self.max_tokens:,} tokens each"
        )


async def warm_up(backend: Any, plan: Warmup) -> dict[str, Any]:
    """Send the burst to every server and wait for every answer, within BACKSTOP stall timeouts; returns its record.
    `backend` is the TrtllmBackend whose request path the burst takes (typed loosely: that module imports this one).

    An answer the server refuses or breaks off ends the run as it would during the run (the message says it was
    the warm-up); a burst not done within the deadline ends it as a stall."""
    prompts = plan.prompts()
    eps = list(backend._eps)
    say = backend.on_warmup or (lambda _line: None)
    say(plan.describe(len(eps)))
    t0 = time.monotonic()
    jobs = {asyncio.create_task(_one(backend, ep, ids, plan.max_tokens)): ep for ep in eps for ids in prompts}
    # Each query has the client's own stall deadlines (first byte, every byte after), which name what stalled; the
    # burst's own deadline is a backstop a little beyond them, so it never hides their more precise message.
    backstop = backend.client.stall_s * BACKSTOP
    try:
        done, pending = await asyncio.wait(jobs, timeout=backstop, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        await _settle(jobs)
    failed = [task for task in done if task.exception() is not None]
    if failed:
        exc = failed[0].exception()
        if isinstance(exc, BackendError):
            exc.message = f"warm-up, before LoadGen started: {exc.message}"
            exc.args = (exc.message,)
        raise exc  # type: ignore[misc]
    if pending:
        waiting = sorted({jobs[task].url for task in pending})
        raise BackendError(
            f"The warm-up ({plan.queries} queries per server) was not answered within "
            f"{backend.time_scale.describe(backstop)} by {', '.join(waiting)} (stall timeout); the run "
            "stopped before LoadGen started.",
            "check the server log, or raise the limit with --stall-timeout SECONDS",
            kind="stall",
        )
    seconds = round(time.monotonic() - t0, 3)
    say(f"{LABEL}: {len(jobs)} answered in {seconds:g} s")
    lo, hi = WARMUP_INPUT_TOKENS
    return {
        "label": LABEL,
        "queries_per_server": plan.queries,
        "servers": len(eps),
        "answered": len(jobs),
        "input_tokens": [lo, hi - 1],
        "token_ids": [WARMUP_TOKEN_IDS[0], WARMUP_TOKEN_IDS[1] - 1],
        "prompt_tokens": sum(len(p) for p in prompts) * len(eps),
        "max_tokens": plan.max_tokens,
        "stream": backend.stream,
        "seconds": seconds,
        "seed": plan.seed,
        "source": SOURCE,
    }


async def _settle(jobs: dict[asyncio.Task[None], Endpoint]) -> None:
    """Cancel what is still running and collect every outcome, so no query's error is left unread (asyncio would
    print it, with its traceback, when the task is collected)."""
    for task in jobs:
        task.cancel()
    await asyncio.gather(*jobs, return_exceptions=True)


async def _one(backend: Any, ep: Endpoint, ids: np.ndarray, max_tokens: int) -> None:
    """One warm-up query through the run's own request path; its answer goes nowhere."""
    request = Request(-1, -1, ids, max_tokens)
    if backend.stream:
        async for _ in backend._events(ep, request):
            pass
        return
    body = backend.payload(ep.form, ids.tolist(), max_tokens, model=ep.model or backend.model or "")
    # read to the end under the client's bounds and deadlines, keeping none of it: ten answers of up to the body
    # bound each would otherwise sit in memory at once
    async for _ in backend.client.request(ep, "POST", backend.form_path(ep.form), body):
        pass
