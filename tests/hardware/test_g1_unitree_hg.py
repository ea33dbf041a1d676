"""The G1 over unitree_hg, end to end on loopback DDS: ``robot-rl bridge --robot g1`` (Unitree's 29-DoF model)
as a separate process, and a legs-only policy's commands sent through UnitreeDdsRobot. On the wire every LowCmd
is the robot's: the reported mode_machine echoed, mode_pr 0 (PR), a valid CRC, the 29 used slots of the 35
enabled (legs from the policy, waist and arms held at their default pose with their own gains), the other 6
disabled."""

from __future__ import annotations

import time

import numpy as np
import pytest

from robot_rl.control.controller import PolicyController
from robot_rl.dds import TOPIC_LOWCMD, make_participant
from robot_rl.dds import unitree_hg as hg
from robot_rl.dds.crc import crc_ok
from robot_rl.hardware.unitree_dds import UnitreeDdsRobot
from robot_rl.policy.contract import PolicyContract
from robot_rl.robots.assets import model_source_missing
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm

CONNECT_TIMEOUT_S = 30.0  # a fresh interpreter imports mujoco and cyclonedds and builds the 29-DoF model first
MODE_MACHINE = 5  # the 29-DoF G1's variant code, as the bridge reports it
G1 = load_robot("g1")
LAYOUT = ObservationLayout((ObsTerm("base_ang_vel"), ObsTerm("projected_gravity"), ObsTerm("command"),
                            ObsTerm("joint_pos_rel"), ObsTerm("joint_vel"), ObsTerm("last_action")))
COMMANDS = CommandSpec(("lin_vel_x", "lin_vel_y", "ang_vel_z"), ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)))
ACTION = JointPositionAction(scale=0.25, clip=100.0)
LEG_ACTION = np.linspace(-0.4, 0.4, 12)  # raw action: legs 0.1 rad either side of their default, joint by joint


class FixedLegs:
    contract = PolicyContract.expected_from(G1, LAYOUT, COMMANDS, ACTION)

    def act(self, obs: np.ndarray) -> np.ndarray:
        return LEG_ACTION[None, :]


def test_legs_only_policy_commands_go_out_as_the_g1s_lowcmd(start_bridge, bridge_status, domain) -> None:
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    missing = model_source_missing(G1)
    if missing:
        pytest.skip(f"model source not on this machine: {missing}")
    start_bridge("--robot", "g1", "--mode-machine", str(MODE_MACHINE), duration_s=40)
    participant = make_participant(domain, "lo")
    reader = DataReader(participant, Topic(participant, TOPIC_LOWCMD, hg.LowCmd_))
    controller = PolicyController(G1, LAYOUT, COMMANDS, ACTION, FixedLegs())
    seen = []
    with UnitreeDdsRobot(G1, domain_id=domain, connect_timeout_s=CONNECT_TIMEOUT_S) as robot:
        assert robot.mode_machine == MODE_MACHINE
        for _ in range(25):
            robot.write(controller.step(robot.read()))
            seen += [m for m in reader.take(N=64) if m.sample_info.valid_data]
            time.sleep(0.02)
        status = bridge_status.wait_for(lambda s: s.commands_applied >= 10, timeout_s=5.0)
        seen += [m for m in reader.take(N=64) if m.sample_info.valid_data]
    assert status is not None and status.commands_applied >= 10, status
    assert status.commands_rejected == 0 and status.commands_bad_crc == 0
    assert len(seen) >= 10
    legs = G1.default_positions[:12] + ACTION.scale * LEG_ACTION
    for msg in seen:
        assert crc_ok(msg)
        assert (msg.mode_machine, msg.mode_pr) == (MODE_MACHINE, hg.MODE_PR)
        assert [m.mode for m in msg.motor_cmd] == [hg.MOTOR_ENABLE] * 29 + [hg.MOTOR_DISABLE] * 6
        q = np.array([m.q for m in msg.motor_cmd[:29]])
        np.testing.assert_array_equal(q[12:], G1.default_positions[12:].astype(np.float32))
        np.testing.assert_allclose(q[:12], legs, atol=1e-6)
        np.testing.assert_array_equal([m.kp for m in msg.motor_cmd[:29]], G1.kp.astype(np.float32))
        np.testing.assert_array_equal([m.kd for m in msg.motor_cmd[:29]], G1.kd.astype(np.float32))
        assert all(m.kp == 0 and m.kd == 0 and m.q == 0 for m in msg.motor_cmd[29:])
