"""Issue #44 items 4 and 8, hunting for more of the class: seeded mutations of every shipped recipe and benchmark
file, through `repro recipes validate` (all at once, --json and for people) and `repro verify` (a real published
bundle judged by a mutated recipe, or by a mutated benchmark file shadowing the shipped one).

A mutation replaces a value (anywhere in the tree) by a hostile one (wrong type, nan, inf, huge, negative, empty,
control characters, a path, nesting), deletes or adds a key, wraps a value in a list or mapping, or edits the text
(a line twice, a cut, a stray byte, a tab). Whatever the input: no exit 3, no traceback, no raw control character
on the terminal; each refused file is one line naming it; nothing written outside the workspace. The default run is
a seeded sample; REPRO_FUZZ=1 runs every mutant (and more of them) through verify as well.
"""

from __future__ import annotations

import copy
import json
import os
import random
from pathlib import Path
from typing import Any

import yaml
from test_no_exit3 import FIXTURE, FULL, Case, Sandbox

from repro.core.benchmarks import SHIPPED
from repro.core.recipes import recipes_dir

SEED = int(os.environ.get("REPRO_FUZZ_SEED", "4408"))
"""Another seed, other mutants: REPRO_FUZZ_SEED=N."""
PER_FILE = 60 if FULL else 8
"""Mutants of each shipped recipe and benchmark file (8 recipes, 3 benchmarks)."""
VERIFIED = 400 if FULL else 6
"""Mutants that go on through `repro verify` (half recipes of the bundle's own, half benchmark files)."""

HOSTILE: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    0.5,
    -0.0,
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    -float("inf"),
    2**64,
    10**30,
    "",
    " ",
    "x" * 5000,
    "a\nb",
    "\x1b[2J\x07",
    "../../../.bashrc",
    "/etc/passwd",
    "~/.ssh/id_rsa",
    "unknown",
    "null",
    "1e999",
    "\u202eevil",
    "line\u2028two",
    "é",
    "0x10",
    "-5",
    [],
    [None],
    [1, "a", {}],
    {},
    {"a": None},
    {"": 1},
    {"nested": {"deeper": [float("nan")]}},
]


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*at, i))
    return out


def _get(node: Any, at: tuple[Any, ...]) -> Any:
    for k in at:
        node = node[k]
    return node


def _mutate_tree(tree: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    tree = copy.deepcopy(tree)
    for _ in range(rng.randint(1, 3)):
        at = rng.choice([p for p in _paths(tree) if p])
        parent, key = _get(tree, at[:-1]), at[-1]
        op, value = rng.random(), parent[key]
        if isinstance(value, int | float) and not isinstance(value, bool) and rng.random() < 0.6:
            parent[key] = _odd_number(value, rng)  # the type the schema wants, a value that may not be
        elif op < 0.55:
            parent[key] = copy.deepcopy(rng.choice(HOSTILE))
        elif op < 0.7 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.8 and isinstance(parent, dict):
            parent[rng.choice(["extra", "x\ny", "../k", "tp_size"])] = copy.deepcopy(rng.choice(HOSTILE))
        elif op < 0.9:
            parent[key] = [parent[key]] if rng.random() < 0.5 else {"x": parent[key]}
        else:
            parent[key] = str(value) if not isinstance(value, str) else (len(value) or None)
    return tree


def _odd_number(value: float, rng: random.Random) -> float:
    if isinstance(value, int):
        return rng.choice([0, 1, -1, 2, 3, 7, 4096, 4097, 10**6, 2**31, value * 1000, -value])
    return rng.choice([0.0, 1e-9, 1e9, 1e15, -1.0, 100.0, 100.5, value / 1000, value * 1000, -value])


def _mutate_text(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    op = rng.randrange(5)
    if op == 0:
        lines.insert(i, lines[i])  # a line twice: often a key twice
    elif op == 1:
        return text[: rng.randrange(len(text))]
    elif op == 2:
        pos = rng.randrange(len(text))
        return (
            text[:pos]
            + rng.choice(["\x00", "\t", "\ufffd", ":", "&a ", "*a", "!!python/name:os.system ", "{"])
            + text[pos:]
        )
    elif op == 3:
        lines[i] = "\t" + lines[i]
    else:
        lines[i] = lines[i].replace(":", "", 1)
    return "".join(lines)


def mutant(text: str, rng: random.Random) -> str:
    tree = yaml.safe_load(text)
    if rng.random() < 0.75:
        return yaml.safe_dump(_mutate_tree(tree, rng), sort_keys=False, allow_unicode=rng.random() < 0.5)
    return _mutate_text(text, rng)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


def test_mutated_recipes_and_benchmarks_never_crash_validate_or_verify(tmp_path: Path) -> None:
    box = Sandbox(tmp_path)
    rng = random.Random(SEED)
    recipes = sorted(recipes_dir().glob("*.yaml"))
    base = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in recipes}
    mutants: list[Path] = []
    for src in recipes:
        text = src.read_text(encoding="utf-8")
        mutants += [_write(box.inputs / f"r{len(mutants)}" / src.name, mutant(text, rng)) for _ in range(PER_FILE)]
    # benchmark mutants, each under a name of its own in one folder, named by a copy of a recipe of its model
    benches = box.inputs / "benchmarks"
    bench_recipes: list[Path] = []
    for src in sorted(SHIPPED.glob("*.yaml")):
        text = src.read_text(encoding="utf-8")
        owner = next(r for r in base.values() if r.get("benchmark") == src.stem)
        for _ in range(PER_FILE):
            name = f"fz-{len(bench_recipes)}"
            _write(benches / f"{name}.yaml", mutant(text.replace(f"name: {src.stem}\n", f"name: {name}\n", 1), rng))
            recipe = {**owner, "benchmark": name}
            bench_recipes.append(_write(box.inputs / name / f"{owner['name']}.yaml", yaml.safe_dump(recipe)))
    env = {"REPRO_BENCHMARKS_PATH": str(benches)}
    every = [*mutants, *bench_recipes]
    checked = box.check(
        [
            Case("recipes validate --json (all)", ["recipes", "validate", *map(str, every), "--json"], env),
            Case("recipes validate (all)", ["recipes", "validate", *map(str, every)], {**env, "COLUMNS": "400"}),
        ]
    )
    rows = json.loads(checked[0].out)["recipes"]
    assert len(rows) == len(every) and checked[0].code == 2
    for path, row in zip(every, rows, strict=True):
        assert row["valid"] or (row["error"].startswith(f"{path}: ") and "\n" not in row["error"]), row
    valid = sum(r["valid"] for r in rows)
    assert 0 < valid < len(rows), valid  # mutants that pass go on to verify; most are refused

    # verify: the bundle judged by mutants of its own recipe, and by mutated llama2-70b-99 files shadowing the shipped
    own = [p for p, r in zip(every, rows, strict=True) if p.stem == "nd-gb200-v6" and p in mutants]
    verdicts = [r["valid"] for p, r in zip(every, rows, strict=True) if p in own]
    picked = _prefer_valid(own, verdicts, VERIFIED // 2, rng)
    cases = [Case(f"verify --recipe {p}", ["verify", str(FIXTURE), "--recipe", str(p)]) for p in picked]
    text = (SHIPPED / "llama2-70b-99.yaml").read_text(encoding="utf-8")
    for n in range(VERIFIED - len(picked)):
        folder = box.inputs / f"shadow{n}"
        _write(folder / "llama2-70b-99.yaml", mutant(text, rng))
        cases.append(
            Case(
                f"verify, shadowed by {folder}",
                ["verify", str(FIXTURE), "--json"],
                {"REPRO_BENCHMARKS_PATH": str(folder)},
            )
        )
    for outcome in box.check(cases):
        if outcome.code == 2:
            first = outcome.err.splitlines()[0] if outcome.err else ""
            assert first.startswith("error: ") and "Next:" in outcome.err, (outcome.case.label, outcome.err[-800:])
    if os.environ.get("REPRO_FUZZ_TIMES"):
        print(f"{len(every)} mutants validated ({valid} valid), {len(cases)} verified")


def _prefer_valid(paths: list[Path], valid: list[bool], k: int, rng: random.Random) -> list[Path]:
    """k of the mutants, those that validated first (they reach deepest), then others."""
    good = [p for p, v in zip(paths, valid, strict=True) if v]
    bad = [p for p, v in zip(paths, valid, strict=True) if not v]
    rng.shuffle(good)
    rng.shuffle(bad)
    return (good + bad)[:k]
