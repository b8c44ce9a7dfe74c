"""The package's layers (README "Layout"): every import inside jepa_core points down the layer order, and no module
imports itself back through others, deferred (function-level) imports included.

A deferred import may keep torch out of a light command's start-up; it may not hide a cycle or an upward import.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "jepa_core"

# Lowest first. A module may import its own layer and the layers before it. The top-level modules `cli`, `train`
# `check`, `rewind` and `monitor` are the entry points: `jepa`, `python -m jepa_core.train` / torchrun, `jepa check`,
# `jepa rewind`, and the monitor a loop written elsewhere imports.
LAYERS = ("common", "config", "method", "data", "metrics", "alerts", "run", "workbench", "entry")
ENTRY_POINTS = ("cli", "train", "check", "rewind", "monitor")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None  # the package itself: jepa_core/__init__.py holds only the version
    return "entry" if parts[1] in ENTRY_POINTS else parts[1]


def imports_of(path: Path, modules: set[str]) -> list[tuple[str, int, bool]]:
    """(imported jepa_core module, line, deferred) for every import in the file, `from X import name` resolved to the
    submodule `X.name` when that is a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                       for a in node.names]
        else:
            assert not (isinstance(node, ast.ImportFrom) and node.level), f"{path}: relative import"
            continue
        deferred = id(node) not in top_level and not _under_type_checking(tree, node)
        found += [(t, node.lineno, deferred) for t in targets if t == "jepa_core" or t.startswith("jepa_core.")]
    return found


def _under_type_checking(tree: ast.Module, target: ast.AST) -> bool:
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            if any(child is target for child in ast.walk(node)):
                return True
    return False


def package_graph() -> dict[str, list[tuple[str, int, bool]]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imports_of(path, set(files)) for name, path in files.items()}


GRAPH = package_graph()


def test_every_module_belongs_to_a_layer():
    assert {layer_of(m) for m in GRAPH} - {None} == set(LAYERS)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down_the_layer_order(module):
    own = layer_of(module)
    for target, line, _ in GRAPH[module]:
        theirs = layer_of(target)
        if own is None or theirs is None:
            continue
        assert LAYERS.index(theirs) <= LAYERS.index(own), (
            f"{module}:{line} imports {target}: layer {theirs!r} is above {own!r} ({' < '.join(LAYERS)})")


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (a list of modules, first == last), or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if state.get(nxt) is None and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state.get(node) is None and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_even_through_deferred_imports():
    # A package's __init__ that re-exports its submodules is an edge to them; a submodule importing its own
    # package's __init__ back would be a cycle, and is reported like any other.
    graph = {m: {t for t, _, _ in edges if t in GRAPH and t != m} for m, edges in GRAPH.items()}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_checks_catch_what_they_are_for():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    assert layer_of("jepa_core.method.step") == "method" and layer_of("jepa_core.train") == "entry"
    assert LAYERS.index(layer_of("jepa_core.workbench.charts")) > LAYERS.index(layer_of("jepa_core.run.trainer"))


def test_each_sub_package_says_what_it_owns_and_may_import():
    for layer in LAYERS[:-1]:
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "Owns:" in doc and "May import:" in doc, layer


def readme_layout() -> dict[str, str]:
    """The README's layout block: the text describing each jepa_core layer ('' key: the top-level modules' line)."""
    text = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    block = text[text.index("## Layout"):]
    block = block[block.index("```") + 3:]
    block = block[:block.index("```")]
    described: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            head = line.split()[0]
            current = head[:-1] if head.endswith("/") else ""
            described[current] = described.get(current, "") + " " + line
        elif line.startswith(" " * 14) and current is not None:
            described[current] += " " + line
        else:
            current = None
    return described


def test_the_readme_layout_names_every_module_where_it_is():
    described = readme_layout()
    assert set(described) - {""} == set(LAYERS[:-1])
    for layer in LAYERS[:-1]:
        words = set(re.sub(r"[,;:()]", " ", described[layer]).split())
        modules = {p.stem for p in (PACKAGE / layer).glob("*.py")} - {"__init__"}
        assert modules <= words, f"README layout misses {sorted(modules - words)} in {layer}/"
    assert all(f"{name}.py" in described[""] for name in ENTRY_POINTS)
