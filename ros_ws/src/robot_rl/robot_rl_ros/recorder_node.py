"""Recorder node: subscribes to topics and writes them to an MCAP file as JSON, one JSON schema per topic.

Topics are subscribed as soon as a publisher makes their type known (checked every
``discovery_period_s``), so the recorder can start before the robot. Each subscription matches the
reliability of the topic's publishers. Schema and encoding: robot_rl.ros.recording.

An existing output file is refused (exit status 1) unless ``overwrite`` is true. The file is flushed at
least every 0.5 s, and ``robot-rl log summarize`` reads it (safety events included).
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.logging import get_logger
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rosidl_runtime_py.convert import message_to_ordereddict
from rosidl_runtime_py.utilities import get_message

from robot_rl.ros.recording import McapJsonWriter, message_json, message_json_schema

DEFAULT_TOPICS = [
    "joint_states", "imu/data", "cmd_vel", "estop", "robot_rl_deploy/status", "/diagnostics",
    "forward_position_controller/commands",
]


def _message_class(type_name: str):
    """'std_msgs/Header' (a field type) or 'std_msgs/msg/Header' (a topic type) → the message class."""
    parts = type_name.split("/")
    return get_message(f"{parts[0]}/msg/{parts[1]}" if len(parts) == 2 else type_name)


def _fields_of(type_name: str):
    return _message_class(type_name).get_fields_and_field_types()


class RecorderNode(Node):
    def __init__(self, **node_options) -> None:
        super().__init__("robot_rl_recorder", **node_options)
        self.declare_parameter("topics", DEFAULT_TOPICS)
        self.declare_parameter("output", "")  # default: recordings/robot_rl_<UTC time>.mcap
        self.declare_parameter("discovery_period_s", 1.0)
        self.declare_parameter("overwrite", False)  # true: replace an existing output file
        output = self.get_parameter("output").value or (
            f"recordings/robot_rl_{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}.mcap"
        )
        self._wanted = [self.resolve_topic_name(t) for t in self.get_parameter("topics").value]
        self.writer = McapJsonWriter(Path(output), library="robot_rl_recorder",
                                     overwrite=self.get_parameter("overwrite").value)
        self._recorded: dict[str, object] = {}
        self._fields: dict[str, dict] = {}
        self.get_logger().info(f"recording {', '.join(self._wanted)} to {self.writer.path}")
        self._discover()
        self.create_timer(self.get_parameter("discovery_period_s").value, self._discover)
        self.create_timer(self.writer.flush_s / 2, self.writer.flush_if_due)  # quiet topics are flushed too

    def _discover(self) -> None:
        known = dict(self.get_topic_names_and_types())
        for topic in self._wanted:
            if topic in self._recorded or topic not in known:
                continue
            type_name = known[topic][0]
            try:
                msg_class = _message_class(type_name)
                schema = message_json_schema(type_name, msg_class.get_fields_and_field_types(), _fields_of)
            except (ValueError, AttributeError, ModuleNotFoundError) as exc:
                self.get_logger().error(f"cannot record {topic} ({type_name}): {exc}")
                self._recorded[topic] = None  # don't retry every period
                continue
            self.writer.add_topic(topic, type_name, schema)
            self._fields[topic] = (type_name, msg_class.get_fields_and_field_types())
            self._recorded[topic] = self.create_subscription(
                msg_class, topic, lambda msg, topic=topic: self._on_message(topic, msg), self._qos_for(topic)
            )
            self.get_logger().info(f"recording {topic} ({type_name})")

    def _qos_for(self, topic: str) -> QoSProfile:
        """Reliable when every publisher is (so nothing is dropped), else best effort (so all are heard)."""
        publishers = self.get_publishers_info_by_topic(topic)
        if publishers and all(p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in publishers):
            return QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        return qos_profile_sensor_data

    def _on_message(self, topic: str, msg) -> None:
        received_ns = time.time_ns()
        stamp = getattr(getattr(msg, "header", None), "stamp", None)
        stamped_ns = stamp.sec * 1_000_000_000 + stamp.nanosec if stamp is not None else 0
        type_name, fields = self._fields[topic]
        content = message_json(type_name, fields, message_to_ordereddict(msg), _fields_of)
        self.writer.write(topic, content, received_ns, stamped_ns or received_ns)


def main(args: list[str] | None = None) -> int:
    rclpy.init(args=args)
    try:
        node = RecorderNode()
    except FileExistsError as exc:
        get_logger("robot_rl_recorder").error(str(exc))
        rclpy.try_shutdown()
        return 1
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.writer.close()
        print(f"wrote {node.writer.message_count} messages to {node.writer.path}")
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
