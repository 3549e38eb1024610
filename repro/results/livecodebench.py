"""LiveCodeBench's problems and tests, read as the MLPerf DeepSeek-R1 evaluator gets them, without running their code.

The evaluator loads `livecodebench/code_generation_lite` (release_v1, split test) with `datasets` and a loading
script it trusts remotely (LiveCodeBench @ b1e7cab4 lcb_runner/benchmarks/code_generation.py); repro reads the same
rows from the JSON-lines file that script reads (test.jsonl for release_v1), streamed and bounded. A problem's tests
are its public then its private cases (get_evaluation_sample); fn_name from its metadata makes it call-based. The
private cases are JSON, or base64 of zlib of a pickle of that JSON text: the pickle is read by an unpickler that
refuses every global (a str needs none), and the decompression is bounded.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from pathlib import Path
from typing import Any

from repro.core.errors import InputError
from repro.core.safeio import iter_lines, loads_json, open_regular
from repro.results.sandbox import Cases

_MAX_FILE = 16 << 30
_MAX_LINE = 1 << 30
_MAX_TESTS_TEXT = 1 << 30  # one problem's decompressed private tests
_NEXT = "download LiveCodeBench's code_generation_lite release_v1 test.jsonl again"


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused global {module}.{name}")


def _private_cases(text: str) -> list[dict[str, Any]]:
    try:
        cases = json.loads(text)
    except ValueError:
        packed = zlib.decompressobj()
        raw = packed.decompress(base64.b64decode(text.encode("utf-8"), validate=False), _MAX_TESTS_TEXT)
        if packed.unconsumed_tail:
            raise ValueError("private tests larger than 1 GiB") from None
        inner = _NoGlobals(io.BytesIO(raw)).load()
        if not isinstance(inner, str):
            raise ValueError("private tests are not a pickled JSON text") from None
        cases = json.loads(inner)
    if not isinstance(cases, list):
        raise ValueError("tests are not a list")
    return cases


def _cases(row: dict[str, Any]) -> Cases:
    public = loads_json(row["public_test_cases"])
    private = _private_cases(row["private_test_cases"])
    tests = [*public, *private]
    if not all(
        isinstance(t, dict) and isinstance(t.get("input"), str) and isinstance(t.get("output"), str) for t in tests
    ):
        raise ValueError("a test case lacks its input or output text")
    metadata = loads_json(row.get("metadata") or "{}")
    fn_name = metadata.get("func_name") if isinstance(metadata, dict) else None
    return Cases(
        tuple(t["input"] for t in tests),
        tuple(t["output"] for t in tests),
        fn_name if isinstance(fn_name, str) else None,
    )


def load_problems(path: Path, wanted: set[str] | None = None, *, expected: int | None = None) -> dict[str, Cases]:
    """question_id -> its tests, for every problem in the file (or only the wanted ones); with `expected`, the file
    must hold that many problems (another release has another count: release_v1 400, release_v2 511)."""
    path = Path(path)
    try:
        fh = open_regular(path)
    except OSError as exc:
        raise InputError(f"{path}: LiveCodeBench's problems cannot be read ({exc.strerror or exc}).", _NEXT) from None
    problems: dict[str, Cases] = {}
    count = 0
    with fh:
        for number, (line, cut) in enumerate(iter_lines(fh, max_bytes=_MAX_FILE, max_line=_MAX_LINE), 1):
            if not line.strip():
                continue
            if cut:
                raise InputError(f"{path}: line {number} is longer than 1 GiB.", _NEXT)
            try:
                row = loads_json(line)
                qid = row["question_id"]
                if not isinstance(qid, str):
                    raise ValueError("question_id is not text")
                count += 1
                if wanted is not None and qid not in wanted:
                    continue
                problems[qid] = _cases(row)
            except (ValueError, KeyError, TypeError, pickle.UnpicklingError, zlib.error, EOFError) as exc:
                raise InputError(f"{path}: line {number} is not a LiveCodeBench problem ({exc}).", _NEXT) from None
    if expected is not None and count != expected:
        raise InputError(
            f"{path}: {count} LiveCodeBench problems; the release the benchmark names has {expected}.", _NEXT
        )
    return problems
