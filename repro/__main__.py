"""`python -m repro`: the same CLI as the `repro` script, for a venv whose bin/ is not on PATH."""

from repro.cli import main

main()
