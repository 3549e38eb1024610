"""Number formatting shared by verdict sentences, reports and tables, so a figure reads the same everywhere; and
the word wrap that keeps a number with its unit (ATOM), for plain lines and Rich prose alike."""

from __future__ import annotations

import re
from typing import Any


def fmt_num(value: Any, digits: int = 1) -> str:
    if value is None or value == "unknown":
        return "unknown"
    return f"{float(value):,.{digits}f}"


def fmt_rate(value: Any) -> str:
    """A tokens/s figure as published results print it: 1 decimal from 1,000 up, 2 below (211.81 per GPU for
    Llama-3.1-405B, not 211.8), so a small per-GPU figure keeps the precision it is published with."""
    if value is None or value == "unknown":
        return "unknown"
    return fmt_num(value, 1 if abs(float(value)) >= 1000 else 2)


def fmt_compared(
    value: float, limit: float, digits: int = 4, *, limit_digits: int | None = None, comma: bool = False
) -> tuple[str, str]:
    """A value and the limit it was compared with, with `digits` (and `limit_digits`) decimals, or as many more as
    it takes for the printed numbers to compare as the numbers did (1.23450 < 1.23453, never "1.2345 <
    1.2345"; equal numbers print equal): what the comparison decided and what the line shows must agree."""
    sep = "," if comma else ""
    want = (value > limit) - (value < limit)
    for extra in range(16):
        a = f"{value:{sep}.{digits + extra}f}"
        b = f"{limit:{sep}.{(digits if limit_digits is None else limit_digits) + extra}f}"
        x, y = float(a.replace(",", "")), float(b.replace(",", ""))
        if (x > y) - (x < y) == want:
            return a, b
    return repr(value), repr(limit)


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


def token_count_comparison(c: dict[str, Any]) -> str:
    """LoadGen's count and the server's usage over the same samples, and the gap computed from those two figures
    (it once printed LoadGen's total beside usage over fewer samples, and a percent from a third, pre-clip figure)."""
    got = f"LoadGen got {c.get('tokens', 0):,} tokens from {c.get('source')}"
    other, base = c.get("other_tokens"), c.get("compared_tokens")
    if other is None or not base:
        return got
    n, total = c.get("compared_samples"), c.get("tokens")
    same = "" if base == total else f"; over the {n:,} samples with both counts LoadGen got {base:,}"
    gap = other - base
    return f"{got}{same}; {c.get('other_source')} gives {other:,} ({gap:+,} tokens, {gap / base * 100:+.1f}%)"


# Units a number keeps on its line (`600 s`, `1.5 GB`, `521 tokens/s`): a wrap never puts one below its number.
UNITS = (
    "s", "ms", "min", "h", "%", "W", "kW", "B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "GPU", "GPUs",
    "CPU", "CPUs", "VM", "VMs", "q/s", "tok/s", "tokens/s", "tokens", "samples/s", "samples", "queries/s", "queries",
    "nodes", "x", "°C", "MHz",
)  # fmt: skip
_UNIT = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
# one unbreakable piece: a short repro command (`repro run offline --recipe demo`), a number glued to its unit,
# an option glued to its value, else a run of non-spaces
ATOM = re.compile(
    r"repro(?: [a-z][a-z-]*){1,2}(?: --[a-z][\w-]*(?: (?!-)[^\s,;()]+)?)+"
    rf"|\S*\d (?:{_UNIT})(?![\w/])\S*|--[a-z][\w-]* (?!-)\S+|\S+"
)


def wrap_words(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters broken only at spaces between ATOMs (never inside a word, a
    number and its unit, or an option and its value); a piece longer than `width` gets a line of its own, whole.
    For plain lines written straight to a terminal, which would otherwise cut them at the edge, mid-word."""
    lines: list[str] = []
    for para in text.split("\n"):
        words = list(ATOM.finditer(para))
        if not words:
            lines.append("")
            continue
        start, end = 0, words[0].start()
        for word in words:
            if word.end() - start > width and end > start:
                lines.append(para[start:end])
                start = word.start()
            end = word.end()
        lines.append(para[start:end])
    return lines
