"""The prepared-dataset format shared by `repro setup` (writes it) and the harness (reads it).

A prepared dataset is a folder `$REPRO_HOME/preprocessed/<dataset.name>/`:

    input_ids.npy     int32, all prompts' token ids concatenated
    input_lens.npy    int32, one length per sample (offsets are their cumulative sum)
    output_lens.npy   int32, reference output length in tokens (what `sim` replays)
    outputs.jsonl     {"output": reference text} per sample, for the accuracy evaluator
    manifest.json     format, name, sample count, source checksum and the sha256 of every file above

Ragged arrays plus lengths keep 24,576 prompts in two flat arrays: loading is a single read, no padding.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from repro.core.errors import InputError
from repro.core.fsutil import atomic_write_bytes, atomic_write_json, atomic_write_text, sha256_file
from repro.core.safeio import sha256_regular

FORMAT = "repro-prepared/1"
FILES = ("input_ids.npy", "input_lens.npy", "output_lens.npy", "outputs.jsonl")
BUILTIN_SAMPLE = Path(__file__).resolve().parents[1] / "data" / "openorca_sample.jsonl"


@dataclass
class PreparedDataset:
    folder: Path
    name: str
    input_ids: np.ndarray
    input_lens: np.ndarray
    output_lens: np.ndarray
    outputs: list[str]
    manifest: dict[str, Any] = field(default_factory=dict)
    metrics: list[str] | None = None
    """Each sample's scorer, where the benchmark scores by kind (llama3.1-405b's 'metric' column)."""

    def __post_init__(self) -> None:
        self.offsets = np.concatenate([[0], np.cumsum(self.input_lens, dtype=np.int64)])
        self._bounds: list[int] = self.offsets.tolist()  # Python ints: prompt() runs once per issued sample

    def __len__(self) -> int:
        return int(self.input_lens.shape[0])

    def prompt(self, index: int) -> np.ndarray:
        return self.input_ids[self._bounds[index] : self._bounds[index + 1]]

    @property
    def sha256(self) -> str:
        """One checksum for the whole prepared set: the manifest's, which lists every file's checksum."""
        return str(self.manifest.get("dataset_sha256", ""))


def _npy_bytes(arr: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def save_prepared(
    folder: Path,
    name: str,
    prompts: Sequence[Sequence[int]],
    output_lens: Sequence[int],
    outputs: Sequence[str] | None = None,
    *,
    source: str = "",
    source_sha256: str | None = None,
    extra: dict[str, Any] | None = None,
    metrics: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Write a prepared dataset; every file goes through a temp file + rename and the manifest is written last."""
    if len(prompts) == 0:
        raise InputError(
            f"{source or name}: the dataset has zero samples.", "check the dataset file, then `repro setup --force`"
        )
    if (
        len(output_lens) != len(prompts)
        or (outputs is not None and len(outputs) != len(prompts))
        or (metrics is not None and len(metrics) != len(prompts))
    ):
        raise InputError(
            f"{source or name}: prompts, output lengths and outputs differ in count.", "`repro setup --force`"
        )
    folder = Path(folder)
    lens = np.asarray([len(p) for p in prompts], dtype=np.int32)
    if (lens <= 0).any():
        bad = int(np.argmax(lens <= 0))
        raise InputError(
            f"{source or name}: sample {bad} has an empty prompt.", "check the dataset file, then `repro setup --force`"
        )
    flat = np.fromiter((t for p in prompts for t in p), dtype=np.int32, count=int(lens.sum()))
    texts = list(outputs) if outputs is not None else [""] * len(prompts)
    atomic_write_bytes(folder / "input_ids.npy", _npy_bytes(flat))
    atomic_write_bytes(folder / "input_lens.npy", _npy_bytes(lens))
    atomic_write_bytes(folder / "output_lens.npy", _npy_bytes(np.asarray(output_lens, dtype=np.int32)))
    rows = [{"output": t} if metrics is None else {"output": t, "metric": str(metrics[i])} for i, t in enumerate(texts)]
    atomic_write_text(folder / "outputs.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    files = {f: sha256_file(folder / f) for f in FILES}
    manifest = {
        "format": FORMAT,
        "name": name,
        "samples": len(prompts),
        "source": source,
        "source_sha256": source_sha256,
        "files": files,
        "dataset_sha256": _combined(files),
        **(extra or {}),
    }
    atomic_write_json(folder / "manifest.json", manifest)
    return manifest


def _combined(files: dict[str, str]) -> str:
    import hashlib

    return hashlib.sha256("".join(f"{k}={files[k]}\n" for k in sorted(files)).encode()).hexdigest()


# Bounds on what a prepared dataset may hold (explain and report open the one a run.json names: hostile input).
# The largest real one, Llama-3.1-405B's 8,313 long prompts, is ~60 M token ids (240 MB as int32).
_MAX_NPY = 4 << 30
_MAX_OUTPUTS = 1 << 30
_MAX_MANIFEST = 1 << 20


def _load_npy(path: Path) -> np.ndarray:
    """A regular .npy file whose header agrees with its size (a fake header asking 7 TiB is refused unallocated)."""
    from repro.core.safeio import load_npy_bounded

    try:
        return np.asarray(load_npy_bounded(path, _MAX_NPY))
    except FileNotFoundError:
        raise InputError(f"{path}: the prepared dataset file is missing.", "`repro setup --force`") from None
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{path}: the prepared dataset file is corrupt ({exc}).", "`repro setup --force`") from None


def _read_bounded(path: Path, limit: int, what: str) -> str:
    """A regular file's text within `limit` bytes: a FIFO, a device or /dev/zero is an error, never a hang."""
    from repro.core.safeio import read_bytes_bounded

    try:
        return read_bytes_bounded(path, limit, what=what).decode("utf-8")
    except FileNotFoundError:
        raise
    except (ValueError, OSError) as exc:
        raise InputError(f"{path}: cannot be read as a {what} ({exc}).", "`repro setup --force`") from None


def load_prepared(folder: Path, *, verify: bool = True, expected_sha256: str | None = None) -> PreparedDataset:
    """Read a prepared dataset, checking every file against the manifest so a damaged copy is never benchmarked."""
    folder = Path(folder)
    mpath = folder / "manifest.json"
    try:
        manifest = json.loads(_read_bounded(mpath, _MAX_MANIFEST, "dataset manifest"))
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} manifest")
    except FileNotFoundError:
        raise InputError(f"{mpath}: no prepared dataset here.", "`repro setup`") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{mpath}: the manifest is corrupt ({exc}).", "`repro setup --force`") from None
    if expected_sha256 and manifest.get("dataset_sha256") != expected_sha256:
        raise InputError(
            f"{mpath}: dataset checksum {manifest.get('dataset_sha256')} does not match the expected "
            f"{expected_sha256}.",
            "`repro setup --force`",
        )
    if verify:
        for fname, want in manifest.get("files", {}).items():
            path = folder / fname
            if not path.exists():
                raise InputError(f"{path}: the prepared dataset file is missing.", "`repro setup --force`")
            try:
                got = sha256_regular(path)
            except OSError as exc:
                raise InputError(f"{path}: cannot be read ({exc}).", "`repro setup --force`") from None
            if got != want:
                raise InputError(
                    f"{path}: checksum mismatch (manifest {want[:12]}…, file {got[:12]}…); the file is "
                    "corrupt or was changed.",
                    "`repro setup --force`",
                )
    ids, lens, olens = (_load_npy(folder / f) for f in FILES[:3])
    try:
        rows = [
            json.loads(line)
            for line in _read_bounded(folder / "outputs.jsonl", _MAX_OUTPUTS, "outputs file").split("\n")
            if line.strip()
        ]
        outputs = [str(r["output"]) for r in rows]
        metrics = [str(r["metric"]) for r in rows] if rows and all("metric" in r for r in rows) else None
    except FileNotFoundError:
        raise InputError(
            f"{folder / 'outputs.jsonl'}: the prepared dataset file is missing.", "`repro setup --force`"
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{folder / 'outputs.jsonl'}: corrupt ({exc}).", "`repro setup --force`") from None
    n = int(lens.shape[0])
    if n == 0:
        raise InputError(f"{folder}: the prepared dataset has zero samples.", "`repro setup --force`")
    if olens.shape[0] != n or len(outputs) != n or int(lens.sum()) != ids.shape[0]:
        raise InputError(
            f"{folder}: the prepared files disagree on the number of samples or tokens.", "`repro setup --force`"
        )
    return PreparedDataset(folder, str(manifest.get("name", folder.name)), ids, lens, olens, outputs, manifest, metrics)


def _first(row: dict[str, Any], *names: str) -> Any:
    for n in names:
        if n in row and row[n] is not None:
            return row[n]
    return None


def records_from_frame(df: Any, source: Path) -> tuple[list[list[int]], list[int], list[str]]:
    """(prompts, reference output lengths, reference texts) from MLPerf's OpenOrca frame (already safely loaded,
    see repro/setup/safe_pickle.py). Columns used: tok_input, tok_input_length (llama3.1-405b: tok_input_len),
    output (llama3.1-405b: gt_output)."""
    path = Path(source)
    if not hasattr(df, "columns") or "tok_input" not in df.columns:
        raise InputError(
            f"{path}: column 'tok_input' is missing; this is not MLPerf's tokenized OpenOrca set.",
            "`repro setup --force`",
        )
    prompts: list[list[int]] = []
    olens: list[int] = []
    texts: list[str] = []
    try:
        rows = df.to_dict("records")
        for row in rows:
            toks = [int(t) for t in row["tok_input"]]
            stated = _first(row, "tok_input_length", "tok_input_len")
            if stated is not None and int(stated) != len(toks):
                raise InputError(
                    f"{path}: the stated input length disagrees with tok_input for sample {len(prompts)}.",
                    "`repro setup --force`",
                )
            out = _first(row, "tok_ref_output", "tok_output")
            olen = _first(row, "tok_ref_output_length", "tok_output_length")
            text = str(_first(row, "output", "gt_output", "response") or "")
            if olen is None:
                olen = len(out) if out is not None else max(1, round(len(text.split()) * 1.3))
            prompts.append(toks)
            olens.append(max(1, int(olen)))
            texts.append(text)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(
            f"{path}: sample {len(prompts)} is not token ids and lengths ({type(exc).__name__}).",
            "`repro setup --force`",
        ) from None
    return prompts, olens, texts


def read_builtin_sample(path: Path | None = None) -> list[dict[str, str]]:
    """The built-in OpenOrca-shaped sample: id, system_prompt, question, response."""
    path = Path(path or BUILTIN_SAMPLE)
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows.append({k: str(row[k]) for k in ("id", "system_prompt", "question", "response")})
        except (ValueError, KeyError) as exc:
            raise InputError(f"{path}:{n}: not an OpenOrca-shaped row ({exc}).", "reinstall repro") from None
    if not rows:
        raise InputError(f"{path}: zero samples.", "reinstall repro")
    return rows


def llama2_prompt(system_prompt: str, question: str) -> str:
    """The Llama-2 chat template MLPerf used to tokenize OpenOrca."""
    if system_prompt:
        return f"<s>[INST] <<SYS>>\n{system_prompt}\n<</SYS>>\n\n{question} [/INST]"
    return f"<s>[INST] {question} [/INST]"


def metrics_from_frame(df: Any) -> list[str] | None:
    """Each sample's scorer from the dataset's `metric` column (llama3.1-405b: rouge, niah_em, qa_em); None when the
    dataset has none (llama2-70b scores every sample the same way)."""
    if not hasattr(df, "columns") or "metric" not in df.columns:
        return None
    return [str(m) for m in df["metric"].tolist()]
