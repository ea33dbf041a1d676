"""Each safety filter on its own, with limits derived from the real a1 and panda specs."""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path

import numpy as np
import pytest

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.safety.deadlines import missed_deadlines, overrun_check
from robot_rl.safety.filters import (
    ACTION_CLIP,
    FINITE,
    OVERRUN,
    POSITION,
    RATE,
    STALE,
    TILT,
    TORQUE,
    VELOCITY,
    ActionClip,
    SafetyLimits,
    StaleWatchdog,
    action_clip,
    check_finite,
    estimated_torque,
    position_bounds,
    position_limit,
    rate_limit,
    stale_check,
    tilt_check,
    torque_limit,
    torque_limited_targets,
    velocity_aware_bounds,
    velocity_aware_limit,
)

ROBOTS = ["a1", "panda"]


@functools.cache
def spec_of(name: str) -> RobotSpec:
    return load_robot(name)


@functools.cache
def limits_of(name: str, clip: float | None = None) -> SafetyLimits:
    spec = spec_of(name)
    return SafetyLimits.from_spec(spec, None if clip is None else ActionClip(clip, 0.25, spec.default_positions))


def standing(spec: RobotSpec, q: np.ndarray | None = None, dq: np.ndarray | None = None) -> RobotState:
    n = spec.num_joints
    q = spec.default_positions.copy() if q is None else np.asarray(q, dtype=np.float64)
    return RobotState(0.0, 0, q, np.zeros(n) if dq is None else np.asarray(dq, dtype=np.float64), np.zeros(n))


def hold(spec: RobotSpec, q_target: np.ndarray) -> JointCommand:
    return JointCommand.hold(q_target, spec.kp, spec.kd)


def quat_about_x(angle: float) -> np.ndarray:
    return np.array([math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0])


# --- limits ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ROBOTS)
def test_limits_are_derived_from_the_spec(name):
    spec = spec_of(name)
    lim = limits_of(name)
    margin = spec.safety.soft_limit_margin_rad
    np.testing.assert_allclose(lim.soft_lower, spec.position_lower + margin)
    np.testing.assert_allclose(lim.soft_upper, spec.position_upper - margin)
    np.testing.assert_allclose(lim.max_step, spec.safety.max_target_rate_rad_s * spec.timing.policy_period_s)
    np.testing.assert_allclose(lim.torque_max, spec.safety.torque_limit_fraction * spec.effort_limits)
    assert lim.joint_names == spec.joint_names
    assert lim.damping_kd == spec.safety.damping_kd
    assert (lim.max_tilt_rad is None) == (spec.kind == "arm")
    assert not lim.soft_lower.flags.writeable


def test_margin_larger_than_a_joint_range_is_refused_naming_the_joint():
    spec = spec_of("a1")
    bad = dataclasses.replace(spec, safety=dataclasses.replace(spec.safety, soft_limit_margin_rad=0.9))
    with pytest.raises(ValueError, match=r"FR_hip_joint.*soft_limit_margin_rad 0.9"):
        SafetyLimits.from_spec(bad)


def test_default_pose_outside_the_soft_limits_is_refused():
    spec = spec_of("panda")
    joints = list(spec.joints)
    joints[3] = dataclasses.replace(joints[3], default_position=-0.08)  # inside the hard limit, not the soft one
    with pytest.raises(ValueError, match=r"panda_joint4.*default_position -0.08.*soft limits"):
        SafetyLimits.from_spec(dataclasses.replace(spec, joints=tuple(joints)))


def test_action_clip_maps_to_target_space_and_handles_a_negative_scale():
    offset = np.array([0.0, 1.0])
    lo, hi = ActionClip(2.0, np.array([0.5, -0.25]), offset).target_bounds(2)
    np.testing.assert_array_equal(lo, [-1.0, 0.5])
    np.testing.assert_array_equal(hi, [1.0, 1.5])
    with pytest.raises(ValueError, match=r"ActionClip.offset has shape \(3,\), expected \(2,\)"):
        ActionClip(1.0, 1.0, np.zeros(3)).target_bounds(2)
    with pytest.raises(ValueError, match=r"ActionClip\.clip"):
        ActionClip(float("nan"), 1.0, offset).target_bounds(2)


# --- finite check ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ROBOTS)
def test_finite_inputs_pass(name):
    spec = spec_of(name)
    assert check_finite(standing(spec), hold(spec, spec.default_positions), spec.num_joints,
                        np.zeros(spec.num_joints), spec.joint_names) is None


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_finite_check_names_the_field_the_index_and_the_joint(bad):
    spec = spec_of("a1")
    state = standing(spec)
    state.dq[7] = bad
    event = check_finite(state, hold(spec, spec.default_positions), 12, None, spec.joint_names)
    assert event is not None and event.fault and event.filter_name == FINITE
    assert "state.dq[7] (RR_upper_joint)" in event.detail and str(bad) in event.detail
    assert event.joints == (7,)


def test_finite_check_reports_every_bad_field():
    spec = spec_of("panda")
    state = standing(spec)
    cmd = hold(spec, spec.default_positions)
    cmd.kd[2] = np.nan
    state.base_ang_vel[1] = np.inf
    action = np.zeros(7)
    action[6] = -np.inf
    event = check_finite(state, cmd, 7, action, spec.joint_names)
    assert "command.kd[2] (panda_joint3)" in event.detail
    assert "state.base_ang_vel[1] = inf" in event.detail
    assert "action[6] = -inf" in event.detail
    assert event.joints == (2,)


def test_wrong_shapes_and_non_arrays_are_faults_naming_the_field():
    spec = spec_of("a1")
    state = standing(spec)
    state.q = state.q[:11]
    event = check_finite(state, hold(spec, spec.default_positions), 12)
    assert event.fault and "state.q: expected a float array of shape (12,), got shape (11,)" in event.detail
    state = standing(spec)
    state.base_quat = [1.0, 0.0, 0.0, 0.0]
    assert "state.base_quat" in check_finite(state, hold(spec, spec.default_positions), 12).detail
    # An ONNX-style (1, n) action is fine; a list is not.
    ok = check_finite(standing(spec), hold(spec, spec.default_positions), 12, np.zeros((1, 12)))
    assert ok is None
    event = check_finite(standing(spec), hold(spec, spec.default_positions), 12, [0.0] * 12)
    assert "action: expected a float array" in event.detail


# --- motion filters -------------------------------------------------------------------------------------


def test_action_clip_clamps_only_what_is_outside():
    spec = spec_of("a1")
    lim = limits_of("a1", clip=4.0)  # targets within default ± 1 rad
    target = spec.default_positions.copy()
    assert action_clip(target, lim, np.ones(12, bool)) == (target, None)
    target[[0, 5]] += [3.0, -2.0]
    out, event = action_clip(target, lim, np.ones(12, bool))
    assert event.filter_name == ACTION_CLIP and event.joints == (0, 5) and not event.fault
    np.testing.assert_array_equal(out[[0, 5]], spec.default_positions[[0, 5]] + [1.0, -1.0])
    np.testing.assert_array_equal(np.delete(out, [0, 5]), np.delete(target, [0, 5]))
    assert action_clip(target, limits_of("a1"), np.ones(12, bool))[1] is None  # no clip configured


@pytest.mark.parametrize("name", ROBOTS)
def test_rate_limit_caps_each_step_at_the_spec_rate(name):
    spec, lim = spec_of(name), limits_of(name)
    n = spec.num_joints
    step = spec.safety.max_target_rate_rad_s * spec.timing.policy_period_s
    ref = spec.default_positions.copy()
    active = np.ones(n, bool)
    target = ref + np.linspace(-3, 3, n) * step  # some joints within, some beyond
    out, event = rate_limit(target, ref, lim, active)
    assert event.filter_name == RATE and not event.fault
    np.testing.assert_allclose(out, np.clip(target, ref - step, ref + step))
    assert event.joints == tuple(np.flatnonzero(np.abs(target - ref) > step).tolist())
    exactly = ref + step  # at the bound is inside
    assert rate_limit(exactly, ref, lim, active)[0] is exactly
    # kp == 0: the target exerts no force, so it is not limited
    out, event = rate_limit(target, ref, lim, np.zeros(n, bool))
    assert out is target and event is None


@pytest.mark.parametrize("name", ROBOTS)
def test_position_limit_keeps_targets_inside_the_soft_range(name):
    spec, lim = spec_of(name), limits_of(name)
    n = spec.num_joints
    q = spec.default_positions.copy()
    target = np.where(np.arange(n) % 2 == 0, spec.position_upper + 1.0, spec.position_lower - 1.0)
    out, event = position_limit(target, q, lim, np.ones(n, bool))
    np.testing.assert_array_equal(out, np.where(np.arange(n) % 2 == 0, lim.soft_upper, lim.soft_lower))
    assert event.filter_name == POSITION and event.joints == tuple(range(n))
    assert position_limit(lim.soft_upper.copy(), q, lim, np.ones(n, bool))[1] is None


def test_a_joint_resting_outside_the_soft_range_may_be_held_where_it_is_but_not_pushed_further():
    spec, lim = spec_of("a1"), limits_of("a1")
    q = spec.default_positions.copy()
    q[2] = spec.position_lower[2] + 0.01  # calf on its stop, inside the margin
    q[3] = spec.position_upper[3] + 0.02  # hip reading past its hard limit
    lo, hi = position_bounds(q, lim)
    assert lo[2] == q[2] and hi[3] == spec.position_upper[3]
    assert position_limit(q.copy(), q, lim, np.ones(12, bool))[0][2] == q[2]
    further = q.copy()
    further[2] -= 0.005
    out, event = position_limit(further, q, lim, np.ones(12, bool))
    assert out[2] == q[2] and 2 in event.joints and out[3] == spec.position_upper[3]


def test_velocity_aware_bounds_shrink_only_toward_the_motion():
    spec, lim = spec_of("a1"), limits_of("a1")
    q = spec.default_positions.copy()
    dt = spec.timing.policy_period_s
    dq = np.zeros(12)
    for a, b in zip(velocity_aware_bounds(q, dq, lim), position_bounds(q, lim), strict=True):
        assert np.array_equal(a, b)
    dq[0], dq[1] = 10.0, -5.0
    lo, hi = velocity_aware_bounds(q, dq, lim)
    assert hi[0] == pytest.approx(lim.soft_upper[0] - 10.0 * dt) and lo[0] == lim.soft_lower[0]
    assert lo[1] == pytest.approx(lim.soft_lower[1] + 5.0 * dt) and hi[1] == lim.soft_upper[1]
    # Garbage velocities (finite but absurd) never make the bounds cross.
    lo, hi = velocity_aware_bounds(q, np.full(12, 1e6), lim)
    assert np.all(lo <= hi)
    np.testing.assert_array_equal(hi, lim.soft_lower)


def test_velocity_aware_limit_pulls_the_target_in_when_moving_toward_a_limit():
    spec, lim = spec_of("a1"), limits_of("a1")
    q = spec.default_positions.copy()
    dq = np.zeros(12)
    dq[4] = spec.velocity_limits[4]
    target = q.copy()
    target[4] = lim.soft_upper[4]  # fine at rest, too close at top speed
    assert velocity_aware_limit(target, q, np.zeros(12), lim, np.ones(12, bool))[1] is None
    out, event = velocity_aware_limit(target, q, dq, lim, np.ones(12, bool))
    assert event.filter_name == VELOCITY and event.joints == (4,)
    assert out[4] == pytest.approx(lim.soft_upper[4] - dq[4] * spec.timing.policy_period_s)


@pytest.mark.parametrize("name", ROBOTS)
def test_torque_limit_puts_the_estimate_at_the_limit(name):
    spec, lim = spec_of(name), limits_of(name)
    n = spec.num_joints
    state = standing(spec)
    target = state.q + np.where(np.arange(n) % 2 == 0, 1.0, -1.0) * 2 * lim.torque_max / spec.kp
    cmd = hold(spec, target)
    out, event = torque_limit(target, state, cmd, lim, np.ones(n, bool))
    assert event.filter_name == TORQUE and event.joints == tuple(range(n)) and "saturated" not in event.detail
    np.testing.assert_allclose(np.abs(estimated_torque(out, state, cmd)), lim.torque_max, rtol=1e-12)
    assert np.all(np.sign(out - state.q) == np.sign(target - state.q))  # moved toward q, not past it
    assert torque_limit(state.q.copy(), state, hold(spec, state.q), lim, np.ones(n, bool))[1] is None


def test_torque_limit_never_reverses_the_spring():
    spec, lim = spec_of("panda"), limits_of("panda")
    dq = np.zeros(7)
    dq[0] = 2.0  # kd 50 × 2 rad/s = 100 N·m of damping, over the 87 N·m limit on its own
    state = standing(spec, dq=dq)
    target = state.q.copy()
    target[0] -= 0.01  # spring also braking
    cmd = hold(spec, target)
    out, event = torque_limit(target, state, cmd, lim, np.ones(7, bool))
    assert out[0] == state.q[0]  # spring shrunk to zero (the motor saturates anyway), never reversed
    assert "saturated" in event.detail and "panda_joint1" in event.detail
    target[0] = state.q[0] + 0.01  # spring pushing along the motion reduces the total: untouched, no event
    assert torque_limit(target, state, hold(spec, target), lim, np.ones(7, bool)) == (target, None)


def test_the_batched_torque_law_is_the_chains_row_by_row():
    """What the vectorized env trains behind (``torque_limited_targets`` over N robots) is what the chain's
    ``torque_limit`` sends for each robot alone: random targets, velocities and pushes past the limits."""
    spec, lim = spec_of("panda"), limits_of("panda")
    rng = np.random.default_rng(0)
    n = 64
    q = spec.default_positions + rng.normal(0, 0.3, (n, 7))
    dq = rng.normal(0, 1.5, (n, 7))
    target = q + rng.normal(0, 0.4, (n, 7))
    rest = -spec.kd * dq
    tau = spec.kp * (target - q) + rest
    over = (tau > lim.torque_max) | (tau < -lim.torque_max)
    batched, moved = torque_limited_targets(target, q, spec.kp, rest, lim.torque_max, over)
    assert moved.any() and (~moved).any()
    for i in range(n):
        state = standing(spec, q=q[i], dq=dq[i])
        alone, _ = torque_limit(target[i], state, hold(spec, target[i]), lim, np.ones(7, bool))
        np.testing.assert_allclose(batched[i], alone, rtol=0, atol=1e-12)


def test_torque_limit_respects_the_position_bounds_and_skips_kp_zero_joints():
    spec, lim = spec_of("a1"), limits_of("a1")
    q = spec.default_positions.copy()
    dq = np.zeros(12)
    q[2], dq[2] = spec.position_lower[2] + 0.01, -60.0  # calf slamming into its lower stop
    state = standing(spec, q=q, dq=dq)
    bounds = velocity_aware_bounds(q, dq, lim)  # lower bound pulled 1.2 rad in, against the motion
    target = q.copy()
    target[2] = bounds[1][2]
    # τ = 20·Δ + 0.5·60 is over 33.5; the torque limit alone would put q* at q + 0.175, below the bound.
    out, event = torque_limit(target, state, hold(spec, target), lim, np.ones(12, bool), bounds)
    assert out[2] == bounds[0][2] and "saturated" in event.detail
    damping = JointCommand.damping(12, 3.0)
    assert torque_limit(damping.q_target, state, damping, lim, np.zeros(12, bool))[0] is damping.q_target


# --- fault checks ---------------------------------------------------------------------------------------


def test_tilt_check():
    lim = limits_of("a1")
    assert tilt_check(np.array([1.0, 0, 0, 0]), lim) is None
    assert tilt_check(quat_about_x(0.95), lim) is None
    yaw_only = np.array([math.cos(1.5), 0.0, 0.0, math.sin(1.5)])  # heading is not tilt
    assert tilt_check(yaw_only, lim) is None
    event = tilt_check(quat_about_x(1.05), lim)
    assert event.fault and event.filter_name == TILT and "1.050 rad" in event.detail
    assert tilt_check(np.array([0.0, 0.0, 1.0, 0.0]), lim).fault  # upside down (pitch π)
    assert "not a unit quaternion" in tilt_check(np.array([0.5, 0.0, 0.0, 0.0]), lim).detail
    assert tilt_check(quat_about_x(3.0), limits_of("panda")) is None  # arms have no tilt limit


def test_stale_check_counts_from_the_last_new_tick():
    lim = limits_of("a1")
    period, n_stale = lim.policy_period_s, lim.stale_state_periods
    wd, event = stale_check(7, 100.0, StaleWatchdog(), lim)
    assert wd == StaleWatchdog(7, 100.0) and event is None
    for k in range(1, n_stale):
        wd, event = stale_check(7, 100.0 + k * period, wd, lim)
        assert event is None
    wd, event = stale_check(7, 100.0 + n_stale * period, wd, lim)
    assert event.fault and event.filter_name == STALE and "tick frozen at 7" in event.detail
    wd, event = stale_check(8, 100.0 + n_stale * period, wd, lim)
    assert event is None and wd.fresh_at_s == 100.0 + n_stale * period
    _, event = stale_check(3, 100.2, wd, lim)
    assert event.fault and "backward from 8 to 3" in event.detail


@pytest.mark.parametrize(("latency_ms", "missed"), [(0, 0), (10, 0), (20, 0), (25, 1), (50, 2), (100, 4), (100.5, 5)])
def test_missed_deadlines(latency_ms, missed):
    assert missed_deadlines(latency_ms / 1e3, 0.02) == missed


def test_overrun_check_faults_only_above_the_consecutive_limit():
    lim = limits_of("a1")  # max_consecutive_overruns: 3
    count = 0
    for expected in (1, 2, 3):
        count, event = overrun_check(1, count, lim)
        assert count == expected and event.filter_name == OVERRUN and not event.fault
    count, event = overrun_check(1, count, lim)
    assert event.fault and "4 policy deadlines missed in a row (limit 3)" in event.detail
    assert overrun_check(0, 3, lim) == (0, None)  # an on-time tick resets the count
    assert overrun_check(4, 0, lim)[1].fault  # one 4-period stall counts as four


def test_the_torque_limit_estimates_with_the_motors_measured_gains():
    """A robot whose motors deliver half their commanded kp (spec.safety.actuator_kp_scale, as calibrated): the
    chain estimates the torque the motor really applies, so it lets through twice the target offset, and still
    keeps the real torque at the effort limit."""
    spec = spec_of("panda")
    weak = dataclasses.replace(spec, safety=dataclasses.replace(spec.safety, actuator_kp_scale=0.5))
    lim, lim_weak = limits_of("panda"), SafetyLimits.from_spec(weak)
    assert (lim_weak.kp_scale, lim_weak.kd_scale) == (0.5, 1.0)
    state = standing(spec)
    target = state.q.copy()
    target[6] += 1.5 * lim.torque_max[6] / spec.kp[6]  # 1.5× the limit at the commanded gain, 0.75× at the real one
    cmd = hold(spec, target)
    assert torque_limit(target, state, cmd, lim_weak, np.ones(7, bool)) == (target, None)
    clipped, event = torque_limit(target, state, cmd, lim, np.ones(7, bool))
    assert event is not None and clipped[6] < target[6]
    far = state.q.copy()
    far[6] += 4 * lim.torque_max[6] / spec.kp[6]
    out, event = torque_limit(far, state, hold(spec, far), lim_weak, np.ones(7, bool))
    real = estimated_torque(out, state, hold(spec, far), kp_scale=0.5)
    assert event is not None and real[6] == pytest.approx(lim.torque_max[6])


def test_measured_actuator_scales_are_checked_when_the_spec_loads(tmp_path):
    from robot_rl.robots.spec import ConfigError

    text = Path(spec_of("panda").source_file).read_text().replace("torque_limit_fraction: 1.0",
                                                            "torque_limit_fraction: 1.0\n  actuator_kp_scale: 0.0")
    assert "actuator_kp_scale" in text
    bad = tmp_path / "panda.yaml"
    bad.write_text(text)
    with pytest.raises(ConfigError, match="actuator_kp_scale"):
        load_robot(str(bad))
