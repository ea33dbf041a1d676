"""The codec-based wire path (unitree_wire) gives what MotorSlotMap's IDL-object path gives, both ways, for
both message families, on random commands and states."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.dds import unitree_go as go
from robot_rl.dds import unitree_hg as hg
from robot_rl.dds.crc import crc_ok, with_crc
from robot_rl.hardware.unitree_dds import MotorSlotMap, quat_to_rpy
from robot_rl.hardware.unitree_wire import CommandDecoder, CommandEncoder, StateDecoder, StateEncoder
from robot_rl.robots.spec import load_robot

ROBOTS = ["a1", "go2", "g1"]  # unitree_go (A1 sim bridge, Go2) and unitree_hg (G1)


def _random_state(spec, rng, tick: int) -> RobotState:
    n = spec.num_joints
    quat = rng.normal(size=4)
    return RobotState(0.0, tick, rng.normal(size=n), rng.normal(size=n) * 10, rng.normal(size=n) * 5,
                      quat / np.linalg.norm(quat), rng.normal(size=3), base_lin_acc=rng.normal(size=3))


def _assert_same(a: JointCommand | None, b: JointCommand | None) -> None:
    assert (a is None) == (b is None)
    if a is not None:
        for field in ("q_target", "dq_target", "kp", "kd", "tau_ff"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), field)


@pytest.mark.parametrize("name", ROBOTS)
def test_commands_out_and_in_match_the_idl_path(name):
    spec = load_robot(name)
    slot_map = MotorSlotMap.from_spec(spec)
    encoder, decoder = CommandEncoder(slot_map), CommandDecoder(slot_map)
    msg = slot_map.blank_command()
    rng = np.random.default_rng(26)
    n = spec.num_joints
    for i in range(200):
        command = JointCommand(rng.normal(size=n), rng.normal(size=n), rng.uniform(0, 100, n), rng.uniform(0, 5, n),
                               rng.normal(size=n))
        if i % 10 == 0 and not slot_map.is_hg:
            command.q_target[rng.integers(n)] = go.POS_STOP_F  # the SDK's "no position control" sentinel
        tag, mode_machine = int(rng.integers(0, 2**32)), int(rng.integers(0, 256))
        data, sent = encoder.encode(command, tag=tag, mode_machine=mode_machine)
        expected_sent = slot_map.encode_command(command, msg)
        if slot_map.is_hg:
            msg.mode_machine, msg.reserve[0] = mode_machine, tag
        else:
            msg.reserve = tag
        assert data == with_crc(msg).serialize()
        _assert_same(sent, expected_sent)
        decoder.load(data)
        assert decoder.crc_ok() and decoder.tag == tag
        assert decoder.mode_machine == (mode_machine if slot_map.is_hg else 0)
        _assert_same(decoder.command(), slot_map.decode_command(msg))
    decoder.corrupt_crc()
    assert not decoder.crc_ok()
    with pytest.raises(ValueError, match=r"JointCommand.kd\[3\] .* not a finite float32"):
        command.kd[3] = np.inf
        encoder.encode(command)


@pytest.mark.parametrize("name", ROBOTS)
def test_decoder_reports_mode_pr_and_the_unused_slots_a_command_enables(name):
    """What the sim bridge's status reports of the command in force (unitree_hg; 0 for unitree_go)."""
    spec = load_robot(name)
    slot_map = MotorSlotMap.from_spec(spec)
    decoder = CommandDecoder(slot_map)
    msg = slot_map.blank_command()
    slot_map.encode_command(JointCommand.damping(spec.num_joints, spec.safety.damping_kd), msg)
    decoder.load(with_crc(msg).serialize())
    assert (decoder.mode_pr, decoder.unused_enabled()) == (0, 0)
    if slot_map.is_hg:
        msg.mode_pr = hg.MODE_AB
        for slot in slot_map.unused[::2]:
            msg.motor_cmd[slot].mode = hg.MOTOR_ENABLE
        decoder.load(with_crc(msg).serialize())
        assert (decoder.mode_pr, decoder.unused_enabled()) == (hg.MODE_AB, len(slot_map.unused[::2]))


@pytest.mark.parametrize("name", ROBOTS)
def test_states_out_and_in_match_the_idl_path(name):
    spec = load_robot(name)
    slot_map = MotorSlotMap.from_spec(spec)
    encoder, decoder = StateEncoder(slot_map, mode_machine=7), StateDecoder(slot_map)
    msg = slot_map.family.default_low_state()
    if slot_map.is_hg:
        msg.mode_machine = 7
    rng = np.random.default_rng(62)
    for tick in range(200):
        state = _random_state(spec, rng, tick * 2)
        rpy = quat_to_rpy(state.base_quat.tolist())
        data = encoder.encode(state, tick * 2, rpy)
        slot_map.encode_state(state, msg, tick * 2)
        assert data == with_crc(msg).serialize()
        assert decoder.load(data)
        got = decoder.state(1.5)
        expected = slot_map.decode_state(slot_map.family.LowState_.deserialize(data), 1.5)  # as received
        for field in ("q", "dq", "tau", "base_quat", "base_ang_vel", "base_lin_acc"):
            np.testing.assert_array_equal(getattr(got, field), getattr(expected, field), field)
        assert got.tick == expected.tick and got.timestamp == 1.5
        assert decoder.mode_machine == (7 if slot_map.is_hg else 0)
    bad = encoder.encode(state, 3, rpy, corrupt_crc=True)
    assert not crc_ok(slot_map.family.LowState_.deserialize(bad))
    assert not decoder.load(bad)
