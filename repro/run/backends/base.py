"""The backend interface: take token-id prompts with per-sample limits, report first tokens and completions.

A backend owns its threads; it calls the sink from any thread, in batches, so the harness can turn
events into LoadGen responses with one call per batch. The harness, not the backend, tracks which
samples are outstanding, so a backend that dies never leaves LoadGen waiting.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from repro.core.timescale import REAL_TIME, TimeScale

if TYPE_CHECKING:
    from repro.core.recipes import Recipe
    from repro.setup.dataset import PreparedDataset


class Request(NamedTuple):
    """One sample to generate (immutable; a tuple, so the harness makes one per sample cheaply)."""

    id: int
    index: int  # type: ignore[assignment]  # the field shadows tuple.index(), which nothing here calls
    input_ids: np.ndarray
    max_tokens: int


class Sink(Protocol):
    def first_tokens(self, events: Sequence[tuple[int, int]]) -> None: ...
    def completed(self, events: Sequence[tuple[int, np.ndarray]]) -> None:
        """(id, output ids): the ids logged, whose length is the token count LoadGen gets (TEST06 checks both)."""

    def failed(self, exc: BaseException) -> None: ...


@dataclass(frozen=True)
class BackendContext:
    """Everything a backend module's `create(ctx)` may use; each takes what it needs and ignores the rest."""

    recipe: Recipe
    scenario: str
    dataset: PreparedDataset
    model_dir: Path | None = None
    sim_rate: float | None = None
    """sim: tokens/s to replay at (None: as fast as possible)."""
    stream: bool = False
    """Stream tokens (the Server scenario on a backend that streams)."""
    tokenizer: Any = None
    endpoints: tuple[str, ...] = ()
    """HTTP backends: the servers to send to (empty: the backend's default)."""
    alive: Callable[[], None] | None = None
    """Raises when a server repro started has died (checked while waiting for readiness)."""
    ready_timeout_s: float | None = None
    stall_timeout_s: float | None = None
    """HTTP backends: seconds a server may send nothing before the run fails (None: the backend's default)."""
    served_model: str | None = None
    client_concurrency: int | None = None
    """HTTP backends: requests in flight per server instead of the recipe's."""
    time_scale: TimeScale = REAL_TIME
    """The run's time scale: a backend multiplies every deadline it keeps (stall, readiness) by it."""
    client_processes: int = 1
    """HTTP backends: the client's worker processes (run/backends/spread.py; 1: the run's own process)."""
    warmup: bool = False
    """HTTP backends: send NVIDIA's warm-up burst once the servers are ready (a run: yes; a tune probe: no, tune's
    own warm-up runs first)."""


class Backend(ABC):
    name = "base"
    label: str | None = None

    def __init__(self) -> None:
        self.sink: Sink | None = None
        self._stopping = threading.Event()

    def start(self, sink: Sink) -> None:
        self.sink = sink

    @abstractmethod
    def submit(self, requests: Sequence[Request]) -> None:
        """Queue work and return at once; events arrive through the sink."""

    def cancel(self) -> None:
        """Stop starting new work (Ctrl-C, failure); the harness completes whatever is left."""
        self._stopping.set()

    def close(self) -> None:
        self.cancel()

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name}

    def stats(self) -> dict[str, Any]:
        """What the backend measured beside LoadGen (token accounting, readiness); recorded in run.json."""
        return {}


class WorkerBackend(Backend):
    """Works through a queue on one thread; a failure there is reported to the harness, which ends the run."""

    join_timeout = 5.0

    def __init__(self) -> None:
        super().__init__()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self, sink: Sink) -> None:
        super().start(sink)
        self._thread = threading.Thread(target=self._run, name=f"repro-{self.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self.sink is not None
        try:
            self._work()
        except BaseException as exc:  # noqa: BLE001 - the harness decides what a failure means
            self.sink.failed(exc)

    @abstractmethod
    def _work(self) -> None:
        """Take items from self._queue until None or cancel, sending events to self.sink."""

    def close(self) -> None:
        super().close()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout=self.join_timeout)


class BatchQueueBackend(WorkerBackend):
    """Takes up to batch_size queued requests at a time (shortest prompts first, as submitted) and generates them
    together: a static batch, as the MLCommons reference SUT does."""

    def __init__(self, batch_size: int = 64) -> None:
        super().__init__()
        self.batch_size = batch_size

    def submit(self, requests: Sequence[Request]) -> None:
        for r in sorted(requests, key=lambda r: len(r.input_ids)):
            self._queue.put(r)

    def _next_batch(self) -> list[Request] | None:
        first = self._queue.get()
        if first is None:
            return None
        batch = [first]
        while len(batch) < self.batch_size:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._queue.put(None)
                break
            batch.append(item)
        return batch

    @abstractmethod
    def _generate(self, batch: list[Request]) -> None:
        """Answer every request of the batch through the sink."""

    def _work(self) -> None:
        while (batch := self._next_batch()) is not None:
            if self._stopping.is_set():
                return
            self._generate(batch)
