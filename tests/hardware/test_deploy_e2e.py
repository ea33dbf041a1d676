"""The deploy stack end to end over real DDS on loopback, in two processes, as on a robot.

The sim bridge (``python -m robot_rl.hardware.sim_bridge``, MuJoCo behind Unitree's rt/lowstate and
rt/lowcmd) runs as a subprocess; this process runs the runtime: UnitreeDdsRobot + DeployRuntime + run_loop
in real time. The bridge's status side channel (sim ground truth the runtime never sees) tells what the
robot really did.

Every run starts the way a robot is found: the bridge starts with passive motors and the A1 slumps to the
floor, then the runtime arms and ramps from that measured pose. The fault cases use a runtime without a
policy (ramp to the default pose and hold it), so they run whether or not a policy has been shipped.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from robot_rl.control.deploy_command import run_deployment
from robot_rl.control.deploy_loop import RunRecord, run_loop
from robot_rl.control.runtime import DeployRuntime
from robot_rl.control.state_machine import ramp_duration
from robot_rl.core.loop_timing import fifo_scheduling
from robot_rl.core.types import JointCommand, RobotState
from robot_rl.data.mcap_log_reader import read_log
from robot_rl.hardware.unitree_dds import UnitreeDdsRobot
from robot_rl.robots.spec import RobotSpec, load_robot

POLICY = Path(__file__).resolve().parents[2] / "policies" / "a1_flat" / "policy.onnx"
CONNECT_TIMEOUT_S = 30.0  # a fresh interpreter imports mujoco and cyclonedds and builds the model first
SETTLED_S = 1.0  # bridge sim time by which the passive robot lies on the floor
FIFO_PRIORITY = 10  # real-time priority of every thread of these tests, see realtime_priority()


class TickWatch:
    """A connected UnitreeDdsRobot that also remembers the tick of every state it hands the loop, so a
    test can tell on which loop tick the last fresh state arrived. Only observes; changes nothing."""

    def __init__(self, robot: UnitreeDdsRobot) -> None:
        self.robot, self.ticks = robot, []

    def read(self) -> RobotState:
        state = self.robot.read()
        self.ticks.append(state.tick)
        return state

    def write(self, command: JointCommand) -> JointCommand:
        return self.robot.write(command)

    def connect(self) -> None:
        self.robot.connect()

    def close(self) -> None:
        self.robot.close()


@pytest.fixture(autouse=True)
def realtime_priority() -> Iterator[None]:
    """This test's threads under SCHED_FIFO, as on a robot's computer: the control loop, the re-publish
    thread, the log writer, DDS's threads, and the bridge (threads and child processes inherit the policy
    of the thread that creates them). On a loaded machine a normal-priority thread that holds the GIL can
    be descheduled for tens of ms while the control loop waits for it, and the watchdogs rightly fault
    (FIFO for the loop's thread alone does not help then). Left at normal priority without the privilege."""
    with fifo_scheduling(FIFO_PRIORITY):  # refused (no CAP_SYS_NICE / RLIMIT_RTPRIO): normal priority
        yield


def _connect(spec: RobotSpec, domain: int) -> UnitreeDdsRobot:
    robot = UnitreeDdsRobot(spec, domain_id=domain, connect_timeout_s=CONNECT_TIMEOUT_S)
    robot.connect()
    return robot


def _run_realtime(runtime: DeployRuntime, robot, duration_s: float, arm: bool = True) -> RunRecord:
    return run_loop(runtime, robot, duration_s, realtime=True, arm=arm)


def _settled(bridge_status, since: float = 0.0, commanded: bool = False):
    """The first status of a bridge started after ``since`` (monotonic) with the robot lying on the floor:
    passive, or (``commanded``) damped by a command stream that was already running when it started."""
    status = bridge_status.wait_for(lambda s: s.tick_origin_monotonic_s > since and s.sim_time_s > SETTLED_S,
                                    timeout_s=CONNECT_TIMEOUT_S)
    assert status is not None and status.sim_time_s > SETTLED_S, "no status from the bridge"
    assert status.command_active == commanded and status.base_height_m < 0.15, status
    return status


def _lying_still(robot, timeout_s: float = 8.0, still_rad_s: float = 0.01) -> np.ndarray:
    """The measured pose once every joint moves slower than ``still_rad_s`` (a robot that has just fallen
    over under damping still slides for a while), or the last pose read after ``timeout_s``. At 0.05 rad/s the
    rear hips still crept 0.06–0.07 rad before the re-arm's first tick in two full-suite runs (session 19): wait
    for a robot that is still."""
    deadline = time.monotonic() + timeout_s
    state = robot.read()
    while np.max(np.abs(state.dq)) > still_rad_s and time.monotonic() < deadline:
        time.sleep(0.02)
        state = robot.read()
    return state.q.copy()


def _first(rec: RunRecord, mode: str) -> int:
    assert mode in rec.mode, (f"mode {mode!r} never reached; modes: {_runs(rec.mode)}; "
                              f"faults: {rec.diagnostics['safety']['last_fault']}")
    return rec.mode.index(mode)


def _runs(modes: list[str]) -> list[tuple[str, int]]:
    """Run-length summary of the mode per tick, for assertion messages."""
    out: list[tuple[str, int]] = []
    for m in modes:
        if out and out[-1][0] == m:
            out[-1] = (m, out[-1][1] + 1)
        else:
            out.append((m, 1))
    return out


def _assert_damped_on_stale_state(rec: RunRecord, ticks: list[int], spec: RobotSpec) -> None:
    """Damping on the first loop tick at which the state had not advanced for the spec's stale limit, and
    within stale_state_periods (+ one of slack) loop ticks of the tick that saw the last fresh state."""
    modes = rec.mode
    running = _first(rec, "running")
    damped = _first(rec, "damping")
    assert running < damped and set(modes[damped:]) == {"damping"}, _runs(modes)
    assert not any(text.startswith("[FAULT]") for t, text in rec.events if t < rec.t[damped]), rec.events[:5]
    ticks = np.asarray(ticks[: rec.ticks])
    fresh = np.flatnonzero(np.diff(ticks) > 0) + 1  # loop ticks that saw a new state
    last_fresh = int(fresh[fresh < damped].max())
    assert (ticks[last_fresh:damped + 1] == ticks[last_fresh]).all()
    period, limit = spec.timing.policy_period_s, spec.safety.stale_state_periods
    assert damped - last_fresh <= limit + 1, f"damped {damped - last_fresh} ticks after the last fresh state"
    # The watchdog's own threshold (limit − ½ period, in `now`): not earlier, and not a tick later.
    stale_after = (limit - 0.5) * period
    assert rec.t[damped] - rec.t[last_fresh] >= stale_after - 1e-9
    assert rec.t[damped - 1] - rec.t[last_fresh] < stale_after
    stale = [text for t, text in rec.events if abs(t - rec.t[damped]) < 1e-9]
    assert any("stale" in text and f"tick frozen at {ticks[last_fresh]}" in text for text in stale), stale


class StatusRecorder:
    """Collects the bridge's status (10 Hz) on a thread while the control loop runs in the test's thread."""

    def __init__(self, bridge_status) -> None:
        self.reader, self.statuses = bridge_status.reader, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.statuses.extend(s for s in self.reader.take(N=16) if s.sample_info.valid_data)

    def __enter__(self) -> StatusRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)

    def between(self, start: float, end: float) -> list:
        """Statuses measured in [start, end] (time.monotonic(): the bridge's tick origin + sim time)."""
        return [s for s in self.statuses if start <= s.tick_origin_monotonic_s + s.sim_time_s <= end]


def test_shipped_a1_policy_walks_forward_over_dds_and_logs_every_tick(start_bridge, bridge_status, domain,
                                                                       tmp_path) -> None:
    if not POLICY.exists():
        pytest.skip(f"no shipped A1 policy at {POLICY} (it comes from `robot-rl export`; see policies/)")
    from mcap.reader import make_reader

    from robot_rl.hardware.sim_bridge import SimBridgeStatus_

    assert {"base_x_m", "base_y_m"} <= set(SimBridgeStatus_.__annotations__), \
        "the sim bridge's status side channel must carry the base position (base_x_m, base_y_m)"
    runtime = DeployRuntime.load("a1", POLICY)  # contract checked against the spec and the task
    spec = runtime.spec
    start_bridge()
    robot = _connect(spec, domain)
    walk_s, log_path = 6.0, tmp_path / "walk.mcap"
    try:
        _settled(bridge_status)
        ramp_s = ramp_duration(spec, robot.read().q)
        with StatusRecorder(bridge_status) as sim:
            result = run_deployment(runtime, robot, ramp_s + walk_s, command=(0.5, 0.0, 0.0), log_path=log_path)
    finally:
        robot.close()

    rec = result.record
    assert not result.interrupted and not result.faulted, (result.diagnostics["safety"]["last_fault"],
                                                           result.mode_changes)
    running = _first(rec, "running")
    assert set(rec.mode[:running]) == {"ramp"} and set(rec.mode[running:-1]) == {"running"}, _runs(rec.mode)
    assert rec.mode[-1] == "damping" and set(result.damping.mode) == {"damping"}
    np.testing.assert_allclose(rec.command[running:], np.tile([0.5, 0.0, 0.0], (rec.ticks - running, 1)))

    # The MCAP log reads back with the mcap library: one record per tick on every per-tick channel.
    ticks = rec.ticks + result.damping.ticks
    with log_path.open("rb") as stream:
        reader = make_reader(stream)
        summary = reader.get_summary()
        counts = {summary.channels[cid].topic: n for cid, n in summary.statistics.channel_message_counts.items()}
        meta = {m.name: dict(m.metadata) for m in reader.iter_metadata()}
        deadlines = [json.loads(m.data)["t"] for _, _, m in reader.iter_messages(topics=["/loop/timing"])]
    for topic in ("/robot/state", "/robot/command_proposed", "/robot/command_sent", "/loop/timing"):
        assert counts.get(topic) == ticks, (topic, counts, ticks)
    assert counts.get("/safety/events", 0) == len(rec.events) + len(result.damping.events)
    assert meta["robot_rl.deploy_log"]["dropped_records"] == "0"
    assert result.log_counts["dropped"] == 0 and result.log_counts["written"] == sum(counts.values())

    # What the robot did while the policy ran, from the sim's ground truth (the log's tick deadlines and the
    # bridge's tick origin are both time.monotonic()).
    walking = sim.between(deadlines[running], deadlines[rec.ticks - 2])
    assert len(walking) > 10 * walk_s * 0.8, f"{len(walking)} bridge statuses during {walk_s} s of walking"
    lowest = min(s.base_height_m for s in walking)
    assert lowest > 0.6 * spec.sim_model.base_height, f"base down to {lowest:.3f} m while walking: fallen"
    x, y = rec.base_quat[running:, 1], rec.base_quat[running:, 2]
    tilt = np.arccos(np.clip(1 - 2 * (x * x + y * y), -1.0, 1.0))  # angle between body z and world z (IMU)
    assert tilt.max() < 0.5, f"tilted {tilt.max():.2f} rad while walking"
    # Forward: along the heading the base had when the policy took over, at least a third of 0.5 m/s.
    w0, x0, y0, z0 = rec.base_quat[running]
    heading = np.array([1 - 2 * (y0 * y0 + z0 * z0), 2 * (w0 * z0 + x0 * y0)])
    moved = np.array([walking[-1].base_x_m - walking[0].base_x_m, walking[-1].base_y_m - walking[0].base_y_m])
    forward = float(moved @ heading / np.linalg.norm(heading))
    assert forward > 0.5 * walk_s / 3, f"moved {forward:.2f} m forward (of {0.5 * walk_s:.1f} m commanded)"


def test_bridge_killed_mid_run_damps_within_the_stale_limit(start_bridge, bridge_status, domain) -> None:
    spec = load_robot("a1")
    kill_at = SETTLED_S + spec.safety.ramp_duration_s + 1.5  # ≈ 1 s into holding the pose, with the start-up margin
    bridge = start_bridge("--kill-at-s", f"{kill_at:g}")
    robot = TickWatch(_connect(spec, domain))
    try:
        _settled(bridge_status)
        rec = _run_realtime(DeployRuntime(spec), robot, kill_at + 0.5)
    finally:
        robot.close()
    returncode, out, _ = bridge.wait(timeout=10)
    assert returncode == 0 and re.search(r"sim bridge killed at t=", out), out
    _assert_damped_on_stale_state(rec, robot.ticks, spec)
    assert rec.diagnostics["fault_latched"] and rec.diagnostics["safety"]["faults"] == {"stale_state": 1}


def test_frozen_state_stream_damps_within_the_stale_limit(start_bridge, bridge_status, domain) -> None:
    spec = load_robot("a1")
    # Bridge sim time: the deploy starts once a bridge status shows the robot settled, which can come late by a
    # status period plus the deploy's start-up (policy load, arming), so the freeze leaves it 1.5 s to be running.
    freeze_at = SETTLED_S + spec.safety.ramp_duration_s + 1.5
    start_bridge("--freeze-at-s", f"{freeze_at:g}")
    robot = TickWatch(_connect(spec, domain))
    try:
        _settled(bridge_status)
        rec = _run_realtime(DeployRuntime(spec), robot, freeze_at)
        # Messages still arrive, only their tick (and content) is stuck.
        after = [robot.robot.wait_for_state(1.0) for _ in range(5)]
        status = bridge_status.wait_for(lambda s: s.frozen == 1, timeout_s=2.0)
    finally:
        robot.close()
    assert status.frozen == 1 and status.commands_bad_crc == 0
    assert all(s is not None and s.tick == robot.ticks[rec.ticks - 1] for s in after)
    _assert_damped_on_stale_state(rec, robot.ticks, spec)


def test_commands_with_a_corrupted_crc_are_rejected_and_move_nothing(start_bridge, bridge_status, domain) -> None:
    """Every LowCmd is corrupted on the "wire" before the bridge's CRC check (--corrupt-command 1): the
    runtime ramps and holds as usual, the motors never leave zero torque."""
    spec = load_robot("a1")
    start_bridge("--corrupt-command", "1.0")
    robot = _connect(spec, domain)
    try:
        settled = _settled(bridge_status)
        q0 = robot.read().q.copy()
        rec = _run_realtime(DeployRuntime(spec), robot, spec.safety.ramp_duration_s + 0.5)
        q1 = robot.read().q.copy()
        status = bridge_status.wait_for(lambda s: s.sim_time_s > settled.sim_time_s + 2.0, timeout_s=5.0)
    finally:
        robot.close()
    assert rec.mode[-1] == "running" and not rec.diagnostics["fault_latched"], (_runs(rec.mode), rec.diagnostics)
    assert np.abs(rec.q_target_sent[-1] - q0).max() > 0.5, "the runtime should have asked for a stand-up"
    assert status.commands_received > rec.ticks  # the 500 Hz stream reached the bridge...
    assert status.commands_bad_crc == status.commands_received  # ...and every frame was rejected
    assert status.commands_applied == 0 and status.command_active == 0
    assert np.abs(q1 - q0).max() < 0.05, f"joints moved {np.abs(q1 - q0).max():.3f} rad on rejected frames"
    assert abs(status.base_height_m - settled.base_height_m) < 0.01


def test_restarted_robot_needs_reset_and_arm_and_ramps_again(start_bridge, bridge_status, domain) -> None:
    spec = load_robot("a1")
    kill_at = SETTLED_S + spec.safety.ramp_duration_s + 0.5
    first = start_bridge("--kill-at-s", f"{kill_at:g}")
    runtime = DeployRuntime(spec)
    robot = _connect(spec, domain)  # one connection throughout: the robot restarts, the runtime does not
    try:
        _settled(bridge_status)
        rec = _run_realtime(runtime, robot, kill_at + 0.5)
        assert rec.mode[-1] == "damping" and runtime.chain.faulted, _runs(rec.mode)
        assert first.wait(timeout=10)[0] == 0

        restarted_at = time.monotonic()
        start_bridge()  # the robot comes back: same domain, its tick counting from 0 again
        _settled(bridge_status, since=restarted_at, commanded=True)  # it executes the runtime's damping stream
        assert robot.wait_for_state(5.0) is not None

        # Fresh states alone change nothing, and ARM is refused while the fault is latched.
        held = _run_realtime(runtime, robot, 0.3, arm=True)
        assert set(held.mode) == {"damping"}
        assert any("fault is latched" in text for text in runtime.refused), runtime.refused

        runtime.reset_fault()
        q_measured = _lying_still(robot)
        rearmed = _run_realtime(runtime, robot, spec.safety.ramp_duration_s + 0.5, arm=True)
    finally:
        robot.close()
    modes = rearmed.mode
    running = _first(rearmed, "running")
    assert set(modes[:running]) == {"ramp"} and set(modes[running:]) == {"running"}, _runs(modes)
    assert not rearmed.diagnostics["fault_latched"]
    # The ramp starts at the pose measured on its first tick (the robot lies still, so ≈ the one before),
    # sent as is except for joints at a hard stop, which the chain's position limits hold at or just inside
    # it (and report).
    np.testing.assert_array_equal(rearmed.q_target_proposed[0], rearmed.q[0])
    first_events = " ".join(text for t, text in rearmed.events if t == rearmed.t[0])
    for i in np.flatnonzero(rearmed.q_target_sent[0] != rearmed.q[0]):
        name = spec.joint_names[i]
        assert name in first_events, f"{name}: sent {rearmed.q_target_sent[0, i]}, measured {rearmed.q[0, i]}"
        assert abs(rearmed.q_target_sent[0, i] - rearmed.q[0, i]) < 0.01
    # Not the pose from before the restart (the standing default), but the one the robot lies in now; a slow
    # creep under damping between the two reads stays well inside this.
    np.testing.assert_allclose(rearmed.q[0], q_measured, atol=0.05)
    np.testing.assert_allclose(rearmed.q_target_sent[-1], spec.default_positions, atol=1e-12)


def test_deploy_command_over_dds_stops_on_ctrl_c_into_damping(start_bridge, bridge_status, domain, tmp_path) -> None:
    """``robot-rl deploy`` as a person runs it, interrupted with Ctrl-C (SIGINT) mid-run."""
    if not POLICY.exists():
        pytest.skip(f"no shipped A1 policy at {POLICY} (it comes from `robot-rl export`; see policies/)")
    spec = load_robot("a1")
    start_bridge()
    _settled(bridge_status)
    log_path = tmp_path / "deploy.mcap"
    deploy = subprocess.Popen(
        [sys.executable, "-m", "robot_rl.cli", "deploy", "--interface", "unitree-dds", "--domain-id", str(domain),
         "--policy", str(POLICY), "--duration-s", "60", "--command", "0.3", "0", "0", "--log", str(log_path),
         "--fifo-priority", str(FIFO_PRIORITY)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Interrupt once the runtime commands the robot: the bridge's applied-command counter moves.
        status = bridge_status.wait_for(lambda s: s.commands_applied > 50, timeout_s=CONNECT_TIMEOUT_S)
        assert status is not None and status.commands_applied > 50, "deploy never commanded the robot"
        deploy.send_signal(signal.SIGINT)
        out, err = deploy.communicate(timeout=20)
    finally:
        if deploy.poll() is None:
            deploy.kill()
            deploy.communicate()
    assert deploy.returncode == 130, (out, err)  # 128 + SIGINT, as a shell reports it
    assert "SIGINT: stopping → damping" in err and "interrupted by the operator" in out, (out, err)
    assert re.search(r"ended in damping \(\d+ damping ticks sent\)", out), out
    sent = [r.data for r in read_log(log_path, topics=("/robot/command_sent",))]
    assert len(sent) > 25
    damping = JointCommand.damping(spec.num_joints, spec.safety.damping_kd)
    for record in sent[-20:]:  # the last commands before close, i.e. what the motors keep executing
        np.testing.assert_array_equal(record["kp"], damping.kp)
        np.testing.assert_array_equal(record["kd"], damping.kd)
