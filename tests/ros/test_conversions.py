"""ROS message fields ↔ runtime arrays, without ROS: the node only moves fields in and out of messages."""

import ast
import json
import math
from dataclasses import dataclass

import numpy as np
import pytest

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.robots.spec import REPO_ROOT, load_robot
from robot_rl.ros import conversions as conv
from robot_rl.ros.conversions import MessageError

A1 = load_robot("a1")
JOINTS = A1.joint_names


def _coded(names):
    """Per-joint values that say which joint they belong to: position i, velocity 10 i, effort 100 i,
    where i is the joint's index in the spec."""
    index = [JOINTS.index(n) if n in JOINTS else -1 for n in names]
    return [float(i) for i in index], [10.0 * i for i in index], [100.0 * i for i in index]


# ------------------------------------------------------------------------------------------ joint states


def test_joint_state_in_shuffled_order_comes_out_in_spec_order():
    names = list(np.random.default_rng(3).permutation(JOINTS))
    assert names != list(JOINTS)
    position, velocity, effort = _coded(names)
    q, dq, tau = conv.joint_state_to_arrays(JOINTS, names, position, velocity, effort)
    expected = np.arange(len(JOINTS), dtype=float)
    np.testing.assert_array_equal(q, expected)
    np.testing.assert_array_equal(dq, 10 * expected)
    np.testing.assert_array_equal(tau, 100 * expected)


def test_joint_state_ignores_joints_the_robot_does_not_have():
    names = ["gripper_joint", *reversed(JOINTS), "head_pan"]
    position, velocity, effort = _coded(names)
    q, _, _ = conv.joint_state_to_arrays(JOINTS, names, position, velocity, effort)
    np.testing.assert_array_equal(q, np.arange(len(JOINTS)))


def test_missing_joint_is_an_error_naming_it():
    names = [n for n in JOINTS if n != "RL_upper_joint"]
    position, velocity, effort = _coded(names)
    with pytest.raises(MessageError, match="missing joint 'RL_upper_joint'"):
        conv.joint_state_to_arrays(JOINTS, names, position, velocity, effort)


def test_several_missing_joints_are_all_named():
    names = list(JOINTS[3:])
    with pytest.raises(MessageError) as err:
        conv.joint_state_to_arrays(JOINTS, names, *_coded(names))
    for name in JOINTS[:3]:
        assert repr(name) in str(err.value)


def test_duplicate_joint_name_is_an_error():
    names = [*JOINTS, JOINTS[0]]
    with pytest.raises(MessageError, match="appears twice"):
        conv.joint_state_to_arrays(JOINTS, names, *_coded(names))


@pytest.mark.parametrize(("field", "length", "text"), [
    ("position", 11, "12 names but 11 positions"),
    ("velocity", 0, "no velocities"),
    ("velocity", 5, "12 names but 5 velocities"),
    ("effort", 3, "12 names but 3 efforts"),
])
def test_field_length_mismatch_is_an_error(field, length, text):
    fields = dict(zip(("position", "velocity", "effort"), _coded(JOINTS), strict=True))
    fields[field] = fields[field][:length]
    with pytest.raises(MessageError, match=text):
        conv.joint_state_to_arrays(JOINTS, JOINTS, **fields)


def test_empty_effort_reads_as_zero_torque():
    position, velocity, _ = _coded(JOINTS)
    _, _, tau = conv.joint_state_to_arrays(JOINTS, JOINTS, position, velocity, [])
    np.testing.assert_array_equal(tau, np.zeros(len(JOINTS)))


def test_index_cache_is_not_shared_between_different_orders():
    a, b = list(JOINTS), list(reversed(JOINTS))
    q_a, _, _ = conv.joint_state_to_arrays(JOINTS, a, *_coded(a))
    q_b, _, _ = conv.joint_state_to_arrays(JOINTS, b, *_coded(b))
    np.testing.assert_array_equal(q_a, q_b)


# ------------------------------------------------------------------------------------------ imu


def test_imu_quaternion_is_reordered_to_wxyz():
    half = math.pi / 4  # a 90° yaw: ROS (x, y, z, w) = (0, 0, sin 45°, cos 45°)
    quat, gyro, acc = conv.imu_to_base((0.0, 0.0, math.sin(half), math.cos(half)), (0.1, -0.2, 0.3), (0, 0, 9.81))
    np.testing.assert_allclose(quat, [math.cos(half), 0.0, 0.0, math.sin(half)])
    np.testing.assert_array_equal(gyro, [0.1, -0.2, 0.3])
    np.testing.assert_array_equal(acc, [0.0, 0.0, 9.81])


def test_imu_quaternion_is_normalized():
    quat, _, _ = conv.imu_to_base((0.1, 0.2, 0.3, 0.9), (0, 0, 0), (0, 0, 0))
    assert quat[0] == pytest.approx(0.9 / math.sqrt(0.95))
    assert np.linalg.norm(quat) == pytest.approx(1.0)


def test_imu_without_orientation_is_an_error():
    with pytest.raises(MessageError, match="no orientation"):
        conv.imu_to_base((0, 0, 0, 1), (0, 0, 0), (0, 0, 0), orientation_covariance0=-1.0)


@pytest.mark.parametrize("quat", [(0.0, 0.0, 0.0, 0.0), (math.nan, 0.0, 0.0, 1.0)])
def test_imu_orientation_that_is_not_a_rotation_is_an_error(quat):
    with pytest.raises(MessageError, match="not a rotation"):
        conv.imu_to_base(quat, (0, 0, 0), (0, 0, 0))


# ------------------------------------------------------------------------------------------ assembled state


def test_state_waits_for_joint_states_and_imu():
    assembler = conv.StateAssembler(JOINTS, use_imu=True)
    assert assembler.state() is None
    assert assembler.waiting_for() == ["joint_states", "imu"]
    assembler.on_joint_state(JOINTS, *_coded(JOINTS), now=10.0)
    assert assembler.waiting_for() == ["imu"]
    assert assembler.state() is None
    assembler.on_imu((0, 0, 0, 1), (1, 2, 3), (0, 0, 9.8), 0.0, now=10.5)
    state = assembler.state()
    assert isinstance(state, RobotState)
    np.testing.assert_array_equal(state.base_quat, [1, 0, 0, 0])
    np.testing.assert_array_equal(state.base_ang_vel, [1, 2, 3])
    np.testing.assert_array_equal(state.q, np.arange(len(JOINTS)))


def test_frozen_imu_stops_the_tick_while_joint_states_keep_coming():
    assembler = conv.StateAssembler(JOINTS, use_imu=True)
    assembler.on_imu((0, 0, 0, 1), (0, 0, 0), (0, 0, 0), 0.0, now=1.0)
    assembler.on_joint_state(JOINTS, *_coded(JOINTS), now=1.1)
    assert assembler.state().tick == 1
    for k in range(5):  # the IMU stream froze at t = 1 s
        assembler.on_joint_state(JOINTS, *_coded(JOINTS), now=2.0 + k)
    state = assembler.state()
    assert state.tick == 1  # the runtime's stale-state watchdog sees no progress
    assert state.timestamp == 1.0  # and the state is as old as its oldest part
    assert assembler.joint_state_count == 6 and assembler.imu_count == 1
    assembler.on_imu((0, 0, 0, 1), (0, 0, 0), (0, 0, 0), 0.0, now=7.0)
    assert assembler.state().tick == 2


def test_frozen_joint_states_stop_the_tick_while_the_imu_keeps_coming():
    assembler = conv.StateAssembler(JOINTS, use_imu=True)
    assembler.on_joint_state(JOINTS, *_coded(JOINTS), now=0.0)
    for k in range(4):
        assembler.on_imu((0, 0, 0, 1), (0, 0, 0), (0, 0, 0), 0.0, now=0.1 * (k + 1))
    assert assembler.state().tick == 1


def test_tick_advances_at_the_slower_stream_rate():
    assembler = conv.StateAssembler(JOINTS, use_imu=True)
    for k in range(12):  # joint states at 4x the IMU rate
        assembler.on_joint_state(JOINTS, *_coded(JOINTS), now=k * 0.002)
        if k % 4 == 3:
            assembler.on_imu((0, 0, 0, 1), (0, 0, 0), (0, 0, 0), 0.0, now=k * 0.002)
    assert assembler.state().tick == 3


def test_fixed_base_state_needs_no_imu():
    assembler = conv.StateAssembler(JOINTS, use_imu=False)
    assembler.on_joint_state(JOINTS, *_coded(JOINTS), now=4.0)
    assembler.on_joint_state(JOINTS, *_coded(JOINTS), now=4.02)
    state = assembler.state()
    assert state.timestamp == 4.02 and state.tick == 2  # every joint state is a new tick
    np.testing.assert_array_equal(state.base_quat, [1, 0, 0, 0])


def test_state_from_another_interface_round_trips_through_the_message_fields():
    state = RobotState(timestamp=0.0, tick=1, q=np.linspace(-1, 1, 12), dq=np.linspace(2, 3, 12),
                       tau=np.linspace(-5, 5, 12), base_quat=np.array([0.5, 0.5, -0.5, 0.5]),
                       base_ang_vel=np.array([0.1, 0.2, 0.3]), base_lin_acc=np.array([0.0, 0.1, 9.8]))
    js = conv.state_to_joint_state(state, JOINTS)
    q, dq, tau = conv.joint_state_to_arrays(JOINTS, js["name"], js["position"], js["velocity"], js["effort"])
    np.testing.assert_array_equal(q, state.q)
    np.testing.assert_array_equal(dq, state.dq)
    np.testing.assert_array_equal(tau, state.tau)
    imu = conv.state_to_imu(state)
    quat, gyro, acc = conv.imu_to_base(imu["orientation_xyzw"], imu["angular_velocity"], imu["linear_acceleration"])
    np.testing.assert_allclose(quat, state.base_quat)
    np.testing.assert_array_equal(gyro, state.base_ang_vel)
    np.testing.assert_array_equal(acc, state.base_lin_acc)


# ------------------------------------------------------------------------------------------ commands in


def test_twist_to_velocity_command_in_policy_order():
    indices = conv.twist_command_indices(("lin_vel_x", "lin_vel_y", "ang_vel_z"))
    assert indices == (0, 1, 5)
    command = conv.twist_to_command((0.5, -0.2, 9.0), (7.0, 8.0, 0.3), indices)
    np.testing.assert_array_equal(command, [0.5, -0.2, 0.3])
    reordered = conv.twist_command_indices(("ang_vel_z", "lin_vel_x"))
    np.testing.assert_array_equal(conv.twist_to_command((0.5, 0, 0), (0, 0, 0.3), reordered), [0.3, 0.5])


def test_command_a_twist_cannot_carry_is_an_error_naming_it():
    with pytest.raises(MessageError, match="'target_x'"):
        conv.twist_command_indices(("lin_vel_x", "target_x"))


def test_non_finite_twist_is_rejected():
    with pytest.raises(MessageError, match="non-finite"):
        conv.twist_to_command((math.nan, 0, 0), (0, 0, 0), (0, 1, 5))


def test_command_input_modes():
    velocity = ("lin_vel_x", "lin_vel_y", "ang_vel_z")
    reach = ("target_x", "target_y", "target_z")
    assert conv.command_input_indices("auto", velocity) == ((0, 1, 5), "")
    assert conv.command_input_indices("cmd_vel", velocity) == ((0, 1, 5), "")
    assert conv.command_input_indices("none", velocity) == (None, "")
    assert conv.command_input_indices("auto", ()) == (None, "")
    assert conv.command_input_indices("auto", reach) == (None, "")  # from the target topic instead
    with pytest.raises(MessageError, match="command_input to none"):
        conv.command_input_indices("cmd_vel", reach)
    with pytest.raises(MessageError, match="must be one of"):
        conv.command_input_indices("joystick", velocity)


def test_command_source_picks_cmd_vel_or_the_reach_target():
    velocity = ("lin_vel_x", "lin_vel_y", "ang_vel_z")
    reach = ("target_x", "target_y", "target_z")
    assert conv.command_source("auto", velocity) == conv.CommandSource("cmd_vel", (0, 1, 5))
    assert conv.command_source("auto", reach) == conv.CommandSource("target", (0, 1, 2))
    assert conv.command_source("target", ("target_z", "target_x")) == conv.CommandSource("target", (2, 0))
    assert conv.command_source("none", reach) == conv.CommandSource(None)
    with pytest.raises(MessageError, match="PointStamped"):
        conv.command_source("target", velocity)
    mixed = conv.command_source("auto", ("lin_vel_x", "target_x"))
    assert mixed.kind is None and "'target_x'" in mixed.warning and "'lin_vel_x'" in mixed.warning
    assert "initial values" in mixed.warning


def test_point_to_reach_command():
    np.testing.assert_array_equal(conv.point_to_command((0.5, -0.1, 0.3), (0, 1, 2)), [0.5, -0.1, 0.3])
    np.testing.assert_array_equal(conv.point_to_command((0.5, -0.1, 0.3), (2, 0)), [0.3, 0.5])
    with pytest.raises(MessageError, match="non-finite"):
        conv.point_to_command((math.inf, 0, 0), (0, 1, 2))


def test_event_records_and_log_levels():
    from robot_rl.safety.filters import SafetyEvent

    stale = SafetyEvent("stale", True, "joint state is 120 ms old")
    clamp = SafetyEvent("rate", False, "rate limit", joints=(2,), before=(1.0,), after=(0.5,), joint_names=JOINTS)
    record = conv.event_record(stale)
    assert record == {"filter": "stale", "fault": True, "detail": "joint state is 120 ms old", "joints": [],
                      "text": "[FAULT] stale: joint state is 120 ms old"}
    assert conv.event_record(clamp)["joints"] == [2] and JOINTS[2] in conv.event_record(clamp)["detail"]
    assert conv.event_record("ramp done") == {"filter": "note", "fault": False, "detail": "ramp done", "joints": [],
                                              "text": "ramp done"}
    # faults (stale state included) are logged as errors; limit events, possibly every tick, are not
    assert conv.event_log_level(stale) == "error"
    assert conv.event_log_level(clamp) is None and conv.event_log_level("note") is None
    estop = conv.event_record(conv.estop_event("e-stop from service ~/estop"))
    assert estop["filter"] == "estop" and estop["fault"] is True and estop["detail"] == "e-stop from service ~/estop"
    json.dumps(record)


@pytest.mark.parametrize(("lifecycle", "mode", "reported"), [
    ("unconfigured", "unconfigured", "unconfigured"),
    ("inactive", "configured", "inactive"),
    ("inactive", "damping", "inactive (damping)"),
    ("active", "policy", "policy"),
    ("finalized", "damping", "finalized (damping)"),
])
def test_lifecycle_mode(lifecycle, mode, reported):
    assert conv.lifecycle_mode(lifecycle, mode) == reported


# ------------------------------------------------------------------------------------------ commands out


def _policy_command():
    n = len(JOINTS)
    return JointCommand(q_target=np.linspace(-0.5, 0.5, n), dq_target=np.full(n, 0.25), kp=A1.kp.copy(),
                        kd=A1.kd.copy(), tau_ff=np.zeros(n))


def test_forward_command_data_is_the_position_targets_in_spec_order():
    command = _policy_command()
    measured = np.full(len(JOINTS), 7.0)
    data = conv.forward_command_data(command, measured)
    assert isinstance(data, list) and all(isinstance(v, float) for v in data)
    np.testing.assert_array_equal(data, command.q_target)


def test_damping_holds_the_measured_pose_on_a_position_interface():
    measured = np.linspace(0.1, 1.2, len(JOINTS))
    damping = JointCommand.damping(len(JOINTS), A1.safety.damping_kd)  # q_target 0, kp 0
    np.testing.assert_array_equal(conv.forward_command_data(damping, measured), measured)
    mixed = _policy_command()
    mixed.kp[[2, 5]] = 0.0
    data = np.array(conv.forward_command_data(mixed, measured))
    np.testing.assert_array_equal(data[[2, 5]], measured[[2, 5]])
    keep = np.setdiff1d(np.arange(len(JOINTS)), [2, 5])
    np.testing.assert_array_equal(data[keep], mixed.q_target[keep])


def test_joint_trajectory_content():
    command = _policy_command()
    command.kp[0] = 0.0
    measured = np.full(len(JOINTS), 0.3)
    content = conv.joint_trajectory_content(command, measured, JOINTS, 0.02)
    assert content["joint_names"] == list(JOINTS)
    (point,) = content["points"]
    assert point["positions"][0] == 0.3  # held joint
    assert point["positions"][1:] == command.q_target[1:].tolist()
    assert point["velocities"][0] == 0.0 and point["velocities"][1:] == [0.25] * (len(JOINTS) - 1)
    assert point["time_from_start"] == {"sec": 0, "nanosec": 20_000_000}


@pytest.mark.parametrize(("seconds", "fields"), [
    (0.0, {"sec": 0, "nanosec": 0}), (1.5, {"sec": 1, "nanosec": 500_000_000}),
    (2.000000001, {"sec": 2, "nanosec": 1}), (0.999999999999, {"sec": 1, "nanosec": 0}),
])
def test_duration_fields(seconds, fields):
    assert conv.duration_fields(seconds) == fields


@pytest.mark.parametrize("seconds", [-0.1, math.inf, math.nan])
def test_duration_fields_rejects_bad_durations(seconds):
    with pytest.raises(ValueError, match="duration"):
        conv.duration_fields(seconds)


# ------------------------------------------------------------------------------------------ diagnostics, status


STATS = {
    "mode": "running",
    "loop": {"ticks": np.int64(1500), "lateness_s": {"p50": np.float64(1.25e-6), "max": None}},
    "safety": {"interventions": {"clip": 3, "rate": 0}},
    "last_command": np.array([0.1, 0.2]),
    "ok": True,
}


def test_flatten_stats_gives_dotted_key_value_strings():
    pairs = dict(conv.flatten_stats(STATS))
    assert pairs == {
        "mode": "running",
        "loop.ticks": "1500",
        "loop.lateness_s.p50": "1.25e-06",
        "loop.lateness_s.max": "n/a",
        "safety.interventions.clip": "3",
        "safety.interventions.rate": "0",
        "last_command": "[0.1, 0.2]",
        "ok": "True",
    }
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in conv.flatten_stats(STATS))


@pytest.mark.parametrize(("mode", "warnings", "errors", "level"), [
    ("running", [], [], conv.LEVEL_OK),
    ("ramp", ["waiting for imu"], [], conv.LEVEL_WARN),
    ("damping", [], ["e-stop from topic estop"], conv.LEVEL_ERROR),
    ("fault", [], [], conv.LEVEL_ERROR),
    ("ESTOP", [], [], conv.LEVEL_ERROR),
])
def test_diagnostic_level(mode, warnings, errors, level):
    assert conv.diagnostic_level(mode, warnings, errors) == level


def test_diagnostic_status_content():
    status = conv.diagnostic_status("/robot_rl_deploy: a1", "a1", "damping", STATS, ["waiting for imu"],
                                    ["e-stop from service ~/estop"])
    assert status["level"] == conv.LEVEL_ERROR
    assert status["name"] == "/robot_rl_deploy: a1" and status["hardware_id"] == "a1"
    assert status["message"] == "damping: e-stop from service ~/estop; waiting for imu"
    assert ("safety.interventions.clip", "3") in status["values"]


@dataclass
class _Event:  # stands in for whatever event records the runtime returns (dataclasses)
    kind: str
    joint: int
    value: float


def test_status_json_is_plain_json():
    text = conv.status_json("running", [_Event("clip", 3, math.nan), "ramp_done"], STATS, robot="a1", errors=[])
    payload = json.loads(text)
    assert payload["mode"] == "running" and payload["robot"] == "a1" and payload["errors"] == []
    assert payload["events"] == [{"kind": "clip", "joint": 3, "value": None}, "ramp_done"]
    assert payload["diagnostics"]["loop"]["ticks"] == 1500
    assert payload["diagnostics"]["last_command"] == [0.1, 0.2]
    assert "diagnostics" not in json.loads(conv.status_json("passive", []))


def test_robot_rl_never_imports_rclpy():
    """DESIGN.md: robot_rl/ never imports rclpy; the ROS plumbing lives in ros_ws/src/robot_rl."""
    offenders = []
    for path in (REPO_ROOT / "robot_rl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(REPO_ROOT)}:{node.lineno}" for n in names if n.split(".")[0] == "rclpy"]
    assert not offenders, offenders
