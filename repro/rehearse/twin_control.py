"""The rehearsal's hands on the server twins it started (rehearse/standin/trtllm_serve.py's /twin/ routes): which
scenario's twin serves the next run, and the pre-roll that puts the run's first query into the published run's
steady state. Only the rehearsal's own stand-ins on this host are ever asked; every call is bounded in time."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from repro.core.errors import StepFailed

AGAIN = "see the stand-in's log in the run's servers/ folder, then `repro rehearse --pace published` again"
CALL_S = 30.0
"""One call's limit (a pre-roll simulates a few hundred virtual seconds of a busy server at once)."""


def post(url: str, path: str, doc: dict[str, Any], *, wait_s: float) -> dict[str, Any]:
    """POST `doc` to `url` + `path` (a twin route), retrying while nothing listens there (a server still starting)
    for up to `wait_s`; its JSON answer. A refusal, an error answer or no answer is one StepFailed naming the
    server."""
    data = json.dumps(doc).encode()
    give_up = time.monotonic() + wait_s
    while True:
        req = urllib.request.Request(url.rstrip("/") + path, data=data, headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=CALL_S) as resp:  # noqa: S310 - our own stand-in on loopback
                answer = json.loads(resp.read(1 << 16) or b"{}")
                return answer if isinstance(answer, dict) else {}
        except urllib.error.HTTPError as exc:
            raise StepFailed(
                f"The stand-in at {url} refused {path}: HTTP {exc.code} {exc.read(300)!r}.", AGAIN
            ) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            if time.monotonic() > give_up:
                raise StepFailed(
                    f"The stand-in at {url} did not answer {path} within {wait_s:g} s: {exc}.", AGAIN
                ) from None
            time.sleep(0.2)


def twin_backend(scenario: str, make: Callable[[str, Any], Any], wait_s: float) -> Callable[[str, Any], Any]:
    """A backend factory for a published-pace run: before the backend starts (readiness, NVIDIA's warm-up) every
    server is told to serve `scenario`'s twin, and once it has started, to pre-roll; `make` builds the backend."""

    def factory(name: str, ctx: Any) -> Any:
        backend = make(name, ctx)
        start = backend.start

        def started(sink: Any) -> None:
            for url in ctx.endpoints:
                post(url, "/twin/scenario", {"scenario": scenario}, wait_s=wait_s)
            start(sink)
            for url in ctx.endpoints:
                post(url, "/twin/preroll", {}, wait_s=wait_s)

        backend.start = started
        return backend

    return factory
