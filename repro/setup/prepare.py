"""The prepared dataset from the pinned pickles, converted once in the confined child (issue #43 item 2).

`repro setup` calls `prepare_dataset` with the pinned pickles. The sampled set (and, where the benchmark publishes
one, the calibration pickle) is read once, checked against its pin, and handed to a confined child (convert.py)
that writes the harness's files (npy, jsonl) and the quantizer's calibration parquet into a temp folder; this
process then checksums them, writes the manifest (each file's SHA-256, the source pickles' SHA-256, how the child
was confined) and moves the folder into place. When the manifest already records these very sources, nothing is
decoded again: every later read is of the prepared files.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from repro.core.errors import InputError
from repro.core.fsutil import confined, sha256_file
from repro.core.ledger import Artifact
from repro.core.recipes import Recipe
from repro.setup.convert import publish, run_decoder, staging
from repro.setup.dataset import FILES, load_prepared, write_manifest
from repro.setup.safe_pickle import read_pinned

Pinned = dict[str, tuple[Path, str]]  # role -> (file, the SHA-256 it must have to be decoded)
NEXT = "delete it, then `repro setup`"


def _calibration_plan(recipe: Recipe, files: Pinned) -> dict[str, Any] | None:
    """Where the calibration rows come from: the pinned calibration pickle, drawn from the sampled set, or none."""
    ds = recipe.dataset
    if "calibration" in files:
        path, sha = files["calibration"]
        return {"dir": ds.calibration_dir, "source": str(path), "source_sha256": sha}
    if ds.calibration_samples and ds.calibration_from_sampled:
        return {"dir": ds.calibration_dir, "drawn": ds.calibration_samples, "source_sha256": files["sampled"][1]}
    return None


def _is_current(folder: Path, src_sha: str, calib: dict[str, Any] | None) -> bool:
    try:
        manifest = load_prepared(folder).manifest
    except InputError:
        return False
    if manifest.get("source_sha256") != src_sha:
        return False
    if calib is None:
        return True
    have = manifest.get("calibration")
    if not isinstance(have, dict) or any(have.get(k) != v for k, v in calib.items() if k != "source"):
        return False
    target = folder / str(have.get("file", ""))
    return target.is_file() and not target.is_symlink() and sha256_file(target) == have.get("sha256")


def prepare_dataset(recipe: Recipe, folder: Path, files: Pinned) -> tuple[list[Artifact], dict[str, Any]]:
    """The prepared folder's artifacts for the ledger, and how it was converted (or that it was current)."""
    sampled, src_sha = files["sampled"]
    calib = _calibration_plan(recipe, files)
    if _is_current(folder, src_sha, calib):
        conversion: dict[str, Any] = {"converted": False, "why": "the manifest records these very source pickles"}
    else:
        conversion = _convert(recipe, folder, files, calib)
    manifest = load_prepared(folder).manifest
    arts = [Artifact.of(folder / f, source=str(sampled)) for f in (*FILES, "manifest.json")]
    have = manifest.get("calibration")
    if isinstance(have, dict):
        if "drawn" in have:
            n = have["drawn"]
            draw = f"sample(n={n}, random_state=12345)"
            source = f"{sampled} (calibration rows drawn as processorca.py draws them: {draw})"
        else:
            source = str(have.get("source"))
        arts.append(Artifact.of(folder / str(have["file"]), source=source))
    return arts, conversion


def _convert(recipe: Recipe, folder: Path, files: Pinned, calib: dict[str, Any] | None) -> dict[str, Any]:
    sampled, src_sha = files["sampled"]
    if calib is not None:  # a link planted where the parquet goes stops setup, as everywhere setup writes
        confined(folder.parent, folder / calib["dir"] / "data.parquet", step="repro setup")
    with staging(folder) as tmp:
        spec = recipe.bench.spec  # the benchmark's module reads its columns, in the child as here
        column = spec.calibration_column
        job: dict[str, Any] = {"prepared": True, "family": spec.locator()}
        if calib is not None and "drawn" in calib:
            job["calibration"] = {"dir": calib["dir"], "samples": calib["drawn"], "draw": True, "column": column}
        result = run_decoder(sampled, read_pinned(sampled, src_sha, next_step=NEXT), job, tmp, next_step=NEXT)
        samples = int(result["prepared"]["samples"])
        if samples != recipe.dataset.samples:
            raise InputError(
                f"{sampled}: {samples} samples, the recipe expects {recipe.dataset.samples}.",
                "delete the file, then `repro setup`",
            )
        calib_out = result.get("calibration")
        if calib is not None and "source" in calib:
            path, sha = files["calibration"]
            job2 = {"calibration": {"dir": calib["dir"], "draw": False, "column": column}}
            calib_out = run_decoder(path, read_pinned(path, sha, next_step=NEXT), job2, tmp, next_step=NEXT)[
                "calibration"
            ]
        extra: dict[str, Any] = {
            "conversion": {"decoder": "repro.setup.frame_decode (no pandas)", **result["confinement"]},
        }
        if calib is not None and calib_out is not None:
            extra["calibration"] = {**calib, "file": calib_out["file"], "rows": calib_out["rows"]}
            extra["calibration"]["sha256"] = sha256_file(tmp / calib_out["file"])
        checked = {f: sha256_file(tmp / f) for f in FILES}
        write_manifest(
            tmp, recipe.dataset.name, samples, checked, source=str(sampled), source_sha256=src_sha, extra=extra
        )
        publish(tmp, folder)
    return {"converted": True, "rows": result["rows"], "columns": result["columns"], **extra["conversion"]}


def content_digest(path: Path, pinned: str) -> str:
    """A checksum of what the harness uses (prompt text and tokens, reference output), whatever pandas wrote the
    pickle: decoded in the confined child like any other pickle."""
    with tempfile.TemporaryDirectory(prefix="repro-digest-") as tmp:
        data = read_pinned(path, pinned, next_step=NEXT)
        return str(run_decoder(path, data, {"digest": True}, Path(tmp), next_step=NEXT)["digest"])
