"""Inference backends behind one small interface (see base.py); `make_backend` picks one by name."""

from __future__ import annotations

from repro.run.backends.base import Backend, Request, Sink, make_backend

__all__ = ["Backend", "Request", "Sink", "make_backend"]
