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


class QuietTickCheck:
    """Scratch buffers and constants for one chain (not thread-safe: one per :class:`SafetyChain`)."""

    def __init__(self, limits: SafetyLimits):
        n = limits.num_joints
        self.limits = limits
        self.dt = limits.policy_period_s
        self.kp_scale, self.kd_scale = limits.kp_scale, limits.kd_scale
        self.torque_max = limits.torque_max
        self._shapes = ((n,), (n,), (4,), (3,), (n,), (n,), (n,), (n,), (n,))
        self._moving_shapes = self._shapes[:5]  # state and targets: what still moves once the gains are cached
        self._finite_buffers(n)
        # Bounds on t, one row each: lower rows 0-3 (t must not be below), upper rows 4-7 (not above).
        # Rows 2-5 change every tick: rows = P − Q with P = [ref, soft_lo, ref, soft_hi], Q = [max_step,
        # q̇·Δt, −max_step, q̇·Δt]; (a − (−b) is a + b exactly, so row 4 is the filter's ref + max_step).
        inf = np.full(n, np.inf)
        self._bounds = np.empty((8, n))
        self._bounds[0] = -inf if limits.action_lower is None else limits.action_lower
        self._bounds[1] = limits.soft_lower
        self._bounds[6] = inf if limits.action_upper is None else limits.action_upper
        self._bounds[7] = limits.soft_upper
        self._p = np.empty((4, n))
        self._p[1], self._p[3] = limits.soft_lower, limits.soft_upper
        self._p_ref = self._p[0::2]
        # Q, and below it (row 5) the torque estimate's damping term −(kd·s_d)·q̇: rows 1, 3, 5 are all q̇ times
        # a constant row, so one multiply makes them (with zero velocity targets and feed-forward).
        self._q_and_damping = np.empty((6, n))
        self._q = self._q_and_damping[:4]
        self._q[0], self._q[2] = limits.max_step, -limits.max_step
        self._q_vel = self._q[1::2]
        self._dq_products = self._q_and_damping[1::2]
        self._damping = self._q_and_damping[5]
        self._dq_factors = np.full((3, n), self.dt)  # Δt, Δt, −kd·s_d (set with the gains)
        self._moving = self._bounds[2:6]
        self._lower, self._upper = self._bounds[:4], self._bounds[4:]
        self._outside = np.empty((9, n), dtype=bool)  # 8 bound rows + the torque row
        self._outside_lower, self._outside_upper, self._over = self._outside[:4], self._outside[4:8], self._outside[8]
        self._tau = np.empty(n)
        self._tmp = np.empty(n)
        self._gains_key: tuple = ()
        self._active = np.empty(n, dtype=bool)
        self._all_active = False
        self._kp_eff = np.empty(n)
        self._kd_eff = np.empty(n)
        self._neg_kd_eff = self._dq_factors[2]
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
            if not isinstance(action, np.ndarray):
                return False
            if action.size != self._action_size:
                self._finite_buffers(action.size)
        key = self._gains_key
        cached = bool(key) and key[0] is proposed.kp and key[1] is proposed.kd and key[2] is proposed.dq_target \
            and key[3] is proposed.tau_ff
        try:
            if cached:  # the gain arrays were checked when cached, and cannot have changed
                shapes = (state.q.shape, state.dq.shape, state.base_quat.shape, state.base_ang_vel.shape,
                          proposed.q_target.shape)
                if shapes != self._moving_shapes:
                    return False
                arrays = (state.q, state.dq, state.base_quat, state.base_ang_vel, proposed.q_target)
                buf, ok = self._finite_buf_moving_no_action, self._finite_ok_moving_no_action
                if action is not None:
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
                    buf, ok = self._finite_buf, self._finite_ok
            if action is not None:
                arrays += (action if action.ndim == 1 else action.reshape(-1),)
            np.concatenate(arrays, out=buf)
        except (AttributeError, TypeError, ValueError):  # not arrays, or not float: the full check says why
            return False
        np.isfinite(buf, out=ok)
        return np.count_nonzero(ok) == ok.size  # count_nonzero: half the cost of ok.all() for small arrays

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
        self._gains(proposed)
        np.copyto(self._p_ref, q if reference is None else reference)
        if self._zero_targets:  # q̇·Δt (twice) and the damping term −(kd·s_d)·q̇, in one multiply
            np.multiply(self._dq_factors, dq, out=self._dq_products)
        else:
            np.multiply(dq, self.dt, out=self._q_vel)
        np.subtract(self._p, self._q, out=self._moving)
        outside = self._outside
        np.greater(self._lower, t, out=self._outside_lower)
        np.less(self._upper, t, out=self._outside_upper)
        # The torque filter's estimate, operation for operation (see filters.torque_limit).
        tau = self._tau
        if self._zero_targets:  # kd·s·(0 − q̇) + 0 is −(kd·s)·q̇, exactly
            tmp = self._damping
        else:
            tmp = self._tmp
            np.subtract(proposed.dq_target, dq, out=tmp)
            np.multiply(self._kd_eff, tmp, out=tmp)
            np.add(tmp, proposed.tau_ff, out=tmp)
        np.subtract(t, q, out=tau)
        np.multiply(self._kp_eff, tau, out=tau)
        np.add(tau, tmp, out=tau)
        np.abs(tau, out=tau)
        np.greater(tau, self.torque_max, out=self._over)
        if not self._all_active:
            np.logical_and(outside, self._active, out=outside)
        if np.count_nonzero(outside):
            return False
        if self._all_active:
            np.copyto(new_reference, t)
        else:
            np.copyto(new_reference, q)
            np.copyto(new_reference, t, where=self._active)
        return True
