"""OpenAI-compatible inference servers over HTTP (trtllm-serve first): one endpoint per server, round robin.

The request matches NVIDIA's MLPerf harness (`trtllm_endpoint` core): `prompt_token_ids`, `max_tokens`,
`min_tokens 1`, greedy (`top_k 1`, `top_p 0.001`); Offline posts without streaming, LoadGen's Server scenario
(Server and Interactive, core/scenarios.py) streams (SSE) so first-token times are real. The HTTP/1.1 client is
`repro.run.backends.http_client`; at most `max_concurrency` requests (the recipe's `client_concurrency`, else its
batch size) are in flight per endpoint, each on its own connection, and a server that sends nothing for the recipe's
derived stall deadline (`stall_timeout_s`) ends the run.

Output tokens: trtllm-serve's chat choice carries text only (`ChatCompletionResponseChoice` in
`tensorrt_llm/serve/openai_protocol.py` has no `token_ids`), so the text is re-tokenized with the model's
own tokenizer, as NVIDIA's harness does. The ids logged and the count reported to LoadGen are the same
array; the server's `usage.completion_tokens` is kept beside them and every disagreement is counted.

Other OpenAI-compatible servers (`transformers serve`, strict OpenAI clones) refuse TensorRT-LLM's extensions
with 400/422, so the request form is negotiated once at readiness, in this order: TensorRT-LLM's (unchanged);
OpenAI completions with the prompt as token ids (the OpenAI API allows token arrays); OpenAI completions with the
prompt decoded to text (the MLPerf prompt already carries Llama-2's template, so none is added). Each fallback is
recorded with the server's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from repro.core.errors import InputError
from repro.core.fmt import token_count_comparison
from repro.core.timescale import REAL_TIME, TimeScale
from repro.run.backends.base import Backend, BackendContext, Request
from repro.run.backends.http_client import (
    CONNECTION_KINDS,
    FORM_OPENAI_IDS,
    FORM_OPENAI_TEXT,
    FORM_TRTLLM,
    FORMS,
    RETRYABLE,
    STALL_TIMEOUT_S,
    BackendError,
    Endpoint,
    HttpClient,
    build_openai_payload,
    build_payload,
    text_of,
    token_ids_of,
    usage_count,
)
from repro.run.backends.warmup import Warmup, warm_up

HEALTH_TIMEOUT_S = 300.0
LOCAL_START_S = 60.0
"""A scaled run's readiness wait is never below this: a stand-in container starting on a busy 2-core host takes
seconds that no time scale models."""
BACKOFF_START_S = 0.25
BACKOFF_MAX_S = 5.0
DEFAULT_CONCURRENCY = 2048
FORM_TITLES = {
    FORM_TRTLLM: "TensorRT-LLM's form",
    FORM_OPENAI_IDS: "OpenAI completions with token ids",
    FORM_OPENAI_TEXT: "OpenAI completions with text",
}
PROBE_IDS = (1, 2, 3)
PROBE_TEXT = "Hello"
CUT_SLACK_TOKENS = 16  # ids past max_tokens that a text prefix must hold, so the cut cannot change the first ones
BARE_MODEL = "default"
"""The request's `model` for a client built without one when the server names none (GET /v1/models): trtllm-serve
serves one model and ignores the field. `create` gives the recipe's repo id instead, of whatever benchmark."""
MAX_PIECE_CHARS = 64  # the longest vocabulary piece believed, when sizing a prefix (Llama-2's is 16)


STALL_SAFETY = 2.0
"""The derived stall deadline is this many times the longest answer's expected wait (the recipe's Offline rate is a
published figure this machine may not reach, and a cold server's first wave is slower)."""


def readiness_wait_s(health_timeout_s: float, time_scale: TimeScale) -> float:
    """The readiness wait here: the real machine's scaled, never below LOCAL_START_S (a stand-in's container
    starting on this host is not part of the machine modelled)."""
    return time_scale.deadline(health_timeout_s, floor_s=LOCAL_START_S)


def client_concurrency(recipe: Any) -> int:
    """Requests kept in flight per server: the recipe's `trtllm.client_concurrency`, else its batch size."""
    trt = getattr(recipe, "trtllm", None)
    return int(trt.requests_in_flight) if trt is not None else DEFAULT_CONCURRENCY


def stall_timeout_s(recipe: Any) -> float:
    """Seconds a server may send no byte before the run ends as stalled, derived from the recipe (issue 42 F1).

    An unstreamed trtllm-serve answer sends its status line only once generation has ended (NVIDIA/TensorRT-LLM
    @ 00057725 `tensorrt_llm/serve/openai_server.py`: the whole result is awaited, then one JSONResponse), so an Offline
    request's "no byte" lasts its whole time with the server. With C requests kept in flight on each of n servers
    completing X samples/s per VM, each spends C x n / X seconds there on average (Little's law); the longest answer,
    max_tokens against the benchmark's mean tokens per sample, holds its slot max_tokens / mean times as long. The
    deadline is STALL_SAFETY times that, and never below STALL_TIMEOUT_S (600 s). Llama-3.1-405B at 256 in flight:
    2 x 256 x 1 / 1.17 x 2,000 / (the benchmark file's tokens_per_sample reference) = 1,278 s; at 2,048 the first wave
    waited ~1,580 s on average, past 600 s from request ~780 on (Azure's published run: 1.298 samples/s, latencies
    26 s to a mean of 3,303 s, AZ51
    `closed/Azure/results/ND_GB200_v6/llama3.1-405b/Offline/performance/run_1/mlperf_log_summary.txt`). NVIDIA's
    client has no timeout at all (egmsft/AI-benchmarking-guide @ 3371c0c3
    `Azure_Results/1M_ND_GB300_v6_Inference/code/llmlib/cores/http_async_client.py:615`, `ClientTimeout(total=None)`);
    repro keeps one, so a dead server still ends the run. `--stall-timeout` overrides this.
    """
    trt = getattr(recipe, "trtllm", None)
    if trt is None:
        return STALL_TIMEOUT_S
    mean_tokens = float(recipe.bench.accuracy.tokens_per_sample.reference)
    longest = max(1.0, recipe.loadgen.max_tokens / mean_tokens)
    # n: the servers the Offline rate is spread over: a VM's, or a system's instances (trtllm.system: the rate is
    # the whole system's, one LoadGen over every server)
    system = getattr(trt, "system", None)
    servers = (system.instances or system.front_ends) if system is not None else trt.servers_per_vm
    wait = client_concurrency(recipe) * servers / recipe.loadgen.offline_expected_qps * longest
    return float(round(max(STALL_TIMEOUT_S, STALL_SAFETY * wait)))


CLIENT_TOKENS_PER_PROCESS_S = 25_000.0
"""Tokens/s one client process is given: one streamed about 31,000 on a core of its own (benchmarks/rack_client.py,
docs/BENCHMARKS.md "One client for a rack"), less a fifth for LoadGen and the SUT beside it in the run's process."""


def client_processes(
    recipe: Any, endpoints: int, override: int | None = None, cores: int | None = None
) -> tuple[int, str]:
    """How many processes the client runs in (run/backends/spread.py), and why: --client-processes, else the
    recipe's expected tokens/s (offline_expected_qps x the benchmark's tokens_per_sample) over
    CLIENT_TOKENS_PER_PROCESS_S, at most one per server and one fewer than this host's cores (LoadGen's process
    keeps one)."""
    if override:
        n = max(1, min(int(override), endpoints))
        return n, "--client-processes" + (f" (at most one per server: {endpoints})" if n < override else "")
    cores = cores or len(os.sched_getaffinity(0))
    expected = float(recipe.loadgen.offline_expected_qps) * float(recipe.bench.accuracy.tokens_per_sample.reference)
    need = math.ceil(expected / CLIENT_TOKENS_PER_PROCESS_S)
    n = max(1, min(need, endpoints, cores - 1))
    return n, (
        f"{expected:,.0f} tokens/s expected / {CLIENT_TOKENS_PER_PROCESS_S:,.0f} per client process = {need}, at most "
        f"one per server ({endpoints}) and one fewer than this host's {cores} cores"
    )


def client_plan(
    recipe: Any, stall_override_s: float | None = None, *, endpoints: int = 1, processes: int | None = None
) -> dict[str, Any]:
    """What the client will do, for the dry run and run.json: requests in flight per server, the stall deadline and
    the client's processes, with where each comes from."""
    trt = getattr(recipe, "trtllm", None)
    own = trt is not None and trt.client_concurrency is not None
    n, why = client_processes(recipe, max(1, endpoints), processes)
    return {
        "processes": n,
        "processes_source": why,
        "requests_in_flight_per_server": client_concurrency(recipe),
        "requests_in_flight_source": "recipe trtllm.client_concurrency"
        if own
        else "recipe trtllm.gpu_batch_size (NVIDIA's default)"
        if trt is not None
        else "default",
        "stall_timeout_s": float(stall_override_s) if stall_override_s else stall_timeout_s(recipe),
        "stall_timeout_source": "--stall-timeout"
        if stall_override_s
        else "derived from the recipe: max(600 s, 2 x in flight x servers / offline_expected_qps x max_tokens / "
        "tokens_per_sample)"
        if trt is not None
        else "default",
    }


def endpoints_for(recipe: Any) -> list[str]:
    """REPRO_TRTLLM_ENDPOINTS (comma-separated URLs) or one local server per GPU from the recipe's base port."""
    env = os.environ.get("REPRO_TRTLLM_ENDPOINTS")
    if env:
        return [e.strip().rstrip("/") for e in env.split(",") if e.strip()]
    t = getattr(recipe, "trtllm", None)
    if t is None:
        raise InputError(
            f"recipe '{getattr(recipe, 'name', '?')}' has no trtllm section, so no server ports are known.",
            "pass `--endpoint URL` or pick `--backend hf|sim`",
        )
    return [f"http://127.0.0.1:{t.base_port + i}" for i in range(t.servers_per_vm)]


@dataclass
class TokenStats:
    """Which count of output tokens LoadGen got, and how far the server's other count disagrees with it.

    LoadGen gets the length of the ids logged (the server's ids, else its re-tokenized text): TEST06 fails any
    other count. The server's `usage.completion_tokens` is the other count, compared sample by sample. The ids
    are clipped at the request's max_tokens, so a server that ignores it cannot inflate tokens/s.
    """

    samples: int = 0
    ids_from_server: int = 0
    ids_from_tokenizer: int = 0
    logged_tokens: int = 0
    server_completion_tokens: int = 0
    samples_without_server_count: int = 0
    count_disagreements: int = 0
    first_token_mismatches: int = 0
    loadgen_tokens: int = 0
    counted_from_ids: int = 0
    counted_from_text: int = 0
    clipped_samples: int = 0
    clipped_tokens: int = 0
    retokenized_clipped: int = 0
    """Answers within max_tokens by the server's usage whose re-tokenized text ran past it (clipped, no lie)."""
    compared_samples: int = 0
    """Samples with both counts: the ids LoadGen got and the server's usage."""
    compared_loadgen_tokens: int = 0
    """LoadGen's count over the samples that also had the other count (the base of differ_pct)."""
    compared_other_tokens: int = 0

    def loadgen_count(self) -> dict[str, Any]:
        """What run.json and the verdict say: the source of LoadGen's count, the other count, and the gap."""
        sources = [
            (n, name)
            for n, name in (
                (self.counted_from_ids, "server token ids"),
                (self.counted_from_text, "re-tokenized text"),
            )
            if n
        ]
        source = sources[0][1] if len(sources) == 1 else " + ".join(f"{name} ({n})" for n, name in sources) or None
        differ = None
        if self.compared_loadgen_tokens:
            differ = round((self.compared_other_tokens / self.compared_loadgen_tokens - 1) * 100, 2)
        return {
            "source": source,
            "tokens": self.loadgen_tokens,
            "other_source": "server usage.completion_tokens" if self.compared_loadgen_tokens else None,
            "other_tokens": self.compared_other_tokens if self.compared_loadgen_tokens else None,
            "other_differs_pct": differ,
            "compared_samples": self.compared_samples,
            "compared_tokens": self.compared_loadgen_tokens if self.compared_loadgen_tokens else None,
            "samples_that_differ": self.count_disagreements,
            "clipped_samples": self.clipped_samples,
            "clipped_tokens": self.clipped_tokens,
        }

    def warnings(self) -> list[str]:
        c = self.loadgen_count()
        out = []
        if self.clipped_samples:
            out.append(
                f"{self.clipped_samples} answer(s) were longer than max_tokens; {self.clipped_tokens:,} token(s) past "
                "it were not counted (the server ignores max_tokens)"
            )
        if self.retokenized_clipped:
            out.append(
                f"{self.retokenized_clipped} answer(s) within max_tokens by the server's usage re-tokenized to more "
                "ids than max_tokens; the ids logged and counted were cut at max_tokens"
            )
        if self.count_disagreements and c["other_differs_pct"] is not None:
            out.append(
                f"token counts disagree in {self.count_disagreements} of {self.samples} samples: "
                + token_count_comparison(c)
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "loadgen_count": self.loadgen_count()}

    @classmethod
    def merged(cls, parts: Sequence[TokenStats]) -> TokenStats:
        """One count over several client processes' (every field is a sum)."""
        out = cls()
        for part in parts:
            for key, value in part.__dict__.items():
                setattr(out, key, getattr(out, key) + value)
        return out


class TrtllmBackend(Backend):
    name = "trtllm"
    close_timeout = 5.0
    """Seconds close() waits to drain idle connections and again for the event loop's thread (less after Ctrl-C)."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        api: str = "chat",
        stream: bool = False,
        scenario: str | None = None,
        model: str | None = None,
        default_model: str = BARE_MODEL,
        max_concurrency: int = DEFAULT_CONCURRENCY,
        tokenizer: Any = None,
        health_timeout_s: float = HEALTH_TIMEOUT_S,
        stall_timeout_s: float = STALL_TIMEOUT_S,
        alive: Callable[[], None] | None = None,
        on_wait: Callable[[str, str, float], None] | None = None,
        time_scale: TimeScale = REAL_TIME,
        warmup: Warmup | None = None,
    ) -> None:
        """`health_timeout_s` and `stall_timeout_s` are the real machine's seconds; `time_scale` (a rehearsal's)
        shrinks both, and the readiness backoff, by its one factor (the readiness wait never below
        LOCAL_START_S: starting a stand-in's container on this host is not part of the machine modelled)."""
        super().__init__()
        if not endpoints:
            raise InputError("No server endpoints given.", "`repro run offline --endpoint http://127.0.0.1:8000`")
        self.urls = [u.rstrip("/") for u in endpoints]
        self.api = api
        self.stream = stream
        self.scenario = scenario or ("Server" if stream else "Offline")
        """The run's scenario, for the commands an error names (Interactive streams as Server does)."""
        self.model = model
        self.served_model = model
        self.default_model = default_model
        self.max_concurrency = max_concurrency
        self.tokenizer = tokenizer
        self.time_scale = time_scale
        self.health_timeout_s = readiness_wait_s(health_timeout_s, time_scale)
        self.alive = alive
        self.on_wait = on_wait
        self.warmup = warmup
        """NVIDIA's warm-up burst, sent once every server is ready (None: none, as for a tune probe)."""
        self.on_warmup: Callable[[str], None] | None = None
        """Says the warm-up's start and end (the harness prints them as `[repro]` lines)."""
        self.warmup_record: dict[str, Any] | None = None
        self.client = HttpClient(stall_s=time_scale.s(stall_timeout_s), time_scale=time_scale)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="repro-trtllm", daemon=True)
        self._eps: list[Endpoint] = []
        self._rr = 0
        self._tasks: set[asyncio.Task] = set()
        self.warnings: list[str] = []
        self.tokens = TokenStats()
        self._reported_first: dict[int, int] = {}
        self.server_returns_ids: bool | None = None
        self.ready_after_s: float | None = None
        self.ready_retries = 0
        self.fallbacks: dict[str, str] = {}

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"

    def _run(self, coro, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, sink) -> None:
        super().start(sink)
        if not self._thread.is_alive():
            self._thread.start()
        if not self._eps:
            self._run(self._setup())
        self._run(self.health(), timeout=self.health_timeout_s + 60)
        if not self.server_returns_ids and self.tokenizer is None:
            raise InputError(
                f"{self.urls[0]} returns text without token ids, and no tokenizer was found to turn "
                "the text back into ids (the accuracy log and the token count need them).",
                "`repro setup` (it downloads the model's tokenizer files), then run again",
            )
        if self.warmup is not None and self.warmup_record is None:
            self.warmup_record = self._run(warm_up(self, self.warmup), timeout=self.client.stall_s + 60)

    async def _setup(self) -> None:
        for url in self.urls:
            parts = urlsplit(url)
            if parts.scheme != "http" or not parts.hostname:
                raise InputError(
                    f"Endpoint '{url}' is not an http://host:port URL.",
                    "`repro run offline --endpoint http://127.0.0.1:8000`",
                )
            self._eps.append(
                Endpoint(url, parts.hostname, parts.port or 80, sem=asyncio.Semaphore(self.max_concurrency))
            )

    async def _model_name(self, ep: Endpoint) -> str | None:
        """The served model's name from /v1/models (vLLM and SGLang check it), or None when the route fails.

        Any HTTP status or non-OpenAI body means "unknown" (`transformers serve` answers 500 there); only a
        connection that cannot be made or is cut raises, for the readiness loop to retry.
        """
        try:
            doc = await self.client.json(ep, "GET", "/v1/models")
        except BackendError as exc:
            if exc.kind in CONNECTION_KINDS:
                raise
            return None
        data = doc.get("data") if isinstance(doc, dict) else None
        if isinstance(data, list) and data and isinstance(data[0], dict) and isinstance(data[0].get("id"), str):
            return str(data[0]["id"])
        return None

    def form_path(self, form: str) -> str:
        return self.path if form == FORM_TRTLLM else "/v1/completions"

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode([int(t) for t in ids], skip_special_tokens=True))

    def payload(
        self,
        form: str,
        ids: Sequence[int],
        max_tokens: int,
        *,
        model: str,
        probe: bool = False,
        usage: bool = True,
    ) -> dict[str, Any]:
        """The body of one request in the endpoint's negotiated form: streamed as the run streams (the readiness
        probe not), asking for the usage event unless the server refused `stream_options` (`usage`)."""
        stream = self.stream and not probe
        if form == FORM_TRTLLM:
            return build_payload(self.api, ids, max_tokens, stream=stream, model=model, usage=usage)
        if form == FORM_OPENAI_IDS:
            return build_openai_payload(ids, max_tokens, stream=stream, model=model, usage=usage)
        text = self._decode(ids)
        prompt = text or (PROBE_TEXT if probe else text)
        return build_openai_payload(prompt, max_tokens, stream=stream, model=model, usage=usage)

    async def _negotiate(self, ep: Endpoint, model: str) -> None:
        """Probe each form until one is answered: 400/422 moves on, anything else goes to the readiness loop."""
        refusals: list[tuple[str, str]] = []
        for form in FORMS:
            if form == FORM_OPENAI_TEXT and self.tokenizer is None:
                refusals.append((form, "not tried: no tokenizer to decode the prompt with"))
                continue
            path = self.form_path(form)
            try:
                doc = await self.client.json(
                    ep, "POST", path, self.payload(form, PROBE_IDS, 10, model=model, probe=True)
                )
            except BackendError as exc:
                if exc.status not in (400, 422):
                    raise
                refusals.append((form, exc.message))
                continue
            choices = doc.get("choices") if isinstance(doc, dict) else None
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                raise BackendError(
                    f"{ep.url}{path} answered without 'choices': {str(doc)[:160]}",
                    "point --endpoint at an OpenAI-compatible server",
                    kind="protocol",
                )
            for refused, why in refusals:
                if refused not in self.fallbacks:
                    self.fallbacks[refused] = why
                    self.warnings.append(
                        f"{ep.url} refused {FORM_TITLES[refused]} ({why}); sending {FORM_TITLES[form]} instead"
                    )
            ep.form, ep.model = form, model
            has_ids = token_ids_of(choices[0]) is not None
            known = self.server_returns_ids
            self.server_returns_ids = has_ids if known is None else (known and has_ids)
            return
        said = "; ".join(f"{FORM_TITLES[f]}: {why}" for f, why in refusals)
        scenario = self.scenario.lower()
        raise BackendError(
            f"{ep.url} refused every request form repro sends, with model '{model}' ({said}).",
            f"`repro run {scenario} --endpoint {ep.url} --served-model NAME` with the name of the model "
            "that server loaded (see its log)",
            kind="refused-all",
        )

    async def _events(self, ep: Endpoint, r: Request) -> AsyncIterator[dict[str, Any]]:
        """The events of one streamed request. It asks for the usage event (`stream_options`) until the server
        refuses the field: a 400/422 naming `stream_options` before any event drops it for that server, once, and the
        same request goes again without it (the warm-up's burst meets this before LoadGen starts).

        repro sends it so the server's own count (`usage.completion_tokens`) can be compared with the ids LoadGen
        gets; the count LoadGen gets never depends on it (the re-tokenized text, as NVIDIA's client counts: GB300G
        `code/llmlib/cores/http_async_client.py:770-776`, which sends no `stream_options`, `:676-685`). TensorRT-LLM
        accepts the field before and after the 1.0/1.1 releases the recipes use (`StreamOptions`, `stream_options`
        in `ChatCompletionRequest` and `CompletionRequest` of `tensorrt_llm/serve/openai_protocol.py`: a pre-1.0
        fork, k-l-lambda/TensorRT-LLM @ d92f86f7, whose stored version.py reads 0.20.0rc3, and NVIDIA/TensorRT-LLM
        main @ 0076e939; the v1.0.0 and v1.1.0 tags themselves could not be read), but its request models forbid
        unknown fields (extra="forbid"): a release without it would answer 400 to every streamed request and end the
        run at its first."""
        model, path, usage = ep.model or self.model or "", self.form_path(ep.form), ep.stream_usage
        ids = r.input_ids.tolist()
        got = False
        try:
            async for event in self.client.sse(
                ep, path, self.payload(ep.form, ids, r.max_tokens, model=model, usage=usage)
            ):
                got = True
                yield event
            return
        except BackendError as exc:
            if got or not usage or exc.status not in (400, 422) or "stream_options" not in exc.message:
                raise
            self._refused_stream_options(ep, exc.message)
        async for event in self.client.sse(
            ep, path, self.payload(ep.form, ids, r.max_tokens, model=model, usage=False)
        ):
            yield event

    def _refused_stream_options(self, ep: Endpoint, why: str) -> None:
        """Remember, per server, that it refused `stream_options`; say so once per server."""
        if not ep.stream_usage:
            return
        ep.stream_usage = False
        self.fallbacks.setdefault("stream_options", why)
        self.warnings.append(
            f"{ep.url} refused stream_options ({why}); streaming without it, so the server's own token count is not "
            "compared with the ids counted"
        )

    async def _probe(self, ep: Endpoint) -> str:
        """The model name, then the 10-token request in the form this server takes; bounded by the caller."""
        model = self.served_model or await self._model_name(ep) or self.default_model
        await self._negotiate(ep, model)
        return model

    async def health(self) -> None:
        """Wait until every endpoint answers a 10-token request (NVIDIA's warm-up), retrying with backoff.

        trtllm-serve binds its port before it loads the model and only listens once loading is done, so
        'connection refused', resets, timeouts and 5xx answers are retried until `health_timeout_s`; a 4xx
        or a non-OpenAI answer fails at once, and so does a server whose container has exited (`alive`).
        The model name is asked again on every try and kept only once the probe was answered.
        """
        t0 = self.loop.time()

        async def one(ep: Endpoint) -> None:
            deadline = t0 + self.health_timeout_s
            delay = self.time_scale.s(BACKOFF_START_S)
            while True:
                try:
                    model = await asyncio.wait_for(self._probe(ep), max(deadline - self.loop.time(), 0.001))
                    if self.model is None:
                        self.model = model
                    return
                except (TimeoutError, asyncio.TimeoutError):
                    raise BackendError(
                        f"{ep.url} accepted the connection but did not answer the readiness request within "
                        f"{self.time_scale.describe(self.health_timeout_s)}.",
                        "check the server log, or raise --ready-timeout",
                        kind="timeout",
                    ) from None
                except BackendError as exc:
                    if exc.kind == "http":
                        raise BackendError(
                            f"{ep.url} is not a ready OpenAI-compatible server (port in use by another "
                            f"program?): {exc.message}",
                            "stop whatever holds the port, or fix --endpoint",
                            kind="http",
                        ) from None
                    if exc.kind not in RETRYABLE:
                        raise
                    if self.alive is not None:
                        await self.loop.run_in_executor(None, self.alive)
                    if self.loop.time() + delay >= deadline:
                        raise BackendError(
                            f"{ep.url} did not become ready within {self.time_scale.describe(self.health_timeout_s)} "
                            f"(last: {exc.message})",
                            exc.next_command or "check the server log",
                            kind="timeout",
                        ) from None
                    self.ready_retries += 1
                    if self.on_wait is not None:  # (url, why, seconds left of the readiness wait)
                        self.on_wait(ep.url, exc.kind, max(0.0, deadline - self.loop.time()))
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.time_scale.s(BACKOFF_MAX_S))

        await asyncio.gather(*(one(ep) for ep in self._eps))
        self.ready_after_s = round(self.loop.time() - t0, 3)

    def submit(self, requests: Sequence[Request]) -> None:
        self.loop.call_soon_threadsafe(self._spawn, list(requests))

    def _spawn(self, requests: list[Request]) -> None:
        for r in requests:
            ep = self._eps[self._rr % len(self._eps)]
            self._rr += 1
            task = self.loop.create_task(self._one(ep, r))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _encode(self, text: str, limit: int | None = None) -> list[int]:
        """The ids of `text`; with `limit`, of a prefix long enough to hold `limit` ids and some slack, so an 8 MB
        answer is never tokenized whole when only max_tokens ids are logged (it cost 1.4 GB). The prefix starts
        at (limit + slack) times the longest vocabulary piece in characters and doubles until it holds enough
        ids or is the whole text; tokenization only merges locally, so ids well before the cut are the full
        text's ids."""
        if limit is None or limit <= 0:
            return [int(t) for t in self.tokenizer.encode(text, add_special_tokens=False)]
        want = limit + CUT_SLACK_TOKENS
        span = want * self._piece_chars()
        while True:
            cut = text[:span]
            ids = self.tokenizer.encode(cut, add_special_tokens=False)
            if len(cut) == len(text) or len(ids) >= want:
                return [int(t) for t in (ids if len(cut) == len(text) else ids[:want])]
            span *= 2

    def _piece_chars(self) -> int:
        """The longest vocabulary piece, in characters: no token covers more text (a byte-level or byte-fallback
        piece stands for at most one character per piece character)."""
        if getattr(self, "_piece_chars_cached", None) is None:
            try:
                vocab = self.tokenizer.get_vocab()
                longest = max((len(str(p)) for p in vocab), default=MAX_PIECE_CHARS)
            except (AttributeError, TypeError, ValueError):
                longest = MAX_PIECE_CHARS
            self._piece_chars_cached = max(1, min(longest, MAX_PIECE_CHARS))
        return int(self._piece_chars_cached)

    def output_ids(
        self, ids: list[int] | None, text: str, count: int | None, max_tokens: int | None = None
    ) -> np.ndarray:
        """The ids to log, whose length is also the count LoadGen gets: the server's ids when it sent them, else
        the re-tokenized text. TEST06 checks every reported count against the ids logged, so the server's
        `usage.completion_tokens` is only compared with them (run.json, verify). Clipped at max_tokens."""
        st = self.tokens
        st.samples += 1
        server_ids = ids is not None
        if ids is not None:
            st.ids_from_server += 1
            st.counted_from_ids += 1
        elif self.tokenizer is not None:
            ids = self._encode(text, max_tokens)  # at most max_tokens + slack: past that is clipped anyway
            st.ids_from_tokenizer += 1
            st.counted_from_text += 1
        else:
            raise BackendError(
                "The server returned text without token ids and no tokenizer is loaded.",
                "`repro setup`, then run again",
                kind="protocol",
            )
        if count is None:
            st.samples_without_server_count += 1
        else:
            st.server_completion_tokens += count
            if count != len(ids):
                st.count_disagreements += 1
        if max_tokens and max_tokens > 0 and len(ids) > max_tokens:
            # Past max_tokens by the server's own count: it ignored the request. Re-tokenized text can run a few
            # ids past an answer the server's usage keeps within it; that is clipped too, but is no lie.
            made = len(ids) if server_ids or count is None else count
            if made > max_tokens:
                st.clipped_samples += 1
                st.clipped_tokens += made - max_tokens
            else:
                st.retokenized_clipped += 1
            ids = ids[:max_tokens]
        st.logged_tokens += len(ids)
        st.loadgen_tokens += len(ids)
        if count is not None:
            # compared with what LoadGen got (after any clip), so the two figures stated and their gap agree
            st.compared_samples += 1
            st.compared_loadgen_tokens += len(ids)
            st.compared_other_tokens += count
        return np.asarray(ids, dtype=np.int32)

    def _first_token(self, r: Request, new_ids: list[int] | None, text: str) -> int | None:
        """The first output token as known when the first piece arrives (Server: TTFT is taken now)."""
        if new_ids:
            return int(new_ids[0])
        if self.tokenizer is not None and text.strip():
            head = self._encode(text, 1)
            return head[0] if head else None
        return None

    async def _one(self, ep: Endpoint, r: Request) -> None:
        assert self.sink is not None and ep.sem is not None
        try:
            async with ep.sem:
                if self._stopping.is_set():
                    return
                if self.stream:
                    ids: list[int] = []
                    text, count, first = "", None, None
                    keep = r.max_tokens + 1 if r.max_tokens and r.max_tokens > 0 else None
                    # text past what max_tokens ids can cover is never tokenized: it is not kept either
                    text_cap = (keep or 1 << 20) * self._piece_chars() * 2 if self.tokenizer is not None else 1 << 24
                    async for event in self._events(ep, r):
                        choices = event.get("choices") or []
                        if (given := usage_count(event.get("usage"))) is not None:
                            count = given
                        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
                            continue
                        new_ids = token_ids_of(choices[0])
                        if new_ids:
                            ids.extend(new_ids)
                        piece = text_of(choices[0])
                        if (keep is None or len(ids) < keep) and len(text) < text_cap:
                            text += piece
                        if first is None and (new_ids or text):
                            first = self._first_token(r, new_ids, text)
                            if first is not None:
                                self.sink.first_tokens([(r.id, first)])
                    out = self.output_ids(ids if ids else None, text, count, r.max_tokens)
                    if first is not None and (len(out) == 0 or int(out[0]) != first):
                        self.tokens.first_token_mismatches += 1
                else:
                    body = self.payload(ep.form, r.input_ids.tolist(), r.max_tokens, model=ep.model or self.model or "")
                    doc = await self.client.json(ep, "POST", self.form_path(ep.form), body)
                    choices = doc.get("choices") if isinstance(doc, dict) else None
                    choice = (
                        choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
                    )
                    count = usage_count(doc.get("usage")) if isinstance(doc, dict) else None
                    out = self.output_ids(token_ids_of(choice), text_of(choice), count, r.max_tokens)
                    if len(out):
                        self.sink.first_tokens([(r.id, int(out[0]))])
                self.sink.completed([(r.id, out)])
        except asyncio.CancelledError:
            return
        except BaseException as exc:  # noqa: BLE001 - reported to the harness, which ends the run
            if isinstance(exc, BackendError) and ep.url not in exc.message:
                exc.message = f"{ep.url}: {exc.message}"
                exc.args = (exc.message,)
            self.cancel()
            self.sink.failed(exc)

    def cancel(self) -> None:
        super().cancel()
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(lambda: [t.cancel() for t in list(self._tasks)])

    def close(self) -> None:
        self.cancel()
        if self._thread.is_alive():

            async def _drain() -> None:
                for ep in self._eps:
                    while ep.idle:
                        ep.idle.pop()[1].close()

            with contextlib.suppress(Exception):
                self._run(_drain(), timeout=self.close_timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=self.close_timeout)

    def describe(self) -> dict[str, Any]:
        forms = sorted({ep.form for ep in self._eps}) if self.ready_after_s is not None else []
        return {
            "backend": self.name,
            "endpoints": self.urls,
            "api": self.api,
            "stream": self.stream,
            "max_concurrency_per_endpoint": self.max_concurrency,
            "stall_timeout_s": self.client.stall_s,
            "model": self.model,
            "served_model_given": self.served_model is not None,
            "request_form": forms[0] if len(forms) == 1 else ({ep.url: ep.form for ep in self._eps} or None),
            "request_fallbacks": dict(self.fallbacks),
            "tokenizer": getattr(self.tokenizer, "name_or_path", None) if self.tokenizer is not None else None,
        }

    def stats(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens.to_json(),
            "server_returns_ids": self.server_returns_ids,
            "ready_after_s": self.ready_after_s,
            "ready_retries": self.ready_retries,
            "request_fallbacks": dict(self.fallbacks),
            "warmup": self.warmup_record,
            "stream_options": {ep.url: "sent" if ep.stream_usage else "refused" for ep in self._eps}
            if self.stream
            else None,
            "warnings": [*self.warnings, *self.tokens.warnings()],
        }


def create(ctx: BackendContext) -> Backend:
    """Round robin over the given endpoints (or the recipe's local ports), the recipe's client concurrency per server
    and its derived stall deadline (or --stall-timeout); in ctx.client_processes worker processes when more than one
    (run/backends/spread.py)."""
    kwargs: dict[str, Any] = {
        "endpoints": list(ctx.endpoints) or endpoints_for(ctx.recipe),
        "stream": ctx.stream,
        "scenario": ctx.scenario,
        "tokenizer": ctx.tokenizer,
        "model": ctx.served_model,
        "default_model": ctx.recipe.model.repo_id,
        "max_concurrency": ctx.client_concurrency or client_concurrency(ctx.recipe),
        "health_timeout_s": ctx.ready_timeout_s or HEALTH_TIMEOUT_S,
        "stall_timeout_s": ctx.stall_timeout_s or stall_timeout_s(ctx.recipe),
        "time_scale": ctx.time_scale,
        "warmup": Warmup(max_tokens=ctx.recipe.loadgen.max_tokens) if ctx.warmup else None,
    }
    if ctx.client_processes > 1 and len(kwargs["endpoints"]) > 1:
        from repro.run.backends.spread import SpreadBackend

        ready_s = readiness_wait_s(kwargs["health_timeout_s"], ctx.time_scale)
        return SpreadBackend(
            TrtllmBackend,
            kwargs,
            ctx.client_processes,
            merge_tokens=TokenStats.merged,
            alive=ctx.alive,
            ready_s=ready_s,
        )
    endpoints = kwargs.pop("endpoints")
    return TrtllmBackend(endpoints, alive=ctx.alive, **kwargs)
