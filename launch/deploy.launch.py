"""Deploy a policy: the robot_rl lifecycle deploy node, configured at start and activated on request.

    ros2 launch robot_rl deploy.launch.py robot:=a1 policy:=policies/a1_flat/policy.onnx
    ros2 lifecycle set /robot_rl_deploy activate      # ramp to the default pose, then the policy
    ros2 lifecycle set /robot_rl_deploy deactivate    # damping

This file is the only copy: the ROS 2 package installs it from the repository's launch/ directory.
sim.launch.py reuses deploy_actions() from it.
"""

import importlib.util
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from lifecycle_msgs.msg import Transition


def _logic():
    """launch_logic.py beside this file (no robot_rl import: `ros2 launch` may not see the virtualenv)."""
    spec = importlib.util.spec_from_file_location(
        "robot_rl_launch_logic", os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch_logic.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def deploy_actions(context, interface=None, **parameters):
    """The deploy node, its configure, and (autostart) its activate once configured. ``interface``: forced
    output (sim.launch.py: unitree_dds), else the ``interface`` launch argument; ``parameters``: more
    parameter overrides (sim.launch.py: the link's dds_domain_id)."""
    arg = lambda name: LaunchConfiguration(name).perform(context)  # noqa: E731
    logic = _logic()
    node = LifecycleNode(
        package="robot_rl",
        executable="deploy_node",
        name="robot_rl_deploy",
        namespace=arg("namespace"),
        parameters=logic.deploy_node_parameters(
            get_package_share_directory("robot_rl"), arg("robot"), arg("policy"),
            arg("interface") if interface is None else interface, arg("params_file"), **parameters),
        output="screen",
        emulate_tty=True,
    )
    configure = EmitEvent(event=ChangeState(
        lifecycle_node_matcher=matches_action(node), transition_id=Transition.TRANSITION_CONFIGURE))
    actions = [node, configure]
    if logic.is_true(arg("autostart")):
        # Activate once configure has succeeded (configuring → inactive), never after a later deactivate.
        actions.insert(1, RegisterEventHandler(OnStateTransition(
            target_lifecycle_node=node, start_state="configuring", goal_state="inactive",
            entities=[EmitEvent(event=ChangeState(
                lifecycle_node_matcher=matches_action(node), transition_id=Transition.TRANSITION_ACTIVATE))],
        )))
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument(
            "robot", default_value="a1",
            description="Robot spec name: hardware/robots/{robot}.yaml"),
        DeclareLaunchArgument(
            "policy", default_value="policies/a1_flat/policy.onnx",
            description="Policy .onnx file; a relative path is tried from the working directory, then the repository"),
        DeclareLaunchArgument(
            "interface", default_value="",
            description="Output: unitree_dds, ros2_control or joint_trajectory; empty: the robot's own "
                        "(unitree_dds for a1, go2, g1; ros2_control for panda)"),
        DeclareLaunchArgument(
            "params_file", default_value="",
            description="Node parameters YAML; empty: config/{robot}_params.yaml generated from the spec, "
                        "or the spec's defaults where there is none"),
        DeclareLaunchArgument(
            "namespace", default_value="",
            description="ROS namespace of the node and its topics"),
        DeclareLaunchArgument(
            "autostart", default_value="false",
            description="true: activate (ramp, then policy) as soon as configure succeeds; false: configure only"),
        OpaqueFunction(function=deploy_actions),
    ])
