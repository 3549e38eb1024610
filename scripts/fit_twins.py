#!/usr/bin/env python3
"""Write repro/data/twin/fits.json: every GPU recipe's twin fit under the key of what it depends on.

Usage: python scripts/fit_twins.py [--check]
A fit takes 2-10 s a recipe; the shipped one spares each fresh workspace and test process that. Run this after
changing twins.yaml, a twin log, a recipe with a twin, repro/rehearse/twin.py or the stand-in's trtllm_twin.py;
a stale entry is only slower (it is refitted), and tests/test_twin_fits.py says which entry is stale.
--check writes nothing and exits 1 when an entry is stale or missing.
"""

from __future__ import annotations

import json
import sys

from repro.core.fsutil import atomic_write_text
from repro.core.recipes import get_recipe
from repro.rehearse import twin as T


def stale() -> list[str]:
    """The recipes with a twin whose shipped fit is missing or made under another key."""
    return [name for name in sorted(T.load_record().recipes) if T.shipped_fit(get_recipe(name)) is None]


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        names = stale()
        for name in names:
            print(f"{T.SHIPPED_FITS}: {name}'s fit is stale; run: python scripts/fit_twins.py", file=sys.stderr)
        return 1 if names else 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    doc = {}
    for name in sorted(T.load_record().recipes):
        recipe = get_recipe(name)
        fit = T.shipped_fit(recipe) or T.fit_scenarios(recipe, T.targets(recipe))
        doc[name] = {"key": T.fit_key(recipe), "fit": {k: list(v) for k, v in sorted(fit.items())}}
        print(f"{name}: {T.fit_key(recipe)}")
    atomic_write_text(T.SHIPPED_FITS, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
