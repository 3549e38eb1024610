"""Issue #43: the rehearsal's setup step works without pandas. Its local hub serves dataset pickles written by
repro's own writer, `repro setup`'s code decodes them in the confined child and writes the calibration parquet,
all in a process where pandas, pyarrow, torch and transformers cannot be imported (README command 1's install has
none of them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BLOCK = "import sys; [sys.modules.__setitem__(m, None) for m in ('pandas', 'pyarrow', 'torch', 'transformers')]; "
CODE = (
    BLOCK
    + """
import json
from pathlib import Path
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.rehearse.rehearsal import OUT_LEN, VOCAB, tiny_prompts
from repro.rehearse.setup_step import gated_setup
from repro.setup.dataset import load_prepared
recipe = get_recipe(sys.argv[1])
out = gated_setup(recipe, Workspace.open(Path(sys.argv[2])), tiny_prompts(), OUT_LEN, VOCAB)
prepared = load_prepared(Path(out["prepared_dir"]))
calib = Path(out["prepared_dir"]) / recipe.dataset.calibration_dir / "data.parquet"
print(json.dumps({"status": out["status"], "samples": len(prepared), "calibration": calib.is_file(),
                  "conversion": prepared.manifest.get("conversion", {}).get("decoder"),
                  "loaded": sorted(m for m in ("pandas", "pyarrow", "torch", "transformers") if sys.modules.get(m))}))
"""
)


@pytest.mark.parametrize("recipe", ["nd-gb300-v6", "nd-gb200-v6-405b"])
def test_the_rehearsal_setup_step_needs_no_pandas(recipe: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CODE, recipe, str(tmp_path / "ws")], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["status"] == "done" and got["samples"] > 0 and got["calibration"] is True, got
    assert got["conversion"] == "repro.setup.frame_decode (no pandas)" and got["loaded"] == []
