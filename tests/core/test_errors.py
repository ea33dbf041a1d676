"""Every exception class the package raises for its users derives from RobotRLError, so the command line
can print each one as one line by catching that one base (tests/test_cli.py checks the printing)."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import pytest

from robot_rl.core.errors import RobotRLError

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "robot_rl"
BUILTIN_EXCEPTIONS = {name for name, obj in vars(builtins).items()
                      if isinstance(obj, type) and issubclass(obj, BaseException)}

# Found by the walk below whatever else it finds: if one of these goes missing, the walk is broken (or the
# class moved or was renamed: update the list).
KNOWN_USER_ERRORS = {
    "robot_rl.typed_yaml": {"ConfigError"},
    "robot_rl.robots.assets": {"ModelSourceError", "ModelBuildError"},
    "robot_rl.policy.contract": {"ContractError", "ContractMismatch"},
    "robot_rl.policy.export": {"ExportError"},
    "robot_rl.policy.onnx_policy": {"PolicyLoadError"},
    "robot_rl.tasks.registry": {"UnknownTaskError"},
    "robot_rl.learn.errors": {"CheckpointError"},
    "robot_rl.hardware.unitree_dds": {"RobotConnectionError"},
    "robot_rl.hardware.faults": {"FaultConfigError"},
    "robot_rl.teleop.devices": {"DeviceError"},
    "robot_rl.teleop.session": {"TeleopError"},
    "robot_rl.data.lerobot_format": {"DatasetError"},
    "robot_rl.data.mcap_log_reader": {"LogReadError"},
    "robot_rl.control.deploy_command": {"DeployError"},
}


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def exception_classes() -> dict[str, set[str]]:
    """Module → the exception classes it defines, read with ``ast``: a class is one when a base is a builtin
    exception or another exception class of the package (by name, to a fixed point)."""
    classes: list[tuple[str, str, set[str]]] = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                classes.append((module, node.name, {n for b in node.bases if (n := _base_name(b))}))
    exceptions = set(BUILTIN_EXCEPTIONS)
    found: dict[str, set[str]] = {}
    grew = True
    while grew:
        grew = False
        for module, name, bases in classes:
            if name not in found.get(module, set()) and bases & exceptions:
                found.setdefault(module, set()).add(name)
                exceptions.add(name)
                grew = True
    return found


def test_every_public_exception_class_derives_from_robot_rl_error():
    found = exception_classes()
    for module, names in KNOWN_USER_ERRORS.items():
        assert names <= found.get(module, set()), f"{module}: the walk did not find {names - found.get(module, set())}"
    wrong = []
    for module, names in sorted(found.items()):
        loaded = importlib.import_module(module)
        for name in sorted(names):
            cls = getattr(loaded, name)
            assert issubclass(cls, BaseException), f"{module}.{name} was read as an exception class"
            # A leading underscore marks internal control flow (a stop request, a time budget), which never
            # reaches the user; every other exception class carries a message for them.
            if not name.startswith("_") and cls is not RobotRLError and not issubclass(cls, RobotRLError):
                wrong.append(f"{module}.{name}({', '.join(b.__name__ for b in cls.__bases__)})")
    assert not wrong, "exception classes for users that do not derive from RobotRLError: " + ", ".join(wrong)


@pytest.mark.parametrize(("module", "name", "builtin"), [
    ("robot_rl.typed_yaml", "ConfigError", ValueError),
    ("robot_rl.robots.assets", "ModelSourceError", FileNotFoundError),
    ("robot_rl.tasks.registry", "UnknownTaskError", KeyError),
    ("robot_rl.policy.export", "ExportError", RuntimeError),
])
def test_user_errors_keep_their_builtin_base(module, name, builtin):
    """Callers that already catch the builtin (``except ValueError``) keep catching these."""
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, RobotRLError) and issubclass(cls, builtin)
