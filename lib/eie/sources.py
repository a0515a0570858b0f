"""The package's import graph, read from its own sources: which of its modules a module runs.

What the evaluation store keys its pieces by (the source of every module that computes them) and
what the layer test checks (no import circle) both come from here, so neither is a hand-kept list.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def module_files() -> dict[str, Path]:
    """{module name ("eie.problems.tsp"): its file} of every module of the package."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(("eie", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        modules[name] = path
    return modules


def runtime_imports(tree) -> list:
    """The `from ... import` statements of a module, function-level ones included, but not those
    under `if TYPE_CHECKING:` (annotations only, never executed)."""
    found = []

    def visit(node):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            return
        if isinstance(node, ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


@lru_cache(maxsize=1)
def import_graph() -> dict[str, frozenset]:
    """{module: the package modules it imports (relative imports, at any level of the module)}."""
    modules = module_files()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        targets = set()
        for node in runtime_imports(ast.parse(path.read_text())):
            if not node.level:
                continue
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                if target in modules and target != name:
                    targets.add(target)
        graph[name] = frozenset(targets)
    return graph


def closure(entries, skip=()) -> list[str]:
    """The modules `entries` run: themselves and every package module they import, transitively,
    not entering the modules of `skip` (names, or name prefixes ending in "."). Sorted."""
    graph, seen = import_graph(), set()
    stack = list(entries)
    while stack:
        name = stack.pop()
        if name in seen or any(name == s or (s.endswith(".") and name.startswith(s)) for s in skip):
            continue
        if name not in graph:
            raise ValueError(f"{name!r} is not a module of the package")
        seen.add(name)
        stack.extend(graph[name])
    return sorted(seen)


def module_path(name: str) -> Path:
    return module_files()[name]
