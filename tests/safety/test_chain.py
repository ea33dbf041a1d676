"""The composed safety chain: bit-exact pass-through, filter order, latching, reset, counters, purity."""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.safety import (
    FILTER_ORDER,
    ActionClip,
    FilterState,
    SafetyChain,
    SafetyLimits,
    chain_step,
    late_check,
)
from robot_rl.safety.filters import ACTION_CLIP, FINITE, OVERRUN, POSITION, RATE, STALE, TORQUE

ROBOTS = ["a1", "panda"]


@functools.cache
def spec_of(name: str) -> RobotSpec:
    return load_robot(name)


def wide_clip(spec: RobotSpec) -> ActionClip:
    """An action clip like a policy contract's (scale 0.25, clip 20): ±5 rad around the default pose."""
    return ActionClip(20.0, 0.25, spec.default_positions)


def make_state(spec: RobotSpec, tick: int, q: np.ndarray, dq: np.ndarray | None = None) -> RobotState:
    n = spec.num_joints
    return RobotState(tick * spec.timing.policy_period_s, tick, np.array(q, dtype=np.float64),
                      np.zeros(n) if dq is None else np.array(dq, dtype=np.float64), np.zeros(n))


def assert_same_command(a: JointCommand, b: JointCommand) -> None:
    for field in ("q_target", "dq_target", "kp", "kd", "tau_ff"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field


@pytest.mark.parametrize("name", ROBOTS)
def test_in_range_commands_pass_bit_exact(name):
    """A random walk of commands inside every limit (rate, soft + velocity-aware position, torque, clip),
    with moving measured state, tilt under the limit and random feed-forward: nothing may change."""
    spec = spec_of(name)
    n, dt = spec.num_joints, spec.timing.policy_period_s
    chain = SafetyChain.from_spec(spec, wide_clip(spec))
    lim = chain.limits
    rng = np.random.default_rng(1234)
    tau_max = lim.torque_max
    # Budgets that keep the PD torque estimate under tau_max: spring ≤ ½, damping ≤ ¼, feed-forward ≤ ⅛.
    # Each joint's walk also keeps to its range: per period, at most 1/8 of it for speed·Δt and for steps.
    eighth = (lim.soft_upper - lim.soft_lower) / 8
    v_max = np.minimum.reduce([spec.velocity_limits, 0.25 * tau_max / spec.kd, eighth / dt])
    spring_room = np.minimum(0.25 * tau_max / spec.kp, eighth)  # |q − ref| and |target − ref| each within this
    step = np.minimum(lim.max_step, spring_room)
    margin = v_max * dt + step + 1e-6
    lo, hi = lim.soft_lower + margin, lim.soft_upper - margin
    ref = spec.default_positions.copy()
    assert np.all((lo <= ref) & (ref <= hi))
    state = make_state(spec, 0, ref)
    assert chain.step(state, JointCommand.hold(ref, spec.kp, spec.kd), 0.0).command.q_target is not None
    for tick in range(1, 2001):
        # Full step, a fraction, or exactly at the rate bound (a target on a bound is inside).
        u = rng.choice([-1.0, 1.0], n) * rng.choice([1.0, rng.uniform(0, 1), 0.0], n)
        target = ref + u * step
        target = np.where((target < lo) | (target > hi), ref - u * step, target)
        q = ref + rng.uniform(-1, 1, n) * spring_room
        dq = rng.uniform(-1, 1, n) * v_max
        state = make_state(spec, tick, q, dq)
        if spec.sim_model.floating_base:
            tilt = rng.uniform(0, 0.9 * spec.safety.max_tilt_rad)
            axis = rng.normal(size=2)
            axis /= np.linalg.norm(axis)
            state.base_quat = np.array([math.cos(tilt / 2), *(math.sin(tilt / 2) * axis), 0.0])
            state.base_ang_vel = rng.normal(size=3)
        cmd = JointCommand(target, np.zeros(n), spec.kp.copy(), spec.kd.copy(),
                           rng.uniform(-0.125, 0.125, n) * tau_max)
        sent = cmd.copy()
        out = chain.step(state, cmd, tick * dt, action=rng.normal(size=n))
        assert out.events == () and not out.faulted, out.events
        assert out.command is cmd
        assert_same_command(out.command, sent)
        ref = target
    assert chain.report.summary()["interventions"] == {} and chain.report.steps == 2001


@pytest.mark.parametrize("name", ROBOTS)
def test_damping_and_zero_torque_commands_pass_unchanged(name):
    spec = spec_of(name)
    chain = SafetyChain.from_spec(spec)
    q = spec.default_positions + 0.3 * np.sign(spec.position_upper - spec.default_positions - 0.5)
    for tick, cmd in enumerate([JointCommand.damping(spec.num_joints, spec.safety.damping_kd),
                                JointCommand.passive(spec.num_joints)]):
        dq = np.full(spec.num_joints, 0.9) * spec.velocity_limits  # fast: damping alone may exceed effort
        out = chain.step(make_state(spec, tick, q, dq), cmd, tick * spec.timing.policy_period_s)
        assert out.command is cmd and out.events == ()
    # With kp = 0 there is no target to rate-limit against: the reference becomes the measured pose.
    np.testing.assert_array_equal(chain.filter_state.reference, q)


def test_filters_act_in_order_and_each_is_reported():
    spec = spec_of("a1")
    chain = SafetyChain.from_spec(spec, ActionClip(4.0, 0.25, spec.default_positions))  # default ± 1 rad
    q = spec.default_positions.copy()
    chain.step(make_state(spec, 0, q), JointCommand.hold(q, spec.kp, spec.kd), 0.0)
    target = q.copy()
    target[0] = 50.0  # clip → default + 1 rad, then rate → default + 0.4 rad
    target[1] = q[1] + 0.3  # inside the clip and the rate limit (0.4 rad per step): untouched
    target[2] = spec.position_lower[2] - 1.0  # clip → default − 1 rad, then rate → default − 0.4 rad
    out = chain.step(make_state(spec, 1, q), JointCommand.hold(target, spec.kp, spec.kd), 0.02)
    assert [e.filter_name for e in out.events] == [ACTION_CLIP, RATE]
    assert out.events[0].joints == (0, 2) and out.events[1].joints == (0, 2)
    np.testing.assert_allclose(out.command.q_target[[0, 1, 2]], [q[0] + 0.4, q[1] + 0.3, q[2] - 0.4])
    names = [e.filter_name for e in out.events]
    assert names == sorted(names, key=FILTER_ORDER.index)
    # The unchanged fields are carried over; only the target was replaced.
    assert out.command.kp is not None and np.array_equal(out.command.kp, spec.kp)


def test_the_next_step_is_rate_limited_from_the_target_sent_not_the_one_proposed():
    spec = spec_of("panda")
    chain = SafetyChain.from_spec(spec)
    q = spec.default_positions.copy()
    step = spec.safety.max_target_rate_rad_s * spec.timing.policy_period_s
    far = q + 1.0
    sent = []
    for tick in range(3):  # (a fourth step would meet the torque limit: kp·Δ = 600 × 0.16 > 87 N·m)
        out = chain.step(make_state(spec, tick, q), JointCommand.hold(far, spec.kp, spec.kd), tick * 0.02)
        sent.append(out.command.q_target[0])
        assert RATE in [e.filter_name for e in out.events]
    np.testing.assert_allclose(np.diff([q[0], *sent]), step)


def test_a_nan_is_caught_before_any_clip():
    spec = spec_of("a1")
    chain = SafetyChain.from_spec(spec, wide_clip(spec))
    target = np.full(12, 1e3)
    target[4] = np.nan
    out = chain.step(make_state(spec, 0, spec.default_positions), JointCommand.hold(target, spec.kp, spec.kd), 0.0)
    assert out.faulted and [e.filter_name for e in out.events] == [FINITE]
    assert "command.q_target[4] (FL_upper_joint) = nan" in out.events[0].detail
    assert_same_command(out.command, JointCommand.damping(12, spec.safety.damping_kd))


def test_fault_latches_until_reset_then_the_chain_starts_afresh():
    spec = spec_of("a1")
    chain = SafetyChain.from_spec(spec)
    q = spec.default_positions.copy()
    good = JointCommand.hold(q, spec.kp, spec.kd)
    bad_state = make_state(spec, 0, q)
    bad_state.q[0] = np.inf
    assert chain.step(bad_state, good, 0.0).faulted
    damping = JointCommand.damping(12, spec.safety.damping_kd)
    for tick in range(1, 20):  # clean inputs, still damping, fault reported once
        out = chain.step(make_state(spec, tick, q), good, tick * 0.02)
        assert out.faulted and out.events == ()
        assert_same_command(out.command, damping)
    assert chain.faulted and "state.q[0]" in chain.fault[0].detail
    chain.reset()
    assert not chain.faulted
    # Fresh start: an old tick counts as new, and the reference is the measured pose, not the old target.
    moved = q + 0.1
    out = chain.step(make_state(spec, 3, moved), JointCommand.hold(moved, spec.kp, spec.kd), 10.0)
    assert not out.faulted and out.events == ()
    summary = chain.report.summary()
    assert summary["faults"] == {FINITE: 1} and summary["resets"] == 1 and summary["steps"] == 21
    assert "state.q[0]" in summary["last_fault"][0]


def test_a_fault_and_interventions_in_one_step_are_all_reported():
    spec = spec_of("a1")
    chain = SafetyChain.from_spec(spec)
    q = spec.default_positions.copy()
    chain.step(make_state(spec, 5, q), JointCommand.hold(q, spec.kp, spec.kd), 0.0)
    out = chain.step(make_state(spec, 4, q), JointCommand.hold(q + 1.0, spec.kp, spec.kd), 0.02)  # tick went back
    assert out.faulted and [e.filter_name for e in out.events] == [RATE, STALE]
    assert chain.report.faults[STALE] == 1 and chain.report.interventions[RATE] == 1


def test_report_counts_per_filter_and_per_joint():
    spec = spec_of("panda")
    chain = SafetyChain.from_spec(spec)
    q = spec.default_positions.copy()
    target = q.copy()
    target[3] = spec.position_upper[3] + 1.0  # position limit on joint 4 (and rate, and torque)
    for tick in range(5):
        chain.step(make_state(spec, tick, q), JointCommand.hold(target, spec.kp, spec.kd), tick * 0.02,
                   missed_deadlines=1 if tick == 2 else 0)
    summary = chain.report.summary()
    json.dumps(summary)  # plain types only
    assert summary["interventions"][RATE] == 5 and summary["missed_deadlines"] == 1
    assert summary["per_joint"][RATE] == {"panda_joint4": 5}
    assert POSITION not in summary["interventions"]  # the rate limit already kept it far from the limit
    assert summary["interventions"]["overrun"] == 1 and summary["faults"] == {}


def test_torque_filter_in_the_chain_acts_on_a_pushed_joint():
    spec = spec_of("panda")
    chain = SafetyChain.from_spec(spec)
    q = spec.default_positions.copy()
    chain.step(make_state(spec, 0, q), JointCommand.hold(q, spec.kp, spec.kd), 0.0)
    pushed = q.copy()
    pushed[4] += 0.2  # someone pushed joint 5: holding the old target asks 250 × 0.2 = 50 N·m of 12
    out = chain.step(make_state(spec, 1, pushed), JointCommand.hold(q, spec.kp, spec.kd), 0.02)
    assert [e.filter_name for e in out.events] == [TORQUE]
    tau = spec.kp[4] * (out.command.q_target[4] - pushed[4])
    assert tau == pytest.approx(-spec.effort_limits[4])


def test_chain_step_is_pure():
    spec = spec_of("a1")
    lim = SafetyLimits.from_spec(spec, wide_clip(spec))
    q = spec.default_positions.copy()
    state = make_state(spec, 9, q, np.linspace(-1, 1, 12))
    proposed = JointCommand.hold(q + np.linspace(-2, 2, 12), spec.kp, spec.kd)
    fs = FilterState(reference=q.copy())
    before_state, before_cmd, before_ref = state.q.copy(), proposed.copy(), fs.reference.copy()
    out1, fs1 = chain_step(lim, fs, state, proposed, 1.0, missed_deadlines=1)
    out2, fs2 = chain_step(lim, fs, state, proposed, 1.0, missed_deadlines=1)
    assert_same_command(out1.command, out2.command)
    assert out1.events == out2.events and fs1.consecutive_missed == fs2.consecutive_missed == 1
    np.testing.assert_array_equal(fs1.reference, fs2.reference)
    np.testing.assert_array_equal(state.q, before_state)
    assert_same_command(proposed, before_cmd)
    np.testing.assert_array_equal(fs.reference, before_ref)
    # The stored reference is a copy: reusing the command buffer cannot move it.
    out1.command.q_target[:] = 99.0
    assert np.all(fs1.reference < 99.0)


# --- late check: a tick that stalled between its step and its write --------------------------------------


@pytest.mark.parametrize(("missed_before", "missed_in_tick", "faults"), [
    (0, 0, False), (0, 1, False), (0, 3, False), (0, 4, True), (0, 25, True),
    (2, 1, False), (2, 2, True), (3, 1, True), (0, -1, False),
])
def test_late_check_faults_only_past_the_overrun_limit_counted_with_the_ticks_before(missed_before,
                                                                                    missed_in_tick, faults):
    """A1: limit 3 deadlines in a row. The deadlines a tick's stall adds count with those missed before it."""
    spec = spec_of("a1")
    assert spec.safety.max_consecutive_overruns == 3
    chain = SafetyChain.from_spec(spec)
    q = spec.default_positions.copy()
    hold = JointCommand.hold(q, spec.kp, spec.kd)
    for tick in range(3):
        assert not chain.step(make_state(spec, tick, q), hold, 0.02 * tick).faulted
    step = chain.step(make_state(spec, 3, q), hold, 0.06 + 0.02 * missed_before, missed_deadlines=missed_before)
    assert not step.faulted
    before = chain.filter_state
    out = chain.check_late(missed_in_tick)
    if not faults:
        assert out is None and chain.filter_state is before and not chain.faulted
        return
    assert out.faulted and [(e.filter_name, e.fault) for e in out.events] == [(OVERRUN, True)]
    assert f"{missed_before + missed_in_tick} policy deadlines missed in a row (limit 3)" in out.events[0].detail
    assert "was not sent" in out.events[0].detail
    assert_same_command(out.command, JointCommand.damping(12, spec.safety.damping_kd))
    assert chain.faulted and chain.fault == out.events
    summary = chain.report.summary()
    # Counted as a fault like any other; not a step, and the deadlines are left to the next step's count.
    assert summary["faults"] == {OVERRUN: 1} and summary["steps"] == 4 and summary["missed_deadlines"] == missed_before
    assert summary["last_fault"] == [str(out.events[0])]
    # Latched: the next step (which counts the stall's deadlines) sends damping and reports nothing new.
    nxt = chain.step(make_state(spec, 4, q), hold, 1.0, missed_deadlines=missed_in_tick)
    assert nxt.faulted and nxt.events == () and chain.report.summary()["faults"] == {OVERRUN: 1}
    assert chain.report.missed_deadlines == missed_before + missed_in_tick
    assert_same_command(nxt.command, out.command)


def test_late_check_after_a_fault_keeps_the_latched_damping_and_is_pure():
    spec = spec_of("a1")
    lim = SafetyLimits.from_spec(spec)
    q = spec.default_positions.copy()
    out, fs = chain_step(lim, FilterState(), make_state(spec, 0, q), JointCommand.hold(q, spec.kp, spec.kd), 0.0)
    assert not out.faulted
    again, same = late_check(lim, fs, 2)
    assert again is None and same is fs  # within the limit
    late1, fs1 = late_check(lim, fs, 10)
    late2, fs2 = late_check(lim, fs, 10)
    assert late1.events == late2.events and fs1 == fs2 and fs.fault == () and fs.consecutive_missed == 0
    assert fs1.fault == late1.events and fs1.consecutive_missed == 10
    assert late_check(lim, fs1, 50) == (None, fs1)  # already latched: the step's command is damping
