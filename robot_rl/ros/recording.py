"""MCAP recording of ROS 2 topics as JSON-encoded messages, one JSON schema per topic. No rclpy here.

The recorder node hands over each topic's ROS type name (``sensor_msgs/msg/JointState``), its fields and
their ROS type strings (what ``Msg.get_fields_and_field_types()`` returns, e.g. ``sequence<double>``,
``double[9]``, ``std_msgs/Header``), and each message as a plain dict. Any MCAP reader (Foxglove Studio,
``mcap`` CLI, the ``mcap`` Python package) can open the file without the ROS message definitions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mcap.writer import Writer

from robot_rl.ros.conversions import to_jsonable

_INTEGER_TYPES = {
    "byte", "char", "octet", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
}
_NUMBER_TYPES = {"float", "double", "long double", "float32", "float64"}
_SEQUENCE = re.compile(r"^sequence<(?P<item>.+?)(?:,\s*(?P<bound>\d+))?>$")
_ARRAY = re.compile(r"^(?P<item>.+)\[(?P<size>\d+)\]$")
_STRING = re.compile(r"^w?string(?:<=\d+)?$")

FieldResolver = Callable[[str], Mapping[str, str]]  # nested type name ("std_msgs/Header") → its fields


def _field_schema(ros_type: str, resolve: FieldResolver, depth: int) -> dict[str, Any]:
    ros_type = ros_type.strip()
    if match := _SEQUENCE.match(ros_type):
        schema: dict[str, Any] = {"type": "array", "items": _field_schema(match["item"], resolve, depth)}
        if match["bound"]:
            schema["maxItems"] = int(match["bound"])
        return schema
    if match := _ARRAY.match(ros_type):
        size = int(match["size"])
        return {"type": "array", "items": _field_schema(match["item"], resolve, depth), "minItems": size,
                "maxItems": size}
    if ros_type == "boolean":
        return {"type": "boolean"}
    if ros_type in _INTEGER_TYPES:
        return {"type": "integer"}
    if ros_type in _NUMBER_TYPES:
        return {"type": ["number", "null"]}  # NaN/inf are written as null (JSON has no NaN)
    if _STRING.match(ros_type):
        return {"type": "string"}
    if "/" in ros_type:
        return message_json_schema(ros_type, resolve(ros_type), resolve, _depth=depth + 1)
    raise ValueError(f"unknown ROS field type {ros_type!r}")


def message_json_schema(
    type_name: str, fields: Mapping[str, str], resolve: FieldResolver, *, _depth: int = 0
) -> dict[str, Any]:
    """A JSON schema (draft 2020-12) for a ROS message type from its field → ROS type mapping."""
    if _depth > 32:
        raise ValueError(f"message type {type_name!r} nests deeper than 32 levels")
    schema: dict[str, Any] = {
        "type": "object",
        "title": type_name,
        "properties": {name: _field_schema(ros_type, resolve, _depth) for name, ros_type in fields.items()},
    }
    if _depth == 0:
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
    return schema


class McapJsonWriter:
    """Appends JSON-encoded messages to an MCAP file; each topic is registered once with its schema."""

    def __init__(self, path: str | Path, library: str = "robot_rl") -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._stream = self.path.open("wb")
        self._writer = Writer(self._stream)
        self._writer.start(profile="", library=library)
        self._channels: dict[str, int] = {}
        self._sequence: dict[str, int] = {}
        self.message_count = 0
        self._closed = False

    def add_topic(self, topic: str, type_name: str, schema: Mapping[str, Any]) -> None:
        if topic in self._channels:
            raise ValueError(f"topic {topic!r} is already registered in {self.path}")
        schema_id = self._writer.register_schema(
            name=type_name, encoding="jsonschema", data=json.dumps(schema, sort_keys=True).encode()
        )
        self._channels[topic] = self._writer.register_channel(
            topic=topic, message_encoding="json", schema_id=schema_id, metadata={"ros_type": type_name}
        )
        self._sequence[topic] = 0

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self._channels)

    def write(self, topic: str, message: Mapping[str, Any], log_time_ns: int, publish_time_ns: int | None = None):
        """``log_time_ns``: when the recorder received it; ``publish_time_ns``: the message's own stamp."""
        if topic not in self._channels:
            raise KeyError(f"topic {topic!r} was not registered with add_topic()")
        data = json.dumps(to_jsonable(message), allow_nan=False).encode()
        self._writer.add_message(
            channel_id=self._channels[topic],
            log_time=int(log_time_ns),
            publish_time=int(log_time_ns if publish_time_ns is None else publish_time_ns),
            data=data,
            sequence=self._sequence[topic],
        )
        self._sequence[topic] += 1
        self.message_count += 1

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.finish()
        finally:
            self._stream.close()

    def __enter__(self) -> McapJsonWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
