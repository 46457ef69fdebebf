"""The house's shape: no import circles (none hidden in functions), bounded module sizes."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "svcdoctor"
MAX_MODULE_LINES = 800
MAX_CLI_MODULE_LINES = 300
# The in-cluster agent ships as one stdlib-only file in a ConfigMap: it cannot be split.
LARGE_BY_NECESSITY = frozenset({"cluster/agent.py"})


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _imports_svcdoctor(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").startswith("svcdoctor")
    return isinstance(node, ast.Import) and any(a.name.startswith("svcdoctor") for a in node.names)


def test_no_module_imports_svcdoctor_inside_a_function() -> None:
    """Only cli/ defers its imports (a command loads what it needs, `--help` stays fast)."""
    hidden = []
    for path in _modules():
        if _relative(path).startswith("cli/"):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if _imports_svcdoctor(node):
                    hidden.append(f"{_relative(path)}:{node.lineno}")
    assert not hidden, f"function-level imports of svcdoctor modules: {sorted(set(hidden))}"


def _cycles() -> list[list[str]]:
    graph = grimp.build_graph("svcdoctor", cache_dir=None)
    modules = sorted(graph.modules)
    index = {m: i for i, m in enumerate(modules)}
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    # Tarjan's strongly connected components, iteratively.
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in order:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                order[node] = low[node] = len(order)
                stack.append(node)
                on_stack.add(node)
            children = [c for c in edges[node] if c in index]
            if i < len(children):
                work.append((node, i + 1))
                child = children[i]
                if child not in order:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            if low[node] == order[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def test_no_import_circles() -> None:
    assert _cycles() == []


@pytest.mark.parametrize("path", _modules(), ids=_relative)
def test_module_size(path: Path) -> None:
    name = _relative(path)
    if name in LARGE_BY_NECESSITY:
        return
    limit = MAX_CLI_MODULE_LINES if name.startswith("cli/") else MAX_MODULE_LINES
    lines = len(path.read_text().splitlines())
    assert lines <= limit, f"{name}: {lines} lines (at most {limit})"


def _diagram_edges() -> set[tuple[str, str]]:
    """The arrows of docs/architecture.md's layer diagram (``a --> b & c``)."""
    text = (SRC.parents[1] / "docs" / "architecture.md").read_text()
    diagram = text.split("```mermaid", 1)[1].split("```", 1)[0]
    edges = set()
    for line in diagram.splitlines():
        if "-->" in line:
            source, targets = (part.strip() for part in line.split("-->"))
            edges |= {(source, t.strip()) for t in targets.split("&")}
    return edges


def _package_edges() -> set[tuple[str, str]]:
    """The import graph of the top-level packages, without the edges a path implies."""
    graph = grimp.build_graph("svcdoctor", cache_dir=None)
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())
    direct = {
        (a, b)
        for a in packages
        for b in packages
        if a != b
        and graph.direct_import_exists(
            importer=f"svcdoctor.{a}", imported=f"svcdoctor.{b}", as_packages=True
        )
    }

    def reachable(start: str, skip: tuple[str, str]) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            for a, b in direct:
                if a == node and (a, b) != skip and b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen

    return {(a, b) for a, b in direct if b not in reachable(a, (a, b))}


def test_the_architecture_diagram_is_the_import_graph() -> None:
    """docs/architecture.md draws the packages' imports as they are (reduced to the edges
    no other path implies): a new dependency between packages shows up there, or fails."""
    assert _diagram_edges() == _package_edges()
