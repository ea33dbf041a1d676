"""``robot-rl gen-ros-config``: the deploy node's parameters and the ros2_control controllers YAML,
generated from a robot spec so the ROS side never restates a robot fact by hand.

The committed copies live in ``ros_ws/src/robot_rl/config/<robot>_params.yaml`` and
``<robot>_controllers.yaml``; a test fails while any of them differs from what this module generates, and
the deploy node refuses a parameters file whose ``spec_hash`` no longer matches the spec.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
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
    # "cmd_vel": the policy's commands come from a Twist (error if they can't); "target": from a
    # geometry_msgs/PointStamped (a reach target: target_x, target_y, target_z); "none": they keep their initial
    # values; "auto": cmd_vel or target when the commands fit one of them, else none (with a warning).
    "command_input": "auto",
    "joint_states_topic": "joint_states",
    "imu_topic": "imu/data",
    "cmd_vel_topic": "cmd_vel",
    "target_topic": "target",
    "estop_topic": "estop",
    "joint_trajectory_topic": "joint_trajectory_controller/joint_trajectory",
    "cmd_vel_timeout_s": 0.5,  # no cmd_vel for this long → zero velocity command
    "diagnostics_period_s": 1.0,
    "publish_state": True,  # unitree_dds: republish the robot's state as joint_states and imu/data
    "dds_domain_id": -1,  # unitree_dds: DDS domain of the robot link; -1: the spec's interface.domain_id
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


# What `ros2 param describe /robot_rl_deploy <name>` says. Every parameter the node declares is here.
PARAMETER_DESCRIPTIONS: dict[str, str] = {
    "robot": "Robot spec name (hardware/robots/<robot>.yaml); set at start, it supplies the spec-derived defaults",
    "policy": "Policy .onnx file; a relative path is tried from the working directory, then the repository",
    "spec_hash": "Hash of the spec the parameters were generated from; configure refuses a different one "
                 "(empty: not checked)",
    "joint_names": "The controller's joint order; must equal the spec's (default: the spec's joints)",
    "interface": "Output: ros2_control, joint_trajectory or unitree_dds (default: the robot's own hardware "
                 "interface)",
    "use_imu": "Read the base orientation from imu/data (default: true for a floating base)",
    "forward_command_topic": "Float64MultiArray topic of the forward position controller (interface ros2_control)",
    "trajectory_time_from_start_s": "time_from_start of each JointTrajectory point (interface joint_trajectory)",
    "command_input": "Where the policy's commands come from: auto, cmd_vel, target or none",
    "joint_states_topic": "sensor_msgs/JointState input (or output, republished from unitree_dds)",
    "imu_topic": "sensor_msgs/Imu input (or output, republished from unitree_dds)",
    "cmd_vel_topic": "geometry_msgs/Twist velocity command input",
    "target_topic": "geometry_msgs/PointStamped reach target input (x, y, z in the robot's base frame)",
    "estop_topic": "std_msgs/Bool e-stop input (true latches the e-stop)",
    "joint_trajectory_topic": "JointTrajectory output topic (interface joint_trajectory)",
    "cmd_vel_timeout_s": "No cmd_vel for this long: the velocity command goes to zero",
    "diagnostics_period_s": "Period of ~/status and /diagnostics, in every lifecycle state",
    "publish_state": "unitree_dds: republish the robot's state as joint_states and imu/data",
    "dds_domain_id": "unitree_dds: DDS domain of the robot link (rt/lowcmd, rt/lowstate); -1: the spec's "
                     "interface.domain_id (the robot's own, 0)",
    "pause_gc": "Garbage collection off while the control loop runs",
    "fifo_priority": "> 0: ask for SCHED_FIFO at this priority for the control thread",
}
READ_ONLY_PARAMETERS = frozenset({"robot"})  # the spec-derived defaults follow from it at start


@dataclass(frozen=True)
class NodeParameter:
    """One deploy-node parameter as the node declares it: every one has a default (no ROS parameter is left
    uninitialized, so the node configures without the generated parameters file)."""

    name: str
    default: Any
    description: str
    read_only: bool = False


def node_parameters(spec: RobotSpec) -> list[NodeParameter]:
    """Everything the deploy node declares for ``spec``, in declaration order, with the spec's values as
    defaults: the generated parameters file sets exactly these values (a test checks it)."""
    values = {"policy": "", **deploy_parameters(spec)}
    return [NodeParameter(name, values[name], PARAMETER_DESCRIPTIONS[name], name in READ_ONLY_PARAMETERS)
            for name in PARAMETER_DESCRIPTIONS]


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
