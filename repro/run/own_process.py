"""A LoadGen run in a process of its own: LoadGen 6.0.17 loads mlperf.conf only on a process's first FromConfig, so
a second run in one process logs error_invalid_config "Multiple conf files are used", runs without mlperf.conf's
seeds, and verify FAILs it. Every run after a probe (tune's probes, the --target-qps auto probe, --repeat) goes
through here."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def in_own_process(fn: Callable[..., T], *args: Any) -> T:
    """fn(*args) in a freshly spawned process (never forked: LoadGen's threads may be running); its result or its
    exception here. fn and its arguments must pickle."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()
