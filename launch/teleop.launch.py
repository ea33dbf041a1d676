"""Teleoperation: a gamepad (the ``joy`` driver + robot_rl's teleop node) or the keyboard, publishing
geometry_msgs/Twist on cmd_vel and the e-stop on estop.

    ros2 launch robot_rl teleop.launch.py                   # gamepad: hold LB to drive, B = e-stop
    ros2 launch robot_rl teleop.launch.py input:=keyboard   # keys, in a new xterm window

Keyboard teleop needs a terminal of its own; ``ros2 run robot_rl teleop_node`` in a terminal does the
same without the xterm.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import Node


def generate_launch_description():
    teleop_input = LaunchConfiguration("input")
    namespace = LaunchConfiguration("namespace")
    is_joy = IfCondition(PythonExpression(["'", teleop_input, "' == 'joy'"]))
    is_keyboard = IfCondition(PythonExpression(["'", teleop_input, "' == 'keyboard'"]))
    return LaunchDescription([
        DeclareLaunchArgument(
            "input", default_value="joy",
            description="joy: a gamepad through the joy driver; keyboard: keys in a terminal window"),
        DeclareLaunchArgument(
            "namespace", default_value="",
            description="ROS namespace; use the deploy node's so cmd_vel and estop reach it"),
        DeclareLaunchArgument(
            "joy_device_id", default_value="0",
            description="Gamepad index for the joy driver (/dev/input/js{N})"),
        DeclareLaunchArgument(
            "terminal", default_value="xterm -e",
            description="Command prefix that opens a terminal for keyboard teleop"),
        Node(package="joy", executable="joy_node", name="joy", namespace=namespace, condition=is_joy,
             parameters=[{"device_id": LaunchConfiguration("joy_device_id")}]),
        Node(package="robot_rl", executable="teleop_node", name="robot_rl_teleop", namespace=namespace,
             condition=is_joy, parameters=[{"input": "joy"}], output="screen"),
        Node(package="robot_rl", executable="teleop_node", name="robot_rl_teleop", namespace=namespace,
             condition=is_keyboard, parameters=[{"input": "keyboard"}], prefix=LaunchConfiguration("terminal"),
             output="screen"),
    ])
