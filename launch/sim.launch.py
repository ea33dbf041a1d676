"""The whole stack on a laptop: the robot_rl sim bridge (MuJoCo behind Unitree's DDS topics) and the
deploy node talking to it over unitree_dds, activated as soon as it is configured.

    ros2 launch robot_rl sim.launch.py                      # A1, the shipped flat-ground policy
    ros2 run robot_rl teleop_node                           # in a second terminal: drive it

Stopping the bridge stops the launch.
"""

import os

from launch import LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    ExecuteProcess,
    IncludeLaunchDescription,
    RegisterEventHandler,
)
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration


def generate_launch_description():
    bridge = ExecuteProcess(
        cmd=["robot-rl", "bridge", "--robot", LaunchConfiguration("robot")],
        name="robot_rl_sim_bridge",
        output="screen",
    )
    deploy = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(os.path.dirname(__file__), "deploy.launch.py")),
        launch_arguments={
            "robot": LaunchConfiguration("robot"),
            "policy": LaunchConfiguration("policy"),
            "interface": "unitree_dds",
            "namespace": LaunchConfiguration("namespace"),
            "autostart": LaunchConfiguration("autostart"),
        }.items(),
    )
    return LaunchDescription([
        DeclareLaunchArgument(
            "robot", default_value="a1",
            description="Robot spec name; the sim bridge simulates it and the deploy node drives it"),
        DeclareLaunchArgument(
            "policy", default_value="policies/a1_flat/policy.onnx",
            description="Policy .onnx file; a relative path is tried from the working directory, then the repository"),
        DeclareLaunchArgument(
            "namespace", default_value="",
            description="ROS namespace of the deploy node and its topics"),
        DeclareLaunchArgument(
            "autostart", default_value="true",
            description="true: activate (ramp, then policy) as soon as configure succeeds; false: configure only"),
        bridge,
        RegisterEventHandler(OnProcessExit(
            target_action=bridge,
            on_exit=[EmitEvent(event=Shutdown(reason="the sim bridge exited"))])),
        deploy,
    ])
