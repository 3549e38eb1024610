"""TensorRT-LLM through trtllm-serve's OpenAI-compatible HTTP API: one endpoint per server, round robin.

The request matches NVIDIA's MLPerf harness (`trtllm_endpoint` core): `prompt_token_ids`, `max_tokens`,
`min_tokens 1`, greedy (`top_k 1`, `top_p 0.001`); Offline posts without streaming, Server streams
(SSE) so first-token times are real. The HTTP/1.1 client is a small keep-alive asyncio one so the
harness has no extra dependency and thousands of requests share a few connections per endpoint.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Sequence
from urllib.parse import urlsplit

import numpy as np

from repro.core.errors import InputError, ReproError
from repro.run.backends.base import Backend, Request

HEALTH_TIMEOUT_S = 300.0


class BackendError(ReproError):
    """The inference server answered with an error or went away mid-run."""

    exit_code = 1


def endpoints_for(recipe: Any) -> list[str]:
    """REPRO_TRTLLM_ENDPOINTS (comma-separated URLs) or one local server per GPU from the recipe's base port."""
    env = os.environ.get("REPRO_TRTLLM_ENDPOINTS")
    if env:
        return [e.strip().rstrip("/") for e in env.split(",") if e.strip()]
    t = getattr(recipe, "trtllm", None)
    if t is None:
        raise InputError(f"recipe '{getattr(recipe, 'name', '?')}' has no trtllm section, so no server ports are known.",
                         "set REPRO_TRTLLM_ENDPOINTS or pick `--backend hf|sim`")
    return [f"http://127.0.0.1:{t.base_port + i}" for i in range(t.servers_per_vm)]


def build_payload(api: str, prompt_ids: Sequence[int], max_tokens: int, *, stream: bool, model: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": int(max_tokens), "min_tokens": 1, "temperature": 1.0,
                            "top_k": 1, "top_p": 0.001, "stream": stream}
    if api == "chat":
        body.update(messages=[], prompt_token_ids=[int(t) for t in prompt_ids])
    else:
        body.update(prompt=[int(t) for t in prompt_ids])
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def token_ids_of(choice: dict[str, Any]) -> list[int] | None:
    """trtllm-serve and vLLM-style servers put generated ids in different places; take the first present."""
    for holder in (choice, choice.get("message") or {}, choice.get("delta") or {}):
        for key in ("token_ids", "output_token_ids", "completion_token_ids"):
            if isinstance(holder.get(key), list):
                return [int(t) for t in holder[key]]
    return None


def text_of(choice: dict[str, Any]) -> str:
    for holder in (choice, choice.get("message") or {}, choice.get("delta") or {}):
        for key in ("text", "content"):
            if isinstance(holder.get(key), str):
                return holder[key]
    return ""


@dataclass
class _Endpoint:
    url: str
    host: str
    port: int
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = field(default_factory=list)
    sem: asyncio.Semaphore | None = None


class HttpClient:
    """Just enough HTTP/1.1: keep-alive POST/GET, Content-Length or chunked bodies, streamed for SSE."""

    def __init__(self, timeout_s: float = 3600.0) -> None:
        self.timeout_s = timeout_s

    @staticmethod
    async def _open(ep: _Endpoint) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if ep.idle:
            return ep.idle.pop()
        try:
            return await asyncio.open_connection(ep.host, ep.port, limit=1 << 22)
        except OSError as exc:
            raise BackendError(f"Nothing is listening at {ep.url} ({exc.strerror or exc}).",
                               "start the servers (`repro build-engine`, then trtllm-serve) or set REPRO_TRTLLM_ENDPOINTS") from None

    async def request(self, ep: _Endpoint, method: str, path: str, body: dict[str, Any] | None = None) -> AsyncIterator[bytes]:
        """Yields the body in pieces as they arrive; raises BackendError on a non-2xx status."""
        reader, writer = await self._open(ep)
        data = json.dumps(body).encode() if body is not None else b""
        head = (f"{method} {path} HTTP/1.1\r\nHost: {ep.host}:{ep.port}\r\nAccept: */*\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: keep-alive\r\n\r\n")
        reusable = False
        try:
            writer.write(head.encode() + data)
            await writer.drain()
            status_line = await reader.readline()
            if not status_line:
                raise BackendError(f"{ep.url} closed the connection without answering.", "check the server log")
            parts = status_line.decode("latin-1").split(" ", 2)
            status = int(parts[1])
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                k, _, v = line.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            pieces = self._body(reader, headers)
            if status >= 300:
                text = b"".join([p async for p in pieces]).decode("utf-8", "replace")[:300]
                raise BackendError(f"{ep.url}{path} answered HTTP {status}: {text}", "check the server log")
            async for piece in pieces:
                yield piece
            reusable = headers.get("connection", "").lower() != "close" and (
                "content-length" in headers or "chunked" in headers.get("transfer-encoding", ""))
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            raise BackendError(f"{ep.url} dropped the connection mid-request ({type(exc).__name__}).", "check the server log") from None
        finally:
            if reusable:
                ep.idle.append((reader, writer))
            else:
                writer.close()

    @staticmethod
    async def _body(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
        if "chunked" in headers.get("transfer-encoding", ""):
            while True:
                size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass
                    return
                yield await reader.readexactly(size)
                await reader.readexactly(2)
        elif "content-length" in headers:
            n = int(headers["content-length"])
            if n:
                yield await reader.readexactly(n)
        else:
            while chunk := await reader.read(1 << 16):
                yield chunk

    async def json(self, ep: _Endpoint, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        raw = b"".join([p async for p in self.request(ep, method, path, body)])
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise BackendError(f"{ep.url}{path} answered with something that is not JSON: {raw[:120]!r}", "check the server log") from None

    async def sse(self, ep: _Endpoint, path: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        buf = b""
        async for piece in self.request(ep, "POST", path, body):
            buf += piece
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    return
                yield json.loads(payload)


class TrtllmBackend(Backend):
    name = "trtllm"

    def __init__(self, endpoints: Sequence[str], *, api: str = "chat", stream: bool = False, model: str = "llama2-70b",
                 max_concurrency: int = 2048, tokenizer: Any = None, health_timeout_s: float = HEALTH_TIMEOUT_S) -> None:
        super().__init__()
        if not endpoints:
            raise InputError("No trtllm-serve endpoints given.", "set REPRO_TRTLLM_ENDPOINTS")
        self.urls = [u.rstrip("/") for u in endpoints]
        self.api = api
        self.stream = stream
        self.model = model
        self.max_concurrency = max_concurrency
        self.tokenizer = tokenizer
        self.health_timeout_s = health_timeout_s
        self.client = HttpClient()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="repro-trtllm", daemon=True)
        self._eps: list[_Endpoint] = []
        self._rr = 0
        self._tasks: set[asyncio.Task] = set()
        self.warnings: list[str] = []

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"

    def _run(self, coro, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, sink) -> None:
        super().start(sink)
        self._thread.start()
        self._run(self._setup())
        self._run(self.health(), timeout=self.health_timeout_s + 10)

    async def _setup(self) -> None:
        for url in self.urls:
            parts = urlsplit(url)
            if parts.scheme != "http" or not parts.hostname:
                raise InputError(f"Endpoint '{url}' is not an http://host:port URL.", "fix REPRO_TRTLLM_ENDPOINTS")
            self._eps.append(_Endpoint(url, parts.hostname, parts.port or 80, sem=asyncio.Semaphore(self.max_concurrency)))

    async def health(self) -> None:
        """Every endpoint must listen and answer a 10-token request; one clear error names the first that does not."""
        async def one(ep: _Endpoint) -> None:
            deadline = self.loop.time() + self.health_timeout_s
            while True:
                try:
                    await self.client.json(ep, "POST", self.path, build_payload(self.api, [1], 10, stream=False, model=self.model))
                    return
                except BackendError as exc:
                    if " answered HTTP 4" in exc.message:
                        raise BackendError(f"Port {ep.port} is in use by something that is not a ready trtllm-serve: {exc.message}",
                                           "stop whatever holds the port, or point REPRO_TRTLLM_ENDPOINTS at the servers") from None
                    if "Nothing is listening" in exc.message or self.loop.time() >= deadline:
                        raise
                    await asyncio.sleep(1.0)
        await asyncio.gather(*(one(ep) for ep in self._eps))

    def submit(self, requests: Sequence[Request]) -> None:
        self.loop.call_soon_threadsafe(self._spawn, list(requests))

    def _spawn(self, requests: list[Request]) -> None:
        for r in requests:
            ep = self._eps[self._rr % len(self._eps)]
            self._rr += 1
            task = self.loop.create_task(self._one(ep, r))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _ids(self, ids: list[int] | None, text: str, count: int | None) -> np.ndarray:
        if ids is None and self.tokenizer is not None and text:
            ids = self.tokenizer.encode(text, add_special_tokens=False)
        if ids is None:
            ids = [0] * max(1, int(count or 1))
        return np.asarray(ids or [0], dtype=np.int32)

    async def _one(self, ep: _Endpoint, r: Request) -> None:
        assert self.sink is not None and ep.sem is not None
        try:
            async with ep.sem:
                if self._stopping.is_set():
                    return
                body = build_payload(self.api, r.input_ids.tolist(), r.max_tokens, stream=self.stream, model=self.model)
                if self.stream:
                    ids: list[int] = []
                    text, count, first = "", 0, False
                    async for event in self.client.sse(ep, self.path, body):
                        choices = event.get("choices") or []
                        usage = event.get("usage") or {}
                        count = int(usage.get("completion_tokens") or count)
                        if not choices:
                            continue
                        new_ids = token_ids_of(choices[0])
                        piece = text_of(choices[0])
                        if new_ids:
                            ids.extend(new_ids)
                        text += piece
                        if not first and (new_ids or piece):
                            first = True
                            self.sink.first_tokens([(r.id, new_ids[0] if new_ids else 0)])
                    out = self._ids(ids or None, text, count or None)
                    if not first:
                        self.sink.first_tokens([(r.id, int(out[0]))])
                else:
                    doc = await self.client.json(ep, "POST", self.path, body)
                    choice = (doc.get("choices") or [{}])[0] if isinstance(doc, dict) else {}
                    usage = (doc.get("usage") or {}) if isinstance(doc, dict) else {}
                    out = self._ids(token_ids_of(choice), text_of(choice), usage.get("completion_tokens"))
                    self.sink.first_tokens([(r.id, int(out[0]))])
                self.sink.completed([(r.id, out)])
        except asyncio.CancelledError:
            return
        except BaseException as exc:  # noqa: BLE001 - reported to the harness, which ends the run
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
            try:
                self._run(_drain(), timeout=5)
            except Exception:  # noqa: BLE001
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "endpoints": self.urls, "api": self.api, "stream": self.stream}
