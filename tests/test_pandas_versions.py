"""Issue #43 item 5, "under the newest pandas and under 2.x": a scratch venv with pandas 2.2.3 (numpy 1.26) writes
pickles of MLPerf's shapes, and repro's decoder (running here, under whatever pandas this venv has, or none) reads
them as pandas 2.2.3 reads them; pandas 2.2.3 reads repro's own writer as repro does. The default tests do the same
with the checked-in pickles and this venv's pandas (test_safe_pickle.py); this one makes fresh pickles with PyPI's
pandas 2.2.3 (slow: it installs pandas; skipped with the reason when PyPI cannot be reached)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repro.setup.frame_decode import decode_table
from repro.setup.frame_encode import encode_frame

MAKE = Path(__file__).parent / "fixtures" / "pickles" / "make_pickles.py"
DUMP = r"""
import json, math, sys, warnings
import numpy as np, pandas as pd
warnings.simplefilter("ignore")
def plain(v):
    if isinstance(v, np.ndarray): return [plain(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)): return [plain(x) for x in v]
    if isinstance(v, np.generic): v = v.item()
    return "NaN" if isinstance(v, float) and math.isnan(v) else v
out = {}
for path in sys.argv[1:]:
    df = pd.read_pickle(path)
    out[path] = {"columns": [str(c) for c in df.columns], "index": [int(i) for i in df.index],
                 "data": {str(c): plain(df[c].tolist()) for c in df.columns}}
print(json.dumps({"pandas": pd.__version__, "numpy": np.__version__, "frames": out}))
"""


def _plain(v):
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return "NaN" if isinstance(v, float) and math.isnan(v) else v


@pytest.fixture(scope="module")
def pandas2(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("pandas-2.2.3") / "venv"
    uv = shutil.which("uv")
    if uv:
        make = [uv, "venv", "-q", str(venv), "--python", sys.executable]
        install = [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "pandas==2.2.3", "numpy<2"]
    else:
        make = [sys.executable, "-m", "venv", str(venv)]
        install = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "pandas==2.2.3", "numpy<2"]
    subprocess.run(make, check=True, capture_output=True, timeout=300)
    got = subprocess.run(install, capture_output=True, text=True, timeout=900, check=False)
    if got.returncode != 0:
        pytest.skip(f"pandas 2.2.3 could not be installed from PyPI here: {got.stderr.strip()[-300:]}")
    return venv / "bin" / "python"


@pytest.mark.slow
def test_pickles_written_by_pandas_2_2_decode_as_pandas_2_2_reads_them(pandas2: Path, tmp_path: Path) -> None:
    subprocess.run([str(pandas2), "-W", "ignore", str(MAKE), str(tmp_path / "p223")], check=True, timeout=300)
    paths = sorted(str(p) for p in tmp_path.glob("p223.*.pkl"))
    assert len(paths) == 9
    ref = json.loads(subprocess.run([str(pandas2), "-c", DUMP, *paths], capture_output=True, check=True).stdout)
    assert ref["pandas"] == "2.2.3" and ref["numpy"].startswith("1.")
    for path in paths:
        table = decode_table(Path(path).read_bytes())
        want = ref["frames"][path]
        assert list(table.columns) == want["columns"] and list(table.index) == want["index"], path
        assert {c: _plain(table.values(c)) for c in table.columns} == want["data"], path


@pytest.mark.slow
def test_pandas_2_2_reads_repros_writer_as_repro_does(pandas2: Path, tmp_path: Path) -> None:
    cols = {
        "input": ["<s>[INST] a [/INST]", "b\u2019c"],
        "tok_input": [[1, 2, 29871], [3, 70000, 29871]],
        "tok_input_length": [3, 3],
        "output": ["x", None],
    }
    path = tmp_path / "repro.pkl"
    path.write_bytes(encode_frame(cols))
    ref = json.loads(subprocess.run([str(pandas2), "-c", DUMP, str(path)], capture_output=True, check=True).stdout)
    frame = ref["frames"][str(path)]
    assert frame["columns"] == list(cols) and frame["data"] == cols
    table = decode_table(path.read_bytes())
    assert {c: table.values(c) for c in table.columns} == cols
