"""The deploy node's helpers that need no rclpy (imported by tests without a ROS installation)."""

from __future__ import annotations

import importlib
from pathlib import Path

from robot_rl.robots.spec import REPO_ROOT, RobotSpec

# The Unitree low-level RobotInterface (rt/lowcmd and rt/lowstate over Cyclone DDS), built from the spec.
UNITREE_INTERFACE = ("robot_rl.hardware.unitree_dds", "UnitreeDdsRobot")


def resolve_policy_path(policy: str, repo_root: Path = REPO_ROOT) -> Path:
    """Absolute paths as given; relative ones from the working directory, else from the repository (so the
    launch default ``policies/a1_flat/policy.onnx`` works from any directory)."""
    path = Path(policy).expanduser()
    if path.is_absolute() or path.exists():
        return path.resolve()
    in_repo = repo_root / path
    return in_repo if in_repo.exists() else path  # a missing file is reported by the policy loader


def open_unitree_interface(spec: RobotSpec, domain_id: int | None = None):
    """Construct and connect the Unitree DDS RobotInterface for ``spec`` (on ``domain_id``, default the spec's)."""
    module_name, class_name = UNITREE_INTERFACE
    try:
        interface_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"the unitree_dds output needs {module_name}.{class_name}: {exc}") from exc
    interface = interface_class(spec) if domain_id is None else interface_class(spec, domain_id=domain_id)
    interface.connect()  # waits for the first state; a clear ConnectionError naming domain and NIC if none
    return interface
