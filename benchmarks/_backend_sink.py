"""Drive a repro backend in a benchmark: submit requests and wait until every one has completed.

The harness's own sink records results for LoadGen; a side-by-side timing wants only "all done, how many
tokens", so the benchmarks that time a backend against a reference share this one.
"""

from __future__ import annotations

import threading
from typing import Any


class CountingSink:
    """Counts completed requests and their tokens; `finished` is set when the expected count is reached."""

    def __init__(self) -> None:
        self.expected = self.done = self.tokens = 0
        self.finished = threading.Event()
        self.error: BaseException | None = None

    def expect(self, n: int) -> None:
        self.expected, self.done, self.tokens = n, 0, 0
        self.finished.clear()

    def first_tokens(self, events: Any) -> None:
        pass

    def completed(self, events: Any) -> None:
        self.done += len(events)
        self.tokens += sum(len(e[1]) for e in events)
        if self.done >= self.expected:
            self.finished.set()

    def failed(self, exc: BaseException) -> None:
        self.error = exc
        self.finished.set()


def submit_all(name: str, backend: Any, sink: CountingSink, reqs: list[Any], timeout_s: float = 600) -> int:
    """Submit `reqs` to a started backend and block until all complete; returns the tokens generated."""
    sink.expect(len(reqs))
    backend.submit(reqs)
    if not sink.finished.wait(timeout_s) or sink.error is not None:
        raise RuntimeError(f"{name} backend did not finish: {sink.error}")
    return sink.tokens
