"""Number formatting shared by verdict sentences, reports and tables, so a figure reads the same everywhere."""

from __future__ import annotations

from typing import Any


def fmt_num(value: Any, digits: int = 1) -> str:
    if value is None or value == "unknown":
        return "unknown"
    return f"{float(value):,.{digits}f}"


def end_sentence(text: str) -> str:
    """The text ending in exactly one stop: messages quote reasons and hints that may or may not end with one."""
    text = text.rstrip()
    if not text or text.endswith((".", "!", "?", ":")):
        return text
    if text.endswith(")") and text[:-1].rstrip().endswith((".", "!", "?")):
        return text
    return text + "."


def join_sentences(*parts: str | None) -> str:
    """Sentences joined with one space, each ended once: the one place doctor, errors and hints join text."""
    return " ".join(end_sentence(p) for p in parts if p and p.strip())


def clause(text: str) -> str:
    """A sentence made fit to sit inside another one (in parentheses, after a dash): its final stop dropped."""
    text = text.rstrip()
    while text.endswith((".", "!")) and not text.endswith("..."):
        text = text[:-1].rstrip()
    return text
