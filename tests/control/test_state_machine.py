"""The controller state machine: every (mode, event) pair, the ramp, and the commands of each mode."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from robot_rl.control.state_machine import (
    MIN_JERK_PEAK_SPEED,
    ControllerEvent,
    ControllerMode,
    ControllerState,
    IllegalTransition,
    allowed_events,
    apply_event,
    command_for,
    min_jerk,
    ramp_done,
    ramp_duration,
    ramp_target,
    state_command,
    transition,
)
from robot_rl.core.types import JointCommand
from robot_rl.robots.spec import RobotSpec, load_robot

ROBOTS = ["a1", "panda"]
M, E = ControllerMode, ControllerEvent

# The whole table, written out: anything not listed must be refused.
EXPECTED = {
    (M.PASSIVE, E.ARM): M.RAMP,
    (M.DAMPING, E.ARM): M.RAMP,
    (M.RAMP, E.RAMP_DONE): M.RUNNING,
    (M.DAMPING, E.RESET): M.PASSIVE,
    **{(mode, ev): M.DAMPING for mode in M for ev in (E.STOP, E.ESTOP, E.FAULT)},
}


@functools.cache
def spec_of(name: str) -> RobotSpec:
    return load_robot(name)


def far_pose(spec: RobotSpec) -> np.ndarray:
    """Each joint near the hard limit farthest from its default (inside the soft margin: on the stops)."""
    up = spec.position_upper - spec.default_positions > spec.default_positions - spec.position_lower
    return np.where(up, spec.position_upper - 0.01, spec.position_lower + 0.01)


@pytest.mark.parametrize(("mode", "event"), list(itertools.product(M, E)))
def test_every_transition(mode, event):
    if (mode, event) in EXPECTED:
        assert transition(mode, event) is EXPECTED[(mode, event)]
        assert event in allowed_events(mode)
    else:
        with pytest.raises(IllegalTransition, match=f"{event.name} is not allowed in {mode.name}"):
            transition(mode, event)
        assert event not in allowed_events(mode)


def test_running_is_reached_only_from_ramp():
    for mode, event in itertools.product(M, E):
        try:
            nxt = transition(mode, event)
        except IllegalTransition:
            continue
        if nxt is M.RUNNING:
            assert (mode, event) == (M.RAMP, E.RAMP_DONE)
        if event is E.ARM:
            assert nxt is M.RAMP


@pytest.mark.parametrize("mode", [M.PASSIVE, M.DAMPING])
def test_arm_is_refused_while_a_fault_is_latched(mode):
    with pytest.raises(IllegalTransition, match="safety fault is latched"):
        transition(mode, E.ARM, fault_active=True)
    assert transition(mode, E.ESTOP, fault_active=True) is M.DAMPING


def test_refusal_names_what_is_allowed():
    with pytest.raises(IllegalTransition, match=r"allowed there: STOP, ESTOP, FAULT"):
        transition(M.RUNNING, E.ARM)
    assert isinstance(IllegalTransition("x"), ValueError)


@pytest.mark.parametrize("name", ROBOTS)
def test_arm_captures_a_frozen_copy_of_the_measured_pose(name):
    spec = spec_of(name)
    measured = far_pose(spec)
    cs = apply_event(ControllerState(), E.ARM, 12.5, spec=spec, measured_q=measured)
    assert cs.mode is M.RAMP and cs.since_s == 12.5
    np.testing.assert_array_equal(cs.ramp_start, measured)
    measured[0] += 1.0  # the caller reusing its buffer does not move the ramp
    assert cs.ramp_start[0] == measured[0] - 1.0 and not cs.ramp_start.flags.writeable
    assert cs.ramp_duration_s == ramp_duration(spec, cs.ramp_start)


def test_arm_needs_a_sane_measured_pose():
    spec = spec_of("a1")
    with pytest.raises(IllegalTransition, match="needs the measured joint positions"):
        apply_event(ControllerState(), E.ARM, 0.0, spec=spec)
    with pytest.raises(IllegalTransition, match=r"shape \(7,\), expected \(12,\)"):
        apply_event(ControllerState(), E.ARM, 0.0, spec=spec, measured_q=np.zeros(7))
    bad = spec.default_positions.copy()
    bad[5] = np.nan
    with pytest.raises(IllegalTransition, match=r"measured_q\[5\] \(FL_lower_joint\) is nan"):
        apply_event(ControllerState(), E.ARM, 0.0, spec=spec, measured_q=bad)


def test_stop_while_damping_keeps_the_state():
    spec = spec_of("a1")
    cs = apply_event(ControllerState(), E.ESTOP, 1.0, spec=spec)
    assert cs.mode is M.DAMPING and cs.since_s == 1.0
    assert apply_event(cs, E.FAULT, 2.0, spec=spec) is cs
    cs = apply_event(cs, E.RESET, 3.0, spec=spec)
    assert cs.mode is M.PASSIVE and cs.ramp_start is None


def test_min_jerk_profile():
    assert min_jerk(0.0) == 0.0 and min_jerk(1.0) == 1.0 and min_jerk(0.5) == pytest.approx(0.5)
    taus = np.linspace(0, 1, 1001)
    s = np.array([min_jerk(t) for t in taus])
    assert np.all(np.diff(s) >= 0)
    speed = np.diff(s) / np.diff(taus)
    assert speed.max() == pytest.approx(MIN_JERK_PEAK_SPEED, rel=1e-4)
    assert speed[0] < 1e-4 and speed[-1] < 1e-4  # starts and ends at rest


def test_ramp_target_endpoints_are_exact():
    start = np.array([0.1, -2.6865, 3.3])
    goal = np.array([-0.1, -1.5, 0.8])
    assert np.array_equal(ramp_target(start, goal, 0.0, 2.0), start)
    assert np.array_equal(ramp_target(start, goal, -1.0, 2.0), start)
    assert np.array_equal(ramp_target(start, goal, 2.0, 2.0), goal)
    assert np.array_equal(ramp_target(start, goal, 7.0, 2.0), goal)
    assert np.array_equal(ramp_target(start, goal, 0.0, 0.0), goal)  # zero-length ramp: straight to the goal
    np.testing.assert_allclose(ramp_target(start, goal, 1.0, 2.0), (start + goal) / 2)


@pytest.mark.parametrize("name", ROBOTS)
def test_ramp_duration_is_the_spec_duration_unless_the_rate_limit_needs_longer(name):
    spec = spec_of(name)
    near = spec.default_positions + 0.01
    assert ramp_duration(spec, near) == spec.safety.ramp_duration_s
    far = far_pose(spec)
    duration = ramp_duration(spec, far)
    peak = MIN_JERK_PEAK_SPEED * np.max(np.abs(spec.default_positions - far)) / duration
    assert duration >= spec.safety.ramp_duration_s and peak <= spec.safety.max_target_rate_rad_s


@pytest.mark.parametrize("name", ROBOTS)
def test_ramp_sampled_each_period(name):
    """First command = measured pose exactly, no step over the rate limit or the ramp's own peak
    increment, last command = default pose exactly, and RAMP_DONE is due exactly then."""
    spec = spec_of(name)
    period = spec.timing.policy_period_s
    start = far_pose(spec)
    cs = apply_event(ControllerState(), E.ARM, 100.0, spec=spec, measured_q=start)
    targets = []
    k = 0
    while True:
        now = 100.0 + k * period
        cmd = command_for(cs, spec, now)
        targets.append(cmd.q_target)
        np.testing.assert_array_equal(cmd.kp, spec.kp)
        np.testing.assert_array_equal(cmd.kd, spec.kd)
        if ramp_done(cs, now):
            break
        k += 1
    assert np.array_equal(targets[0], start)
    assert np.array_equal(targets[-1], spec.default_positions)
    assert not np.array_equal(targets[-2], spec.default_positions)
    assert len(targets) == int(np.ceil(cs.ramp_duration_s / period - 1e-9)) + 1
    steps = np.abs(np.diff(targets, axis=0))
    peak_increment = MIN_JERK_PEAK_SPEED * np.abs(spec.default_positions - start) / cs.ramp_duration_s * period
    assert np.all(steps <= peak_increment + 1e-12)
    assert np.all(steps <= spec.safety.max_target_rate_rad_s * period)


@pytest.mark.parametrize("name", ROBOTS)
def test_commands_of_each_mode(name):
    spec = spec_of(name)
    n = spec.num_joints
    kd = spec.safety.damping_kd
    damping = state_command(M.DAMPING, spec)
    assert not damping.q_target.any() and not damping.kp.any() and not damping.tau_ff.any()
    np.testing.assert_array_equal(damping.kd, np.full(n, kd))
    assert np.array_equal(state_command(M.PASSIVE, spec).kd, np.full(n, kd))
    zero = state_command(M.PASSIVE, spec, passive="zero_torque")
    assert not zero.kp.any() and not zero.kd.any() and not zero.tau_ff.any()
    with pytest.raises(ValueError, match="passive must be 'zero_torque' or 'damping'"):
        state_command(M.PASSIVE, spec, passive="limp")
    with pytest.raises(ValueError, match="policy commands while RUNNING"):
        state_command(M.RUNNING, spec)
    with pytest.raises(ValueError, match="RAMP needs ramp_start"):
        state_command(M.RAMP, spec)
    ramp = state_command(M.RAMP, spec, ramp_start=far_pose(spec), elapsed_s=0.0)
    assert isinstance(ramp, JointCommand) and np.array_equal(ramp.q_target, far_pose(spec))
