"""The G1 over unitree_hg, end to end on loopback DDS: ``robot-rl bridge --robot g1`` (Unitree's 29-DoF model)
as a separate process, and a legs-only policy's commands sent through UnitreeDdsRobot. On the wire every LowCmd
is the robot's: the reported mode_machine echoed, mode_pr 0 (PR), a valid CRC, the 29 used slots of the 35
enabled (legs from the policy, waist and arms held at their default pose with their own gains), the other 6
disabled. The supervisor's damping, when the controller goes silent, is such a LowCmd too."""

from __future__ import annotations

import json
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from robot_rl.control.controller import PolicyController
from robot_rl.control.deploy_command import command_age_limit
from robot_rl.control.supervisor import READY, Supervisor
from robot_rl.core.loop_timing import fifo_scheduling
from robot_rl.core.types import JointCommand
from robot_rl.dds import TOPIC_LOWCMD, TOPIC_LOWSTATE, make_participant
from robot_rl.dds import unitree_hg as hg
from robot_rl.dds.crc import crc_ok, with_crc
from robot_rl.hardware.unitree_dds import MotorSlotMap, UnitreeDdsRobot
from robot_rl.policy.contract import PolicyContract
from robot_rl.robots.assets import model_source_missing
from robot_rl.robots.spec import load_robot
from robot_rl.safety.supervisor import SupervisorLimits
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm

CONNECT_TIMEOUT_S = 30.0  # a fresh interpreter imports mujoco and cyclonedds and builds the 29-DoF model first
MODE_MACHINE = 5  # the 29-DoF G1's variant code, as the bridge reports it
FIFO_PRIORITY = 10  # the supervisor test's bridge and controller; the supervisor one above (as deploy runs it)
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


def _wire_reader(participant):
    """Every rt/lowcmd frame on the wire (keep last 1024: a second of 500 Hz damping and more)."""
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    qos = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(1024))
    return DataReader(participant, Topic(participant, TOPIC_LOWCMD, hg.LowCmd_), qos=qos)


def _frames(reader) -> list:
    return [m for m in reader.take(N=1024) if m.sample_info.valid_data]


def _assert_g1_damping(msg, mode_machine: int) -> None:
    """The damping LowCmd as the G1 must get it: CRC good, the robot's mode_machine, mode_pr PR, the 29 used
    slots enabled with kp 0 and the spec's damping kd (targets 0), the 6 unused disabled and zero."""
    assert crc_ok(msg)
    assert (msg.mode_machine, msg.mode_pr) == (mode_machine, hg.MODE_PR)
    assert [m.mode for m in msg.motor_cmd] == [hg.MOTOR_ENABLE] * 29 + [hg.MOTOR_DISABLE] * 6
    assert {(m.q, m.dq, m.tau, m.kp, m.kd) for m in msg.motor_cmd[:29]} == {(0.0, 0.0, 0.0, 0.0, G1.safety.damping_kd)}
    assert {(m.q, m.dq, m.tau, m.kp, m.kd) for m in msg.motor_cmd[29:]} == {(0.0, 0.0, 0.0, 0.0, 0.0)}


class StandaloneSupervisor:
    """``python -m robot_rl.control.supervisor --robot g1`` on its own, as deploy starts it (one SCHED_FIFO level
    above the loop it guards); its stderr (events, the exit summary) collected on a thread."""

    def __init__(self, domain_id: int) -> None:
        cmd = [sys.executable, "-m", "robot_rl.control.supervisor", "--robot", "g1", "--domain-id", str(domain_id),
               "--fifo-priority", str(FIFO_PRIORITY + 1)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.err: list[str] = []
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()

    def wait_ready(self, timeout_s: float) -> bool:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        return bool(ready) and self.proc.stdout.readline().strip() == READY

    def stop(self) -> dict:
        """SIGTERM; the summary it prints as it exits (it stops sending, the robot keeps the last command)."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)
        time.sleep(0.1)  # the stderr thread reads the last lines
        found = re.search(r"supervisor exits in \w+: (\{.*\})", "".join(self.err))
        assert found, self.err
        return json.loads(found.group(1))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_supervisor_damps_the_g1_when_its_controller_goes_silent(start_bridge, bridge_status, domain) -> None:
    """A controller holds all 29 motors over unitree_hg, then its loop hangs (the process lives on; its
    re-publish thread stops after the command age limit). The supervisor, a process of its own, takes over
    within 2 × its stale limit, and the bridge applies its damping LowCmd and keeps receiving it: checked on
    the bridge's side (status: what it applied, nothing rejected for a wrong mode_machine or a bad CRC) and
    on the wire. The bridge and this controller run under SCHED_FIFO, the supervisor one level above, as
    in the A1's fault tests (tests/hardware/test_deploy_supervisor.py; normal priority where refused)."""
    missing = model_source_missing(G1)
    if missing:
        pytest.skip(f"model source not on this machine: {missing}")
    stale_s = SupervisorLimits.from_spec(G1).stale_s  # 100 ms: 5 policy periods
    period = G1.timing.policy_period_s
    with fifo_scheduling(FIFO_PRIORITY):
        start_bridge("--robot", "g1", "--mode-machine", str(MODE_MACHINE), duration_s=60)
        wire = _wire_reader(make_participant(domain, "lo"))
        robot = UnitreeDdsRobot(G1, domain_id=domain, connect_timeout_s=CONNECT_TIMEOUT_S,
                                max_command_age_s=command_age_limit(G1))
        supervisor = StandaloneSupervisor(domain)
        try:
            robot.connect()
            assert supervisor.wait_ready(CONNECT_TIMEOUT_S), supervisor.err
            hold = JointCommand.hold(robot.read().q, G1.kp, G1.kd)
            held = None
            for i in range(200):  # a loop holding every motor where it is until the bridge applies it (≥ 0.5 s)
                robot.write(hold)
                t_write = time.monotonic()
                time.sleep(period - 0.01)
                held = bridge_status.wait_for(lambda s: s.command_kp_max > 0, timeout_s=0.001)  # takes ≈ 10 ms
                if i >= 25 and held is not None and held.command_kp_max > 0:
                    break
            _frames(wire)  # the hold so far
            t_hang = t_write + period  # the loop stops writing (its robot object lives on): the first write missed
            assert held.command_damping == 0 and held.command_kp_max == G1.kp.max(), held
            assert held.commands_rejected == 0 and held.commands_bad_crc == 0, held
            status = bridge_status.wait_for(lambda s: s.command_damping == 1 and s.damping_since_monotonic_s > t_hang,
                                            timeout_s=5.0)
            assert status.command_damping == 1, (status, supervisor.err)
            later = bridge_status.wait_for(lambda s: s.last_command_monotonic_s > t_hang + 1.0, timeout_s=5.0)
            frames = _frames(wire)
            summary = supervisor.stop()
        finally:
            supervisor.kill()
            robot.close()
    latency = status.damping_since_monotonic_s - t_hang
    assert latency < 2 * stale_s, f"damped {1e3 * latency:.0f} ms after the controller went silent"
    assert "taking over with damping" in "".join(supervisor.err)
    assert summary["mode"] == "damping" and summary["takeovers"] == 1 and summary["damping_sent"] > 100, summary
    # The bridge's side: it applied the damping (kp 0, kd = damping_kd on every joint, mode_pr PR, the unused
    # slots off), rejected nothing (mode_machine right, values finite) and saw no bad CRC; it still does.
    for s in (status, later):
        assert s.command_damping == 1 and s.command_kp_max == 0.0
        assert s.command_kd_min == s.command_kd_max == G1.safety.damping_kd
        assert s.command_mode_pr == hg.MODE_PR and s.command_unused_enabled == 0
        assert s.commands_rejected == 0 and s.commands_bad_crc == 0
    assert later.damping_since_monotonic_s == status.damping_since_monotonic_s
    # On the wire: the controller's hold frames, then only the supervisor's damping, every frame the G1's.
    damping = [i for i, m in enumerate(frames) if not any(c.kp for c in m.motor_cmd)]
    assert len(damping) > 100 and damping == list(range(damping[0], len(frames))), len(frames)
    for msg in frames[damping[0]:]:
        _assert_g1_damping(msg, MODE_MACHINE)


def _until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_supervisor_echoes_the_robots_mode_machine_before_the_controllers(hg_a1_spec, domain) -> None:
    """unitree_hg drops a command whose mode_machine is not the robot's, so the takeover's damping carries
    the robot's own (its newest LowState with a good CRC), and the controller's last echo only while no
    state has come. Real DDS on loopback; the robot's side is played by raw endpoints (no model needed);
    the supervisor is stepped by hand, with made-up times."""
    from cyclonedds.pub import DataWriter
    from cyclonedds.topic import Topic

    spec = hg_a1_spec
    slot_map = MotorSlotMap.from_spec(spec)
    supervisor = Supervisor(spec, domain_id=domain, limits=SupervisorLimits(stale_s=0.1, handback_s=0.1))
    supervisor.open()
    participant = make_participant(domain, "lo")
    wire = _wire_reader(participant)  # also the "robot" the supervisor's writer must match
    states = DataWriter(participant, Topic(participant, TOPIC_LOWSTATE, hg.LowState_))
    controller = DataWriter(participant, Topic(participant, TOPIC_LOWCMD, hg.LowCmd_))
    try:
        assert supervisor.wait_matched(10.0)
        hold = slot_map.blank_command()
        slot_map.encode_command(JointCommand.hold(spec.default_positions, spec.kp, spec.kd), hold)
        hold.mode_machine = 3  # what the controller echoed
        controller.write(with_crc(hold))
        assert _until(lambda: supervisor.step(0.0) is not None)  # its command arrived: watching
        assert supervisor.mode_machine() == 3  # no LowState yet: the controller's echo
        state = hg.default_low_state()
        state.mode_machine = 5
        states.write(with_crc(state))
        assert _until(lambda: supervisor.mode_machine() == 5)  # the robot's own, once it reports
        state.mode_machine = 9
        corrupt = with_crc(state)
        corrupt.crc ^= 1
        states.write(corrupt)
        time.sleep(0.3)
        assert supervisor.mode_machine() == 5  # a state with a bad CRC is not the robot's word
        _frames(wire)  # the controller's frame
        assert "taking over" in supervisor.step(1.0)  # 1 s without a command: damping now
        sent: list = []
        assert _until(lambda: bool(sent.extend(_frames(wire)) or sent))
    finally:
        supervisor.close()
    assert len(sent) == 1  # one step, one damping frame
    msg = sent[0]
    assert crc_ok(msg) and (msg.mode_machine, msg.mode_pr) == (5, hg.MODE_PR)
    assert [m.mode for m in msg.motor_cmd] == [hg.MOTOR_ENABLE] * 12 + [hg.MOTOR_DISABLE] * 23
    assert {(m.kp, m.kd) for m in msg.motor_cmd[:12]} == {(0.0, spec.safety.damping_kd)}
