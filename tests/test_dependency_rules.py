"""The package's floors (docs/ARCHITECTURE.md "Dependency rules"), checked on every import.

A module imports only from its own package or from packages on lower floors, and no two
modules import each other (directly or around a circle). Imports are read from the source
(``ast``), including those inside functions, so a lazy import cannot hide an upward dependency
or a circle; ``if TYPE_CHECKING:`` imports are exempt from the floors (they never run) but
count for circles.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "governed_broker"

#: Floor of each top-level package or module of governed_broker (higher may import lower).
FLOORS: dict[str, int] = {
    "__init__": 0, "contracts": 0, "seeding": 0, "progress": 0,
    "config": 1,
    "llm": 2, "memory": 2,
    "sim": 3, "cognition": 3, "rag": 3,
    "broker": 4,
    "checkpoint": 5, "run_dir": 5,
    "validity": 6,
    "runner": 7,
    "sweep": 8, "analysis": 8, "docgen": 8,
    "calibration": 9, "explore": 9,
    "cli": 10,
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit(module: str) -> str:
    """The floor unit of a module: its top-level package or module under governed_broker."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(tree: ast.AST, top_level_only: bool,
             type_checking: bool = False) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
                    and not type_checking):
                continue
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                if not (top_level_only and in_function):
                    # `from pkg import name` may import the submodule pkg.name
                    found.extend((f"{child.module}.{a.name}", child.lineno)
                                 for a in child.names)
            elif isinstance(child, ast.Import) and not (top_level_only and in_function):
                found.extend((a.name, child.lineno) for a in child.names)
            visit(child, nested)

    visit(tree, False)
    return [(m, line) for m, line in found if m.split(".")[0] == "governed_broker"]


def _sources() -> dict[str, ast.AST]:
    return {_module_name(p): ast.parse(p.read_text(encoding="utf-8"))
            for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_unit_has_a_floor() -> None:
    units = {_unit(m) for m in _sources()}
    assert units <= set(FLOORS), f"give these a floor in FLOORS: {sorted(units - set(FLOORS))}"


def test_imports_go_only_to_lower_floors() -> None:
    wrong = []
    sources = _sources()
    for module, tree in sources.items():
        mine = _unit(module)
        for target, line in _imports(tree, top_level_only=False):
            theirs = _unit(_resolve(target, set(sources)) or target)
            if theirs != mine and FLOORS[theirs] >= FLOORS[mine]:
                wrong.append(f"{module}:{line} imports {target} "
                             f"(floor {FLOORS[mine]} -> {FLOORS[theirs]})")
    assert not wrong, "upward or sideways imports:\n" + "\n".join(wrong)


def _resolve(target: str, modules: set[str]) -> str | None:
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def test_no_import_circles() -> None:
    """No circle of modules, counting lazy imports and those for type checking too.

    A circle there still ties two modules into one concept.
    """
    sources = _sources()
    modules = set(sources)
    graph = {m: {t for t in (_resolve(x, modules)
                             for x, _ in _imports(tree, False, type_checking=True))
                 if t and t != m and not m.startswith(t + ".")}  # a package's own __init__
             for m, tree in sources.items()}
    state: dict[str, int] = {}
    circles: list[str] = []

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif nxt not in state:
                walk(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module, [module])
    assert not circles, "import circles:\n" + "\n".join(circles)
