"""What the ROS 2 package (``ros_ws/src/robot_rl``) needs from robot_rl, without importing rclpy.

- :mod:`robot_rl.ros.conversions` — message fields ↔ runtime arrays (joint states by name, IMU, Twist,
  joint commands for ros2_control and joint trajectories, diagnostics and status content).
- :mod:`robot_rl.ros.teleop` — gamepad (Joy) and keyboard → velocity command.
- :mod:`robot_rl.ros.recording` — JSON schemas from ROS message field types and an MCAP writer with
  JSON-encoded messages (the recorder node).
- :mod:`robot_rl.ros.gen_config` — ``robot-rl gen-ros-config``: node parameters and ros2_control
  controllers YAML generated from a robot spec.

The nodes take fields out of messages and put results back in; every decision lives here, where it is
tested without a ROS installation.
"""
