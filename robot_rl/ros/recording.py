"""MCAP recording of ROS 2 topics as JSON-encoded messages, one JSON schema per topic. No rclpy here.

The recorder node hands over each topic's ROS type name (``sensor_msgs/msg/JointState``), its fields and
their ROS type strings (what ``Msg.get_fields_and_field_types()`` returns, e.g. ``sequence<double>``,
``double[9]``, ``std_msgs/Header``), and each message as a plain dict. Any MCAP reader (Foxglove Studio,
``mcap`` CLI, the ``mcap`` Python package) can open the file without the ROS message definitions.

Values follow the schema: :func:`message_json` encodes each field by its ROS type, so a ``byte``/``octet``
(rclpy gives ``bytes``, e.g. ``diagnostic_msgs/DiagnosticStatus.level``) or a ``char`` is written as the
integer its schema says, not as a one-character string.

The file is also a robot_rl deploy log as far as ``robot-rl log summarize`` is concerned: safety events
heard on the recorded topics (the deploy node's events on its ``.../status`` topic, e-stops included; an
e-stop on a ``std_msgs/Bool`` ``.../estop`` topic where no status is recorded) are written to
``/safety/events`` with the deploy log's schema, and
``close()`` writes the deploy log's counters metadata (``robot_rl.deploy_log``), which marks a file closed
cleanly. Like the deploy log, the writer ends its chunk and writes it out at least every ``flush_s``
(0.5 s), so a recorder killed outright loses at most that much, and it never replaces an existing file
unless ``overwrite=True``.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mcap.writer import Writer

from robot_rl.data.mcap_log import EVENTS, METADATA_NAME, SCHEMAS
from robot_rl.ros.conversions import to_jsonable

DEFAULT_FLUSH_S = 0.5  # the deploy log's: longest a message waits in memory before it is in the file

_INTEGER_TYPES = {
    "byte", "char", "octet", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
}
_BYTE_TYPES = {"byte", "octet", "char"}  # rclpy: bytes (byte, octet) or a 1-character str (char); JSON: integer
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


def _byte_value(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return value[0] if len(value) == 1 else list(value)
    if isinstance(value, str) and len(value) == 1:
        return ord(value)
    return to_jsonable(value)


def _field_value(ros_type: str, value: Any, resolve: FieldResolver, depth: int) -> Any:
    ros_type = ros_type.strip()
    match = _SEQUENCE.match(ros_type) or _ARRAY.match(ros_type)
    if match:
        item = match["item"].strip()
        if isinstance(value, (bytes, bytearray)):  # a byte/uint8 sequence may come as one bytes object
            return list(value)
        items = value.tolist() if hasattr(value, "tolist") else list(value)
        return [_field_value(item, v, resolve, depth) for v in items]
    if ros_type in _BYTE_TYPES:
        return _byte_value(value)
    if "/" in ros_type and isinstance(value, Mapping):
        return message_json(ros_type, resolve(ros_type), value, resolve, _depth=depth + 1)
    return to_jsonable(value)


def message_json(type_name: str, fields: Mapping[str, str], message: Mapping[str, Any], resolve: FieldResolver,
                 *, _depth: int = 0) -> dict[str, Any]:
    """A message (as a plain dict, e.g. ``rosidl_runtime_py``'s ``message_to_ordereddict``) as the JSON that
    :func:`message_json_schema` describes for its type: each field encoded by its ROS type."""
    if _depth > 32:
        raise ValueError(f"message type {type_name!r} nests deeper than 32 levels")
    return {name: _field_value(ros_type, message.get(name), resolve, _depth) for name, ros_type in fields.items()
            if name in message}


def is_status_topic(topic: str, type_name: str) -> bool:
    """The deploy node's JSON status topic (``.../status``, ``std_msgs/String``)."""
    return type_name == "std_msgs/msg/String" and topic.rstrip("/").rsplit("/", 1)[-1] == "status"


def safety_events(topic: str, type_name: str, message: Mapping[str, Any], t: float,
                  status_recorded: bool = False) -> list[dict[str, Any]]:
    """The deploy log's ``/safety/events`` records (filter, fault, detail, joints, t) in one recorded message:
    the ``events`` of the deploy node's JSON ``status`` other than notes (every e-stop the node took, from
    its topic or its service, is one of them), and, only while no status topic is recorded
    (``status_recorded``), ``std_msgs/Bool`` true on a topic named ``estop``."""
    name = topic.rstrip("/").rsplit("/", 1)[-1]
    if type_name == "std_msgs/msg/Bool" and name == "estop":
        if message.get("data") is True and not status_recorded:
            return [{"t": t, "filter": "estop", "fault": True, "detail": f"e-stop on {topic}", "joints": []}]
        return []
    if not is_status_topic(topic, type_name):
        return []
    try:
        status = json.loads(message.get("data", ""))
    except (TypeError, ValueError):
        return []
    events = status.get("events", []) if isinstance(status, dict) else []
    return [{"t": t, "filter": str(e["filter"]), "fault": bool(e.get("fault", False)),
             "detail": str(e.get("detail", "")), "joints": [int(j) for j in e.get("joints", [])]}
            for e in events if isinstance(e, dict) and "filter" in e and e["filter"] != "note"]


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

    def __init__(self, path: str | Path, library: str = "robot_rl", *, overwrite: bool = False,
                 flush_s: float = DEFAULT_FLUSH_S, fsync: bool = True, clock: Callable[[], float] = time.monotonic,
                 metadata: Mapping[str, str] | None = None) -> None:
        if not flush_s > 0:
            raise ValueError(f"McapJsonWriter flush_s must be > 0, got {flush_s!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:  # "x": the check and the creation are one step
            self._stream = self.path.open("wb" if overwrite else "xb")
        except FileExistsError:
            raise FileExistsError(f"{self.path}: a file is already there; choose another output, or set "
                                  "overwrite to replace it") from None
        self._writer = Writer(self._stream)
        self._writer.start(profile="", library=library)
        self._channels: dict[str, int] = {}
        self._sequence: dict[str, int] = {}
        self._types: dict[str, str] = {}
        self.message_count = 0
        self.safety_event_count = 0
        self.flush_s, self.fsync, self._clock = flush_s, fsync, clock
        self._metadata = {"writer": library, **(metadata or {})}
        self._last_flush = clock()
        self._unflushed = False
        self._closed = False
        self._writer.flush()  # the header is in the file at once

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
        self._types[topic] = type_name

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self._channels)

    def write(self, topic: str, message: Mapping[str, Any], log_time_ns: int, publish_time_ns: int | None = None):
        """``log_time_ns``: when the recorder received it; ``publish_time_ns``: the message's own stamp."""
        if topic not in self._channels:
            raise KeyError(f"topic {topic!r} was not registered with add_topic()")
        self._add(topic, message, log_time_ns, publish_time_ns)
        self.message_count += 1
        status_recorded = any(is_status_topic(t, type_name) for t, type_name in self._types.items())
        events = safety_events(topic, self._types[topic], message, log_time_ns * 1e-9, status_recorded)
        if events and EVENTS not in self._channels:
            self.add_topic(EVENTS, SCHEMAS[EVENTS]["title"], SCHEMAS[EVENTS])
        for event in events:
            self._add(EVENTS, event, log_time_ns, None)
            self.safety_event_count += 1
        self.flush_if_due()

    def _add(self, topic: str, message: Mapping[str, Any], log_time_ns: int, publish_time_ns: int | None) -> None:
        data = json.dumps(to_jsonable(message), allow_nan=False).encode()
        self._writer.add_message(
            channel_id=self._channels[topic],
            log_time=int(log_time_ns),
            publish_time=int(log_time_ns if publish_time_ns is None else publish_time_ns),
            data=data,
            sequence=self._sequence[topic],
        )
        self._sequence[topic] += 1
        self._unflushed = True

    def flush_if_due(self) -> bool:
        """Write the chunk in progress to the file when ``flush_s`` has passed since the last flush (called on
        every write and by the recorder's timer, so a quiet topic is flushed too). True when it flushed."""
        if self._closed or not self._unflushed or self._clock() - self._last_flush < self.flush_s:
            return False
        self.flush()
        return True

    def flush(self) -> None:
        """End the chunk in progress and put it in the file (and on disk, with ``fsync``)."""
        self._writer.flush()
        if self.fsync:
            os.fsync(self._stream.fileno())
        self._last_flush, self._unflushed = self._clock(), False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.add_metadata(METADATA_NAME, {  # the deploy log's counters: `log summarize` reads them
                "written": str(self.message_count), "enqueued": str(self.message_count), "dropped_records": "0",
                "safety_events": str(self.safety_event_count), **self._metadata})
            self._writer.finish()
        finally:
            self._stream.close()

    def __enter__(self) -> McapJsonWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
