"""``robot-rl gen-ros-config``: the deploy node's parameters and the ros2_control controllers YAML,
generated from a robot spec so the ROS side never restates a robot fact by hand.

The committed copies live in ``ros_ws/src/robot_rl/config/<robot>_params.yaml`` and
``<robot>_controllers.yaml``; a test fails while any of them differs from what this module generates, and
the deploy node refuses a parameters file whose ``spec_hash`` no longer matches the spec.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from robot_rl.robots.spec import (
    HARDWARE_DIR,
    REPO_ROOT,
    RobotSpec,
    Ros2ControlInterfaceSpec,
    UnitreeDdsInterfaceSpec,
    available_robots,
    checkout_root,
    load_robot,
)
from robot_rl.typed_yaml import ConfigError

CONFIG_DIR = REPO_ROOT / "ros_ws" / "src" / "robot_rl" / "config"
DEPLOY_NODE_NAME = "robot_rl_deploy"
# The deploy node's outputs: a ros2_control forward position controller (Float64MultiArray), a joint
# trajectory controller (JointTrajectory), or Unitree low-level DDS (rt/lowcmd, state from rt/lowstate).
OUTPUTS = ("ros2_control", "joint_trajectory", "unitree_dds")
DEFAULT_CONTROLLER = "forward_position_controller"


def default_output(spec: RobotSpec) -> str:
    """The output that talks to this robot's own hardware interface."""
    return "unitree_dds" if isinstance(spec.interface, UnitreeDdsInterfaceSpec) else "ros2_control"


def controller_name(spec: RobotSpec) -> str:
    if isinstance(spec.interface, Ros2ControlInterfaceSpec):
        return spec.interface.controller
    return DEFAULT_CONTROLLER


# Deploy-node parameters that don't depend on the robot; the node declares them with these defaults.
NODE_DEFAULTS: dict[str, Any] = {
    # "cmd_vel": the policy's commands come from a Twist (error if they can't); "none": they keep their initial
    # values; "auto": cmd_vel when every command maps onto a Twist field, else none (with a warning).
    "command_input": "auto",
    "joint_states_topic": "joint_states",
    "imu_topic": "imu/data",
    "cmd_vel_topic": "cmd_vel",
    "estop_topic": "estop",
    "joint_trajectory_topic": "joint_trajectory_controller/joint_trajectory",
    "cmd_vel_timeout_s": 0.5,  # no cmd_vel for this long → zero velocity command
    "diagnostics_period_s": 1.0,
    "publish_state": True,  # unitree_dds: republish the robot's state as joint_states and imu/data
    "pause_gc": True,  # garbage collection off while the control loop runs (see control/loop_timing)
    "fifo_priority": 0,  # > 0: ask for SCHED_FIFO at this priority for the control thread
}


def spec_parameters(spec: RobotSpec) -> dict[str, Any]:
    """The deploy-node parameters that follow from the spec; the node derives them itself when unset."""
    return {
        "robot": spec.name,
        "spec_hash": spec.spec_hash,  # the node refuses to configure when the spec has changed since
        "joint_names": list(spec.joint_names),  # the controller's order; checked against the spec too
        "interface": default_output(spec),
        "use_imu": spec.sim_model.floating_base,  # a floating base needs its orientation from an IMU
        "forward_command_topic": f"{controller_name(spec)}/commands",
        "trajectory_time_from_start_s": spec.timing.policy_period_s,  # reach each target by the next step
    }


def deploy_parameters(spec: RobotSpec) -> dict[str, Any]:
    """The deploy node's parameters. Topic names are relative, so a launch namespace applies to them."""
    return {**spec_parameters(spec), **NODE_DEFAULTS}


def controllers_config(spec: RobotSpec) -> dict[str, Any]:
    """controller_manager with a joint_state_broadcaster and a forward position controller over the
    spec's joints in spec order (the order of the deploy node's Float64MultiArray)."""
    if spec.command_mode != "position_pd":
        raise ConfigError(
            spec.source_file, "command_mode",
            f"{spec.command_mode!r}: the generated ros2_control config drives position targets (position_pd) only",
        )
    name = controller_name(spec)
    return {
        "controller_manager": {"ros__parameters": {
            "update_rate": round(1.0 / spec.timing.hardware_period_s),
            "joint_state_broadcaster": {"type": "joint_state_broadcaster/JointStateBroadcaster"},
            name: {"type": "forward_command_controller/ForwardCommandController"},
        }},
        name: {"ros__parameters": {"joints": list(spec.joint_names), "interface_name": "position"}},
    }


def _source_name(spec: RobotSpec) -> str:
    """The spec's path as ``hardware/robots/<name>.yaml`` (relative to the checkout or to the specs' parent)."""
    path = Path(spec.source_file).resolve()
    for root in (checkout_root(), HARDWARE_DIR.parent):
        if root is None:
            continue
        try:
            return path.relative_to(root.resolve()).as_posix()
        except ValueError:
            continue
    return path.name


def _header(spec: RobotSpec) -> list[str]:
    return [
        f"# Generated by `robot-rl gen-ros-config --robot {spec.name}` from {_source_name(spec)}"
        f" (spec hash {spec.spec_hash}).",
        "# Do not edit: change the spec and regenerate. tests/ros/test_gen_config.py fails while this file is stale.",
    ]


def _dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=120)


def render_params(spec: RobotSpec) -> str:
    body = {"/**": {"ros__parameters": deploy_parameters(spec)}}
    return "\n".join([*_header(spec), _dump(body)])


def render_controllers(spec: RobotSpec) -> str:
    gains = [f"#   {j.name}: kp {j.kp:g}, kd {j.kd:g}" for j in spec.joints]
    lines = [
        *_header(spec),
        "# A forward position controller leaves the PD loop to the hardware: it must use the spec's gains,",
        "# the ones the policy was trained with:",
        *gains,
    ]
    return "\n".join([*lines, _dump(controllers_config(spec))])


def config_files(spec: RobotSpec, out_dir: Path) -> dict[Path, str]:
    """Every generated file for one robot: path → text."""
    files = {out_dir / f"{spec.name}_params.yaml": render_params(spec)}
    if spec.command_mode == "position_pd":
        files[out_dir / f"{spec.name}_controllers.yaml"] = render_controllers(spec)
    return files


def gen_ros_config(robot: str = "all", out_dir: Path | None = None, check: bool = False) -> int:
    """Write the ROS 2 deploy-node parameters and ros2_control controllers YAML generated from robot specs.

    Args:
        robot: Robot name (or path to a spec YAML); "all" for every spec in hardware/robots.
        out_dir: Where to write <robot>_params.yaml and <robot>_controllers.yaml
            (default: the checkout's ros_ws/src/robot_rl/config; required outside a checkout).
        check: Write nothing; exit with 1 if any file is missing or differs from what would be generated.
    """
    if out_dir is None and checkout_root() is None:
        print(f"error: robot_rl runs from an installed package, not a checkout, so there is no ros_ws/ to write to "
              f"(it would be {CONFIG_DIR}); pass --out-dir DIR", file=sys.stderr)
        return 2
    out_dir = CONFIG_DIR if out_dir is None else Path(out_dir)
    names = available_robots() if robot == "all" else [robot]
    stale: list[Path] = []
    for name in names:
        for path, text in config_files(load_robot(name), out_dir).items():
            current = path.read_text() if path.exists() else None
            if current == text:
                continue
            if check:
                stale.append(path)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        listing = "\n".join(f"  {path}" for path in stale)
        print(f"stale or missing (run `robot-rl gen-ros-config`):\n{listing}", file=sys.stderr)
        return 1
    return 0
