"""Tasks are terms: nothing outside the task definitions asks which task it runs, and tasks are configuration
that never imports the simulator (sim imports tasks, one way)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "robot_rl"
# A comparison of a task's kind: `objective ==`, `!=`, `in`, `not in` (and the old PPO_OBJECTIVES list).
SWITCH = re.compile(r"\bobjective\s*(==|!=|in\b|not\s+in\b)|\bPPO_OBJECTIVES\b|\bOBJECTIVES\b")


def _sources(*folders: Path):
    for folder in folders:
        yield from sorted(folder.rglob("*.py"))


def test_no_objective_switch_outside_the_task_definitions():
    offenders = []
    for path in _sources(PACKAGE, ROOT / "benchmarks"):
        if path.is_relative_to(PACKAGE / "tasks"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if SWITCH.search(line.split("#", 1)[0]):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "run the task through its terms instead:\n" + "\n".join(offenders)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_tasks_never_import_sim():
    """One direction only: the env (sim) reads the task's terms; the tasks are configuration."""
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in _imports(p) if m.startswith("robot_rl.sim"))
                 for p in _sources(PACKAGE / "tasks")}
    assert not {k: v for k, v in offenders.items() if v}
    sim_imports_tasks = any(m.startswith("robot_rl.tasks") for p in _sources(PACKAGE / "sim") for m in _imports(p))
    assert sim_imports_tasks  # the direction kept: sim builds on the task configuration
