"""Inference backends behind one small interface (base.py). Which backends exist, and what each can do, is the
registry in `repro.core.backends`; each backend module here defines `create(ctx)`, found by its registered name.
"""

from __future__ import annotations

import importlib

from repro.core.backends import backend_spec
from repro.run.backends.base import Backend, BackendContext, Request, Sink

__all__ = ["Backend", "BackendContext", "Request", "Sink", "create_backend"]


def create_backend(name: str, ctx: BackendContext) -> Backend:
    """The backend registered as `name`, built by its module's `create(ctx)`."""
    module = importlib.import_module(f"{__name__}.{backend_spec(name).name}")
    backend: Backend = module.create(ctx)
    return backend
