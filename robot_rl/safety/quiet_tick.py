"""The safety chain's quiet-tick check: "no filter acts on this command", decided in a few numpy calls.

Almost every tick of a healthy robot passes the chain untouched. The filters in
:mod:`robot_rl.safety.filters` establish that one filter at a time (≈ 50 small numpy calls and their
temporaries, ≈ 30 µs for 12 joints); :class:`QuietTickCheck` establishes the same with ≈ 15 calls into
buffers allocated once. It never decides anything itself: it only answers "certainly quiet" or "not sure",
and on "not sure" :func:`robot_rl.safety.chain.chain_step` runs the filters, which stay the one definition of
every event, bound and counter. So the chain's output is the same either way; this is only a shortcut.

Why "certainly quiet" is sound, filter by filter (``t`` the proposed targets, all inputs finite):

- finite check: one ``isfinite`` over every input copied into one buffer, after a shape check;
- action clip, rate limit: the same bounds the filters compute (``ref ∓ max_step``, the same float ops);
- position and velocity-aware limits: the velocity-aware bounds lie inside the position bounds
  (``lo − min(q̇, 0)·Δt ≥ lo``), so checking them checks both. We check them against the *soft* limits,
  ``t ≥ max(soft_lo, soft_lo − q̇·Δt)`` and ``t ≤ min(soft_hi, soft_hi − q̇·Δt)``: equal to the filters'
  bounds while q is inside the soft limits (for q̇ < 0, ``q̇·Δt`` is the filters' ``min(q̇, 0)·Δt``),
  and tighter otherwise (outside, the filters widen the soft limits to q; they also pin crossed bounds,
  which only widens them): a tighter check can only answer "not sure" more often;
- torque limit: the filter's own estimate, ``kp·s_p·(t − q) + kd·s_d·(q̇* − q̇) + τ_ff``, same operations
  in the same order, against ``|τ| ≤ torque_max``.

Only joints with kp > 0 count (the motion filters ignore the others). Gains, velocity targets and
feed-forward that arrive as read-only arrays owning their data (the controller's constants) are trusted
not to change, and what derives from them (the active mask, the effective gains) is cached by identity.
"""

from __future__ import annotations

import numpy as np

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.safety.filters import SafetyLimits


def _immutable(arr: object) -> bool:
    return isinstance(arr, np.ndarray) and arr.base is None and not arr.flags.writeable


# The numpy ufuncs of the hot path, bound once (a module global is one lookup, ``np.subtract`` two).
_add, _subtract, _multiply, _greater, _count = np.add, np.subtract, np.multiply, np.greater, np.count_nonzero
_isfinite, _concatenate, _ndarray = np.isfinite, np.concatenate, np.ndarray


class QuietTickCheck:
    """Scratch buffers and constants for one chain (not thread-safe: one per :class:`SafetyChain`).

    Every numpy call of a quiet tick takes operands of one shape, contiguous or one-dimensional: numpy's
    fast loop, ≈ 0.3 µs a call for 12 joints; a broadcast or a strided 2-D operand takes its general iterator,
    twice that or more. Python scalars cost like a broadcast, so the constants are arrays (``Δt`` too).
    """

    def __init__(self, limits: SafetyLimits):
        n = limits.num_joints
        self.limits = limits
        self.dt = limits.policy_period_s
        self.kp_scale, self.kd_scale = limits.kp_scale, limits.kd_scale
        self.torque_max = limits.torque_max
        self._shapes = ((n,), (n,), (4,), (3,), (n,), (n,), (n,), (n,), (n,))
        self._moving_shapes = self._shapes[:5]  # state and targets: what still moves once the gains are cached
        self._finite_buffers(n)
        # Every bound as a pair (x, y), crossed when x > y, in one (12, n) array M: pair i is (M[i], M[i + 4]),
        # so one `greater` of the contiguous blocks M[0:8] and M[4:12] decides all eight:
        #   pair 0: lo_c > t  (lo_c = max(action_lower, soft_lower): a side's constant bounds in one row, exact)
        #   pair 1: ref − max_step > t          pair 5: t > ref + max_step
        #   pair 2: soft_lower − q̇·Δt > t      pair 6: t > soft_upper − q̇·Δt
        #   pair 3: −torque_max > τ             pair 7: τ > torque_max
        #   pair 4: t > hi_c  (hi_c = min(action_upper, soft_upper))
        # Rows: 0 lo_c, 1 ref − max_step, 2 soft_lower − q̇·Δt, 3 −torque_max, 4-6 t, 7 τ, 8 hi_c,
        # 9 ref + max_step, 10 soft_upper − q̇·Δt, 11 torque_max.
        lower = limits.soft_lower if limits.action_lower is None else np.maximum(limits.action_lower,
                                                                                limits.soft_lower)
        upper = limits.soft_upper if limits.action_upper is None else np.minimum(limits.action_upper,
                                                                                limits.soft_upper)
        self._m = m = np.empty((12, n))
        m[0], m[3], m[8], m[11] = lower, -self.torque_max, upper, self.torque_max
        self._x, self._y = m[0:8], m[4:12]
        self._rate_lo, self._vel_lo, self._t_rows, self._tau = m[1], m[2], m[4:7], m[7]
        self._rate_hi, self._vel_hi = m[9], m[10]
        self._max_step = np.array(limits.max_step, dtype=np.float64)
        self._soft_lower = np.array(limits.soft_lower, dtype=np.float64)
        self._soft_upper = np.array(limits.soft_upper, dtype=np.float64)
        self._dt = np.full(n, self.dt)
        self._vel_step = np.empty(n)  # q̇·Δt
        self._rest = np.empty(n)  # the torque estimate's damping and feed-forward term
        self._outside = np.empty((8, n), dtype=bool)
        self._gains_key: tuple = ()
        self._active = np.empty(n, dtype=bool)
        self._all_active = False
        self._kp_eff = np.empty(n)
        self._kd_eff = np.empty(n)
        self._neg_kd_eff = np.empty(n)
        self._zero_targets = False  # q̇* and τ_ff are immutable zeros: rest = −kd_eff·q̇ exactly

    def _finite_buffers(self, action_size: int) -> None:
        """Every input of one tick in one buffer; the action (of any size, as check_finite takes it: a legs-only
        policy's is narrower than the robot) at the end. Made again only when the action's size changes."""
        n = self.limits.num_joints
        self._action_size = action_size
        self._finite_buf = np.empty(7 * n + 7 + action_size)
        self._finite_ok = np.empty(7 * n + 7 + action_size, dtype=bool)
        self._finite_buf_no_action = self._finite_buf[: 7 * n + 7]
        self._finite_ok_no_action = self._finite_ok[: 7 * n + 7]
        # With cached gains (already checked, and immutable): state, targets and action only.
        self._finite_buf_moving = self._finite_buf[: 3 * n + 7 + action_size]
        self._finite_ok_moving = self._finite_ok[: 3 * n + 7 + action_size]
        self._finite_buf_moving_no_action = self._finite_buf[: 3 * n + 7]
        self._finite_ok_moving_no_action = self._finite_ok[: 3 * n + 7]

    def all_finite(self, state: RobotState, proposed: JointCommand, action: np.ndarray | None) -> bool:
        """True when every array has its shape and is finite; False means "run check_finite"."""
        if action is not None:
            if not isinstance(action, _ndarray):
                return False
            if action.size != self._action_size:
                self._finite_buffers(action.size)
        key = self._gains_key
        try:
            if key and key[0] is proposed.kp and key[1] is proposed.kd and key[2] is proposed.dq_target \
                    and key[3] is proposed.tau_ff:  # the gain arrays were checked when cached, cannot have changed
                q, dq, quat, gyro, t = state.q, state.dq, state.base_quat, state.base_ang_vel, proposed.q_target
                if (q.shape, dq.shape, quat.shape, gyro.shape, t.shape) != self._moving_shapes:
                    return False
                if action is None:
                    arrays = (q, dq, quat, gyro, t)
                    buf, ok = self._finite_buf_moving_no_action, self._finite_ok_moving_no_action
                else:
                    arrays = (q, dq, quat, gyro, t, action if action.ndim == 1 else action.reshape(-1))
                    buf, ok = self._finite_buf_moving, self._finite_ok_moving
            else:
                shapes = (state.q.shape, state.dq.shape, state.base_quat.shape, state.base_ang_vel.shape,
                          proposed.q_target.shape, proposed.dq_target.shape, proposed.kp.shape, proposed.kd.shape,
                          proposed.tau_ff.shape)
                if shapes != self._shapes:
                    return False
                arrays = (state.q, state.dq, state.base_quat, state.base_ang_vel, proposed.q_target,
                          proposed.dq_target, proposed.kp, proposed.kd, proposed.tau_ff)
                buf, ok = self._finite_buf_no_action, self._finite_ok_no_action
                if action is not None:
                    arrays += (action if action.ndim == 1 else action.reshape(-1),)
                    buf, ok = self._finite_buf, self._finite_ok
            _concatenate(arrays, out=buf)
        except (AttributeError, TypeError, ValueError):  # not arrays, or not float: the full check says why
            return False
        _isfinite(buf, ok)
        return _count(ok) == ok.size  # count_nonzero: half the cost of ok.all() for small arrays

    def _gains(self, proposed: JointCommand) -> None:
        """Active mask and effective gains for this command's kp / kd (cached for immutable arrays)."""
        kp, kd, dqt, tau_ff = proposed.kp, proposed.kd, proposed.dq_target, proposed.tau_ff
        key = self._gains_key
        if key and key[0] is kp and key[1] is kd and key[2] is dqt and key[3] is tau_ff:
            return
        np.greater(kp, 0.0, out=self._active)
        self._all_active = np.count_nonzero(self._active) == self._active.size
        np.multiply(kp, self.kp_scale, out=self._kp_eff)
        np.multiply(kd, self.kd_scale, out=self._kd_eff)
        np.negative(self._kd_eff, out=self._neg_kd_eff)
        cacheable = all(_immutable(a) and a.shape == self._shapes[0] and np.isfinite(a).all()
                        for a in (kp, kd, dqt, tau_ff))
        self._zero_targets = cacheable and not dqt.any() and not tau_ff.any()
        self._gains_key = (kp, kd, dqt, tau_ff) if cacheable else ()

    def quiet(self, reference: np.ndarray | None, state: RobotState, proposed: JointCommand,
              new_reference: np.ndarray) -> bool:
        """True when no motion filter would change ``proposed.q_target``; then ``new_reference`` holds the
        next rate-limit reference (the target on active joints, q elsewhere). Inputs must be finite."""
        t, q, dq = proposed.q_target, state.q, state.dq
        key = self._gains_key
        if not (key and key[0] is proposed.kp and key[1] is proposed.kd and key[2] is proposed.dq_target
                and key[3] is proposed.tau_ff):
            self._gains(proposed)
        ref = q if reference is None else reference
        self._t_rows[...] = t
        # The filters' bounds, operation for operation: ref ∓ max_step (rate_limit), soft ∓ q̇·Δt (see above).
        _subtract(ref, self._max_step, self._rate_lo)
        _add(ref, self._max_step, self._rate_hi)
        vel_step = _multiply(dq, self._dt, self._vel_step)
        _subtract(self._soft_lower, vel_step, self._vel_lo)
        _subtract(self._soft_upper, vel_step, self._vel_hi)
        # The torque filter's estimate, operation for operation (see filters.torque_limit).
        rest = self._rest
        if self._zero_targets:  # kd·s·(0 − q̇) + 0 is −(kd·s)·q̇, exactly
            _multiply(self._neg_kd_eff, dq, rest)
        else:
            _subtract(proposed.dq_target, dq, rest)
            _multiply(self._kd_eff, rest, rest)
            _add(rest, proposed.tau_ff, rest)
        tau = _subtract(t, q, self._tau)
        _multiply(self._kp_eff, tau, tau)
        _add(tau, rest, tau)
        outside = _greater(self._x, self._y, self._outside)
        if self._all_active:
            if _count(outside):
                return False
            new_reference[...] = t
            return True
        np.logical_and(outside, self._active, out=outside)
        if _count(outside):
            return False
        np.copyto(new_reference, q)
        np.copyto(new_reference, t, where=self._active)
        return True
