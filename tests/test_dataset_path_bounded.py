"""explain and report open the dataset a run.json names (issue #36 item 5): every read of it is bounded in bytes
and time and must be a regular file. A FIFO, /dev/zero, a fake .npy header asking 7 TiB and an endless outputs
file each end at once with 'not measured' and why, under a 4 GB address-space cap (helpers.cli_process)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import cli_process, copy_bundle, write_prepared

GB200 = "azure-nd-gb200-v6-v5.1"
RUN = "llama2-70b-99/Offline/performance/run_1"


def _fake_npy(path: Path, shape: tuple[int, ...]) -> None:
    """A real .npy header (numpy's own writer) declaring `shape`, followed by almost no data."""
    from numpy.lib import format as npy

    with path.open("wb") as fh:
        npy.write_array_header_1_0(fh, {"descr": "<i4", "fortran_order": False, "shape": shape})
        fh.write(b"\0" * 64)


def _hostile(data: Path, shape: str) -> None:
    if shape == "fifo manifest":
        (data / "manifest.json").unlink()
        os.mkfifo(data / "manifest.json")
    elif shape == "fifo npy":
        (data / "input_lens.npy").unlink()
        os.mkfifo(data / "input_lens.npy")
    elif shape == "/dev/zero npy":
        (data / "input_ids.npy").unlink()
        (data / "input_ids.npy").symlink_to("/dev/zero")
    elif shape == "/dev/zero outputs":
        (data / "outputs.jsonl").unlink()
        (data / "outputs.jsonl").symlink_to("/dev/zero")
    elif shape == "7 TiB header":
        _fake_npy(data / "input_ids.npy", (1 << 41,))
    elif shape == "header larger than its data":
        _fake_npy(data / "input_lens.npy", (1000,))
    elif shape == "object array":
        np.save(data / "input_lens.npy", np.array([1, "x"], dtype=object), allow_pickle=True)
    else:
        raise AssertionError(shape)


SHAPES = [
    "fifo manifest",
    "fifo npy",
    "/dev/zero npy",
    "/dev/zero outputs",
    "7 TiB header",
    "header larger than its data",
    "object array",
]


@pytest.mark.parametrize("shape", SHAPES)
def test_explain_reads_a_hostile_dataset_bounded(fixtures: Path, tmp_path: Path, shape: str) -> None:
    bundle = copy_bundle(fixtures, GB200, tmp_path / "b")
    data = write_prepared(tmp_path / "data", 16, name="mlperf-openorca")
    _hostile(data, shape)
    (bundle / RUN / "run.json").write_text(json.dumps({"dataset_path": str(data)}))
    started = time.monotonic()
    proc = cli_process("explain", str(bundle / RUN), "--recipe", "nd-gb200-v6", "--json", timeout=60)
    assert time.monotonic() - started < 60
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    source = json.dumps(doc)
    assert "not measured: the run's dataset cannot be read" in source, source[:2000]


def test_the_same_dataset_untouched_is_measured(fixtures: Path, tmp_path: Path) -> None:
    bundle = copy_bundle(fixtures, GB200, tmp_path / "b")
    data = write_prepared(tmp_path / "data", 16, name="mlperf-openorca")
    (bundle / RUN / "run.json").write_text(json.dumps({"dataset_path": str(data)}))
    proc = cli_process("explain", str(bundle / RUN), "--recipe", "nd-gb200-v6", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"measured: mean of 16 prompts in {data}" in proc.stdout


def test_load_npy_bounded_refuses_before_allocating(tmp_path: Path) -> None:
    from repro.core.safeio import load_npy_bounded

    _fake_npy(tmp_path / "big.npy", (1 << 41,))
    with pytest.raises(ValueError, match="over the"):
        load_npy_bounded(tmp_path / "big.npy", 4 << 30)
    np.save(tmp_path / "ok.npy", np.arange(10, dtype=np.int32))
    assert load_npy_bounded(tmp_path / "ok.npy", 4 << 30).tolist() == list(range(10))
