"""What the ROS 2 package (``ros_ws/src/robot_rl``) needs from robot_rl, without importing rclpy.

- :mod:`robot_rl.ros.conversions` — message fields ↔ runtime arrays (joint states by name, IMU, Twist,
  reach targets, joint commands for ros2_control and joint trajectories, diagnostics and status content).
- :mod:`robot_rl.ros.teleop` — gamepad (Joy) and keyboard → velocity command.
- :mod:`robot_rl.ros.recording` — JSON schemas from ROS message field types, values encoded to match
  them, and an MCAP writer with JSON-encoded messages that ``robot-rl log summarize`` reads (the recorder node).
- :mod:`robot_rl.ros.gen_config` — the deploy node's parameters with their spec defaults and
  descriptions, and ``robot-rl gen-ros-config``: node parameters and ros2_control controllers YAML
  generated from a robot spec.

The launch files' own logic is in the repository's ``launch/launch_logic.py`` (``ros2 launch`` may run on
an interpreter that cannot import robot_rl).

The nodes take fields out of messages and put results back in; every decision lives here, where it is
tested without a ROS installation.
"""
