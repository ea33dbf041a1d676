"""Decisions the launch files make, as plain functions, tested without ROS 2 (tests/ros/test_launch_logic.py).

The launch files beside this one load it by path: ``ros2 launch`` runs on the interpreter
ROS 2 was installed for (``/usr/bin/python3``), which does not see the virtualenv that has robot_rl, so
nothing here (nor in the launch files) may import robot_rl; only the standard library. Installed with them
into ``share/robot_rl/launch``.
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


DDS_DOMAIN_IDS = range(0, 233)  # what Cyclone DDS accepts (and the sim bridge)


def sim_link_domain(requested: str, ros_domain_id: str | None) -> int:
    """The DDS domain of the sim bridge's Unitree link in sim.launch.py.

    "auto" (or empty): the domain after ROS 2's (``ROS_DOMAIN_ID``, 0 when unset), so ROS 2 processes never
    discover the plain-DDS Unitree topics (rmw_cyclonedds warns "Failed to parse type hash" for each), and
    several users on one machine who each set their own ROS_DOMAIN_ID don't share a sim either. A number: that
    domain.
    """
    text = requested.strip().lower()
    if text in ("", "auto"):
        ros = int(ros_domain_id) if ros_domain_id and ros_domain_id.strip().isdigit() else 0
        return (ros + 1) % len(DDS_DOMAIN_IDS)
    try:
        domain = int(text)
    except ValueError:
        raise ValueError(f"link_domain_id must be auto or a DDS domain id 0..232, got {requested!r}") from None
    if domain not in DDS_DOMAIN_IDS:
        raise ValueError(f"link_domain_id must be auto or a DDS domain id 0..232, got {requested!r}")
    return domain


def deploy_node_parameters(share_dir: str, robot: str, policy: str, interface: str = "",
                           params_file: str = "", **overrides: Any) -> list[Any]:
    """The deploy node's ``parameters=``: a parameters file (``params_file``, else the generated
    ``config/<robot>_params.yaml`` where the package has one: the node's own defaults come from the same
    spec, so a robot without a generated file runs on those), then the launch arguments as overrides."""
    files = [params_file] if params_file else [
        path for path in [os.path.join(share_dir, "config", f"{robot}_params.yaml")] if os.path.isfile(path)]
    given: dict[str, Any] = {"robot": robot, "policy": policy}
    if interface:  # empty: the parameters file's choice, i.e. the robot's own hardware interface
        given["interface"] = interface
    return [*files, {**given, **overrides}]
