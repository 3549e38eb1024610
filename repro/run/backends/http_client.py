"""The HTTP/1.1 client repro speaks to OpenAI-compatible inference servers with, and the request and answer forms.

A small keep-alive asyncio client (no third-party HTTP stack in the timed path): POST/GET, Content-Length or
chunked bodies, server-sent events for streaming. Every read is bounded (a stall timeout per byte, a whole-request
limit, caps on headers and bodies), so a server that stalls or lies ends the request with one BackendError naming
the endpoint. The request bodies (TensorRT-LLM's form and the plain OpenAI completions forms) and the parsing of
generated ids, text and `usage` live here too; `repro.run.backends.trtllm` is the backend that drives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from repro.core.errors import ReproError
from repro.core.timescale import REAL_TIME, TimeScale

CONNECT_TIMEOUT_S = 30.0
# No byte for this long ends a request. A loaded 70B server answers a non-streamed 1,024-token request in about
# two minutes at its slowest batch (and streams a token every fraction of a second), so ten minutes is a stall,
# not a slow answer; `--stall-timeout` changes it. A request as a whole gets three times that.
STALL_TIMEOUT_S = 600.0
WHOLE_REQUEST_STALLS = 3
# A 1,024-token answer with ids is ~20 KB (streamed as events, ~300 KB); a body past this is not an answer.
MAX_BODY_BYTES = 8 << 20
MAX_HEAD_BYTES = 64 << 10
# uvicorn (trtllm-serve, `transformers serve`) closes a kept-alive connection after 5 s idle; one reused at that moment
# is closed unanswered. Connections idle longer than this are not reused (a Server run at a few queries/s has many).
IDLE_REUSE_S = 4.0
# After `data: [DONE]` the body's end usually follows at once; this long is waited for it before closing.
DRAIN_AFTER_DONE_S = 2.0


class BackendError(ReproError):
    """The inference server answered with an error, could not be reached, or went away mid-run.

    `kind` says which: refused, timeout, reset, emfile, http, not-ready, protocol, died, refused-all;
    `status` is the HTTP status when the server answered one.
    """

    exit_code = 1

    def __init__(
        self, message: str, next_command: str | None = None, *, kind: str = "http", status: int | None = None
    ) -> None:
        super().__init__(message, next_command)
        self.kind = kind
        self.status = status


RETRYABLE = ("refused", "reset", "timeout", "not-ready")
# kind="stall": the server stopped sending (or sent too slowly) for the stall timeout; kind="too-large": a
# body or header past its cap. Neither is retried: the run ends, failed, naming the endpoint.
CONNECTION_KINDS = ("refused", "reset", "timeout", "emfile")
FORM_TRTLLM = "trtllm"
FORM_OPENAI_IDS = "openai-completions-token-ids"
FORM_OPENAI_TEXT = "openai-completions-text"
FORMS = (FORM_TRTLLM, FORM_OPENAI_IDS, FORM_OPENAI_TEXT)


def connect_error(url: str, exc: BaseException) -> BackendError:
    """One sentence per failure kind, so 'too many open files' never reads as 'nothing is listening'."""
    code = getattr(exc, "errno", None)
    if code in (errno.EMFILE, errno.ENFILE):
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return BackendError(
            f"Too many open files: could not open a connection to {url} (the open-file limit is {soft}).",
            f"`ulimit -n {max(soft * 2, 65536)}`, then run again",
            kind="emfile",
        )
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or code == errno.ETIMEDOUT:
        return BackendError(
            f"Timed out connecting to {url}.", "check the host and port, and that the server runs", kind="timeout"
        )
    if code == errno.ECONNREFUSED or isinstance(exc, ConnectionRefusedError):
        return BackendError(
            f"Connection refused at {url}: nothing is listening there (yet).",
            "start the server at that URL (or leave out --endpoint and repro starts one), then run the same "
            "command again",
            kind="refused",
        )
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)) or code in (errno.ECONNRESET, errno.EPIPE):
        return BackendError(f"{url} reset the connection.", "check the server log", kind="reset")
    return BackendError(
        f"Could not connect to {url} ({getattr(exc, 'strerror', None) or exc}).",
        "check the URL and that the server runs",
        kind="refused",
    )


def build_payload(
    api: str, prompt_ids: Sequence[int], max_tokens: int, *, stream: bool, model: str, usage: bool = True
) -> dict[str, Any]:
    """TensorRT-LLM's form (NVIDIA's harness body); streamed with `usage`, it asks for the usage event too."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": int(max_tokens),
        "min_tokens": 1,
        "temperature": 1.0,
        "top_k": 1,
        "top_p": 0.001,
        "stream": stream,
    }
    if api == "chat":
        body.update(messages=[], prompt_token_ids=[int(t) for t in prompt_ids])
    else:
        body.update(prompt=[int(t) for t in prompt_ids])
    if stream and usage:
        body["stream_options"] = {"include_usage": True}
    return body


def build_openai_payload(
    prompt: Sequence[int] | str, max_tokens: int, *, stream: bool, model: str, usage: bool = True
) -> dict[str, Any]:
    """The standard OpenAI completions body: greedy is temperature 0; nothing beyond the published API."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt if isinstance(prompt, str) else [int(t) for t in prompt],
        "max_tokens": int(max_tokens),
        "temperature": 0,
        "stream": stream,
    }
    if stream and usage:
        body["stream_options"] = {"include_usage": True}
    return body


def _holders(choice: Any) -> list[dict[str, Any]]:
    if not isinstance(choice, dict):
        return []
    return [h for h in (choice, choice.get("message"), choice.get("delta")) if isinstance(h, dict)]


def token_ids_of(choice: dict[str, Any]) -> list[int] | None:
    """trtllm-serve and vLLM-style servers put generated ids in different places; take the first present.

    Ids are whole numbers a vocabulary can hold (0 to 2^31-1); anything else is a server error, not a token."""
    for holder in _holders(choice):
        for key in ("token_ids", "output_token_ids", "completion_token_ids"):
            ids = holder.get(key)
            if isinstance(ids, list):
                if not all(type(t) is int and 0 <= t < 2**31 for t in ids):
                    bad = next(t for t in ids if not (type(t) is int and 0 <= t < 2**31))
                    raise BackendError(
                        f"the server sent a token id that is not a vocabulary index: {str(bad)[:40]!r}",
                        "check the server (is --endpoint an inference server?)",
                        kind="protocol",
                    )
                return ids
    return None


def text_of(choice: dict[str, Any]) -> str:
    for holder in _holders(choice):
        for key in ("text", "content"):
            if isinstance(holder.get(key), str):
                return holder[key]
    return ""


@dataclass
class Endpoint:
    url: str
    host: str
    port: int
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = field(default_factory=list)
    """Kept-alive connections and when each went idle (loop time)."""
    sem: asyncio.Semaphore | None = None
    form: str = FORM_TRTLLM
    model: str = ""
    stream_usage: bool = True
    """Streamed requests ask for the usage event (`stream_options`); False once this server refused the field."""


class _Clock:
    """One request's two limits: no byte for `stall_s`, and the whole request within `whole_s`."""

    def __init__(
        self, ep: Endpoint, path: str, stall_s: float, whole_s: float, time_scale: TimeScale = REAL_TIME
    ) -> None:
        self.where = f"{ep.url}{path}"
        self.stall_s = stall_s
        self.whole_s = whole_s
        self.time_scale = time_scale
        self.deadline = asyncio.get_running_loop().time() + whole_s

    def _left(self) -> float:
        left = self.deadline - asyncio.get_running_loop().time()
        if left <= 0:
            raise self.stalled(whole=True)
        return min(self.stall_s, left)

    def stalled(self, *, whole: bool = False) -> BackendError:
        ts = self.time_scale
        what = (
            f"did not finish answering within {ts.describe(self.whole_s)}"
            if whole
            else f"sent nothing for {ts.describe(self.stall_s)}"
        )
        return BackendError(
            f"{self.where} {what} (stall timeout); the run stopped there.",
            "check the server log, or raise the limit with --stall-timeout SECONDS",
            kind="stall",
        )

    async def read(self, reader: asyncio.StreamReader, n: int = 1 << 16) -> bytes:
        try:
            return await asyncio.wait_for(reader.read(n), self._left())
        except (TimeoutError, asyncio.TimeoutError):
            raise self.stalled(whole=asyncio.get_running_loop().time() >= self.deadline) from None

    async def head(self, reader: asyncio.StreamReader) -> list[bytes]:
        """Status line and headers, which must all arrive within one stall timeout (a byte a second never does)."""
        limit = asyncio.get_running_loop().time() + self.stall_s

        size = 0

        async def lines() -> list[bytes]:
            nonlocal size
            out: list[bytes] = []
            while True:
                line = await reader.readline()
                size += len(line)
                if size > MAX_HEAD_BYTES:
                    raise BackendError(
                        f"{self.where} sent more than {MAX_HEAD_BYTES >> 10} KB of headers.",
                        "point --endpoint at an OpenAI-compatible server",
                        kind="too-large",
                    )
                out.append(line)
                if line in (b"\r\n", b"\n", b"") and len(out) > 1 or not line:
                    return out

        try:
            left = min(limit, self.deadline) - asyncio.get_running_loop().time()
            return await asyncio.wait_for(lines(), max(left, 0.001))
        except (TimeoutError, asyncio.TimeoutError):
            if not size and not reader._buffer:  # type: ignore[attr-defined]  # not one byte: a plain stall
                raise self.stalled() from None
            raise BackendError(
                f"{self.where} did not finish its status line and headers within "
                f"{self.time_scale.describe(self.stall_s)} (stall timeout); the run stopped there.",
                "check the server log, or raise the limit with --stall-timeout SECONDS",
                kind="stall",
            ) from None
        except ValueError:  # a line past the reader's limit
            raise BackendError(
                f"{self.where} sent a header line longer than {MAX_HEAD_BYTES >> 10} KB.",
                "point --endpoint at an OpenAI-compatible server",
                kind="too-large",
            ) from None


class HttpClient:
    """Just enough HTTP/1.1: keep-alive POST/GET, Content-Length or chunked bodies, streamed for SSE.

    Every read is bounded: no byte for `stall_s` seconds, a whole request past `WHOLE_REQUEST_STALLS` times that,
    headers past 64 KB and a body past `max_body` bytes each end the request with one BackendError naming the
    endpoint, so a server that stalls or lies can neither hang a run nor fill its memory.
    """

    def __init__(
        self,
        stall_s: float = STALL_TIMEOUT_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        max_body: int = MAX_BODY_BYTES,
        time_scale: TimeScale = REAL_TIME,
    ) -> None:
        """`stall_s` is already in this run's seconds; `time_scale` only says how a message names it."""
        self.time_scale = time_scale
        self.stall_s = stall_s
        self.connect_timeout_s = connect_timeout_s
        self.max_body = max_body

    async def _open(self, ep: Endpoint) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
        """A kept-alive connection idle for less than IDLE_REUSE_S (the server has not timed it out), else a new one;
        the flag says which."""
        now = asyncio.get_running_loop().time()
        while ep.idle:
            reader, writer, since = ep.idle.pop()
            if now - since < IDLE_REUSE_S and not reader.at_eof():
                return reader, writer, True
            writer.close()
        try:
            opening = asyncio.open_connection(ep.host, ep.port, limit=MAX_HEAD_BYTES)
            return (*await asyncio.wait_for(opening, self.connect_timeout_s), False)
        except (TimeoutError, OSError) as exc:
            raise connect_error(ep.url, exc) from None

    async def _exchange(
        self, ep: Endpoint, payload: bytes, clock: _Clock
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, list[bytes]]:
        """Send the request and read its head. A kept-alive connection the server closed as the request went out
        (no status line, or a reset) is retried once on a new connection, as HTTP clients do: nothing was answered."""
        while True:
            reader, writer, reused = await self._open(ep)
            try:
                writer.write(payload)
                await writer.drain()
                head = await clock.head(reader)
            except (ConnectionError, asyncio.IncompleteReadError):
                writer.close()
                if not reused:
                    raise
                continue
            except BaseException:
                writer.close()
                raise
            if head[0] or not reused:
                return reader, writer, head
            writer.close()

    def _too_large(self, clock: _Clock, what: str) -> BackendError:
        return BackendError(
            f"{clock.where} sent {what} larger than {self.max_body >> 20} MB; no answer to one request is that large.",
            "check the server (is --endpoint an inference server?)",
            kind="too-large",
        )

    async def request(
        self, ep: Endpoint, method: str, path: str, body: dict[str, Any] | None = None
    ) -> AsyncGenerator[bytes, None]:
        """Yields the body in pieces as they arrive; raises BackendError on a non-2xx status."""
        clock = _Clock(ep, path, self.stall_s, self.stall_s * WHOLE_REQUEST_STALLS, self.time_scale)
        data = json.dumps(body).encode() if body is not None else b""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {ep.host}:{ep.port}\r\nAccept: */*\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: keep-alive\r\n\r\n"
        )
        reusable = False
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer, (status_line, *header_lines) = await self._exchange(ep, head.encode() + data, clock)
            if not status_line:
                raise BackendError(
                    f"{ep.url} closed the connection without answering.", "check the server log", kind="reset"
                )
            parts = status_line.decode("latin-1").split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
                raise BackendError(
                    f"{ep.url} does not speak HTTP (first line: {status_line[:60]!r}).",
                    "point --endpoint at an OpenAI-compatible server",
                    kind="protocol",
                )
            status = int(parts[1])
            headers: dict[str, str] = {}
            for line in header_lines:
                k, _, v = line.decode("latin-1").partition(":")
                if v:
                    headers[k.strip().lower()] = v.strip()
            pieces = self._body(reader, headers, clock)
            if status >= 300:
                text = b"".join([p async for p in pieces]).decode("utf-8", "replace")[:300]
                raise BackendError(
                    f"{ep.url}{path} answered HTTP {status}: {text}",
                    "check the server log",
                    kind="not-ready" if status in (408, 429, 500, 502, 503, 504) else "http",
                    status=status,
                )
            async for piece in pieces:
                yield piece
            reusable = (
                headers.get("connection", "").lower() != "close"
                and ("content-length" in headers or "chunked" in headers.get("transfer-encoding", ""))
                and not reader.at_eof()
                and not getattr(reader, "_buffer", b"")  # bytes past the body: its length lied
            )
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            raise BackendError(
                f"{ep.url} reset the connection mid-request ({type(exc).__name__}).",
                "check the server log",
                kind="reset",
            ) from None
        finally:
            if reusable and writer is not None:
                ep.idle.append((reader, writer, asyncio.get_running_loop().time()))
            elif writer is not None:
                writer.close()

    async def _body(self, reader: asyncio.StreamReader, headers: dict[str, str], clock: _Clock) -> AsyncIterator[bytes]:
        if "chunked" in headers.get("transfer-encoding", ""):
            async for piece in self._dechunk(reader, clock):
                yield piece
            return
        total = 0
        if "content-length" in headers:
            raw = headers["content-length"]
            if not raw.isdigit() or len(raw) > 18:
                raise BackendError(
                    f"{clock.where} sent Content-Length {raw[:40]!r}, not a byte count.",
                    "point --endpoint at an OpenAI-compatible server",
                    kind="protocol",
                )
            n = int(raw)
            if n > self.max_body:
                raise self._too_large(clock, f"a Content-Length of {n:,} bytes,")
            while total < n:
                chunk = await clock.read(reader, min(1 << 16, n - total))
                if not chunk:
                    raise asyncio.IncompleteReadError(b"", n - total)
                total += len(chunk)
                yield chunk
            return
        while chunk := await clock.read(reader):
            total += len(chunk)
            if total > self.max_body:
                raise self._too_large(clock, "a body")
            yield chunk

    async def _dechunk(self, reader: asyncio.StreamReader, clock: _Clock) -> AsyncIterator[bytes]:
        """Chunked transfer decoding over whatever bytes have arrived: one await per network read, not three per
        chunk, since a streaming server sends one small chunk per token."""
        buf = b""
        pos = 0
        total = 0
        while True:
            out: list[bytes] = []
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                try:
                    size = int(buf[pos:eol].split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    raise BackendError(
                        f"{clock.where} sent a chunk size that is not hexadecimal: {buf[pos:eol][:40]!r}.",
                        "point --endpoint at an OpenAI-compatible server",
                        kind="protocol",
                    ) from None
                if size > self.max_body:
                    raise self._too_large(clock, "a chunk")
                if size == 0:
                    if out:
                        yield b"".join(out)
                    rest = buf[eol + 2 :]
                    while not (rest == b"\r\n" or rest.endswith(b"\r\n\r\n")):
                        more = await clock.read(reader)
                        if not more or len(rest) > MAX_HEAD_BYTES:
                            break
                        rest += more
                    return
                end = eol + 2 + size
                if len(buf) < end + 2:
                    break
                out.append(buf[eol + 2 : end])
                pos = end + 2
            if out:
                yield b"".join(out)
            buf, pos = buf[pos:], 0
            if len(buf) > self.max_body or (b"\r\n" not in buf and len(buf) > MAX_HEAD_BYTES):
                raise self._too_large(clock, "a chunk")
            more = await clock.read(reader)
            if not more:
                raise asyncio.IncompleteReadError(buf, None)
            total += len(more)
            if total > self.max_body * 2:
                raise self._too_large(clock, "a chunked body")
            buf += more

    async def json(self, ep: Endpoint, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        raw = b"".join([p async for p in self.request(ep, method, path, body)])
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise BackendError(
                f"{ep.url}{path} answered with something that is not JSON: {raw[:120]!r}",
                "point --endpoint at an OpenAI-compatible server",
                kind="protocol",
            ) from None

    async def sse(self, ep: Endpoint, path: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Events up to `data: [DONE]`, after which the body's end is awaited briefly so the connection can be
        reused; a server that sends [DONE] and then nothing costs a closed connection, not a stall timeout. The end of
        the body also ends the events (`transformers serve` sends no [DONE]); a body that never ends is a stall."""
        buf = b""
        stream = self.request(ep, "POST", path, body)
        try:
            async for piece in stream:
                *lines, buf = (buf + piece).split(b"\n")
                if len(buf) > self.max_body:
                    raise BackendError(
                        f"{ep.url}{path} sent an event line longer than {self.max_body >> 20} MB.",
                        "check the server (is --endpoint an inference server?)",
                        kind="too-large",
                    )
                for line in lines:
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        with contextlib.suppress(TimeoutError, asyncio.TimeoutError, BackendError):
                            await asyncio.wait_for(_drain(stream), DRAIN_AFTER_DONE_S)
                        return
                    try:
                        event = json.loads(payload)
                    except ValueError:
                        raise BackendError(
                            f"{ep.url}{path} sent an event that is not JSON: {payload[:120]!r}",
                            "point --endpoint at an OpenAI-compatible server",
                            kind="protocol",
                        ) from None
                    if isinstance(event, dict):
                        yield event
        finally:
            await stream.aclose()


async def _drain(stream: AsyncIterator[bytes]) -> None:
    async for _ in stream:
        pass


def usage_count(usage: Any) -> int | None:
    """`usage.completion_tokens` when it is a whole, non-negative number; anything else is no count."""
    value = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
