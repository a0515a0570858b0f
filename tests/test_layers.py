"""The package's import graph: no new circle between modules (function-level imports included)."""

import ast

from eie.sources import PACKAGE, import_graph, runtime_imports

KNOWN: set = set()  # no circle remains


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


def test_package_modules_import_each_other_at_the_top_only():
    """A function-level import of another module of the package hides a layer's dependency; the one
    allowed is the compiled placement kernel, imported when first used (numba compiles it then)."""
    allowed = {("eie.problems.heightmap", "placement_kernel")}
    hidden = []
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(("eie", *path.relative_to(PACKAGE).with_suffix("").parts))
        for function in ast.walk(ast.parse(path.read_text())):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in runtime_imports(function):
                    if node.level and (name, node.module) not in allowed:
                        hidden.append(f"{name}.{function.name}: from {'.' * node.level}{node.module or ''}")
    assert not hidden, hidden
