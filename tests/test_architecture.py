"""The Python package's layers, read from its sources with ``ast`` (nothing is imported):
no two torch_tpu modules import each other, directly or through others, at any level
(function-local imports included), and ``torch_tpu._runtime``, the start-up plumbing at
the bottom, imports neither the compile backend nor the operators above it.

Edges into the package root ``torch_tpu`` are left out: the root imports its submodules
and submodules read ``torch_tpu.sync`` and friends from it, which is the normal pattern."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "torch_tpu"


def _modules() -> dict[str, tuple[str, bool]]:
    """Every module of the package: dotted name -> (file, whether it is a package)."""
    modules = {}
    for folder, dirs, names in os.walk(os.path.join(ROOT, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        relative = os.path.relpath(folder, ROOT).split(os.sep)
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            if name == "__init__.py":
                modules[".".join(relative)] = (os.path.join(folder, name), True)
            else:
                modules[".".join([*relative, name[:-3]])] = (os.path.join(folder, name), False)
    return modules


def _imported(module: str, is_package: bool, tree: ast.AST, known: set[str]) -> set[str]:
    """The torch_tpu modules `module` imports anywhere in its body: ``from a import b``
    counts as importing ``a.b`` when that is a module, else ``a``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                parts = parts[: len(parts) - node.level + (1 if is_package else 0)]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in known else base)
    return {name for name in found if name in known and name != module}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, (path, is_package) in modules.items():
        with open(path, encoding="utf-8") as file:
            tree = ast.parse(file.read(), path)
        graph[name] = _imported(name, is_package, tree, set(modules)) - {PACKAGE}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm),
    each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_the_graph_sees_function_local_and_relative_imports():
    graph = import_graph()
    assert "torch_tpu.compile.host_split" in graph["torch_tpu.compile.runner"]  # local import
    assert "torch_tpu.conformance.runner" in graph["torch_tpu.conformance.cpu_check"]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_between_torch_tpu_modules():
    cycles = find_cycles(import_graph())
    assert not cycles, "modules that import each other (through the modules listed): " + "; ".join(
        " <-> ".join(cycle) for cycle in cycles
    )


@pytest.mark.parametrize("upper", ["torch_tpu.compile", "torch_tpu.ops"])
def test_runtime_does_not_import_upward(upper):
    graph = import_graph()
    upward = {
        f"{module} imports {target}"
        for module, targets in graph.items()
        if module.startswith("torch_tpu._runtime")
        for target in targets
        if target == upper or target.startswith(upper + ".")
    }
    assert not upward, sorted(upward)
