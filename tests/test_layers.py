"""The package's import graph: no new circle between modules (function-level imports included)."""

import ast

from eie.paths import repo_root

PACKAGE = repo_root() / "lib" / "eie"
# Circles that remain, to be straightened: the problems call their reference solvers, which check
# and cost with the problems; bin packing's heuristics use the problem's placement and vice versa.
KNOWN = {frozenset({"eie.problems.cvrp", "eie.problems.tsp", "eie.solvers"}),
         frozenset({"eie.problems.bpp", "eie.problems.bpp_heuristics"})}


def import_graph() -> dict:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(("eie", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        modules[name] = path
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                for alias in node.names:
                    target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    if target in modules and target != name:
                        graph[name].add(target)
    return graph


def circles(graph: dict) -> set:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), set(), [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_finder_sees_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset({"a", "b", "c"})}


def test_no_import_circle_beyond_the_known_ones():
    found = circles(import_graph())
    assert not found - KNOWN, f"new import circles: {[sorted(c) for c in found - KNOWN]}"
