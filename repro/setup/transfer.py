"""Bounded HTTP transfers for `repro setup`: the token stays on the hub, and every transfer ends.

Token: `Authorization: Bearer` goes only to the hub's own origin (scheme, host, port: the rule huggingface_hub's
`_is_same_or_hub_host` applies, and the browser's same-origin rule). Redirects are followed here, one by one; the
header is rebuilt for every hop, so a 302/307 to a CDN, to another port of the same host, or from https to http
never carries it. A mirror on another port of the same machine is another service: it gets no token.

Bounds: no byte for `stall_s` ends the transfer (socket timeout), and so does a trickle: every window of `stall_s`
seconds must bring `MIN_BYTES_PER_WINDOW` bytes, so a server sending a byte every 5 s is cut within two windows.
Response headers must arrive within one window (a timer closes the socket). A body is never read past the size
the hub listed (or the HEAD announced, capped at `MAX_UNLISTED_BYTES`): one byte more and the transfer is refused.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import stat
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from repro.core.benchmarks import LOOPBACK_HOSTS
from repro.core.errors import ReproError, StepFailed
from repro.core.secrets import redact_url

STALL_ENV = "REPRO_DOWNLOAD_STALL_S"
DEFAULT_STALL_S = 60.0
MIN_BYTES_PER_WINDOW = 64 << 10
MAX_REDIRECTS = 10
MAX_UNLISTED_BYTES = 8 << 30  # a dataset URL's own HEAD is not trusted beyond this
CHUNK = 1 << 20
RETRIES = 5  # a connection dropped mid-body is resumed this many times when it made progress
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDIRECTS = (301, 302, 303, 307, 308)


class TransferError(StepFailed):
    """A transfer that broke a bound or the protocol: one sentence naming the URL (without its signed query)."""


class Dropped(TransferError):
    """The connection ended before the body did: resumable."""


@dataclass(frozen=True)
class Limits:
    stall_s: float = DEFAULT_STALL_S
    min_bytes: int = MIN_BYTES_PER_WINDOW

    @classmethod
    def from_env(cls) -> Limits:
        """REPRO_DOWNLOAD_STALL_S (seconds, 1-3600) changes the window, for slow links or tests."""
        raw = os.environ.get(STALL_ENV, "")
        try:
            value = float(raw) if raw else DEFAULT_STALL_S
        except ValueError:
            value = DEFAULT_STALL_S
        return cls(stall_s=min(max(value, 0.2), 3600.0) if value == value else DEFAULT_STALL_S)


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) with the scheme's default port: what must match for the token to be sent."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme, 0)


def token_allowed(url: str, hub_url: str | None) -> bool:
    return hub_url is not None and origin(url) == origin(hub_url)


def shown(url: str) -> str:
    """A URL as printed: no user:password, no query (a CDN's signed URL carries its signature there)."""
    parts = urlsplit(redact_url(url))
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    """A connection for url (through the environment's proxy, as urllib would) and the request target."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TransferError(f"{shown(url)}: not an http(s) URL.", "check the URL, then `repro setup`")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host, port = parts.hostname, parts.port
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if parts.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(p.hostname or "", p.port, timeout=timeout)
            conn.set_tunnel(host, port)
            return conn, target
        return http.client.HTTPConnection(p.hostname or "", p.port, timeout=timeout), url
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(host, port, timeout=timeout), target


def _request(method: str, url: str, headers: dict[str, str], limits: Limits) -> http.client.HTTPResponse:
    """One request; the status line and headers must arrive within one stall window."""
    conn, target = _connection(url, limits.stall_s)
    fired = threading.Event()

    def expire() -> None:
        fired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(limits.stall_s, expire)
    timer.daemon = True
    timer.start()
    stalled = TransferError(
        f"{shown(url)}: no answer within {limits.stall_s:g} s (the server stalled before its headers).",
        "check the network or the mirror, then `repro setup` (finished files are kept)",
    )
    try:
        conn.request(method, target, headers=headers)
        resp = conn.getresponse()
        if fired.is_set():  # the timer cut the headers short: http.client may still have parsed a status line
            resp.close()
            raise stalled
    except (OSError, http.client.HTTPException) as exc:
        conn.close()
        if fired.is_set() or isinstance(exc, TimeoutError):
            raise stalled from None
        raise Dropped(
            f"{shown(url)}: the connection failed ({type(exc).__name__}).",
            "check the network, then `repro setup` (finished files are kept)",
        ) from None
    finally:
        timer.cancel()
    return resp


def open_url(
    method: str,
    url: str,
    *,
    token: str | None,
    hub: str | None,
    headers: dict[str, str],
    limits: Limits,
    hop_ok: Callable[[str], bool] | None = None,
) -> tuple[str, http.client.HTTPResponse]:
    """Follow redirects by hand: the token is added afresh on each hop, and only on the hub's own origin; with
    `hop_ok`, a URL it refuses (the first or a redirect's) is never requested."""
    for _ in range(MAX_REDIRECTS + 1):
        if hop_ok is not None and not hop_ok(url):
            raise TransferError(
                f"{shown(url)}: refused (not https); a checksum list is fetched over https only.",
                "check the benchmark file's md5 list_url, then `repro setup`",
            )
        hop = dict(headers)
        if token and token_allowed(url, hub):
            hop["Authorization"] = f"Bearer {token}"
        resp = _request(method, url, hop, limits)
        location = resp.getheader("Location")
        if resp.status not in _REDIRECTS or not location:
            return url, resp
        resp.close()
        url = urljoin(url, location)
    raise TransferError(
        f"{shown(url)}: more than {MAX_REDIRECTS} redirects.", "check the mirror (HF_ENDPOINT), then `repro setup`"
    )


@contextlib.contextmanager
def deadline(limits: Limits, what: str) -> Iterator[None]:
    """A total time bound (two stall windows) for a hub metadata call made through huggingface_hub, whose client
    has per-read timeouts only: a trickling API answer would otherwise keep `repro setup` planning for ever.
    SIGALRM interrupts the blocking read in the main thread; elsewhere the call runs unbounded, as before."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    seconds = 2 * limits.stall_s

    def expire(signum: int, frame: Any) -> None:
        raise TransferError(
            f"{what}: no complete answer within {seconds:g} s (the server is stalling or trickling).",
            "check the network or HF_ENDPOINT, then `repro setup`",
        )

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _http_error(url: str, status: int) -> ReproError:
    if status in (401, 403):
        return ReproError(
            f"{shown(url)} refused the download (HTTP {status}).",
            "check access (`hf auth login`, or the model page's license), then `repro setup`",
        )
    if status == 404:
        return ReproError(f"{shown(url)}: not found (HTTP 404).", "check the recipe's URL, then `repro setup`")
    return ReproError(f"{shown(url)} answered HTTP {status}.", "`repro setup` again (finished files are kept)")


def content_length(url: str, *, limits: Limits | None = None) -> int | None:
    """Content-Length from a HEAD without credentials (a dataset URL is not the hub), or None."""
    try:
        _, resp = open_url(
            "HEAD", url, token=None, hub=None, headers={"User-Agent": "repro"}, limits=limits or Limits.from_env()
        )
    except ReproError:
        return None
    with resp:
        if resp.status != 200:
            return None
        try:
            return int(resp.getheader("Content-Length") or "")
        except ValueError:
            return None


def secure_url(url: str) -> bool:
    """https, or plain http to this machine's loopback (a local mirror or stand-in): what a checksum list may use."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    return bool(host) and (parts.scheme == "https" or (parts.scheme == "http" and host in LOOPBACK_HOSTS))


def fetch_small(url: str, max_bytes: int, *, limits: Limits | None = None) -> bytes:
    """A small document (MLCommons' .md5 list) into memory: no credentials, https on every hop (`secure_url`),
    HTTP 200, at most `max_bytes`, and the whole answer within two stall windows (a trickle cannot hold it open)."""
    limits = limits or Limits.from_env()
    headers = {"User-Agent": "repro", "Accept-Encoding": "identity"}
    final, resp = open_url("GET", url, token=None, hub=None, headers=headers, limits=limits, hop_ok=secure_url)
    end = time.monotonic() + 2 * limits.stall_s
    with resp:
        if resp.status != 200:
            raise _http_error(final, resp.status)
        body = bytearray()
        while True:
            try:
                chunk = resp.read1(max_bytes + 1 - len(body))
            except (OSError, http.client.HTTPException) as exc:
                raise Dropped(
                    f"{shown(final)}: the connection broke ({type(exc).__name__}).", "`repro setup`"
                ) from None
            if not chunk:
                return bytes(body)
            body += chunk
            if len(body) > max_bytes:
                raise TransferError(
                    f"{shown(final)}: more than {max_bytes:,} bytes; not a checksum list.",
                    "check the URL, then `repro setup`",
                )
            if time.monotonic() > end:
                raise TransferError(
                    f"{shown(final)}: no complete answer within {2 * limits.stall_s:g} s (the server is trickling).",
                    "check the network, then `repro setup`",
                )


def open_part(part: Path) -> int:
    """The `.incomplete` file for appending: created by us or a regular file already ours, never through a
    symlink (a planted `x.incomplete -> /elsewhere` would make the download append to a file outside)."""
    part.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(part, flags | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        raise ReproError(
            f"{part}: not a plain file repro can resume into ({exc.strerror}); nothing was written through it.",
            f"remove {part.name}, then `repro setup`",
        ) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        raise ReproError(
            f"{part}: not a plain file of its own (a device, FIFO or hard link); nothing was written through it.",
            f"remove {part.name}, then `repro setup`",
        )
    os.set_blocking(fd, True)
    return fd


Progress = Callable[[int], None]


def download(
    url: str,
    part: Path,
    *,
    expected_size: int,
    token: str | None,
    hub: str | None,
    progress: Progress | None = None,
    limits: Limits | None = None,
) -> int:
    """Append url's body to `part` until it holds `expected_size` bytes, resuming what is there; returns the bytes
    resumed. Retries a dropped connection that made progress; a stall, an overlong body or an HTTP error ends it."""
    limits = limits or Limits.from_env()
    fd = open_part(part)
    try:
        resumed = os.fstat(fd).st_size
        if resumed > expected_size:
            os.ftruncate(fd, 0)
            resumed = 0
        start = resumed
        for _ in range(RETRIES + 1):
            have = os.fstat(fd).st_size
            if have == expected_size:
                break
            try:
                _one_get(url, fd, have, expected_size, token, hub, progress, limits)
            except Dropped:
                if os.fstat(fd).st_size == have:
                    raise
        else:
            raise Dropped(
                f"{shown(url)}: the connection kept dropping ({RETRIES} resumes).",
                "`repro setup` again; the partial file is kept and resumed",
            )
        os.fsync(fd)
        return start
    finally:
        os.close(fd)


def _one_get(
    url: str,
    fd: int,
    have: int,
    expected: int,
    token: str | None,
    hub: str | None,
    progress: Progress | None,
    limits: Limits,
) -> None:
    headers = {"User-Agent": "repro", "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    final, resp = open_url("GET", url, token=token, hub=hub, headers=headers, limits=limits)
    with resp:
        if resp.status == 200 and have:
            os.ftruncate(fd, 0)  # the server ignored the Range: start over
            if progress:
                progress(-have)
            have = 0
        elif resp.status == 206:
            crange = resp.getheader("Content-Range") or ""
            if not crange.startswith(f"bytes {have}-"):
                raise TransferError(
                    f"{shown(final)}: answered a resume from byte {have:,} with '{crange[:60]}'.",
                    "`repro setup` again",
                )
        elif resp.status != 200:
            raise _http_error(final, resp.status)
        left = expected - have
        announced = resp.getheader("Content-Length")
        if announced and announced.isdigit() and int(announced) > left:
            raise TransferError(
                f"{shown(final)}: announces {int(announced):,} bytes where {left:,} are expected; not read.",
                "check the mirror or the recipe, then `repro setup`",
            )
        _read_body(resp, final, fd, left, progress, limits)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_body(
    resp: http.client.HTTPResponse, url: str, fd: int, left: int, progress: Progress | None, limits: Limits
) -> None:
    got, window_start, window_bytes = 0, time.monotonic(), 0
    while True:
        try:
            chunk = resp.read1(min(CHUNK, left - got + 1))
        except TimeoutError:
            raise TransferError(
                f"{shown(url)}: no byte for {limits.stall_s:g} s after {got:,} of {left:,} bytes; the transfer "
                "stalled.",
                "check the network or the mirror, then `repro setup` (the partial file is kept and resumed)",
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise Dropped(f"{shown(url)}: the connection broke ({type(exc).__name__}).", "`repro setup`") from None
        if not chunk:
            break
        got += len(chunk)
        if got > left:
            raise TransferError(
                f"{shown(url)}: sent more than the {left:,} bytes expected; cut there, the file is not used.",
                "check the mirror or the recipe, then `repro setup`",
            )
        _write_all(fd, chunk)
        if progress:
            progress(len(chunk))
        window_bytes += len(chunk)
        now = time.monotonic()
        if now - window_start >= limits.stall_s:
            if window_bytes < limits.min_bytes:
                raise TransferError(
                    f"{shown(url)}: {window_bytes:,} bytes in {now - window_start:.0f} s (under "
                    f"{limits.min_bytes:,} per {limits.stall_s:g} s); the transfer is trickling and was stopped.",
                    "check the network or the mirror, then `repro setup` (the partial file is kept and resumed)",
                )
            window_start, window_bytes = now, 0
    if got < left:
        raise Dropped(f"{shown(url)}: the body ended after {got:,} of {left:,} bytes.", "`repro setup`")
