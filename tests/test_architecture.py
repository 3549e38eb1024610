"""The layout's rules, checked on the source: only the edge renders, and module imports form no cycle."""

from __future__ import annotations

import ast
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


def _imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_only_the_edge_imports_rich_typer_or_the_ui() -> None:
    offenders = []
    for name, path in _modules().items():
        if name.startswith(EDGE):
            continue
        for imported in _imports(path, top_level_only=False):
            if imported.split(".")[0] in ("rich", "typer") or imported.startswith(("repro.ui", "repro.commands")):
                offenders.append(f"{name} imports {imported}")
    assert not offenders, "\n".join(sorted(offenders))


def test_no_import_cycle_at_module_level() -> None:
    mods = _modules()
    graph = {
        name: {i for i in _imports(path, top_level_only=True) if i in mods and i != name} for name, path in mods.items()
    }
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle.extend(stack[stack.index(nxt) :] + [node, nxt] if nxt in stack else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, [*stack, node]):
                return True
        state[node] = 2
        return False

    for name in sorted(graph):
        if state.get(name) is None and visit(name, []):
            break
    assert not cycle, " -> ".join(cycle)
