"""Host settings a published run set and repro only reads: the GPU boost slider (`nvidia-smi boost-slider -l`).

NVIDIA's MLPerf harness sets `nvidia-smi boost-slider --vboost <vboost_slider>` around a run where its config says so
(Azure's GB200 and GB300 Llama-2-70B configs: 1) and back to 0 after (egmsft/AI-benchmarking-guide @ 3371c0c3
`Azure_Results/1M_ND_GB300_v6_Inference/code/ops/harness.py:61-101`). repro never changes it: the run records what
the host had, doctor names the command, verify and explain name a difference.

nvidia-smi's output format is not guaranteed (its own man page says so) and no sample of `boost-slider -l` could be
read for this code: the reading is bounded in time and bytes, keeps the raw text, and states a value only when the
output says it unambiguously (a `vboost` row under a header naming its `Current` column, or a row with one number).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

COMMAND = ["nvidia-smi", "boost-slider", "-l"]
TIMEOUT_S = 5.0
MAX_BYTES = 16 << 10
RAW_CHARS = 2000


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() or ch == "\n" else "?" for ch in text)[:RAW_CHARS]


def _tokens(line: str) -> list[str]:
    return [t for t in re.split(r"[\s|]+", line) if t]


def parse_boost_slider(text: str) -> tuple[int | None, str]:
    """(vboost, how it was read) from `boost-slider -l` output; None when the output does not say it unambiguously.
    Every GPU's row must agree."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    header = next((_tokens(ln) for ln in lines if re.search(r"\bcurrent\b", ln, re.I)), None)
    rows = [ln for ln in lines if re.search(r"\bvboost\b", ln, re.I) and not re.search(r"\bcurrent\b", ln, re.I)]
    if not rows:
        return None, "no vboost row in the output"
    values: list[int] = []
    for row in rows:
        tokens = _tokens(row)
        numbers = [t for t in tokens if re.fullmatch(r"\d+", t)]
        col = next((i for i, t in enumerate(header or []) if t.lower() == "current"), None)
        if header is not None and col is not None and len(header) == len(tokens) and tokens[col].isdigit():
            values.append(int(tokens[col]))
        elif len(numbers) == 1:
            values.append(int(numbers[0]))
        else:
            return None, f"the vboost row {row.strip()[:80]!r} does not say which number is the current value"
    if len(set(values)) > 1:
        return None, f"the GPUs differ: vboost {', '.join(str(v) for v in values)}"
    return values[0], f"{len(values)} vboost row(s) of `{' '.join(COMMAND)}`"


def _bounded_output(proc: subprocess.Popen[bytes], timeout_s: float) -> tuple[bytes, bool]:
    """At most MAX_BYTES of the process's output within `timeout_s`; (output, whether it exited in time). A process
    past either bound is killed."""
    import select
    import time

    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    size = 0
    fd = proc.stdout.fileno()
    while size < MAX_BYTES:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, min(4096, MAX_BYTES - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        finished = True
    except subprocess.TimeoutExpired:
        finished = False
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    proc.stdout.close()
    return b"".join(chunks), finished


def read_boost_slider(timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """What the host's boost slider is, for run.json: state read/unknown/unsupported/error, the value where it is
    unambiguous, why, and the raw output (bounded). Never raises; never waits longer than `timeout_s`."""
    out: dict[str, Any] = {"command": " ".join(COMMAND), "state": "unknown", "vboost": None}
    exe = shutil.which(COMMAND[0])
    if exe is None:
        return {**out, "why": "nvidia-smi not found on PATH"}
    try:
        proc = subprocess.Popen(
            [exe, *COMMAND[1:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "LC_ALL": "C"},
        )
    except OSError as exc:
        return {**out, "why": f"nvidia-smi could not be started ({exc.strerror or exc})"}
    raw, finished = _bounded_output(proc, timeout_s)
    if not finished:
        return {**out, "why": f"nvidia-smi did not answer within {timeout_s:g} s"}
    text = raw.decode("utf-8", "replace")
    shown = _printable(text)
    if proc.returncode != 0:
        first = next((ln.strip() for ln in shown.splitlines() if ln.strip()), f"exit {proc.returncode}")[:200]
        state = "unsupported" if re.search(r"not supported|unknown|invalid", text, re.I) else "error"
        return {**out, "state": state, "why": first, "raw": shown}
    value, how = parse_boost_slider(text)
    return {**out, "state": "read" if value is not None else "unknown", "vboost": value, "why": how, "raw": shown}
