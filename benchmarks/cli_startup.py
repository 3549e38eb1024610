"""CLI start-up: `repro --help` and `repro verify <published run>` against `python -c pass`, side by side.

Goal (issue 17): both within 0.15 s on the 2-core dev VM. Prints each command's median, the ratio to a bare
interpreter start, and whether the goal was reached. Then the floors any Typer CLI pays, measured the same way:
`import typer`, and a do-nothing Typer app built like repro's (same settings, the verify signature's kinds of
parameters) asked for --help and run: Typer 0.29 builds a pydantic TypeAdapter per parameter when a command runs.

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


FLOOR_APP = """
from pathlib import Path
from typing import Annotated
import sys, typer
app = typer.Typer(help="floor", pretty_exceptions_enable=False, rich_markup_mode=None, add_completion=False)
@app.command()
def verify(
    result_dir: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="A folder.")],
    recipe: Annotated[str | None, typer.Option("--recipe", help="r")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", min=1, help="g")] = None,
    scenario: Annotated[str | None, typer.Option("--scenario", help="s")] = None,
    json: Annotated[bool, typer.Option("--json", help="j")] = False,
    against: Annotated[list[str] | None, typer.Option("--against", help="a")] = None,
) -> None:
    print(result_dir)
@app.command()
def other() -> None:
    pass
typer.main.get_command(app).main(args=sys.argv[1:], prog_name="floor", standalone_mode=False)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.pairs = 1
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
    floors = (
        ("floor: import typer", [sys.executable, "-c", "import typer"]),
        ("floor: Typer app --help", [sys.executable, "-c", FLOOR_APP, "--help"]),
        ("floor: Typer app verify DIR (does nothing)", [sys.executable, "-c", FLOOR_APP, "verify", str(FIXTURE)]),
    )
    for label, argv in floors:
        pair = alternate(
            label,
            lambda a=argv: subprocess.run(a, capture_output=True, check=True),
            lambda: subprocess.run(bare, capture_output=True, check=True),
            args.pairs,
        )
        print(pair.line() + "; python -c pass = reference")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
