"""The whole stack on a laptop: the robot_rl sim bridge (MuJoCo behind Unitree's DDS topics) and the
deploy node talking to it over unitree_dds, activated as soon as it is configured.

    ros2 launch robot_rl sim.launch.py                      # A1, the shipped flat-ground policy
    ros2 run robot_rl teleop_node                           # in a second terminal: drive it

The deploy node's output is always unitree_dds here (the bridge speaks nothing else), so this file has no
``interface`` argument. The bridge and the deploy node's Unitree link use their own DDS domain, by default
the one after ROS_DOMAIN_ID, so ROS 2 processes don't see the plain-DDS Unitree topics. Stopping the bridge
stops the launch; Ctrl-C stops both, the deploy node sending damping first.
"""

import importlib.util
import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, ExecuteProcess, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration


def _beside(name):
    """A file beside this one (installed together): launch_logic.py, deploy.launch.py. Not `import robot_rl`:
    `ros2 launch` runs on the interpreter ROS 2 was installed for, which may not see the virtualenv."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    spec = importlib.util.spec_from_file_location(f"robot_rl_launch_{name.split('.')[0]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _on_bridge_exit(event, context):
    reason = _beside("launch_logic.py").exit_shutdown_reason(context.is_shutdown, "the sim bridge", event.returncode)
    return [] if reason is None else [EmitEvent(event=Shutdown(reason=reason))]


def _sim(context):
    robot = LaunchConfiguration("robot").perform(context)
    domain = _beside("launch_logic.py").sim_link_domain(
        LaunchConfiguration("link_domain_id").perform(context), os.environ.get("ROS_DOMAIN_ID"))
    bridge = ExecuteProcess(
        cmd=["robot-rl", "bridge", "--robot", robot, "--domain-id", str(domain)],
        name="robot_rl_sim_bridge",
        output="screen",
    )
    return [
        bridge,
        # Only when the launch is not already shutting down: a second Shutdown fails launch_ros (exit 1).
        RegisterEventHandler(OnProcessExit(target_action=bridge, on_exit=_on_bridge_exit)),
        *_beside("deploy.launch.py").deploy_actions(context, interface="unitree_dds", dds_domain_id=domain),
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument(
            "robot", default_value="a1",
            description="Robot spec name; the sim bridge simulates it and the deploy node drives it"),
        DeclareLaunchArgument(
            "policy", default_value="policies/a1_flat/policy.onnx",
            description="Policy .onnx file; a relative path is tried from the working directory, then the repository"),
        DeclareLaunchArgument(
            "params_file", default_value="",
            description="Deploy node parameters YAML; empty: config/{robot}_params.yaml generated from the spec "
                        "(its interface is overridden: always unitree_dds)"),
        DeclareLaunchArgument(
            "namespace", default_value="",
            description="ROS namespace of the deploy node and its topics"),
        DeclareLaunchArgument(
            "autostart", default_value="true",
            description="true: activate (ramp, then policy) as soon as configure succeeds; false: configure only"),
        DeclareLaunchArgument(
            "link_domain_id", default_value="auto",
            description="DDS domain of the Unitree link between the bridge and the deploy node; auto: the one "
                        "after ROS_DOMAIN_ID, so ROS 2 never sees those plain-DDS topics"),
        OpaqueFunction(function=_sim),
    ])
