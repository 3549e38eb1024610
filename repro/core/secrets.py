"""Keep the Hugging Face token out of everything we print or store."""

from __future__ import annotations

import os
import re

_TOKEN_RE = re.compile(r"hf_[A-Za-z0-9]{8,}")
_ENV_NAMES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def redact(text: str) -> str:
    for name in _ENV_NAMES:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    return _TOKEN_RE.sub("hf_***", text)
