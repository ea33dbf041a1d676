"""Decisions the launch files make, as plain functions (no ``launch`` import), tested without ROS 2.

The launch files in the repository's ``launch/`` call these from their OpaqueFunctions and event handlers.
"""

from __future__ import annotations

import os
from typing import Any

TRUE_WORDS = ("true", "1", "yes", "on")


def is_true(text: str) -> bool:
    """A launch argument's truth value ("true", "1", "yes", "on"; any case)."""
    return text.strip().lower() in TRUE_WORDS


def exit_shutdown_reason(is_shutdown: bool, name: str, returncode: int | None) -> str | None:
    """The reason for the Shutdown event to emit when process ``name`` exits, or None for none.

    None while the launch is already shutting down (Ctrl-C, another process's exit): the process exited
    *because of* that shutdown, and a second Shutdown event makes launch_ros shut its ROS adapter down twice
    ("Cannot shutdown a ROS adapter that is not running", exit status 1).
    """
    if is_shutdown:
        return None
    how = "exited" if returncode in (0, None) else f"exited with status {returncode}"
    return f"{name} {how}"


def deploy_node_parameters(share_dir: str, robot: str, policy: str, interface: str = "",
                           params_file: str = "") -> list[Any]:
    """The deploy node's ``parameters=``: a parameters file (``params_file``, else the generated
    ``config/<robot>_params.yaml`` where the package has one: the node's own defaults come from the same
    spec, so a robot without a generated file runs on those), then the launch arguments as overrides."""
    files = [params_file] if params_file else [
        path for path in [os.path.join(share_dir, "config", f"{robot}_params.yaml")] if os.path.isfile(path)]
    overrides: dict[str, Any] = {"robot": robot, "policy": policy}
    if interface:  # empty: the parameters file's choice, i.e. the robot's own hardware interface
        overrides["interface"] = interface
    return [*files, overrides]
