"""The layout's rules, checked on the source: only the edge renders, and module imports form no cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

PKG = REPO / "repro"
EDGE = ("repro.cli", "repro.commands", "repro.ui")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(path: Path, top_level_only: bool, module: str = "") -> set[str]:
    """Absolute and relative imports; with top_level_only=False also those inside functions and TYPE_CHECKING."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module:
                mod = node.module
            else:
                continue
            names.add(mod)
            names |= {f"{mod}.{a.name}" for a in node.names}
    return names


def test_only_the_edge_imports_rich_typer_or_the_ui() -> None:
    offenders = []
    for name, path in _modules().items():
        if name.startswith(EDGE):
            continue
        for imported in _imports(path, top_level_only=False, module=name):
            if imported.split(".")[0] in ("rich", "typer") or imported.startswith(("repro.ui", "repro.commands")):
                offenders.append(f"{name} imports {imported}")
    assert not offenders, "\n".join(sorted(offenders))


# Stages from the bottom up: a module may import its own stage and any stage of a lower rank, never a higher one.
STAGE_RANK = {
    "core": 0,
    "setup": 1,
    "engine": 1,
    "results": 1,
    "run": 2,
    "flow": 3,
    "report": 3,
    "rehearse": 3,
    "ui": 4,
    "commands": 5,
    "cli": 6,
}
# Packages of one rank stay apart too (setup, engine and results meet only in run and above).


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {
        name: {i for i in _imports(path, top_level_only=False, module=name) if i in mods and i != name}
        for name, path in mods.items()
    }


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_stage_package_has_a_rank() -> None:
    packages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert packages <= set(STAGE_RANK), sorted(packages - set(STAGE_RANK))


def test_stages_import_only_downward_function_level_imports_included() -> None:
    offenders = []
    for name, targets in _graph().items():
        a = _stage(name)
        for target in sorted(targets):
            b = _stage(target)
            if a not in STAGE_RANK or b not in STAGE_RANK or a == b:
                continue
            if STAGE_RANK[b] >= STAGE_RANK[a]:
                offenders.append(f"{name} ({a}) imports {target} ({b})")
    assert not offenders, "\n".join(offenders)


def test_no_import_cycle_lazy_or_not() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle.extend([*stack[stack.index(nxt) :], node, nxt] if nxt in stack else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, [*stack, node]):
                return True
        state[node] = 2
        return False

    for name in sorted(graph):
        if state.get(name) is None and visit(name, []):
            break
    assert not cycle, " -> ".join(cycle)


def test_every_path_architecture_md_names_exists() -> None:
    """docs/ARCHITECTURE.md is read to find things: each `repro/...` path it names, and each module file name in its
    tree, must be in the source (a renamed or moved module fails here until the document follows)."""
    doc = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    paths = {m.rstrip(".,:;)") for m in re.findall(r"(?<![\w/])repro/[\w./-]+", doc)}
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"
    files = {p.name for top in ("repro", "tests", "benchmarks") for p in (REPO / top).rglob("*") if p.is_file()}
    names = set(re.findall(r"(?<![\w/.-])([a-z_][\w-]*\.(?:py|sh))\b", doc))
    assert not names - files, f"docs/ARCHITECTURE.md names files that do not exist: {sorted(names - files)}"
    assert len(paths) > 20 and len(names) > 40  # the patterns still find what the document names


OUTSIDE = re.compile(r"\.\./shared|/work/shared|/work/\.mirror|shared/(reference|fixtures)")


def test_the_tests_need_nothing_beside_the_repository() -> None:
    """A fresh clone has no shared/ (the workplace's reference notes and logs) beside it: no test, benchmark or
    script names a path there or above the repository in its code (a docstring may cite a note; the logs the tests
    read are copies in tests/fixtures/)."""
    found = []
    sources = [*(REPO / "tests").rglob("*.py"), *(REPO / "benchmarks").glob("*.py"), *(REPO / "scripts").glob("*.py")]
    for path in (p for p in sources if p != Path(__file__)):  # this file holds the pattern itself
        tree = ast.parse(path.read_text(), str(path))
        docs = {id(n.body[0].value) for n in ast.walk(tree) if _docstring(n) is not None}
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) and id(node) not in docs else None
            if isinstance(text, str) and OUTSIDE.search(text):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {text[:80]!r}")
            if isinstance(node, ast.Attribute) and ast.unparse(node) == "REPO.parent":
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: REPO.parent")
    found += [str(p.relative_to(REPO)) for p in (REPO / "scripts").glob("*.sh") if OUTSIDE.search(p.read_text())]
    assert not found, found


def _docstring(node: ast.AST) -> str | None:
    if not isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None
    return ast.get_docstring(node, clean=False)
