"""Peak memory of parsing a 200 MB LoadGen detail log (issue #16 item 12; numbers in docs/SECURITY.md).

    cd <checkout> && PYTHONPATH=$PWD python benchmarks/log_peak_memory.py

Builds a 200 MB mlperf_log_detail.txt (a real published detail log followed by padding MLLOG lines) in a temp
folder, then parses it in a fresh interpreter with the importable repro and prints how far the parse raised the
peak resident set (ru_maxrss), next to the file size.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = """
import resource, sys, pathlib
from repro.results.logs import parse_detail
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
parse_detail(pathlib.Path(sys.argv[1]))
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


def main() -> None:
    src = next((REPO / "tests" / "fixtures" / "published").rglob("mlperf_log_detail.txt")).read_bytes()
    filler = b':::MLLOG {"key": "padding", "value": "' + b"x" * 180 + b'", "metadata": {}}\n'
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "mlperf_log_detail.txt"
        with open(big, "wb") as fh:
            fh.write(src)
            for _ in range((200 << 20) // (len(filler) * 4096)):
                fh.write(filler * 4096)
        out = subprocess.run([sys.executable, "-c", CHILD, str(big)], capture_output=True, text=True, check=True)
        print(f"log {big.stat().st_size / 2**20:.0f} MB: parse raised peak RSS by {float(out.stdout):.0f} MB")


if __name__ == "__main__":
    main()
