"""OpenAI-compatible inference servers over HTTP (trtllm-serve first): one endpoint per server, round robin.

The request matches NVIDIA's MLPerf harness (`trtllm_endpoint` core): `prompt_token_ids`, `max_tokens`,
`min_tokens 1`, greedy (`top_k 1`, `top_p 0.001`); Offline posts without streaming, Server streams
(SSE) so first-token times are real. The HTTP/1.1 client is `repro.run.backends.http_client`; at most
`max_concurrency` requests (the recipe's batch size) are in flight per endpoint, each on its own connection.

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
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from repro.core.errors import InputError
from repro.core.fmt import token_count_comparison
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

HEALTH_TIMEOUT_S = 300.0
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
MAX_PIECE_CHARS = 64  # the longest vocabulary piece believed, when sizing a prefix (Llama-2's is 16)


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
        model: str | None = None,
        default_model: str = "llama2-70b",
        max_concurrency: int = DEFAULT_CONCURRENCY,
        tokenizer: Any = None,
        health_timeout_s: float = HEALTH_TIMEOUT_S,
        stall_timeout_s: float = STALL_TIMEOUT_S,
        alive: Callable[[], None] | None = None,
        on_wait: Callable[[str, str, float], None] | None = None,
    ) -> None:
        super().__init__()
        if not endpoints:
            raise InputError("No server endpoints given.", "`repro run offline --endpoint http://127.0.0.1:8000`")
        self.urls = [u.rstrip("/") for u in endpoints]
        self.api = api
        self.stream = stream
        self.model = model
        self.served_model = model
        self.default_model = default_model
        self.max_concurrency = max_concurrency
        self.tokenizer = tokenizer
        self.health_timeout_s = health_timeout_s
        self.alive = alive
        self.on_wait = on_wait
        self.client = HttpClient(stall_s=stall_timeout_s)
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
        self, form: str, ids: Sequence[int], max_tokens: int, *, model: str, probe: bool = False
    ) -> dict[str, Any]:
        """The body of one request in the endpoint's negotiated form (the probe does not stream)."""
        stream = self.stream and not probe
        if form == FORM_TRTLLM:
            return build_payload(self.api, ids, max_tokens, stream=stream, model=model)
        if form == FORM_OPENAI_IDS:
            return build_openai_payload(ids, max_tokens, stream=stream, model=model)
        text = self._decode(ids)
        return build_openai_payload(text or (PROBE_TEXT if probe else text), max_tokens, stream=stream, model=model)

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
        scenario = "server" if self.stream else "offline"
        raise BackendError(
            f"{ep.url} refused every request form repro sends, with model '{model}' ({said}).",
            f"`repro run {scenario} --endpoint {ep.url} --served-model NAME` with the name of the model "
            "that server loaded (see its log)",
            kind="refused-all",
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
            delay = BACKOFF_START_S
            while True:
                try:
                    model = await asyncio.wait_for(self._probe(ep), max(deadline - self.loop.time(), 0.001))
                    if self.model is None:
                        self.model = model
                    return
                except (TimeoutError, asyncio.TimeoutError):
                    raise BackendError(
                        f"{ep.url} accepted the connection but did not answer the readiness request within "
                        f"{self.health_timeout_s:.0f} s.",
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
                            f"{ep.url} did not become ready within {self.health_timeout_s:.0f} s (last: {exc.message})",
                            exc.next_command or "check the server log",
                            kind="timeout",
                        ) from None
                    self.ready_retries += 1
                    if self.on_wait is not None:  # (url, why, seconds left of the readiness wait)
                        self.on_wait(ep.url, exc.kind, max(0.0, deadline - self.loop.time()))
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, BACKOFF_MAX_S)

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
                body = self.payload(ep.form, r.input_ids.tolist(), r.max_tokens, model=ep.model or self.model or "")
                path = self.form_path(ep.form)
                if self.stream:
                    ids: list[int] = []
                    text, count, first = "", None, None
                    keep = r.max_tokens + 1 if r.max_tokens and r.max_tokens > 0 else None
                    # text past what max_tokens ids can cover is never tokenized: it is not kept either
                    text_cap = (keep or 1 << 20) * self._piece_chars() * 2 if self.tokenizer is not None else 1 << 24
                    async for event in self.client.sse(ep, path, body):
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
                    doc = await self.client.json(ep, "POST", path, body)
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
            "warnings": [*self.warnings, *self.tokens.warnings()],
        }


def create(ctx: BackendContext) -> TrtllmBackend:
    """Round robin over the given endpoints (or the recipe's local ports), the recipe's batch size per server."""
    trt = ctx.recipe.trtllm
    return TrtllmBackend(
        list(ctx.endpoints) or endpoints_for(ctx.recipe),
        stream=ctx.stream,
        tokenizer=ctx.tokenizer,
        model=ctx.served_model,
        default_model=ctx.recipe.model.repo_id,
        max_concurrency=trt.gpu_batch_size if trt is not None else DEFAULT_CONCURRENCY,
        alive=ctx.alive,
        health_timeout_s=ctx.ready_timeout_s or HEALTH_TIMEOUT_S,
        stall_timeout_s=ctx.stall_timeout_s or STALL_TIMEOUT_S,
    )
