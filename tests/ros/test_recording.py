"""JSON schemas from ROS field types, and MCAP files read back with the mcap library's own reader."""

import json
import math

import numpy as np
import pytest
from mcap.reader import make_reader

from robot_rl.ros.recording import McapJsonWriter, message_json_schema

# What rosidl's get_fields_and_field_types() returns for these standard messages (stands in for the
# generated message classes, which need a ROS installation).
FIELDS = {
    "sensor_msgs/msg/JointState": {"header": "std_msgs/Header", "name": "sequence<string>",
                                   "position": "sequence<double>", "velocity": "sequence<double>",
                                   "effort": "sequence<double>"},
    "std_msgs/Header": {"stamp": "builtin_interfaces/Time", "frame_id": "string"},
    "builtin_interfaces/Time": {"sec": "int32", "nanosec": "uint32"},
    "sensor_msgs/msg/Imu": {"header": "std_msgs/Header", "orientation": "geometry_msgs/Quaternion",
                            "orientation_covariance": "double[9]", "angular_velocity": "geometry_msgs/Vector3",
                            "angular_velocity_covariance": "double[9]",
                            "linear_acceleration": "geometry_msgs/Vector3",
                            "linear_acceleration_covariance": "double[9]"},
    "geometry_msgs/Quaternion": {"x": "double", "y": "double", "z": "double", "w": "double"},
    "geometry_msgs/Vector3": {"x": "double", "y": "double", "z": "double"},
    "std_msgs/msg/String": {"data": "string"},
}


def _resolve(name):
    return FIELDS[name]


def _schema(type_name):
    return message_json_schema(type_name, FIELDS[type_name], _resolve)


def _validate(value, schema, at="$"):
    """Checks the subset of JSON Schema that message_json_schema emits (type, properties, items, min/maxItems)."""
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    python = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
              "integer": int, "number": (int, float)}
    ok = any(isinstance(value, python[t]) and not (t in ("integer", "number") and isinstance(value, bool))
             for t in types)
    assert ok, f"{at}: {value!r} is not {types}"
    if isinstance(value, dict):
        assert set(value) == set(schema["properties"]), f"{at}: keys {sorted(value)}"
        for key, item in value.items():
            _validate(item, schema["properties"][key], f"{at}.{key}")
    if isinstance(value, list):
        assert schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", math.inf), f"{at}: length"
        for i, item in enumerate(value):
            _validate(item, schema["items"], f"{at}[{i}]")


JOINT_STATE = {"header": {"stamp": {"sec": 12, "nanosec": 500}, "frame_id": ""}, "name": ["a", "b"],
               "position": [0.1, 0.2], "velocity": [0.0, -1.0], "effort": []}
IMU = {"header": {"stamp": {"sec": 12, "nanosec": 600}, "frame_id": "imu_link"},
       "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}, "orientation_covariance": [0.0] * 9,
       "angular_velocity": {"x": 0.1, "y": 0.2, "z": 0.3}, "angular_velocity_covariance": [0.0] * 9,
       "linear_acceleration": {"x": 0.0, "y": 0.0, "z": 9.8}, "linear_acceleration_covariance": [0.0] * 9}


def test_schema_of_joint_state_resolves_nested_types():
    schema = _schema("sensor_msgs/msg/JointState")
    assert schema["title"] == "sensor_msgs/msg/JointState" and schema["$schema"].startswith("https://json-schema")
    header = schema["properties"]["header"]
    assert header["title"] == "std_msgs/Header" and "$schema" not in header
    assert header["properties"]["stamp"]["properties"]["nanosec"] == {"type": "integer"}
    assert schema["properties"]["name"] == {"type": "array", "items": {"type": "string"}}
    _validate(JOINT_STATE, schema)


def test_schema_of_fixed_arrays_and_bounded_types():
    schema = _schema("sensor_msgs/msg/Imu")
    assert schema["properties"]["orientation_covariance"]["minItems"] == 9
    assert schema["properties"]["orientation_covariance"]["maxItems"] == 9
    _validate(IMU, schema)
    with pytest.raises(AssertionError, match="length"):
        _validate({**IMU, "orientation_covariance": [0.0] * 8}, schema)
    bounded = message_json_schema("pkg/msg/B", {"ids": "sequence<int32, 5>", "tag": "string<=8", "ok": "boolean",
                                                "raw": "sequence<uint8>", "w": "wstring"}, _resolve)
    assert bounded["properties"]["ids"] == {"type": "array", "items": {"type": "integer"}, "maxItems": 5}
    assert bounded["properties"]["tag"] == {"type": "string"} and bounded["properties"]["w"] == {"type": "string"}
    assert bounded["properties"]["ok"] == {"type": "boolean"}


def test_unknown_field_type_is_an_error_naming_it():
    with pytest.raises(ValueError, match="'quaternion128'"):
        message_json_schema("pkg/msg/X", {"q": "quaternion128"}, _resolve)


def test_mcap_round_trip(tmp_path):
    path = tmp_path / "run" / "log.mcap"
    with McapJsonWriter(path) as writer:
        writer.add_topic("/joint_states", "sensor_msgs/msg/JointState", _schema("sensor_msgs/msg/JointState"))
        writer.add_topic("/imu/data", "sensor_msgs/msg/Imu", _schema("sensor_msgs/msg/Imu"))
        writer.write("/joint_states", JOINT_STATE, log_time_ns=1_000, publish_time_ns=900)
        # numpy values and NaN, as a message converted from rclpy can carry: lists and null in the file
        imu = {**IMU, "orientation_covariance": np.zeros(9), "angular_velocity": {"x": math.nan, "y": 0.0, "z": 0.0}}
        writer.write("/imu/data", imu, log_time_ns=2_000)
        writer.write("/joint_states", {**JOINT_STATE, "position": [0.3, 0.4]}, log_time_ns=3_000)
        assert writer.message_count == 3 and writer.topics == ("/joint_states", "/imu/data")

    with path.open("rb") as stream:
        reader = make_reader(stream)
        summary = reader.get_summary()
        schemas = {s.name: s for s in summary.schemas.values()}
        assert set(schemas) == {"sensor_msgs/msg/JointState", "sensor_msgs/msg/Imu"}
        assert all(s.encoding == "jsonschema" for s in schemas.values())
        assert json.loads(schemas["sensor_msgs/msg/Imu"].data) == _schema("sensor_msgs/msg/Imu")
        channels = {c.topic: c for c in summary.channels.values()}
        assert channels["/imu/data"].message_encoding == "json"
        assert channels["/imu/data"].metadata == {"ros_type": "sensor_msgs/msg/Imu"}
        records = [(channel.topic, message.log_time, message.publish_time, message.sequence, json.loads(message.data))
                   for _, channel, message in reader.iter_messages(log_time_order=True)]

    assert [r[:4] for r in records] == [("/joint_states", 1_000, 900, 0), ("/imu/data", 2_000, 2_000, 0),
                                        ("/joint_states", 3_000, 3_000, 1)]
    assert records[0][4] == JOINT_STATE
    assert records[1][4]["orientation_covariance"] == [0.0] * 9
    assert records[1][4]["angular_velocity"]["x"] is None
    for topic, _, _, _, data in records:
        _validate(data, _schema(channels[topic].metadata["ros_type"]))


def test_writing_an_unregistered_topic_is_an_error(tmp_path):
    with McapJsonWriter(tmp_path / "x.mcap") as writer:
        writer.add_topic("/a", "std_msgs/msg/String", _schema("std_msgs/msg/String"))
        with pytest.raises(KeyError, match="'/b' was not registered"):
            writer.write("/b", {"data": "x"}, log_time_ns=1)
        with pytest.raises(ValueError, match="already registered"):
            writer.add_topic("/a", "std_msgs/msg/String", _schema("std_msgs/msg/String"))


# What rclpy's message_to_ordereddict gives for a DiagnosticArray: `byte` fields (DiagnosticStatus.level)
# are Python bytes. They were written as "\u0000" while the schema said integer.
DIAG_FIELDS = {
    "diagnostic_msgs/msg/DiagnosticArray": {"header": "std_msgs/Header",
                                            "status": "sequence<diagnostic_msgs/DiagnosticStatus>"},
    "diagnostic_msgs/DiagnosticStatus": {"level": "byte", "name": "string", "message": "string",
                                         "hardware_id": "string", "values": "sequence<diagnostic_msgs/KeyValue>"},
    "diagnostic_msgs/KeyValue": {"key": "string", "value": "string"},
    "pkg/msg/Bytes": {"b": "octet", "c": "char", "raw": "sequence<uint8>", "fixed": "byte[2]"},
}


def _resolve_all(name):
    return {**FIELDS, **DIAG_FIELDS}[name]


def test_byte_fields_are_written_as_the_integers_their_schema_says(tmp_path):
    from robot_rl.ros.recording import message_json

    array_type = "diagnostic_msgs/msg/DiagnosticArray"
    schema = message_json_schema(array_type, DIAG_FIELDS[array_type], _resolve_all)
    assert schema["properties"]["status"]["items"]["properties"]["level"] == {"type": "integer"}
    message = {"header": {"stamp": {"sec": 1, "nanosec": 2}, "frame_id": ""},
               "status": [{"level": b"\x02", "name": "/robot_rl_deploy: a1", "message": "estop",
                           "hardware_id": "a1", "values": [{"key": "mode", "value": "estop"}]}]}
    content = message_json(array_type, DIAG_FIELDS[array_type], message, _resolve_all)
    assert content["status"][0]["level"] == 2
    _validate(content, schema)
    raw = message_json("pkg/msg/Bytes", DIAG_FIELDS["pkg/msg/Bytes"],
                       {"b": b"\x07", "c": "A", "raw": b"\x01\x02", "fixed": [b"\x00", b"\xff"]}, _resolve_all)
    assert raw == {"b": 7, "c": 65, "raw": [1, 2], "fixed": [0, 255]}
    _validate(raw, message_json_schema("pkg/msg/Bytes", DIAG_FIELDS["pkg/msg/Bytes"], _resolve_all))
    path = tmp_path / "diag.mcap"
    with McapJsonWriter(path) as writer:
        writer.add_topic("/diagnostics", array_type, schema)
        writer.write("/diagnostics", content, log_time_ns=1)
    with path.open("rb") as stream:
        (_, _, stored), = make_reader(stream).iter_messages()
    assert json.loads(stored.data)["status"][0]["level"] == 2


def test_an_existing_file_is_refused_unless_overwrite(tmp_path):
    path = tmp_path / "rec.mcap"
    path.write_bytes(b"earlier recording")
    with pytest.raises(FileExistsError, match="overwrite"):
        McapJsonWriter(path)
    assert path.read_bytes() == b"earlier recording"
    with McapJsonWriter(path, overwrite=True) as writer:
        writer.add_topic("/a", "std_msgs/msg/String", _schema("std_msgs/msg/String"))
    assert path.read_bytes().startswith(b"\x89MCAP")


def test_the_writer_flushes_at_least_every_flush_s(tmp_path):
    now = [0.0]
    path = tmp_path / "rec.mcap"
    writer = McapJsonWriter(path, flush_s=0.5, fsync=False, clock=lambda: now[0])
    writer.add_topic("/a", "std_msgs/msg/String", _schema("std_msgs/msg/String"))
    writer.write("/a", {"data": "first"}, log_time_ns=1)
    size = path.stat().st_size
    assert b"first" not in path.read_bytes()  # still in the chunk being built
    now[0] = 0.4
    assert writer.flush_if_due() is False and path.stat().st_size == size
    now[0] = 0.6  # the recorder's timer calls this while a topic is quiet
    assert writer.flush_if_due() is True and path.stat().st_size > size
    assert writer.flush_if_due() is False  # nothing new
    # a process killed now: the message is readable from the file as it is
    from robot_rl.data.mcap_log_reader import read_log

    assert [r.data for r in read_log(path)] == [{"data": "first"}]
    writer.close()


def test_log_summarize_reads_a_recorder_file_with_its_estop(tmp_path, capsys):
    from robot_rl.data.mcap_log_reader import log_summarize, summarize_log

    status = json.dumps({"mode": "estop", "lifecycle": "active", "events": [
        {"filter": "estop", "fault": True, "detail": "e-stop from service ~/estop", "joints": [], "text": "x"},
        {"filter": "note", "fault": False, "detail": "(2 earlier events not shown)", "joints": [], "text": "y"},
        {"filter": "rate", "fault": False, "detail": "rate limit: FR_hip 1→0.5", "joints": [0], "text": "z"}]})
    path = tmp_path / "rec.mcap"
    with McapJsonWriter(path, library="robot_rl_recorder") as writer:
        writer.add_topic("/estop", "std_msgs/msg/Bool", {"type": "object", "properties": {"data": {"type": "boolean"}}})
        writer.add_topic("/robot_rl_deploy/status", "std_msgs/msg/String", _schema("std_msgs/msg/String"))
        writer.write("/estop", {"data": False}, log_time_ns=1_000_000_000)
        writer.write("/estop", {"data": True}, log_time_ns=2_000_000_000)
        writer.write("/robot_rl_deploy/status", {"data": status}, log_time_ns=2_500_000_000)
        writer.write("/robot_rl_deploy/status", {"data": "not json"}, log_time_ns=2_600_000_000)
    summary = summarize_log(path)
    assert summary["closed_cleanly"] is True and summary["truncated"] is False
    # the e-stop the node reported on its status counts once; the /estop message itself is not counted again
    assert summary["safety_events"]["total"] == 2 and summary["safety_events"]["faults"] == 1
    assert summary["safety_events"]["by_filter"] == {"estop": 1, "rate": 1}
    assert summary["messages"]["/estop"] == 2 and summary["dropped_records"] == 0
    assert log_summarize(str(path)) == 0
    out = capsys.readouterr().out
    assert "not closed cleanly" not in out and "safety events: 2 (1 faults)" in out


def test_estop_messages_count_as_safety_events_when_no_deploy_status_is_recorded(tmp_path):
    from robot_rl.data.mcap_log_reader import summarize_log
    from robot_rl.ros.recording import safety_events

    assert safety_events("/estop", "std_msgs/msg/Bool", {"data": True}, 1.0) == [
        {"t": 1.0, "filter": "estop", "fault": True, "detail": "e-stop on /estop", "joints": []}]
    assert safety_events("/estop", "std_msgs/msg/Bool", {"data": False}, 1.0) == []
    assert safety_events("/estop", "std_msgs/msg/Bool", {"data": True}, 1.0, status_recorded=True) == []
    assert safety_events("/chatter", "std_msgs/msg/String", {"data": "{}"}, 1.0) == []
    path = tmp_path / "rec.mcap"
    with McapJsonWriter(path) as writer:
        writer.add_topic("/ns/estop", "std_msgs/msg/Bool", {"type": "object", "properties": {}})
        writer.write("/ns/estop", {"data": True}, log_time_ns=1)
    assert summarize_log(path)["safety_events"]["by_filter"] == {"estop": 1}
