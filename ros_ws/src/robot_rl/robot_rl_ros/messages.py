"""ROS 2 messages built from the plain lists and dicts of robot_rl.ros.conversions (nothing decided here)."""

from __future__ import annotations

from collections.abc import Sequence

from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Twist
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint


def float64_multi_array(data: Sequence[float]) -> Float64MultiArray:
    return Float64MultiArray(data=[float(v) for v in data])


def joint_trajectory(content: dict) -> JointTrajectory:
    msg = JointTrajectory(joint_names=list(content["joint_names"]))
    msg.points = [
        JointTrajectoryPoint(positions=point["positions"], velocities=point["velocities"],
                             time_from_start=Duration(**point["time_from_start"]))
        for point in content["points"]
    ]
    return msg


def joint_state(fields: dict, stamp: Time) -> JointState:
    msg = JointState(name=fields["name"], position=fields["position"], velocity=fields["velocity"],
                     effort=fields["effort"])
    msg.header.stamp = stamp
    return msg


def imu(fields: dict, stamp: Time) -> Imu:
    msg = Imu()
    msg.header.stamp = stamp
    o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
    o.x, o.y, o.z, o.w = (float(v) for v in fields["orientation_xyzw"])
    w.x, w.y, w.z = (float(v) for v in fields["angular_velocity"])
    a.x, a.y, a.z = (float(v) for v in fields["linear_acceleration"])
    return msg


def twist(linear: Sequence[float], angular: Sequence[float]) -> Twist:
    msg = Twist()
    msg.linear.x, msg.linear.y, msg.linear.z = (float(v) for v in linear)
    msg.angular.x, msg.angular.y, msg.angular.z = (float(v) for v in angular)
    return msg


def diagnostic_array(statuses: Sequence[dict], stamp: Time) -> DiagnosticArray:
    msg = DiagnosticArray(status=[
        DiagnosticStatus(level=bytes([content["level"]]), name=content["name"], message=content["message"],
                         hardware_id=content["hardware_id"],
                         values=[KeyValue(key=k, value=v) for k, v in content["values"]])
        for content in statuses
    ])
    msg.header.stamp = stamp
    return msg
