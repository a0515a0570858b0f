"""The package's import graph: no new circle between modules (function-level imports included)."""

import ast

from eie.paths import repo_root

PACKAGE = repo_root() / "lib" / "eie"
KNOWN: set = set()  # no circle remains


def import_graph() -> dict:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(("eie", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        modules[name] = path
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in runtime_imports(ast.parse(path.read_text())):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                for alias in node.names:
                    target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    if target in modules and target != name:
                        graph[name].add(target)
    return graph


def runtime_imports(tree) -> list:
    """The relative `from ... import` statements of a module, function-level ones included, but not
    those under `if TYPE_CHECKING:` (annotations only, never executed)."""
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
