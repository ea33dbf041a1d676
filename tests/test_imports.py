"""The subpackages of robot_rl form a layered graph: no import cycle between them, and core at the bottom.

A cycle between two subpackages means neither can be understood, tested or moved without the other; a lazy
import inside a function hides it from Python but not from the design, so every import counts here:
module level, inside functions and under ``TYPE_CHECKING`` alike. The graph is read from the source with
``ast`` (nothing is imported), so the test needs none of the optional extras.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from pathlib import Path

PACKAGE = "robot_rl"
PACKAGE_DIR = Path(__file__).resolve().parents[1] / PACKAGE


@dataclass(frozen=True)
class ImportLine:
    """One import statement of the package that names another part of it."""

    source: str  # dotted module that imports, e.g. robot_rl.teleop.session
    target: str  # dotted module (or package) imported, e.g. robot_rl.learn.demos
    path: str  # file, relative to the repository
    line: int
    text: str  # the statement as written

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def module_name(path: Path, package_dir: Path) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def subpackage(module: str) -> str | None:
    """``robot_rl.teleop.session`` → ``teleop``; ``robot_rl.cli`` → ``cli``; ``robot_rl`` itself → None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == PACKAGE else None


def imported_modules(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names ``node`` imports (``from a import b`` yields ``a.b``: b may be a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: resolve against this module's package
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return [f"{base}.{alias.name}" if alias.name != "*" else base for alias in node.names]


@cache
def package_imports(package_dir: Path = PACKAGE_DIR) -> tuple[ImportLine, ...]:
    """Every import, anywhere in every module of the package, of another module of the package."""
    found = []
    repo = package_dir.parent
    for path in sorted(package_dir.rglob("*.py")):
        module = module_name(path, package_dir)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            text = ast.unparse(node)
            for target in imported_modules(node, module, path.name == "__init__.py"):
                if target == PACKAGE or target.startswith(PACKAGE + "."):
                    found.append(ImportLine(module, target, str(path.relative_to(repo)), node.lineno, text))
    return tuple(found)


def subpackage_graph(imports: tuple[ImportLine, ...]) -> dict[tuple[str, str], list[ImportLine]]:
    """(importing subpackage, imported subpackage) → the import lines that make that edge."""
    edges: dict[tuple[str, str], list[ImportLine]] = defaultdict(list)
    seen: set[tuple[str, str, str, int]] = set()  # ``from a import b, c`` is one reason for an edge, not two
    for imp in imports:
        src, dst = subpackage(imp.source), subpackage(imp.target)
        if src is not None and dst is not None and src != dst and (src, dst, imp.path, imp.line) not in seen:
            seen.add((src, dst, imp.path, imp.line))
            edges[src, dst].append(imp)
    return edges


def strongly_connected(nodes: set[str], succ: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node: each one holds a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return components


def shortest_cycle(component: list[str], succ: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the component's first node, as ``[a, b, …, a]`` (breadth first)."""
    start, members = component[0], set(component)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(succ[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in {component}")  # a component always has one


def describe_cycles(edges: dict[tuple[str, str], list[ImportLine]]) -> list[str]:
    """One paragraph per cycle: the subpackages in order, then each edge's import lines."""
    succ: dict[str, set[str]] = defaultdict(set)
    for src, dst in edges:
        succ[src].add(dst)
    nodes = {n for edge in edges for n in edge}
    report = []
    for component in strongly_connected(nodes, succ):
        cycle = shortest_cycle(component, succ)
        lines = [f"cycle {' → '.join(cycle)} (strongly connected: {', '.join(component)})"]
        for src, dst in pairwise(cycle):
            lines.append(f"  {src} → {dst}:")
            lines += [f"    {imp}" for imp in edges[src, dst]]
        report.append("\n".join(lines))
    return report


def test_no_import_cycle_between_subpackages():
    report = describe_cycles(subpackage_graph(package_imports()))
    assert not report, "import cycles between robot_rl's subpackages:\n" + "\n".join(report)


def test_core_imports_nothing_else_from_the_package():
    outside = [imp for imp in package_imports()
               if subpackage(imp.source) == "core" and subpackage(imp.target) != "core"]
    assert not outside, "robot_rl.core must import only itself:\n" + "\n".join(map(str, outside))


def test_the_graph_reader_sees_lazy_relative_and_type_only_imports(tmp_path):
    # The two tests above pass vacuously if the reader misses imports; this one checks it on a tiny package.
    pkg = tmp_path / PACKAGE
    for sub in ("a", "b", "c"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "m.py").write_text("def f():\n    from robot_rl.b import m\n")
    (pkg / "b" / "m.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..c import m\n")
    (pkg / "c" / "m.py").write_text("from robot_rl import a\n")
    edges = subpackage_graph(package_imports(pkg))
    assert set(edges) == {("a", "b"), ("b", "c"), ("c", "a")}
    (report,) = describe_cycles(edges)
    assert report.startswith("cycle a → b → c → a") and "robot_rl/b/m.py:3: from ..c import m" in report
