"""Fault injection: the safety chain and the controller state machine, driven tick by tick with bad data,
bad timing and bad commands, on limits loaded from the real a1 and panda specs. Every test asserts the
safe behaviour: damping within one period, limits held, faults latched until an explicit reset.

Two stand-ins, both declared here because the real ones are not what is under test:
- ``LoopStandIn`` stands in for the runtime's control loop (robot_rl.control's controller): per tick it
  applies operator events to the state machine, takes the command of the current mode (the policy's while
  RUNNING), passes it through the safety chain and feeds a chain fault back as FAULT.
- ``TrackingRobot`` stands in for a robot whose joints reach each position target by the next tick (the
  chain only ever sees states, so where they come from does not matter here; velocities are the finite
  difference, so the velocity-aware limit sees real motion).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import pytest

from robot_rl.control.state_machine import (
    MIN_JERK_PEAK_SPEED,
    ControllerEvent,
    ControllerMode,
    ControllerState,
    IllegalTransition,
    apply_event,
    command_for,
    ramp_done,
    ramp_duration,
)
from robot_rl.core.types import JointCommand, RobotState
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.safety import ActionClip, SafetyChain, SafetyOutput, missed_deadlines
from robot_rl.safety.filters import FINITE, OVERRUN, RATE, STALE, TILT, estimated_torque

ROBOTS = ["a1", "panda"]
ACTION_SCALE = 0.25  # a policy contract's action scale (legged_gym's); the offset is the default pose
ACTION_CLIP = 100.0


@functools.cache
def spec_of(name: str) -> RobotSpec:
    return load_robot(name)


def action_to_command(spec: RobotSpec, action: np.ndarray) -> JointCommand:
    """Stands in for the policy contract's action mapping: q* = default + scale·a, with the spec's gains."""
    return JointCommand.hold(spec.default_positions + ACTION_SCALE * action, spec.kp, spec.kd)


def damping_of(spec: RobotSpec) -> JointCommand:
    return JointCommand.damping(spec.num_joints, spec.safety.damping_kd)


def is_damping(spec: RobotSpec, cmd: JointCommand) -> bool:
    want = damping_of(spec)
    return all(np.array_equal(getattr(cmd, f), getattr(want, f)) for f in ("q_target", "kp", "kd", "tau_ff"))


class TrackingRobot:
    """Stand-in robot (see the module docstring): reaches every kp > 0 target by the next tick."""

    def __init__(self, spec: RobotSpec, q: np.ndarray):
        n = spec.num_joints
        self.period = spec.timing.policy_period_s
        self.state = RobotState(0.0, 1, np.array(q, dtype=np.float64), np.zeros(n), np.zeros(n))
        self.frozen = False

    def read(self, now: float) -> RobotState:
        s = self.state
        # A frozen sensor stream: the reader still stamps each message with a fresh time.
        return RobotState(now, s.tick, s.q.copy(), s.dq.copy(), s.tau.copy(), s.base_quat.copy(), s.base_ang_vel.copy())

    def write(self, cmd: JointCommand) -> None:
        if self.frozen:
            return
        new_q = np.where(cmd.kp > 0, cmd.q_target, self.state.q)
        self.state.dq = (new_q - self.state.q) / self.period
        self.state.q = new_q
        self.state.tick += 1


class LoopStandIn:
    """Stand-in for the runtime's control loop (see the module docstring)."""

    def __init__(self, spec: RobotSpec, robot: TrackingRobot, policy: Callable[[RobotState, int], np.ndarray]):
        self.spec, self.robot, self.policy = spec, robot, policy
        self.chain = SafetyChain.from_spec(spec, ActionClip(ACTION_CLIP, ACTION_SCALE, spec.default_positions))
        self.cs = ControllerState()
        self.k = 0
        self.period = spec.timing.policy_period_s
        self.sent: list[tuple[ControllerMode, JointCommand, SafetyOutput]] = []

    def tick(self, events: tuple[ControllerEvent, ...] = (), missed: int = 0,
             state_hook: Callable[[RobotState], None] | None = None, jitter_s: float = 0.0,
             stall: int = 0) -> SafetyOutput:
        """One tick; ``stall``: deadlines that pass between its step and its write (the next tick then
        counts them as missed, as a real loop's next wait does)."""
        self.k += 1 + missed  # skipped deadlines are skipped, never made up
        now = self.k * self.period + jitter_s
        state = self.robot.read(now)
        if state_hook is not None:
            state_hook(state)
        for event in events:
            self.cs = apply_event(self.cs, event, now, spec=self.spec, measured_q=state.q,
                                  fault_active=self.chain.faulted)
        mode = self.cs.mode
        action = None
        if mode is ControllerMode.RUNNING:
            action = self.policy(state, self.k)
            proposed = action_to_command(self.spec, action)
        else:
            proposed = command_for(self.cs, self.spec, now)
        out = self.chain.step(state, proposed, now, action=action, missed_deadlines=missed)
        late = self.chain.check_late(stall) if stall else None
        if late is not None:
            out = late
        self.k += stall
        if out.faulted and mode is not ControllerMode.DAMPING:
            self.cs = apply_event(self.cs, ControllerEvent.FAULT, now, spec=self.spec)
        elif ramp_done(self.cs, now):
            self.cs = apply_event(self.cs, ControllerEvent.RAMP_DONE, now, spec=self.spec)
        self.robot.write(out.command)
        self.sent.append((mode, proposed, out))
        return out

    def run_until_running(self) -> int:
        """ARM, then tick through the ramp. Returns the number of ramp ticks."""
        self.tick((ControllerEvent.ARM,))
        ticks = 1
        while self.cs.mode is ControllerMode.RAMP:
            self.tick()
            ticks += 1
        assert self.cs.mode is ControllerMode.RUNNING
        return ticks


def gentle_policy(spec: RobotSpec) -> Callable[[RobotState, int], np.ndarray]:
    """A slow sinusoid from the default pose (where the ramp ends), well inside every limit."""
    first: list[int] = []
    gain = np.linspace(0.5, 1.0, spec.num_joints)

    def policy(state: RobotState, k: int) -> np.ndarray:
        first.append(k)
        return 0.1 * gain * np.sin(0.05 * (k - first[0]))

    return policy


def running_loop(name: str, policy=None) -> LoopStandIn:
    spec = spec_of(name)
    loop = LoopStandIn(spec, TrackingRobot(spec, spec.default_positions), policy or gentle_policy(spec))
    loop.run_until_running()
    return loop


# --- non-finite data ------------------------------------------------------------------------------------

STATE_FIELDS = ("q", "dq", "base_quat", "base_ang_vel")
COMMAND_FIELDS = ("q_target", "dq_target", "kp", "kd", "tau_ff")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("name", ROBOTS)
def test_non_finite_at_every_index_faults_into_damping(name, bad):
    spec = spec_of(name)
    n = spec.num_joints
    sizes = {"q": n, "dq": n, "base_quat": 4, "base_ang_vel": 3}
    cases = [("state", f, i) for f in STATE_FIELDS for i in range(sizes[f])]
    cases += [("command", f, i) for f in COMMAND_FIELDS for i in range(n)]
    cases += [("action", "action", i) for i in range(n)]
    for where, field, i in cases:
        chain = SafetyChain.from_spec(spec, ActionClip(ACTION_CLIP, ACTION_SCALE, spec.default_positions))
        q = spec.default_positions.copy()
        state = RobotState(0.0, 1, q.copy(), np.zeros(n), np.zeros(n))
        action = np.zeros(n)
        cmd = action_to_command(spec, action)
        assert not chain.step(state, cmd, 0.0, action=action).faulted
        state = RobotState(0.02, 2, q.copy(), np.zeros(n), np.zeros(n))
        cmd = action_to_command(spec, action)
        target = {"state": state, "command": cmd}.get(where)
        if where == "action":
            action = action.copy()
            action[i] = bad
        else:
            getattr(target, field)[i] = bad
        out = chain.step(state, cmd, 0.02, action=action)
        label = f"{where}.{field}[{i}]" if where != "action" else f"action[{i}]"
        assert out.faulted, label
        assert is_damping(spec, out.command), label
        assert [e.filter_name for e in out.events] == [FINITE] and label in out.events[0].detail
        # Latched: a clean next tick is still damping.
        clean = RobotState(0.04, 3, q.copy(), np.zeros(n), np.zeros(n))
        out = chain.step(clean, action_to_command(spec, np.zeros(n)), 0.04, action=np.zeros(n))
        assert out.faulted and is_damping(spec, out.command), label


@pytest.mark.parametrize("name", ROBOTS)
def test_a_nan_action_while_running_puts_the_controller_in_damping(name):
    spec = spec_of(name)
    loop = running_loop(name, policy=lambda s, k: np.full(spec.num_joints, np.nan))
    loop.tick()  # the policy's first tick
    assert loop.cs.mode is ControllerMode.DAMPING
    mode, _, out = loop.sent[-1]
    assert mode is ControllerMode.RUNNING and out.faulted and is_damping(spec, out.command)


# --- out-of-range and abrupt commands -------------------------------------------------------------------


def assert_within_limits(spec: RobotSpec, chain: SafetyChain, state: RobotState, sent: JointCommand,
                         previous: np.ndarray) -> None:
    lim = chain.limits
    assert np.all(np.isfinite(sent.q_target))
    assert np.all(sent.q_target >= lim.soft_lower) and np.all(sent.q_target <= lim.soft_upper)
    assert np.all(np.abs(sent.q_target - previous) <= lim.max_step * (1 + 1e-12))
    tau = estimated_torque(sent.q_target, state, sent)
    spring = sent.kp * (sent.q_target - state.q)
    over = np.abs(tau) > lim.torque_max * (1 + 1e-9)
    # Over the limit only where damping alone is (the spring never adds to an excess).
    assert np.all(~over | (spring * tau <= 0)), (tau, spring)
    if spec.name == "a1":  # kd·speed stays far under the A1's effort limit: strictly within
        assert not over.any()


@pytest.mark.parametrize("name", ROBOTS)
def test_out_of_range_actions_are_clipped_then_limited(name):
    spec = spec_of(name)
    rng = np.random.default_rng(7)
    loop = running_loop(name, policy=lambda s, k: rng.choice([-1e3, 1e3], spec.num_joints))
    previous = loop.sent[-1][2].command.q_target
    for _ in range(100):
        state = loop.robot.read(0.0)
        out = loop.tick()
        assert not out.faulted
        assert {e.filter_name for e in out.events} >= {"action_clip", RATE}
        assert_within_limits(spec, loop.chain, state, out.command, previous)
        previous = out.command.q_target
    per_joint = loop.chain.report.summary()["per_joint"]["action_clip"]
    assert set(per_joint) == set(spec.joint_names) and min(per_joint.values()) == 100


@pytest.mark.parametrize("name", ROBOTS)
def test_a_step_change_in_the_target_is_rate_limited(name):
    spec = spec_of(name)
    lim = SafetyChain.from_spec(spec).limits
    # Step every joint toward its farther soft limit, by half the way there (at most 1 rad).
    up = lim.soft_upper - spec.default_positions > spec.default_positions - lim.soft_lower
    room = np.where(up, lim.soft_upper - spec.default_positions, spec.default_positions - lim.soft_lower)
    goal = spec.default_positions + np.where(up, 1.0, -1.0) * np.minimum(room / 2, 1.0)
    loop = running_loop(name, policy=lambda s, k: (goal - spec.default_positions) / ACTION_SCALE)
    start = loop.sent[-1][2].command.q_target
    steps_needed = np.ceil(np.abs(goal - start) / lim.max_step - 1e-9).astype(int)
    targets = [start]
    for _ in range(steps_needed.max() + 2):
        targets.append(loop.tick().command.q_target)
    targets = np.array(targets)
    for j in range(spec.num_joints):
        moves = np.abs(np.diff(targets[:, j]))
        k = steps_needed[j]
        np.testing.assert_allclose(moves[: k - 1], lim.max_step[j], rtol=1e-9)  # full steps, then the rest
        assert targets[k, j] == pytest.approx(goal[j], abs=1e-12) and np.all(moves[k:] < 1e-12)


@pytest.mark.parametrize("name", ROBOTS)
def test_a_joint_driven_toward_its_limit_at_top_speed(name):
    """Policy slams every joint toward its limit while the joint already moves there at top speed (or,
    for the panda, the fastest speed at which damping alone stays under its effort limit)."""
    spec = spec_of(name)
    n, dt = spec.num_joints, spec.timing.policy_period_s
    chain = SafetyChain.from_spec(spec, ActionClip(ACTION_CLIP, ACTION_SCALE, spec.default_positions))
    lim = chain.limits
    speed = np.minimum(spec.velocity_limits, 0.95 * lim.torque_max / spec.kd)
    for direction in (1.0, -1.0):
        limit = lim.soft_upper if direction > 0 else lim.soft_lower
        hard = spec.position_upper if direction > 0 else spec.position_lower
        for frac in np.linspace(0.0, 1.0, 41):  # from the default pose to the hard limit
            q = spec.default_positions + frac * (hard - spec.default_positions)
            state = RobotState(0.0, 1, q, direction * speed, np.zeros(n))
            chain.reset()
            out = chain.step(state, action_to_command(spec, np.full(n, direction * 1e3)), 0.0,
                             action=np.full(n, direction * 1e3))
            sent = out.command.q_target
            assert not out.faulted and np.all(np.isfinite(sent))
            inside = (q <= lim.soft_upper) & (q >= lim.soft_lower)
            # Inside the soft limit, or no further out than a joint already past it.
            assert np.all(direction * (sent - np.where(inside, limit, q)) <= 1e-12)
            tau = estimated_torque(sent, state, out.command)
            assert np.all(np.abs(tau) <= lim.torque_max * (1 + 1e-9)), (frac, tau)
            # The lookahead holds the target a period's travel short of that bound, unless the torque
            # limit had to give some of it back (then the torque is exactly at the limit).
            shrunk = np.where(inside, limit, q) - direction * speed * dt
            at_torque_limit = np.isclose(np.abs(tau), lim.torque_max, rtol=1e-9)
            assert np.all((direction * (sent - shrunk) <= 1e-12) | at_torque_limit), frac


def test_panda_at_top_speed_damping_exceeds_effort_and_the_target_still_brakes():
    """The panda spec's kd (50 on joints 1–4) times its top speed is more than the 87 N·m effort limit, so
    "torque within effort" is impossible there; the chain must still keep the target inside the soft
    limit and never let the spring push along the motion."""
    spec = spec_of("panda")
    chain = SafetyChain.from_spec(spec)
    lim = chain.limits
    q = lim.soft_upper - 0.02
    state = RobotState(0.0, 1, q, spec.velocity_limits.copy(), np.zeros(7))
    out = chain.step(state, JointCommand.hold(spec.position_upper + 1.0, spec.kp, spec.kd), 0.0)
    sent = out.command.q_target
    assert np.all(sent <= lim.soft_upper) and np.all(sent <= q)  # spring term ≤ 0: braking, not pushing


# --- timing faults --------------------------------------------------------------------------------------


@pytest.mark.parametrize("jitter", [0.0, 0.2, -0.2])
@pytest.mark.parametrize("name", ROBOTS)
def test_frozen_state_faults_after_exactly_n_periods(name, jitter):
    """The tick stops advancing while messages keep arriving with fresh timestamps. ``now`` wobbles by
    ±jitter periods on alternate ticks: the fault still comes on exactly the N-th tick after the last
    new state, never on the (N−1)-th."""
    spec = spec_of(name)
    period, n_stale = spec.timing.policy_period_s, spec.safety.stale_state_periods
    loop = running_loop(name)
    loop.robot.frozen = True  # the state written by the last tick is the last new one
    timestamps = []
    for j in range(n_stale + 3):  # j = periods since the last new state
        out = loop.tick(jitter_s=(jitter if j % 2 else -jitter) * period,
                        state_hook=lambda s: timestamps.append(s.timestamp))
        if j < n_stale:
            assert not out.faulted, f"faulted after {j} stale periods, limit {n_stale}"
        elif j == n_stale:
            assert out.faulted and [e.filter_name for e in out.events] == [STALE]
            assert f"limit {n_stale} periods" in out.events[0].detail
            assert is_damping(spec, out.command) and loop.cs.mode is ControllerMode.DAMPING
        else:
            assert out.faulted and is_damping(spec, out.command)
    assert np.all(np.diff(timestamps) > 0)  # fresh timestamps did not hide the frozen tick


@pytest.mark.parametrize("name", ROBOTS)
def test_latency_spikes_are_counted_and_fault_only_past_the_consecutive_limit(name):
    spec = spec_of(name)
    period = spec.timing.policy_period_s
    limit = spec.safety.max_consecutive_overruns
    assert period == 0.02 and limit == 3  # the figures this scenario is written for
    loop = running_loop(name)
    # Isolated 25 / 50 ms spikes between on-time ticks: counted, never a fault.
    for latency in (0.025, 0.005, 0.050, 0.010, 0.025, 0.050, 0.019):
        missed = missed_deadlines(latency, period)
        out = loop.tick(missed=missed)
        assert not out.faulted
        assert [e.filter_name for e in out.events] == ([OVERRUN] if missed else [])
    summary = loop.chain.report.summary()
    assert summary["missed_deadlines"] == 1 + 2 + 1 + 2 and summary["interventions"][OVERRUN] == 4
    # 25 ms spikes back to back: the 4th in a row is the first past the limit of 3.
    for i in range(1, limit + 2):
        out = loop.tick(missed=missed_deadlines(0.025, period))
        assert out.faulted == (i > limit)
    assert is_damping(spec, out.command) and loop.cs.mode is ControllerMode.DAMPING


@pytest.mark.parametrize(("latency", "faults"), [(0.025, False), (0.050, False), (0.100, True)])
def test_a_single_spike_faults_only_when_it_spans_more_deadlines_than_allowed(latency, faults):
    """One 100 ms stall at 20 ms is 4 deadlines without a new command — more than 3 in a row."""
    loop = running_loop("a1")
    out = loop.tick(missed=missed_deadlines(latency, 0.02))
    assert out.faulted is faults
    assert loop.chain.report.missed_deadlines == {0.025: 1, 0.050: 2, 0.100: 4}[latency]


@pytest.mark.parametrize("name", ROBOTS)
def test_a_tick_stalled_past_the_limit_before_its_write_sends_damping_not_its_command(name):
    """SIGSTOP between a tick's read and its write, SIGCONT 0.5 s later (25 deadlines): the command that tick
    computed is never sent; damping is, and the overrun fault is latched on that very tick."""
    spec = spec_of(name)
    loop = running_loop(name)
    limit = spec.safety.max_consecutive_overruns
    for stall in range(1, limit + 1):  # shorter stalls, each followed by an on-time tick: sent as computed
        out = loop.tick(stall=stall)
        assert not out.faulted and not is_damping(spec, out.command)  # the policy's command went out
        assert not loop.tick(missed=stall).faulted  # the next tick counts those deadlines: an overrun event
        loop.tick()
    q_before = loop.robot.state.q.copy()
    out = loop.tick(stall=25)
    mode, proposed, _ = loop.sent[-1]
    assert mode is ControllerMode.RUNNING and not is_damping(spec, proposed)  # the policy did compute one
    assert out.faulted and is_damping(spec, out.command) and loop.cs.mode is ControllerMode.DAMPING
    assert [(e.filter_name, e.fault) for e in out.events] == [(OVERRUN, True)]
    np.testing.assert_array_equal(loop.robot.state.q, q_before)  # no position target reached the robot
    nxt = loop.tick(missed=25)
    assert is_damping(spec, nxt.command) and nxt.events == ()
    assert loop.chain.report.summary()["faults"] == {OVERRUN: 1}


def test_a_stall_adds_to_the_deadlines_already_missed_in_a_row():
    """Two deadlines missed before the tick, two more during it: four in a row, past the A1's three."""
    spec = spec_of("a1")
    loop = running_loop("a1")
    out = loop.tick(missed=2, stall=1)
    assert not out.faulted  # 3 in a row: at the limit, not past it
    loop.tick()  # on time: the count starts over
    out = loop.tick(missed=2, stall=2)
    assert out.faulted and is_damping(spec, out.command)
    assert "4 policy deadlines missed in a row (limit 3)" in out.events[-1].detail


# --- operator stops, tilt, latching, start-up -----------------------------------------------------------


@pytest.mark.parametrize("event", [ControllerEvent.ESTOP, ControllerEvent.STOP])
@pytest.mark.parametrize("name", ROBOTS)
def test_estop_during_motion_damps_on_the_very_next_command(name, event):
    spec = spec_of(name)
    loop = running_loop(name, policy=lambda s, k: 1.5 * np.sin(0.5 * k + np.arange(spec.num_joints)))
    for _ in range(10):
        assert not is_damping(spec, loop.tick().command)
    assert np.abs(loop.robot.state.dq).max() > 0.5  # it is moving
    out = loop.tick((event,))
    assert is_damping(spec, out.command) and loop.cs.mode is ControllerMode.DAMPING
    assert not out.faulted  # an operator stop is not a safety fault: re-arming needs no chain reset
    for _ in range(5):
        assert is_damping(spec, loop.tick().command)


@pytest.mark.parametrize("name", ROBOTS)
def test_tilt_beyond_the_limit_faults(name):
    spec = spec_of(name)
    loop = running_loop(name)
    axis = np.array([0.6, 0.8, 0.0])  # roll and pitch together
    faulted_at = None
    for step in range(1, 30):
        tilt = 0.05 * step + 0.013  # never exactly on the limit
        quat = np.array([math.cos(tilt / 2), *(math.sin(tilt / 2) * axis)])
        out = loop.tick(state_hook=lambda s, qt=quat: setattr(s, "base_quat", qt))
        if out.faulted and faulted_at is None:
            faulted_at = tilt
            assert [e.filter_name for e in out.events] == [TILT] and is_damping(spec, out.command)
    if spec.safety.max_tilt_rad is None:
        assert faulted_at is None  # an arm has no base tilt limit
    else:
        assert faulted_at - 0.05 < spec.safety.max_tilt_rad < faulted_at
        assert loop.cs.mode is ControllerMode.DAMPING


@pytest.mark.parametrize("name", ROBOTS)
def test_a_fault_latches_until_reset_and_rearming_goes_through_the_ramp(name):
    spec = spec_of(name)
    loop = running_loop(name, policy=lambda s, k: 0.8 * np.sin(0.4 * k + np.arange(spec.num_joints)))
    for _ in range(5):
        loop.tick()

    def corrupt(s: RobotState) -> None:
        s.dq[0] = np.nan

    assert loop.tick(state_hook=corrupt).faulted
    for _ in range(10):
        assert is_damping(spec, loop.tick().command)
    with pytest.raises(IllegalTransition, match="fault is latched"):
        loop.tick((ControllerEvent.ARM,))
    # Damping let the joints settle somewhere new; the re-arm ramp starts from there.
    toward_middle = np.sign(spec.position_upper + spec.position_lower - 2 * spec.default_positions)
    sagged = spec.default_positions + 0.3 * toward_middle
    loop.robot.state.q = sagged
    loop.chain.reset()
    out = loop.tick((ControllerEvent.ARM,))
    assert loop.sent[-1][0] is ControllerMode.RAMP and not out.faulted
    assert np.array_equal(out.command.q_target, sagged)
    while loop.cs.mode is ControllerMode.RAMP:
        out = loop.tick()
    assert np.array_equal(out.command.q_target, spec.default_positions)
    assert loop.cs.mode is ControllerMode.RUNNING


@pytest.mark.parametrize("name", ROBOTS)
def test_start_up_from_a_far_pose_ramps_smoothly_to_exactly_the_default_pose(name):
    spec = spec_of(name)
    up = spec.position_upper - spec.default_positions > spec.default_positions - spec.position_lower
    far = np.where(up, spec.position_upper - 0.01, spec.position_lower + 0.01)  # on the stops, past the soft margin
    loop = LoopStandIn(spec, TrackingRobot(spec, far), gentle_policy(spec))
    for _ in range(5):  # passive first
        out = loop.tick()
        assert loop.cs.mode is ControllerMode.PASSIVE and not out.command.kp.any()
    ramp_ticks = loop.run_until_running()
    ramp = [(proposed, out) for mode, proposed, out in loop.sent if mode is ControllerMode.RAMP]
    assert len(ramp) == ramp_ticks
    sent = np.array([out.command.q_target for _, out in ramp])
    assert np.array_equal(sent[0], far)  # the first command is the measured pose, exactly
    assert np.array_equal(sent[-1], spec.default_positions)  # and the last one the default pose, exactly
    for proposed, out in ramp:  # the chain lets the whole ramp through untouched
        assert out.events == () and out.command is proposed
    period = spec.timing.policy_period_s
    duration = ramp_duration(spec, far)
    assert ramp_ticks == math.ceil(duration / period - 1e-9) + 1
    increment = MIN_JERK_PEAK_SPEED * np.abs(spec.default_positions - far) / duration * period
    steps = np.abs(np.diff(sent, axis=0))
    assert np.all(steps <= increment * (1 + 1e-6) + 1e-12)
    assert np.all(steps <= spec.safety.max_target_rate_rad_s * period)
    assert duration >= spec.safety.ramp_duration_s


@pytest.mark.parametrize("name", ROBOTS)
def test_in_range_policy_commands_reach_the_robot_bit_exact(name):
    loop = running_loop(name)
    for _ in range(200):
        out = loop.tick()
        _, proposed, _ = loop.sent[-1]
        assert out.events == () and out.command is proposed
        assert np.array_equal(out.command.q_target, proposed.q_target)
