"""The gantry a simulated humanoid hangs from until its policy takes over (robot_rl.hardware.gantry), in SimRobot
and through the deploy loop. Unitree's 29-DoF G1 from ../shared/external (skipped where absent)."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.control.deploy_loop import run_loop
from robot_rl.control.runtime import DeployRuntime
from robot_rl.core.types import JointCommand
from robot_rl.hardware.gantry import needs_gantry
from robot_rl.hardware.sim_robot import SimRobot
from robot_rl.robots.assets import model_source_missing
from robot_rl.robots.spec import load_robot

G1 = load_robot("g1")


def _g1_model() -> None:
    missing = model_source_missing(G1)
    if missing:
        pytest.skip(f"model source not on this machine: {missing}")


def _tilt(quat: np.ndarray) -> float:
    """Angle between the base's z axis and the world's (rad)."""
    return float(np.arccos(np.clip(1 - 2 * (quat[1] ** 2 + quat[2] ** 2), -1.0, 1.0)))


def test_only_floating_base_humanoids_hang():
    assert needs_gantry(G1)
    assert not any(needs_gantry(load_robot(name)) for name in ("a1", "go2", "panda"))


def test_a_release_time_must_be_a_sim_time():
    with pytest.raises(ValueError, match=r"gantry_release_s must be a sim time >= 0 s, got -1\.0"):
        SimRobot(G1, gantry_release_s=-1.0)


def test_pybullet_refuses_a_humanoid_it_cannot_hang():
    with pytest.raises(ValueError, match=r"g1: a humanoid hangs from a gantry .* use simulator 'mujoco'"):
        SimRobot(G1, "pybullet").connect()


def test_a_passive_g1_hangs_upright_until_the_stated_time_then_falls():
    """Motors passive (as at power-up): on the gantry the pelvis stays at its standing height and upright while
    the legs go limp; released at 1 s, nothing holds it and it falls."""
    _g1_model()
    passive = JointCommand.passive(G1.num_joints)
    with SimRobot(G1, gantry_release_s=1.0) as robot:
        hanging = []
        while robot.sim_time() < 1.0 - 1e-9:
            assert robot.gantry_engaged
            robot.write(passive)
            hanging.append(robot.read())
        assert robot.gantry_engaged  # lets go on the next physics step
        robot.write(passive)
        assert not robot.gantry_engaged
        while robot.sim_time() < 3.0:
            robot.write(passive)
        fallen = robot.read()
    base_height = G1.sim_model.base_height
    assert max(abs(s.base_pos[2] - base_height) for s in hanging) < 0.03
    assert max(_tilt(s.base_quat) for s in hanging) < 0.05
    assert max(float(np.linalg.norm(s.base_pos[:2])) for s in hanging) < 0.05  # the limp legs swing it a little
    assert fallen.base_pos[2] < 0.5 * base_height or _tilt(fallen.base_quat) > 1.0, fallen.base_pos


def test_the_deploy_loop_ramps_a_hanging_g1_and_lowers_the_gantry_when_the_policy_takes_over():
    """The runtime (no policy: it holds the default pose when RUNNING) ramps the G1 on the gantry without a
    safety fault; the gantry is engaged on every ramp tick and lowered on the first running one. Without the
    gantry (released at 0 s) the same ramp ends in the tilt fault: the G1 cannot stand on its spec PD."""
    _g1_model()
    runtime = DeployRuntime(G1)
    engaged: list[bool] = []
    with SimRobot(G1) as robot:
        record = run_loop(runtime, robot, G1.safety.ramp_duration_s + 0.2, realtime=False,
                          on_tick=lambda k, t: engaged.append(robot.gantry_engaged))
        after = robot.gantry_engaged
    running = record.mode.index("running")
    assert set(record.mode[:running]) == {"ramp"} and not runtime.chain.faulted, runtime.diagnostics()
    assert all(engaged[: running + 1]) and not any(engaged[running + 1 :]) and not after
    np.testing.assert_allclose(record.q[running], G1.default_positions, atol=0.1)  # ramped on the gantry

    unsupported = DeployRuntime(G1)
    with SimRobot(G1, gantry_release_s=0.0) as robot:
        run_loop(unsupported, robot, G1.safety.ramp_duration_s, realtime=False)
    assert unsupported.chain.faulted and "tilt" in str(unsupported.chain.fault), unsupported.diagnostics()


def test_a_quadruped_has_no_gantry():
    a1 = load_robot("a1")
    with SimRobot(a1) as robot:
        assert not robot.gantry_engaged
        robot.release_gantry()  # a no-op
        for _ in range(50):
            robot.write(JointCommand.passive(a1.num_joints))
        assert robot.read().base_pos[2] < 0.5 * a1.sim_model.base_height  # slumps to the floor, as before


def test_the_sim_bridge_lowers_the_gantry_a_stated_time_after_the_first_position_command(domain):
    """In-process bridge stepped by hand: the G1 hangs, passive, whatever the wait; a damping command (kp 0)
    arms nothing; the first position command starts the clock, and the gantry lets go gantry_release_s later."""
    _g1_model()
    from cyclonedds.pub import DataWriter
    from cyclonedds.topic import Topic

    from robot_rl.dds import TOPIC_LOWCMD, make_participant
    from robot_rl.dds.crc import with_crc
    from robot_rl.hardware.sim_bridge import SimBridge

    bridge = SimBridge(G1, domain_id=domain, realtime=False, mode_machine=5, gantry_release_s=0.2)
    bridge.open()
    participant = make_participant(domain, "lo")
    writer = DataWriter(participant, Topic(participant, TOPIC_LOWCMD, bridge.slot_map.family.LowCmd_))

    def send(command: JointCommand) -> None:
        msg = bridge.slot_map.blank_command()
        bridge.slot_map.encode_command(command, msg)
        msg.mode_machine = 5
        applied = bridge.status.commands_applied
        writer.write(with_crc(msg))
        for _ in range(2500):  # until the bridge took it (≤ 5 s of sim time: DDS delivers in microseconds)
            bridge.tick()
            if bridge.status.commands_applied > applied:
                return
        raise AssertionError("the bridge never got the command")

    try:
        for _ in range(500):  # 1 s passive
            bridge.tick()
        assert bridge.status.gantry_engaged == 1
        assert abs(bridge.data.xpos[bridge.robot.base_body_id][2] - G1.sim_model.base_height) < 0.03
        send(JointCommand.damping(G1.num_joints, G1.safety.damping_kd))
        for _ in range(500):
            bridge.tick()
        assert bridge.status.gantry_engaged == 1  # damping is not the deploy's ramp
        send(JointCommand.hold(G1.default_positions, G1.kp, G1.kd))
        armed = bridge.periods
        while bridge.status.gantry_engaged:
            bridge.tick()
        assert (bridge.periods - armed) * bridge.period_s == pytest.approx(0.2, abs=2.5 * bridge.period_s)
    finally:
        bridge.close()
    assert SimBridge(load_robot("a1"), realtime=False).status.gantry_engaged == 0
