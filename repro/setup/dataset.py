"""The prepared-dataset format shared by `repro setup` (writes it) and the harness (reads it).

A prepared dataset is a folder `$REPRO_HOME/preprocessed/<dataset.name>/`:

    input_ids.npy     int32, all prompts' token ids concatenated
    input_lens.npy    int32, one length per sample (offsets are their cumulative sum)
    output_lens.npy   int32, reference output length in tokens (what `sim` replays)
    outputs.jsonl     {"output": reference text} per sample, for the accuracy evaluator
    manifest.json     format, name, sample count, source checksum and the sha256 of every file above

Ragged arrays plus lengths keep every prompt of a set in two flat arrays: loading is a single read, no padding.
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
    """Each sample's scorer, where the benchmark scores by kind (its module's reader, repro/core/families/)."""

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
    files = write_prepared_files(folder, prompts, output_lens, outputs, source=source or name, metrics=metrics)
    return write_manifest(folder, name, len(prompts), files, source=source, source_sha256=source_sha256, extra=extra)


def write_prepared_files(
    folder: Path,
    prompts: Sequence[Sequence[int]],
    output_lens: Sequence[int],
    outputs: Sequence[str] | None = None,
    *,
    source: str,
    metrics: Sequence[str] | None = None,
) -> dict[str, str]:
    """The four data files of a prepared dataset (no manifest); returns file name -> sha256."""
    if len(prompts) == 0:
        raise InputError(
            f"{source}: the dataset has zero samples.", "check the dataset file, then `repro setup --force`"
        )
    if (
        len(output_lens) != len(prompts)
        or (outputs is not None and len(outputs) != len(prompts))
        or (metrics is not None and len(metrics) != len(prompts))
    ):
        raise InputError(f"{source}: prompts, output lengths and outputs differ in count.", "`repro setup --force`")
    folder = Path(folder)
    lens = np.asarray([len(p) for p in prompts], dtype=np.int32)
    if (lens <= 0).any():
        bad = int(np.argmax(lens <= 0))
        raise InputError(
            f"{source}: sample {bad} has an empty prompt.", "check the dataset file, then `repro setup --force`"
        )
    flat = np.fromiter((t for p in prompts for t in p), dtype=np.int32, count=int(lens.sum()))
    texts = list(outputs) if outputs is not None else [""] * len(prompts)
    atomic_write_bytes(folder / "input_ids.npy", _npy_bytes(flat))
    atomic_write_bytes(folder / "input_lens.npy", _npy_bytes(lens))
    atomic_write_bytes(folder / "output_lens.npy", _npy_bytes(np.asarray(output_lens, dtype=np.int32)))
    rows = [{"output": t} if metrics is None else {"output": t, "metric": str(metrics[i])} for i, t in enumerate(texts)]
    atomic_write_text(folder / "outputs.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return {f: sha256_file(folder / f) for f in FILES}


def write_manifest(
    folder: Path,
    name: str,
    samples: int,
    files: dict[str, str],
    *,
    source: str = "",
    source_sha256: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest (written last): every data file's sha256 and one checksum over them."""
    manifest = {
        "format": FORMAT,
        "name": name,
        "samples": samples,
        "source": source,
        "source_sha256": source_sha256,
        "files": files,
        "dataset_sha256": _combined(files),
        **(extra or {}),
    }
    atomic_write_json(Path(folder) / "manifest.json", manifest)
    return manifest


def _combined(files: dict[str, str]) -> str:
    import hashlib

    return hashlib.sha256("".join(f"{k}={files[k]}\n" for k in sorted(files)).encode()).hexdigest()


# Bounds on what a prepared dataset may hold (explain and report open the one a run.json names: hostile input).
# The largest real one, Llama-3.1-405B's set of long prompts, is ~60 M token ids (240 MB as int32).
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


def prompt_lengths(folder: Path) -> np.ndarray:
    """Only the prompt lengths of a prepared dataset (input_lens.npy, bounded), for arithmetic that needs no tokens
    (doctor's KV cache): the manifest must name this format; nothing else is read."""
    folder = Path(folder)
    mpath = folder / "manifest.json"
    try:
        manifest = json.loads(_read_bounded(mpath, _MAX_MANIFEST, "dataset manifest"))
    except FileNotFoundError:
        raise InputError(f"{mpath}: no prepared dataset here.", "`repro setup`") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{mpath}: the manifest is corrupt ({exc}).", "`repro setup --force`") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"{mpath}: not a {FORMAT} manifest.", "`repro setup --force`")
    lens = _load_npy(folder / "input_lens.npy")
    if lens.ndim != 1 or lens.shape[0] == 0 or not np.issubdtype(lens.dtype, np.integer) or int(lens.min()) < 0:
        raise InputError(f"{folder / 'input_lens.npy'}: not a list of prompt lengths.", "`repro setup --force`")
    return lens


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
