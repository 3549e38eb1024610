#!/usr/bin/python3
"""A CPU stand-in for `trtllm-serve`, for tests and the client benchmark: the same CLI flags, the same wire format.

Built from TensorRT-LLM's source, not from what repro expects (read through the code index, NVIDIA/TensorRT-LLM
`main` 2025-26; the fields below are unchanged since the 1.0 line that the recipes' 1.0/1.1 images ship):
- `tensorrt_llm/commands/serve.py` `launch_server`: the socket is *bound* before `PyTorchLLM(**llm_args)` loads the
  model, and uvicorn only *listens* on it after loading, so a client sees "connection refused" for minutes.
- `tensorrt_llm/serve/openai_protocol.py`: `ChatCompletionResponseChoice` = index, message, logprobs,
  finish_reason, stop_reason, mm_embedding_handle, disaggregated_params, avg_decoded_tokens_per_iter: **no
  token_ids**; `UsageInfo` = prompt_tokens, total_tokens, completion_tokens, prompt_tokens_details;
  `ChatCompletionRequest` forbids unknown fields (extra="forbid") and rejects stream_options without stream;
  `skip_special_tokens` defaults to True, so EOS never reaches the text.
- `tensorrt_llm/serve/postprocess_handlers.py` `chat_stream_post_processor`: a first event with only
  `delta.role` (framed `data: {json} \\n\\n`, with the space), one event per decoded piece
  (`model_dump_json(exclude_none=True)`), then, with `stream_options.include_usage`, a last event with
  `choices: []` and `usage`; `openai_server.py` ends the stream with `data: [DONE]\\n\\n`. Non-streaming
  usage counts `len(output.token_ids)`.

Generation is a deterministic function of the prompt over the word-level vocabulary in `<tokenizer>/tokenizer.json`.
Faults for tests, from the environment: STANDIN_LOAD_S (seconds between bind and listen), STANDIN_CRASH=load
(exit 1 while loading) or after:N (exit 3 after N answers), STANDIN_HANG=load (bind, never listen);
STANDIN_OUT_LEN fixes the answer length (for the client benchmark). STANDIN_FORBID=field[,field] imitates a release
whose request models lack those fields: with extra="forbid" a request naming one is a 400 ("Extra inputs are not
permitted"). STANDIN_LOG_REQUESTS=1 prints one line per accepted request (prompt length, id range, max_tokens, stream).

Fixed-speed mode (off unless STANDIN_TOKENS_PER_S is set), a queue whose capacity can be computed by hand:
- STANDIN_MAX_BATCH slots (default: unlimited); a request takes a free slot or waits in one FIFO queue.
- In its slot a request with p prompt tokens whose answer is n token ids (EOS included) emits token k
  (k = 1..n) at  start + p * STANDIN_PREFILL_S_PER_TOKEN (default 0) + k / STANDIN_TOKENS_PER_S,
  and frees the slot after the last one. Slots do not slow each other down.
So with prefill 0: TPOT = 1 / tokens_per_s at any load, TTFT = queue wait + 1 / tokens_per_s, and the service time is
S = p * prefill + n / tokens_per_s; the server saturates at  capacity = max_batch / mean(S)  requests per second
(an M/G/c queue fed by LoadGen's Poisson arrivals). With STANDIN_OUT_LEN=L every answer has n = L + 1 ids when
max_tokens > L. `service_time_s` and `capacity_qps` below compute it for tests. Non-streaming answers are sent at
the time the last token would have been, so Offline runs see the same speed.
Noisy mode (on when any of these is set, with STANDIN_TOKENS_PER_S): what a real GPU server does to p99 latency
(issue 34: an H100's p99 TPOT was 141-188 ms at 10-57 q/s, not monotonic in the rate), for `repro tune` tests:
- STANDIN_DECODE_SLOPE s: each token's gap is 1/tokens_per_s x (1 + s x (sequences decoding - 1)): TPOT rises with
  the batch, as one decode step over more sequences takes longer;
- STANDIN_JITTER sigma: the gap is multiplied by a log-normal factor exp(N(-sigma^2/2, sigma)) (mean 1);
- STANDIN_STALL_P p and STANDIN_STALL_S t: with probability p per token the gap grows by t seconds (a rare stall:
  a scheduler hiccup, a long prefill chunk in the same step);
- STANDIN_SEED: the generator's seed (default: from the OS, so every run is different).
The queue beyond STANDIN_MAX_BATCH slots is the fixed-speed one. The gaps are drawn when each token is due, so the
load a token sees is the load at that moment.
A dead rank (trtllm_llmapi_launch.py sends SIGUSR1 under STANDIN_RANK_LOSS=503): from then on every request,
/health included, is answered 503 and every stream in flight stops sending, forever, as trtllm-serve stays alive
returning 503 after one rank's executor died (NVIDIA/TensorRT-LLM issue 18663).
Only the standard library, so it runs in the FROM-scratch test image.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import signal
import socket
import sys
import time
import uuid
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the twin's scheduler beside this file (image and tree)
from trtllm_twin import Job, LiveTwin, TwinParams, twin_set  # noqa: E402

CHAT_FIELDS = {
    "messages",
    "prompt_token_ids",
    "model",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "max_completion_tokens",
    "max_tokens",
    "n",
    "presence_penalty",
    "response_format",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "user",
    "best_of",
    "use_beam_search",
    "top_k",
    "top_p_min",
    "min_p",
    "repetition_penalty",
    "length_penalty",
    "early_stopping",
    "stop_token_ids",
    "include_stop_str_in_output",
    "ignore_eos",
    "min_tokens",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "truncate_prompt_tokens",
    "lora_request",
    "echo",
    "add_generation_prompt",
    "add_special_tokens",
    "documents",
    "chat_template",
    "chat_template_kwargs",
    "disaggregated_params",
}
LOG_REQUESTS = os.environ.get("STANDIN_LOG_REQUESTS") == "1"
FORBID = {f.strip() for f in os.environ.get("STANDIN_FORBID", "").split(",") if f.strip()}
COMPLETION_FIELDS = (
    CHAT_FIELDS
    - {
        "messages",
        "prompt_token_ids",
        "max_completion_tokens",
        "tools",
        "tool_choice",
        "chat_template",
        "chat_template_kwargs",
        "documents",
        "add_generation_prompt",
    }
) | {"prompt", "suffix", "detokenize"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="trtllm-serve")
    p.add_argument("model")
    p.add_argument("--host", default="localhost")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--tokenizer")
    p.add_argument("--backend", default="pytorch")
    p.add_argument("--extra_llm_api_options", "--config")
    for flag in (
        "--num_postprocess_workers",
        "--tp_size",
        "--pp_size",
        "--ep_size",
        "--max_num_tokens",
        "--max_batch_size",
        "--max_seq_len",
        "--max_beam_width",
    ):
        p.add_argument(flag, type=int)
    return p.parse_args(argv)


class Vocab:
    def __init__(self, folder: Path) -> None:
        doc = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        vocab: dict[str, int] = doc["model"]["vocab"]
        self.words = {i: w for w, i in vocab.items()}
        self.special = {t["id"] for t in doc.get("added_tokens", []) if t.get("special")}
        eos = [t["id"] for t in doc.get("added_tokens", []) if t.get("content") == "</s>"]
        self.eos = eos[0] if eos else max(self.special or {2})
        self.normal = sorted(i for i in self.words if i not in self.special)

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.words[i] for i in ids if i not in self.special)


def generate(prompt: list[int], max_tokens: int, vocab: Vocab) -> tuple[list[int], str]:
    """Deterministic in the prompt: its length picks the answer length; stops with EOS unless cut by max_tokens."""
    fixed = os.environ.get("STANDIN_OUT_LEN")
    want = int(fixed) if fixed else 1 + (sum(prompt) + 7 * len(prompt)) % 40
    n = min(want, max_tokens)
    seed = sum(prompt) * 31
    ids = [vocab.normal[(seed + i * 7) % len(vocab.normal)] for i in range(n)]
    if want < max_tokens:
        ids.append(vocab.eos)
        return ids, "stop"
    return ids, "length"


def twin_answer(prompt: list[int], osl: int, max_tokens: int, vocab: Vocab) -> tuple[list[int], str]:
    """The twin's answer: as many words as its engine gives the request (its output length), EOS when that is
    under max_tokens, as a model stops."""
    seed = sum(prompt) * 31
    ids = [vocab.normal[(seed + i * 7) % len(vocab.normal)] for i in range(osl)]
    if osl < max_tokens:
        return [*ids, vocab.eos], "stop"
    return ids, "length"


def _env_float(name: str) -> float | None:
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else None


def service_time_s(
    prompt_tokens: float, answer_ids: float, tokens_per_s: float, prefill_s_per_token: float = 0.0
) -> float:
    """Seconds a request holds its slot in fixed-speed mode."""
    return prompt_tokens * prefill_s_per_token + answer_ids / tokens_per_s


def capacity_qps(
    max_batch: int, tokens_per_s: float, mean_answer_ids: float, mean_prompt_tokens: float = 0.0, prefill: float = 0.0
) -> float:
    """Requests per second the fixed-speed server completes when every slot is busy (the saturation rate)."""
    return max_batch / service_time_s(mean_prompt_tokens, mean_answer_ids, tokens_per_s, prefill)


class Pace:
    """Fixed-speed mode: max_batch slots, a FIFO queue beyond them, a fixed per-sequence token rate."""

    def __init__(
        self,
        tokens_per_s: float,
        max_batch: int | None,
        prefill_s_per_token: float,
        *,
        slope: float = 0.0,
        jitter: float = 0.0,
        stall_p: float = 0.0,
        stall_s: float = 0.0,
        seed: int | None = None,
    ) -> None:
        if tokens_per_s <= 0 or (max_batch is not None and max_batch < 1) or prefill_s_per_token < 0:
            raise ValueError("STANDIN_TOKENS_PER_S > 0, STANDIN_MAX_BATCH >= 1, STANDIN_PREFILL_S_PER_TOKEN >= 0")
        if min(slope, jitter, stall_p, stall_s) < 0 or stall_p > 1:
            raise ValueError("STANDIN_DECODE_SLOPE, STANDIN_JITTER, STANDIN_STALL_S >= 0 and 0 <= STANDIN_STALL_P <= 1")
        self.tokens_per_s = tokens_per_s
        self.max_batch = max_batch
        self.prefill = prefill_s_per_token
        self.slope, self.jitter, self.stall_p, self.stall_s = slope, jitter, stall_p, stall_s
        self.noisy = bool(slope or jitter or stall_p)
        self.rng = random.Random(seed)
        self.busy = 0
        self.waiting: deque[asyncio.Future[None]] = deque()

    @classmethod
    def from_env(cls) -> Pace | None:
        rate = _env_float("STANDIN_TOKENS_PER_S")
        if rate is None:
            return None
        batch = os.environ.get("STANDIN_MAX_BATCH", "").strip()
        seed = os.environ.get("STANDIN_SEED", "").strip()
        return cls(
            rate,
            int(batch) if batch else None,
            _env_float("STANDIN_PREFILL_S_PER_TOKEN") or 0.0,
            slope=_env_float("STANDIN_DECODE_SLOPE") or 0.0,
            jitter=_env_float("STANDIN_JITTER") or 0.0,
            stall_p=_env_float("STANDIN_STALL_P") or 0.0,
            stall_s=_env_float("STANDIN_STALL_S") or 0.0,
            seed=int(seed) if seed else None,
        )

    def gap(self) -> float:
        """Noisy mode: seconds until a sequence's next token, under the load of this moment."""
        base = (1 + self.slope * max(0, self.busy - 1)) / self.tokens_per_s
        if self.jitter:
            base *= math.exp(self.rng.gauss(-(self.jitter**2) / 2, self.jitter))
        if self.stall_p and self.rng.random() < self.stall_p:
            base += self.stall_s
        return base

    async def acquire(self) -> float:
        """Wait for a slot (first come, first served); returns the loop time the request starts."""
        if self.waiting or (self.max_batch is not None and self.busy >= self.max_batch):
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.waiting.append(fut)
            try:
                await fut  # release() hands its slot over directly, so busy stays counted
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self.release()
                elif fut in self.waiting:
                    self.waiting.remove(fut)
                raise
        else:
            self.busy += 1
        return asyncio.get_running_loop().time()

    def release(self) -> None:
        while self.waiting:
            fut = self.waiting.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self.busy -= 1

    def token_time(self, start: float, prompt_tokens: int, k: int) -> float:
        """Loop time token k (1-based) is due."""
        return start + prompt_tokens * self.prefill + k / self.tokens_per_s


async def _until(when: float) -> None:
    delay = when - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


STREAM_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"
TWIN_EMIT_S = 0.25
"""The twin streams a request's tokens at most this often (wall seconds; the first and the last at their own
times): LoadGen's TPOT is (last - first) / (tokens - 1), which grouping the middle ones leaves exact, and 2 CPU
cores cannot carry one event per token of a published server's rate (TensorRT-LLM's stream_interval groups too)."""


class PaceTiming:
    """The fixed-speed and noisy modes (or none): token k at its due time, one event per token."""

    def __init__(self, pace: Pace | None, prompt: list[int], start: float | None) -> None:
        self.pace, self.prompt, self.start = pace, prompt, start
        self.clock = [start + len(prompt) * pace.prefill if start is not None and pace else 0.0, 0]

    async def upto(self, k: int) -> None:
        pace, start = self.pace, self.start
        if start is None or pace is None:
            return
        if not pace.noisy:
            await _until(pace.token_time(start, len(self.prompt), k))
            return
        while self.clock[1] < k:  # each gap drawn when the previous token is out: the load of that moment
            self.clock[0] += pace.gap()
            self.clock[1] += 1
            await _until(self.clock[0])

    async def more(self, have: int, total: int) -> int:
        await self.upto(have + 1)
        return have + 1


class TwinTiming:
    """The twin: the first token and the end when its engine says; between them, what it has every TWIN_EMIT_S."""

    def __init__(self, twin: LiveTwin, job: Job) -> None:
        self.twin, self.job = twin, job

    async def upto(self, k: int) -> None:
        first, done = self.job.waiters
        await (first if k <= 1 else done)

    async def more(self, have: int, total: int) -> int:
        first, done = self.job.waiters
        if have == 0:
            await first
            return 1
        if not done.done():
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(done), TWIN_EMIT_S)
        got = total if done.done() else min(total - 1, self.job.owner.tokens_of(self.job))
        return max(got, have + 1) if done.done() else max(got, have)


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.model = args.model
        self.vocab = Vocab(Path(args.tokenizer or args.model))
        self.answered = 0
        crash = os.environ.get("STANDIN_CRASH", "")
        self.crash_after = int(crash.split(":", 1)[1]) if crash.startswith("after:") else None
        self.pace: Pace | None = None
        self.twin: LiveTwin | None = None
        self.broken: asyncio.Event | None = None
        """Set once a rank died (SIGUSR1): 503 to everything, streams in flight never continue."""
        self.twins: dict[str, TwinParams] = {}
        """Every scenario's twin this server holds (STANDIN_TWIN's "scenarios"); POST /twin/scenario picks one."""

    def _done(self) -> None:
        self.answered += 1
        if self.crash_after is not None and self.answered >= self.crash_after:
            print(f"[stand-in] RuntimeError: simulated engine failure after {self.answered} requests", flush=True)
            os._exit(3)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers = {}
                while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                await self.route(method, path, body, writer)
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            writer.close()

    def _json(self, writer: asyncio.StreamWriter, status: int, doc: object) -> None:
        data = json.dumps(doc, separators=(",", ":")).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}.get(status, "Error")
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n".encode()
            + data
        )

    async def route(self, method: str, path: str, raw: bytes, writer: asyncio.StreamWriter) -> None:
        if self.broken is not None and self.broken.is_set():
            self._json(writer, 503, {"detail": "Service Unavailable"})
            return
        if method == "GET" and path == "/health":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            return
        if method == "GET" and path == "/v1/models":
            self._json(
                writer,
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "tensorrt_llm"}
                    ],
                },
            )
            return
        if method == "POST" and path.startswith("/twin/") and self.twin is not None:
            self._control(path, raw, writer)
            return
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions"):
            self._json(writer, 404, {"detail": "Not Found"})
            return
        chat = path == "/v1/chat/completions"
        try:
            req = json.loads(raw)
        except ValueError:
            self._json(
                writer, 400, {"object": "error", "message": "invalid JSON", "type": "BadRequestError", "code": 400}
            )
            return
        known = (CHAT_FIELDS if chat else COMPLETION_FIELDS) - FORBID
        extra = set(req) - known
        problem = (
            f"Extra inputs are not permitted: {sorted(extra)}"
            if extra
            else "stream_options can only be set if stream is true"
            if req.get("stream_options") and not req.get("stream")
            else "model is required"
            if "model" not in req
            else None
        )
        prompt = req.get("prompt_token_ids") if chat else req.get("prompt")
        if problem is None and not (isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)):
            problem = "this stand-in needs token-id prompts"
        if problem:
            self._json(writer, 400, {"object": "error", "message": problem, "type": "BadRequestError", "code": 400})
            return
        max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        if LOG_REQUESTS:  # what a test asks of the server's own view: the requests in the order they came
            ends = (min(prompt), max(prompt))
            print(
                f"[stand-in] request prompt_tokens={len(prompt)} ids={ends[0]}-{ends[1]} max_tokens={max_tokens} "
                f"stream={bool(req.get('stream'))}",
                flush=True,
            )
        if self.twin is not None:
            if req.get("stream"):  # Starlette's StreamingResponse sends its status line before the first chunk
                writer.write(STREAM_HEAD)
            job = self.twin.submit(prompt, max_tokens)
            ids, finish = twin_answer(prompt, job.osl, max_tokens, self.vocab)
            await self.answer(req, chat, prompt, ids, finish, writer, TwinTiming(self.twin, job))
            return
        ids, finish = generate(prompt, max_tokens, self.vocab)
        if self.pace is None:
            await self.answer(req, chat, prompt, ids, finish, writer, PaceTiming(None, prompt, None))
            return
        start = await self.pace.acquire()
        try:
            await self.answer(req, chat, prompt, ids, finish, writer, PaceTiming(self.pace, prompt, start))
        finally:
            self.pace.release()

    def _control(self, path: str, raw: bytes, writer: asyncio.StreamWriter) -> None:
        """The rehearsal's hands on the twin (no trtllm-serve route): /twin/scenario {"scenario": S} makes S's twin
        the one that serves, afresh (what the old one still ran is cancelled); /twin/preroll runs the pre-roll."""
        assert self.twin is not None
        if path == "/twin/scenario":
            try:
                name = str(json.loads(raw or b"{}").get("scenario", ""))
            except (ValueError, AttributeError):
                name = ""
            if name not in self.twins:
                self._json(writer, 404, {"detail": f"no twin for scenario {name!r}", "have": sorted(self.twins)})
                return
            self.twin.close()
            self.twin = LiveTwin(self.twins[name])
            print(f"[stand-in] server twin: scenario {name}: {describe(self.twin.p)}", flush=True)
            self._json(writer, 200, {"scenario": name})
            return
        if path == "/twin/preroll":
            done = self.twin.preroll()
            print(
                f"[stand-in] server twin: pre-roll of {done['virtual_s']:g} virtual s, {done['phantoms']} requests",
                flush=True,
            )
            self._json(writer, 200, done)
            return
        self._json(writer, 404, {"detail": "Not Found"})

    async def answer(
        self,
        req: dict,
        chat: bool,
        prompt: list[int],
        ids: list[int],
        finish: str,
        writer: asyncio.StreamWriter,
        timing: PaceTiming | TwinTiming,
    ) -> None:
        """Write the answer, each token when `timing` says it is due (an unstreamed answer after the last one)."""
        usage = {
            "prompt_tokens": len(prompt),
            "total_tokens": len(prompt) + len(ids),
            "completion_tokens": len(ids),
            "prompt_tokens_details": {"cached_tokens": 0},
        }
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        created = int(time.time())
        if not req.get("stream"):
            await timing.upto(len(ids))
            text = self.vocab.decode(ids)
            if chat:
                choice = {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": []},
                    "logprobs": None,
                    "finish_reason": finish,
                    "stop_reason": None,
                    "mm_embedding_handle": None,
                    "disaggregated_params": None,
                    "avg_decoded_tokens_per_iter": None,
                }
                doc = {
                    "id": rid,
                    "object": "chat.completion",
                    "created": created,
                    "model": req["model"],
                    "choices": [choice],
                    "usage": usage,
                    "prompt_token_ids": None,
                }
            else:
                doc = {
                    "id": rid,
                    "object": "text_completion",
                    "created": created,
                    "model": req["model"],
                    "choices": [
                        {
                            "index": 0,
                            "text": text,
                            "token_ids": None,
                            "logprobs": None,
                            "context_logits": None,
                            "finish_reason": finish,
                            "stop_reason": None,
                            "disaggregated_params": None,
                            "avg_decoded_tokens_per_iter": None,
                        }
                    ],
                    "usage": usage,
                    "prompt_token_ids": None,
                }
            self._json(writer, 200, doc)
            await writer.drain()
            self._done()
            return
        if self.twin is None:
            writer.write(STREAM_HEAD)

        def event(data: str, space: bool = False) -> None:
            payload = f"data: {data}{' ' if space else ''}\n\n".encode()
            writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")

        kind = "chat.completion.chunk" if chat else "text_completion"

        def chunk(choices: list[dict[str, object]], space: bool = False, **extra: object) -> None:
            doc = {"id": rid, "object": kind, "created": created, "model": req["model"], "choices": choices, **extra}
            event(json.dumps(doc, separators=(",", ":")), space=space)

        await timing.upto(1)
        if chat:
            chunk([{"index": 0, "delta": {"role": "assistant"}}], space=True)
        have = 0
        while have < len(ids):
            upto = await timing.more(have, len(ids))
            if self.broken is not None and self.broken.is_set():
                await asyncio.Event().wait()  # the executor is gone: this stream never gets another token
            if upto <= have:
                continue
            piece = self.vocab.decode(ids[have:upto])
            piece = piece if have == 0 or not piece else " " + piece
            have = upto
            last = have == len(ids)
            piece_choice: dict[str, object] = (
                {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            )
            if last:
                piece_choice["finish_reason"] = finish
            chunk([piece_choice])
            await writer.drain()
        so = req.get("stream_options") or {}
        if so.get("include_usage", True) and req.get("stream_options") is not None:
            chunk([], usage=usage)
        event("[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        self._done()


def describe(p: TwinParams) -> str:
    return (
        f"step {p.a:.4g} s + {p.b:.3g} s x decoders + {p.c:.3g} s x prefill tokens, {p.max_batch} running at most, "
        f"KV {p.kv_tokens:,} tokens, {p.max_num_tokens} tokens a step, time x {p.time_scale:g}, width {p.width:g}"
        + (f", {p.replicas} replicas" if p.replicas > 1 else "")
        + (f", step stalls {p.stall_p:.3g} x {p.stall_s:.3g} s" if p.stall_p else "")
        + (f", first-token stalls {p.first_stall_p:.3g} x {p.first_stall_s:.3g} s" if p.first_stall_p else "")
    )


async def serve(sock: socket.socket, server: Server) -> None:
    srv = await asyncio.start_server(server.handle, sock=sock, backlog=8192, limit=1 << 22)
    server.broken = asyncio.Event()

    def rank_lost() -> None:
        print("[stand-in] RuntimeError: a rank's executor died; answering 503 from now on", flush=True)
        assert server.broken is not None
        server.broken.set()

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, rank_lost)
    print(
        f"[stand-in] INFO: Uvicorn running on http://{server.args.host}:{server.args.port} (Press CTRL+C to quit)",
        flush=True,
    )
    async with srv:
        await srv.serve_forever()


def main(argv: list[str]) -> int:
    if argv[:1] == ["disaggregated"]:  # `trtllm-serve disaggregated -c CONFIG`: the front end (trtllm_disagg.py)
        import trtllm_disagg

        return trtllm_disagg.main(argv[1:])
    args = parse_args(argv)
    print(f"[stand-in] trtllm-serve {args.model} --port {args.port} --backend {args.backend}", flush=True)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host if args.host != "localhost" else "127.0.0.1", args.port))
    except OSError as e:
        print(f"RuntimeError: Failed to bind socket to {args.host}:{args.port}: {e}", flush=True)
        return 1
    print("[stand-in] loading model ...", flush=True)
    if os.environ.get("STANDIN_CRASH") == "load":
        print("[stand-in] RuntimeError: simulated CUDA out of memory while loading the model", flush=True)
        return 1
    try:
        server = Server(args)
    except (OSError, KeyError, ValueError) as e:
        print(f"[stand-in] OSError: cannot load the tokenizer: {e}", flush=True)
        return 1
    try:
        server.pace = Pace.from_env()
        twin = os.environ.get("STANDIN_TWIN", "").strip()
        if twin:
            server.twins, active = twin_set(twin)
            server.twin = LiveTwin(server.twins[active])
    except (ValueError, TypeError) as e:
        print(f"[stand-in] ValueError: bad fixed-speed settings (or twin settings): {e}", flush=True)
        return 1
    if server.twin is not None:
        print(f"[stand-in] server twin: {describe(server.twin.p)}", flush=True)
    if server.pace is not None:
        p = server.pace
        print(
            f"[stand-in] fixed speed: {p.tokens_per_s} tokens/s per sequence, {p.max_batch or 'unlimited'} slots, "
            f"{p.prefill} s prefill per prompt token"
            + (f"; noisy: slope {p.slope}, jitter {p.jitter}, stalls {p.stall_p} x {p.stall_s} s" if p.noisy else ""),
            flush=True,
        )
    time.sleep(float(os.environ.get("STANDIN_LOAD_S", "0") or 0))
    if os.environ.get("STANDIN_HANG") == "load":
        while True:
            time.sleep(3600)
    asyncio.run(serve(sock, server))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
