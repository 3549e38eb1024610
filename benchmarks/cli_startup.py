"""CLI start-up: `repro --help` and `repro verify <published run>` against `python -c pass`, side by side.

Goal (issue 17): both within 0.15 s on the 2-core dev VM. Prints each command's median, the ratio to a bare
interpreter start, and whether the goal was reached.

    python benchmarks/cli_startup.py [--pairs 15]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sidebyside import alternate  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "published" / "azure-nd-gb200-v6-v5.1"
GOAL_S = 0.15


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", "from repro.cli import main; main()", *args]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=15)
    args = ap.parse_args()
    bare = [sys.executable, "-c", "pass"]
    for label, argv in (("repro --help", _cmd("--help")), ("repro verify GB200", _cmd("verify", str(FIXTURE)))):
        pair = alternate(
            label,
            lambda a=argv: subprocess.run(a, capture_output=True, check=False),
            lambda: subprocess.run(bare, capture_output=True, check=True),
            args.pairs,
        )
        import statistics

        med = statistics.median(pair.repro_s)
        print(
            pair.line()
            + f"; python -c pass = reference; goal <= {GOAL_S} s: {'reached' if med <= GOAL_S else 'not reached'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
