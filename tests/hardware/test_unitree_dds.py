"""UnitreeDdsRobot: motor slots mapped by joint name, LowCmd encoding, and real DDS over loopback against
the sim bridge running as a separate process (``python -m robot_rl.hardware.sim_bridge``)."""

import random
import re
import time

import numpy as np
import pytest

from robot_rl.core.loop_timing import RateLoop
from robot_rl.core.types import JointCommand, RobotInterface
from robot_rl.dds import unitree_go as go
from robot_rl.dds import unitree_hg as hg
from robot_rl.dds.crc import crc_ok
from robot_rl.hardware.unitree_dds import MotorSlotMap, RobotConnectionError, UnitreeDdsRobot
from robot_rl.robots.spec import load_robot

CONNECT_TIMEOUT_S = 20.0  # a fresh interpreter imports mujoco and cyclonedds and builds the model first


def shuffle_slots(data: dict) -> None:
    """Motor slots in a random order: spec joint i no longer sits in slot i."""
    slots = list(data["interface"]["motor_slots"])
    random.Random(7).shuffle(slots)
    data["interface"]["motor_slots"] = slots


def shuffle_joints(data: dict) -> None:
    """Joint order changed, motor slots (by name) as on the robot: the robot's wire layout is unchanged."""
    random.Random(3).shuffle(data["joints"])


def test_command_goes_to_the_slot_named_for_each_joint(edited_spec) -> None:
    spec = edited_spec(shuffle_slots)
    slot_map = MotorSlotMap.from_spec(spec)
    assert slot_map.slots != tuple(range(12))
    msg = slot_map.blank_command()
    n = spec.num_joints
    command = JointCommand(np.linspace(-1, 1, n), np.full(n, 0.5), np.arange(n) + 10.0, np.full(n, 0.7),
                           np.arange(n) * 0.1)
    slot_map.encode_command(command, msg)
    names = spec.interface.motor_slots
    for slot, motor in enumerate(msg.motor_cmd):
        if names[slot]:
            i = spec.joint_names.index(names[slot])
            assert motor.mode == go.MOTOR_MODE_SERVO
            assert (motor.q, motor.kp, motor.tau) == pytest.approx((command.q_target[i], 10.0 + i, 0.1 * i),
                                                                    rel=1e-6)
        else:  # unused slot: the SDK's passive values
            assert (motor.mode, motor.q, motor.dq, motor.kp, motor.kd, motor.tau) == \
                (go.MOTOR_MODE_SERVO, go.POS_STOP_F, go.VEL_STOP_F, 0.0, 0.0, 0.0)

    state = go.default_low_state()
    for slot, motor in enumerate(state.motor_state):
        motor.q, motor.dq, motor.tau_est = 100.0 + slot, -slot, 0.5 * slot
    state.tick = 42
    decoded = slot_map.decode_state(state, timestamp=1.5)
    expected_slots = np.array([names.index(name) for name in spec.joint_names])
    np.testing.assert_array_equal(decoded.q, 100.0 + expected_slots)
    np.testing.assert_array_equal(decoded.dq, -expected_slots)
    assert (decoded.tick, decoded.timestamp, decoded.base_lin_vel) == (42, 1.5, None)


def test_hg_family_enables_spec_slots_and_disables_the_rest(hg_a1_spec) -> None:
    slot_map = MotorSlotMap.from_spec(hg_a1_spec)
    msg = slot_map.blank_command()
    slot_map.encode_command(JointCommand.hold(hg_a1_spec.default_positions, hg_a1_spec.kp, hg_a1_spec.kd), msg)
    assert [m.mode for m in msg.motor_cmd] == [hg.MOTOR_ENABLE] * 12 + [hg.MOTOR_DISABLE] * 23
    assert msg.motor_cmd[2].q == pytest.approx(hg_a1_spec.default_positions[2])


def test_sent_command_is_float32_rounded_and_non_finite_refused() -> None:
    spec = load_robot("a1")
    slot_map = MotorSlotMap.from_spec(spec)
    q = spec.default_positions + 1e-9  # not representable in float32
    sent = slot_map.encode_command(JointCommand.hold(q, spec.kp, spec.kd), slot_map.blank_command())
    np.testing.assert_array_equal(sent.q_target, q.astype(np.float32).astype(np.float64))
    assert not np.array_equal(sent.q_target, q)
    bad = JointCommand.hold(q, spec.kp, spec.kd)
    bad.kd[4] = np.nan
    with pytest.raises(ValueError, match=r"kd\[4\] \(FL_upper_joint\) = nan is not a finite float32"):
        slot_map.encode_command(bad, slot_map.blank_command())
    with pytest.raises(ValueError, match=r"q_target has shape \(3,\), robot 'a1' has 12 joints"):
        slot_map.encode_command(JointCommand.hold(np.zeros(3), np.zeros(3), np.zeros(3)), slot_map.blank_command())


def test_refuses_a_spec_without_a_unitree_interface() -> None:
    with pytest.raises(ValueError, match=r"interface\.type is 'franka', a Unitree DDS robot needs 'unitree_dds'"):
        UnitreeDdsRobot(load_robot("panda"))


def test_connect_without_a_robot_names_topic_domain_and_interface(domain: int) -> None:
    robot = UnitreeDdsRobot(load_robot("a1"), domain_id=domain, connect_timeout_s=0.3)
    with pytest.raises(RobotConnectionError, match=rf"'rt/lowstate' within 0.3 s \(DDS domain {domain}, network "
                                                   r"interface 'lo', robot 'a1'\)") as caught:
        robot.connect()
    # Not only domain and interface: a peer with another discovery config is named as a cause too.
    assert "discovers peers differently" in str(caught.value) and "multicast" in str(caught.value)
    with pytest.raises(RuntimeError, match="before connect"):
        robot.write(JointCommand.passive(12))


def test_reads_fresh_states_from_the_bridge_and_maps_joints_by_name(start_bridge, edited_spec, domain) -> None:
    bridge = start_bridge(duration_s=20)
    spec = load_robot("a1")
    shuffled = edited_spec(shuffle_joints)
    assert shuffled.joint_names != spec.joint_names
    with UnitreeDdsRobot(spec, domain_id=domain, connect_timeout_s=CONNECT_TIMEOUT_S) as robot, \
            UnitreeDdsRobot(shuffled, domain_id=domain, connect_timeout_s=CONNECT_TIMEOUT_S) as other:
        assert isinstance(robot, RobotInterface)
        states = [robot.wait_for_state(1.0) for _ in range(100)]
        assert all(s is not None for s in states), "states stopped arriving"
        ticks = np.array([s.tick for s in states])
        assert (np.diff(ticks) > 0).all(), "ticks must strictly increase while fresh"
        # A millisecond counter advancing one hardware period per state. The reader keeps only the newest
        # state, so a busy machine skips some: gaps are whole periods.
        period_ms = round(1e3 * spec.timing.hardware_period_s)
        assert (np.diff(ticks) % period_ms == 0).all()
        assert (np.diff([s.timestamp for s in states]) > 0).all()
        assert abs(states[-1].timestamp - time.monotonic()) < 0.5
        for s in states:
            assert np.linalg.norm(s.base_quat) == pytest.approx(1.0, abs=1e-5)
            assert np.isfinite(s.q).all() and np.isfinite(s.base_lin_acc).all() and s.base_lin_vel is None
        assert robot.state_crc_errors == 0

        # The same LowState through a spec whose joint order differs: equal per joint name.
        # Each reader keeps only its newest state, so read both repeatedly until some tick was seen by both.
        seen_a, seen_b = {}, {}
        for _ in range(400):
            a, b = robot.wait_for_state(1.0), other.wait_for_state(1.0)
            seen_a[a.tick], seen_b[b.tick] = a, b
            if seen_a.keys() & seen_b.keys():
                break
        common = seen_a.keys() & seen_b.keys()
        assert common, "the two readers never saw the same tick"
        a, b = seen_a[min(common)], seen_b[min(common)]
        order = [spec.joint_names.index(name) for name in shuffled.joint_names]
        np.testing.assert_array_equal(b.q, a.q[order])
        np.testing.assert_array_equal(b.tau, a.tau[order])
    assert bridge.proc.poll() is None


def test_ramp_through_write_stands_the_passive_robot_up(start_bridge, bridge_status, domain) -> None:
    """The bridge starts passive and the robot collapses; a ramp to the default pose under the spec's PD,
    sent through write() at the policy rate, stands it up. The ramp here stands in for the runtime's."""
    start_bridge(duration_s=30)
    spec = load_robot("a1")
    with UnitreeDdsRobot(spec, domain_id=domain, connect_timeout_s=CONNECT_TIMEOUT_S, tag_state_tick=True) as robot:
        slumped = bridge_status.wait_for(lambda s: s.sim_time_s > 1.0, timeout_s=5.0)
        assert slumped.command_active == 0 and slumped.base_height_m < 0.15, "passive robot should have sagged"
        q0 = robot.read().q.copy()
        assert np.abs(q0 - spec.default_positions).max() > 0.5

        ramp_s, period = spec.safety.ramp_duration_s, spec.timing.policy_period_s
        loop = RateLoop(period)
        for tick in loop:
            robot.read()  # a controller reads every tick; the command's tag is this state's tick
            alpha = min(1.0, tick.index * period / ramp_s)
            target = (1 - alpha) * q0 + alpha * spec.default_positions
            sent = robot.write(JointCommand.hold(target, spec.kp, spec.kd))
            np.testing.assert_allclose(sent.q_target, target, rtol=1e-6, atol=1e-6)
            if tick.index * period > ramp_s + 1.0:
                break
        final = robot.read()
        status = bridge_status.wait_for(lambda s: s.commands_applied > 0, timeout_s=1.0)
        assert robot.commands_republished > 0, "the 500 Hz re-publish thread never sent"
        # The tag in LowCmd.reserve is the tick of the state last read, seen by the bridge.
        assert 0 < status.last_command_reserve <= status.tick
        assert status.tick - status.last_command_reserve < 200
    assert status.command_active == 1 and status.commands_bad_crc == 0
    error = np.abs(final.q - spec.default_positions)
    # kp 20 leaves a steady-state sag under the robot's weight (the stand check sees ≈ 0.24 rad from the pose)
    assert error.max() < 0.4, f"joints did not converge: |q − q_default| = {np.round(error, 3)}"
    assert status.base_height_m > 0.2, f"robot did not stand up: base height {status.base_height_m:.3f} m"
    w = final.base_quat[0]
    assert 2 * np.arccos(min(1.0, abs(w))) < 0.3, "robot is not upright"


def test_bridge_killed_mid_run_leaves_a_state_whose_tick_stops(start_bridge, domain) -> None:
    bridge = start_bridge("--kill-at-s", "1.0", duration_s=20)
    with UnitreeDdsRobot(load_robot("a1"), domain_id=domain, connect_timeout_s=CONNECT_TIMEOUT_S) as robot:
        returncode, out, _ = bridge.wait(timeout=CONNECT_TIMEOUT_S)
        assert returncode == 0 and re.search(r"killed at t=1\.0\d\d s", out), out
        last = robot.read()
        assert 0 < last.tick < 1000
        assert robot.wait_for_state(0.3) is None
        again = robot.read()  # still answers at once, with the same (now stale) state
        assert again.tick == last.tick and again.timestamp == last.timestamp
        assert time.monotonic() - again.timestamp > 0.3


def test_hg_family_echoes_mode_machine_end_to_end(start_bridge, bridge_status, hg_a1_spec, domain) -> None:
    start_bridge("--robot", hg_a1_spec.source_file, "--mode-machine", "7", duration_s=20)
    with UnitreeDdsRobot(hg_a1_spec, domain_id=domain, connect_timeout_s=CONNECT_TIMEOUT_S) as robot:
        assert robot.mode_machine == 7
        state = robot.read()
        robot.write(JointCommand.hold(state.q, hg_a1_spec.kp, hg_a1_spec.kd))
        status = bridge_status.wait_for(lambda s: s.commands_applied >= 5, timeout_s=5.0)
    assert status.commands_applied >= 5 and status.commands_rejected == 0 and status.commands_bad_crc == 0


def test_crc_of_what_write_sends_is_valid(start_bridge, domain) -> None:
    """Reads back, on the wire, a LowCmd that write() published: CRC and passive unused slots."""
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    from robot_rl.dds import TOPIC_LOWCMD, make_participant

    start_bridge(duration_s=20)
    spec = load_robot("a1")
    participant = make_participant(domain, "lo")
    reader = DataReader(participant, Topic(participant, TOPIC_LOWCMD, go.LowCmd_))
    with UnitreeDdsRobot(spec, domain_id=domain, connect_timeout_s=CONNECT_TIMEOUT_S) as robot:
        robot.write(JointCommand.damping(spec.num_joints, spec.safety.damping_kd))
        deadline, seen = time.monotonic() + 5.0, []
        while not seen and time.monotonic() < deadline:
            seen = [m for m in reader.take(N=8) if m.sample_info.valid_data]
            time.sleep(0.01)
    assert seen, "no LowCmd on the wire"
    msg = seen[-1]
    assert crc_ok(msg) and bytes(msg.head) == bytes(go.HEAD) and msg.level_flag == go.LEVEL_FLAG_LOW
    assert [m.kd for m in msg.motor_cmd[:12]] == [spec.safety.damping_kd] * 12
    assert all(m.q == pytest.approx(go.POS_STOP_F) and m.kd == 0 for m in msg.motor_cmd[12:])


def test_example_cyclone_config_file_matches_the_one_used_in_code() -> None:
    """hardware/dds/cyclonedds_lo.xml is what users point CYCLONEDDS_URI at; it must stay the config our
    processes build for 'lo'."""
    import xml.etree.ElementTree as ET

    from robot_rl.dds import cyclone_config_xml
    from robot_rl.robots.spec import REPO_ROOT

    def canonical(element: ET.Element) -> tuple:
        return (element.tag, tuple(sorted(element.attrib.items())), (element.text or "").strip(),
                tuple(canonical(child) for child in element))

    from_file = ET.parse(REPO_ROOT / "hardware" / "dds" / "cyclonedds_lo.xml").getroot()
    assert canonical(from_file) == canonical(ET.fromstring(cyclone_config_xml("lo")))
