"""`python -m repro`: the same CLI as the `repro` script, for a venv whose bin/ is not on PATH."""

from repro.cli import main

if __name__ == "__main__":  # not when a spawned child (the --target-qps auto probe) imports it
    main()
