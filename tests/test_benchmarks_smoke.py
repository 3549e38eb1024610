"""Every benchmark runs end to end at tiny sizes (`--smoke`), so a layout change that breaks one fails here.

The figures a smoke run prints mean nothing; the test checks only that the script finished and printed the
line that carries its result. A new script in benchmarks/ must add its result line below.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import REPO

BENCH = REPO / "benchmarks"

RESULT_LINE = {
    "accuracy_speed.py": r"ROUGE repro [\d.]+ vs reference [\d.]+ \([\d.]+x\)",
    "aggregate_speed.py": r"repro is [\d.]+x the plain-parse floor",
    "attest_verify_speed.py": r"repro attest verify, slowest whole-process run: [\d.]+ s",
    "cli_startup.py": r"repro verify GB200: repro [\d.]+ s, reference [\d.]+ s, ratio [\d.]+x",
    "contradicting_folders.py": r"(?m)^tried: [1-9]\d*$",
    "demo_runner.py": r"demo: numpy [\d,.]+ tokens/s, hf [\d,.]+ tokens/s, ratio [\d.]+x",
    "demo_server_threads.py": r"threads 2: completed q/s [\d.]+",
    "harness_overhead.py": r"Offline: [\d,]+ tokens/s, [\d,]+ samples/s .*x the best published VM",
    "harness_vs_reference.py": r"samples: repro [\d,]+ samples/s, reference [\d,]+ samples/s, ratio [\d.]+x",
    "hf_vs_generate.py": r"hf backend [\d,]+ tokens/s, model\.generate [\d,]+ tokens/s, ratio [\d.]+x",
    "hostile_inputs.py": r"TOTAL\s+tried\s+[1-9]\d*\s+tracebacks\s+\d+",
    "http_client.py": r"offline: repro/plain CPU cost ratio [\d.]+",
    "rehearsal_time.py": r"nd-gb300-v6 --pace published planned: Offline [\d.,]+ s here for [\d,]+ s at the published",
    "rack_client.py": r"repro: best (VALID|INVALID) streamed rate [\d,]+ tokens/s .* cores for 1,136,100",
    "series_edge.py": r"series near the band edge: repro is [\d,]+x faster than the linear scan",
    "log_peak_memory.py": r"billion-laughs recipe, recipes validate\s+input\s+[\d.]+ MB\s+peak RSS\s+\d+ MB",
    "text_answer_memory.py": r"MB answer: reference \+[\d,.]+ MB, repro \+[\d,.]+ MB, ratio [\d.]+x, same ids: True",
}

SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def test_every_benchmark_has_a_result_line() -> None:
    assert sorted(RESULT_LINE) == SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_smoke(name: str, tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, str(BENCH / name), "--smoke"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert re.search(RESULT_LINE.get(name, r"(?!)"), out), out[-3000:]
