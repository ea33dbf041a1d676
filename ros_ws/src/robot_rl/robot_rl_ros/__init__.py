"""ROS 2 plumbing over robot_rl: message conversion lives in robot_rl.ros.conversions (no rclpy there)."""
