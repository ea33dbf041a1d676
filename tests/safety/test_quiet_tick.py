"""The quiet-tick shortcut changes nothing: SafetyChain (with it) and chain_step (every filter, without it)
give the same commands, events, faults and filter state on random ticks around every limit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.robots.spec import load_robot
from robot_rl.safety import ActionClip, FilterState, SafetyChain, chain_step
from robot_rl.safety.filters import FILTER_ORDER, FINITE, check_finite
from robot_rl.safety.quiet_tick import QuietTickCheck

ROBOTS = ["a1", "go2", "g1", "panda"]


def _read_only(values: np.ndarray) -> np.ndarray:
    arr = np.array(values, dtype=np.float64)
    arr.setflags(write=False)
    return arr


def _random_tick(spec, lim, rng, tick: int, ref: np.ndarray, gains: tuple[np.ndarray, ...]):
    """A state and command near the limits: each term of the filters' bounds is hit now and then."""
    n = spec.num_joints
    span = lim.soft_upper - lim.soft_lower
    kind = rng.integers(6)
    scale = rng.choice([0.0, 0.3, 1.0, 1.05])  # inside the rate limit, on it, just over it
    target = ref + rng.uniform(-1, 1, n) * lim.max_step * scale
    # The measured pose around the target, within the spring's torque budget or just over it.
    q = target + rng.uniform(-1, 1, n) * lim.torque_max / spec.kp * rng.choice([0.3, 1.0, 1.1])
    if rng.random() < 0.1:  # now and then outside the soft limits
        q = rng.uniform(lim.soft_lower - 0.02 * span, lim.soft_upper + 0.02 * span)
    dq = rng.normal(size=n) * rng.choice([0.1, 1.0, 10.0])
    if kind == 0:  # a target right at a soft limit, or just past it
        j = rng.integers(n)
        target[j] = (lim.soft_upper if rng.random() < 0.5 else lim.soft_lower)[j] + rng.choice([0.0, 1e-9, -1e-9])
    if kind == 1:  # the policy's clip
        target = lim.action_upper + rng.uniform(-1e-3, 1e-3, n)
    if kind == 2:  # close to the measured pose: torque small, the rate limit decides
        q = np.clip(target + rng.normal(size=n) * 1e-3, lim.soft_lower, lim.soft_upper)
    quat = np.array([1.0, 0.0, 0.0, 0.0])
    if spec.safety.max_tilt_rad is not None and rng.random() < 0.05:
        tilt = rng.uniform(0.0, 1.2 * spec.safety.max_tilt_rad)
        quat = np.array([math.cos(tilt / 2), math.sin(tilt / 2), 0.0, 0.0])
    state = RobotState(tick * 0.02, tick if rng.random() > 0.02 else max(tick - 1, 0), q, dq, np.zeros(n), quat,
                       rng.normal(size=3))
    kp, kd, zero_dq, zero_tau = gains
    if kind == 3:  # writable gains with a passive joint, velocity targets and feed-forward torque
        kp = np.array(kp)
        kp[rng.integers(n)] = 0.0
        command = JointCommand(target, rng.normal(size=n), kp, np.array(kd), rng.normal(size=n) * lim.torque_max)
    else:  # the controller's way: read-only gains and zero targets, the same arrays every tick
        command = JointCommand(target, zero_dq, kp, kd, zero_tau)
    if kind == 4 and rng.random() < 0.2:  # a non-finite value somewhere
        if rng.random() < 0.5:
            command.q_target[rng.integers(n)] = np.nan
        else:
            state.dq[rng.integers(n)] = np.inf
    return state, command


def test_a_legs_only_policy_takes_the_shortcut():
    """The G1 drives 12 of its 29 joints: its 12-wide raw action must not send every tick to the full filters."""
    spec = load_robot("g1")
    n = spec.num_joints
    assert spec.num_policy_joints < n
    check = QuietTickCheck(SafetyChain.from_spec(spec).limits)
    q = spec.default_positions.copy()
    state = RobotState(0.0, 1, q.copy(), np.zeros(n), np.zeros(n), np.array([1.0, 0, 0, 0]), np.zeros(3))
    command = JointCommand(q.copy(), _read_only(np.zeros(n)), _read_only(spec.kp), _read_only(spec.kd),
                           _read_only(np.zeros(n)))
    action = np.zeros(spec.num_policy_joints, dtype=np.float32)
    assert check.all_finite(state, command, action)
    assert check.quiet(None, state, command, np.zeros(n))
    action[3] = np.nan
    assert not check.all_finite(state, command, action)


@pytest.mark.parametrize("name", ROBOTS)
def test_the_shortcut_gives_what_every_filter_gives(name):
    spec = load_robot(name)
    n = spec.num_joints
    chain = SafetyChain.from_spec(spec, ActionClip(2.0, 0.5, spec.default_positions))
    lim = chain.limits
    gains = (_read_only(spec.kp), _read_only(spec.kd), _read_only(np.zeros(n)), _read_only(np.zeros(n)))
    rng = np.random.default_rng(26)
    plain = FilterState()
    quiet_ticks = 0
    for tick in range(1, 3001):
        ref = spec.default_positions if plain.reference is None else plain.reference
        state, command = _random_tick(spec, lim, rng, tick, ref, gains)
        # The policy's raw action: every joint's, or a legs-only policy's narrower one (G1: 12 of 29)
        action = rng.normal(size=rng.choice([n, spec.num_policy_joints])).astype(np.float32)
        missed = int(rng.random() < 0.02)
        expected, plain = chain_step(lim, plain, state, command, tick * 0.02, action=action, missed_deadlines=missed)
        got = chain.step(state, command, tick * 0.02, action=action, missed_deadlines=missed)
        assert [str(e) for e in got.events] == [str(e) for e in expected.events], tick
        assert got.faulted == expected.faulted
        assert (got.command is command) == (expected.command is command), tick
        for field in ("q_target", "dq_target", "kp", "kd", "tau_ff"):
            np.testing.assert_array_equal(getattr(got.command, field), getattr(expected.command, field))
        fs = chain.filter_state
        assert fs.stale == plain.stale and fs.consecutive_missed == plain.consecutive_missed
        assert [str(e) for e in fs.fault] == [str(e) for e in plain.fault]
        np.testing.assert_array_equal(fs.reference, plain.reference)
        quiet_ticks += not expected.events
        if plain.fault:  # re-arm both, as the runtime would after a reset
            chain.reset()
            plain = FilterState()
    assert quiet_ticks > 50  # the shortcut was taken too (test_chain.py walks inside every limit for longer)


def test_a_quiet_tick_passes_the_command_object_and_keeps_its_own_reference():
    spec = load_robot("a1")
    n = spec.num_joints
    chain = SafetyChain.from_spec(spec)
    q = spec.default_positions.copy()
    state = RobotState(0.0, 1, q.copy(), np.zeros(n), np.zeros(n), np.array([1.0, 0, 0, 0]), np.zeros(3))
    command = JointCommand(q.copy(), _read_only(np.zeros(n)), _read_only(spec.kp), _read_only(spec.kd),
                           _read_only(np.zeros(n)))
    refs = []
    for tick in range(1, 5):
        state.tick = tick
        out = chain.step(state, command, tick * 0.02, action=np.zeros(n))
        assert out.command is command and out.events == ()
        refs.append(chain.filter_state.reference)
        assert refs[-1] is not command.q_target
        sent = command.q_target.copy()
        command.q_target[:] += 0.001  # the caller reuses its buffer: the chain's reference must not move
        np.testing.assert_array_equal(chain.filter_state.reference, sent)
    assert refs[0] is not refs[1] and refs[0] is refs[2]  # two buffers, in turn: no allocation per tick


def test_gains_changed_in_place_are_seen():
    """Only read-only arrays are cached by identity: a writable kp edited in place is read again."""
    spec = load_robot("a1")
    n = spec.num_joints
    chain = SafetyChain.from_spec(spec)
    q = spec.default_positions.copy()
    kp = spec.kp.copy()
    state = RobotState(0.0, 1, q.copy(), np.zeros(n), np.zeros(n), np.array([1.0, 0, 0, 0]), np.zeros(3))
    target = q + 0.9 * chain.limits.max_step
    assert chain.step(state, JointCommand(target, np.zeros(n), kp, spec.kd.copy(), np.zeros(n)), 0.0).events == ()
    kp *= 1e4  # the same array object, now asking for far more torque than the motors have
    state.tick = 2
    out = chain.step(state, JointCommand(target, np.zeros(n), kp, spec.kd.copy(), np.zeros(n)), 0.02)
    assert [e.filter_name for e in out.events] == ["torque_limit"]


def test_all_finite_refuses_what_it_cannot_vouch_for():
    spec = load_robot("a1")
    n = spec.num_joints
    check = QuietTickCheck(SafetyChain.from_spec(spec).limits)
    state = RobotState(0.0, 1, np.zeros(n), np.zeros(n), np.zeros(n), np.array([1.0, 0, 0, 0]), np.zeros(3))
    command = JointCommand.hold(np.zeros(n), spec.kp, spec.kd)
    assert check.all_finite(state, command, None) and check.all_finite(state, command, np.zeros((1, n)))
    assert check.all_finite(state, command, np.zeros(5))  # any width, as check_finite: a legs-only policy's
    assert check_finite(state, command, n, np.zeros(5)) is None
    assert not check.all_finite(state, command, [0.0] * n)
    bad_shape = RobotState(0.0, 1, np.zeros(n + 1), np.zeros(n - 1), np.zeros(n), np.array([1.0, 0, 0, 0]),
                           np.zeros(3))
    assert not check.all_finite(bad_shape, command, None)
    for value in (np.nan, np.inf, -np.inf):
        state.base_ang_vel[1] = value
        assert not check.all_finite(state, command, None)


def test_a_non_finite_read_only_gain_is_never_trusted():
    """Immutable gains skip the per-tick finite check only once they were found finite."""
    spec = load_robot("a1")
    n = spec.num_joints
    chain = SafetyChain.from_spec(spec)
    q = spec.default_positions.copy()
    kd = spec.kd.copy()
    kd[5] = np.nan
    command = JointCommand(q.copy(), _read_only(np.zeros(n)), _read_only(spec.kp), _read_only(kd),
                           _read_only(np.zeros(n)))
    state = RobotState(0.0, 1, q.copy(), np.zeros(n), np.zeros(n), np.array([1.0, 0, 0, 0]), np.zeros(3))
    for tick in (1, 2):  # the second tick would use a cache, if there were one
        state.tick = tick
        out = chain.step(state, command, tick * 0.02, action=np.zeros(n))
        assert out.faulted and (not out.events or out.events[0].filter_name == "non_finite")
        chain.reset()


def test_all_finite_refuses_every_non_finite_value_at_every_position():
    """Fault injection over the shortcut's finite check: NaN / ±inf in every slot of every input is refused by it
    and faulted by the chain; huge finite values are neither."""
    spec = load_robot("a1")
    n = spec.num_joints
    chain = SafetyChain.from_spec(spec)
    check = QuietTickCheck(chain.limits)
    rng = np.random.default_rng(7)
    gains = (_read_only(spec.kp), _read_only(spec.kd), _read_only(np.zeros(n)), _read_only(np.zeros(n)))

    def tick():
        state = RobotState(0.0, 1, rng.normal(size=n), rng.normal(size=n), np.zeros(n), np.array([1.0, 0, 0, 0]),
                           rng.normal(size=3))
        command = JointCommand(rng.normal(size=n), gains[2], gains[0], gains[1], gains[3])
        return state, command, rng.normal(size=n).astype(np.float32)

    state, command, action = tick()
    assert check.all_finite(state, command, action)
    slots = [("state", f, j) for f in ("q", "dq", "base_quat", "base_ang_vel") for j in range(getattr(state, f).size)]
    slots += [("command", "q_target", j) for j in range(n)] + [("action", "", j) for j in range(n)]
    for owner, field, j in slots:
        for value in (np.nan, np.inf, -np.inf):
            state, command, action = tick()
            arr = getattr(state, field) if owner == "state" else command.q_target if owner == "command" else action
            arr[j] = value
            assert not check.all_finite(state, command, action), (field, j, value)
            assert check_finite_fault(chain, state, command, action), (field, j, value)
    state, command, action = tick()
    state.q[0], state.dq[0] = np.inf, -np.inf
    assert not check.all_finite(state, command, action)
    state, command, action = tick()
    state.dq[:] = 1e308  # finite (their sum would overflow): not a finite-check fault
    assert check.all_finite(state, command, action)
    state.tick = 2
    assert not check_finite_fault(chain, state, command, action)


def check_finite_fault(chain: SafetyChain, state: RobotState, command: JointCommand, action: np.ndarray) -> bool:
    """Did a fresh chain's step latch the finite-check fault on this tick?"""
    chain.reset()
    out = chain.step(state, command, 0.0, action=action)
    return any(e.filter_name == FINITE and e.fault for e in out.events)


@pytest.mark.parametrize("name", ["a1", "g1"])
def test_every_bound_pair_decides_to_the_last_bit(name):
    """The quiet check's eight bound pairs in one comparison: a target on each bound (action clip, rate limit, soft
    and velocity-aware limits, ± torque) is quiet exactly when the filters leave it alone, one ulp past it is not."""
    spec = load_robot(name)
    n = spec.num_joints
    chain = SafetyChain.from_spec(spec, ActionClip(1.0, 0.25, spec.default_positions))
    lim, check = chain.limits, QuietTickCheck(chain.limits)
    gains = (_read_only(spec.kp), _read_only(spec.kd), _read_only(np.zeros(n)), _read_only(np.zeros(n)))
    rng = np.random.default_rng(11)
    ref = spec.default_positions.copy()
    decided, outcomes = 0, {True: 0, False: 0}
    for trial in range(40):
        q = ref + rng.uniform(-0.5, 0.5, n) * lim.max_step
        dq = rng.normal(size=n) * rng.choice([0.5, 20.0])
        state = RobotState(0.02, 1, q, dq, np.zeros(n), np.array([1.0, 0, 0, 0]), np.zeros(3))
        j = rng.integers(n)
        kp_eff, rest = spec.kp[j] * lim.kp_scale, spec.kd[j] * lim.kd_scale * (0.0 - dq[j])
        bounds = [lim.action_lower[j], lim.action_upper[j], ref[j] - lim.max_step[j], ref[j] + lim.max_step[j],
                  lim.soft_lower[j] - dq[j] * lim.policy_period_s, lim.soft_upper[j] - dq[j] * lim.policy_period_s,
                  q[j] + (lim.torque_max[j] - rest) / kp_eff, q[j] - (lim.torque_max[j] + rest) / kp_eff]
        for bound in bounds:
            for value in (bound, np.nextafter(bound, np.inf), np.nextafter(bound, -np.inf)):
                t = ref.copy()
                t[j] = value
                command = JointCommand(t, gains[2], gains[0], gains[1], gains[3])
                out, _ = chain_step(lim, FilterState(ref.copy()), state, command, 0.02)
                motion = [e for e in out.events if e.filter_name in FILTER_ORDER[1:6]]
                quiet = check.quiet(ref, state, command, np.zeros(n))
                outcomes[quiet] += 1
                assert not (quiet and motion), (trial, j, bound, value)  # never quiet where a filter acts
                if not quiet:
                    decided += not motion  # tighter than the filters only outside the soft limits (not here)
                    assert motion or np.any(q < lim.soft_lower) or np.any(q > lim.soft_upper), (trial, j, value)
    assert decided == 0 and outcomes[True] > 50 and outcomes[False] > 50, outcomes
