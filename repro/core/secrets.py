"""Keep the Hugging Face token out of everything we print or store."""

from __future__ import annotations

import os
import re
from typing import Any

_TOKEN_RE = re.compile(r"hf_[A-Za-z0-9]{8,}")
_ENV_NAMES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
_USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]*@")


def redact_url(url: str) -> str:
    """A URL with its user:password part replaced, so an endpoint can be named without its credentials."""
    return _USERINFO_RE.sub(r"\1***@", url)


def redact(text: str) -> str:
    for name in _ENV_NAMES:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    return _TOKEN_RE.sub("hf_***", redact_url(text))


def redact_tree(obj: Any) -> Any:
    """Every string in a JSON-shaped object redacted: the command line, endpoints and errors a run file records."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: redact_tree(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_tree(v) for v in obj]
    return obj
