"""The shipped twin fits (repro/data/twin/fits.json): current for every recipe with a twin, equal to a fresh fit,
and refitted, never trusted, when made under another key."""

from __future__ import annotations

import json
import math

import pytest

from repro.core.recipes import get_recipe
from repro.rehearse import twin as T

CHEAPEST = "nc-h100-v5"
"""The recipe whose fit takes least (about 2 s here): the one refitted in these tests."""


def test_every_recipe_with_a_twin_ships_a_current_fit() -> None:
    stale = [n for n in sorted(T.load_record().recipes) if T.shipped_fit(get_recipe(n)) is None]
    assert not stale, f"stale twin fits {stale}: run python scripts/fit_twins.py"


def test_the_shipped_fit_is_what_a_fresh_fit_gives() -> None:
    recipe = get_recipe(CHEAPEST)
    shipped = T.shipped_fit(recipe)
    assert shipped is not None
    fresh = T.fit_scenarios(recipe, T.targets(recipe))
    assert sorted(fresh) == sorted(shipped)
    for scenario, values in fresh.items():
        pairs = zip(values, shipped[scenario], strict=True)
        assert all(math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0) for a, b in pairs), scenario


@pytest.mark.parametrize("entry", ["other key", "missing", "not json"])
def test_a_stale_or_broken_shipped_fit_is_refitted_and_kept_in_the_workspace(tmp_path, monkeypatch, entry) -> None:
    recipe = get_recipe(CHEAPEST)
    good = T.shipped_fit(recipe)
    assert good is not None
    fits = tmp_path / "fits.json"
    doc = json.loads(T.SHIPPED_FITS.read_text(encoding="utf-8"))
    if entry == "other key":
        doc[CHEAPEST]["key"] = "0" * 16
        doc[CHEAPEST]["fit"]["Offline"] = [1.0, 1.0, 1.0]
        fits.write_text(json.dumps(doc), encoding="utf-8")
    elif entry == "missing":
        del doc[CHEAPEST]
        fits.write_text(json.dumps(doc), encoding="utf-8")
    else:
        fits.write_text("{not json", encoding="utf-8")
    monkeypatch.setattr(T, "SHIPPED_FITS", fits)
    monkeypatch.setattr(T, "_FITTED", {})
    assert T.shipped_fit(recipe) is None
    got = T.cached_fit(recipe, T.targets(recipe), tmp_path / "twin")
    assert got["Offline"] == good["Offline"] and got["Offline"] != (1.0, 1.0, 1.0)
    kept = list((tmp_path / "twin").glob("twin-fit-*.json"))
    assert [p.name for p in kept] == [f"twin-fit-{CHEAPEST}-{T.fit_key(recipe)}.json"]


def test_the_script_checks_the_shipped_fits() -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "fit_twins.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
