"""Safety filters: pure functions between a proposed joint command and the robot.

Each filter takes arrays in the spec's joint order plus the limits derived from the spec, and returns
the (possibly changed) position targets and at most one :class:`SafetyEvent`. None of them reads a
clock, does I/O or keeps state of its own: time and the watchdogs' memory come in as arguments and go
out as return values, so every filter can be tested, replayed and composed on its own.

A target that is inside a filter's bounds is returned as the *same array object*, never a recomputed
copy: commands inside all limits reach the robot bit-exact.

Motion filters act only on joints with ``kp > 0``. With ``kp == 0`` (damping, zero torque) the position
target exerts no force, so there is nothing to limit, and damping is the safe state we fall back to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.robots.spec import RobotSpec

# Filter names, in the order the chain applies them. Events and counters are keyed by these.
FINITE = "non_finite"
ACTION_CLIP = "action_clip"
RATE = "rate_limit"
POSITION = "position_limit"
VELOCITY = "velocity_limit"  # velocity-aware position limit
TORQUE = "torque_limit"
TILT = "tilt"
STALE = "stale_state"
OVERRUN = "overrun"
FILTER_ORDER = (FINITE, ACTION_CLIP, RATE, POSITION, VELOCITY, TORQUE, TILT, STALE, OVERRUN)


@dataclass(frozen=True)
class SafetyEvent:
    """Something a filter did or found. ``fault`` events latch the chain into damping.

    Limit events keep their numbers, not text: the text (:attr:`detail`) is built only when someone
    reads it, which keeps a tick on which the rate limiter clamps every joint cheap.
    """

    filter_name: str  # one of FILTER_ORDER
    fault: bool
    message: str  # what happened (a fault's whole story; for a limit, which limit)
    joints: tuple[int, ...] = ()  # joint indices involved (empty when not joint-specific)
    # Limit events: per joint in `joints`, the value proposed and the value sent (position targets in
    # rad; for the torque limit, the estimated torque in N·m).
    before: tuple[float, ...] = ()
    after: tuple[float, ...] = ()
    joint_names: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def detail(self) -> str:
        """For a person: what, which joint or index, the values."""
        if not self.before:
            return self.message
        names = self.joint_names
        shown = [f"{names[i] if i < len(names) else i} {b:.4g}→{a:.4g}"
                 for i, b, a in zip(self.joints[:4], self.before[:4], self.after[:4], strict=True)]
        more = f" (+{len(self.joints) - 4} more)" if len(self.joints) > 4 else ""
        return f"{self.message}: {', '.join(shown)}{more}"

    def __str__(self) -> str:
        return f"[{'FAULT' if self.fault else 'limit'}] {self.filter_name}: {self.detail}"


@dataclass(frozen=True, eq=False)
class ActionClip:
    """The policy contract's action clip, seen in target space: ``q* = offset + scale·a``, ``|a| ≤ clip``.

    The chain clips targets rather than raw actions so it works whether or not the controller hands it
    the action; the bounds are the same set.
    """

    clip: float | np.ndarray
    scale: float | np.ndarray
    offset: np.ndarray

    def target_bounds(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        clip = np.broadcast_to(np.asarray(self.clip, dtype=np.float64), (n,))
        scale = np.broadcast_to(np.asarray(self.scale, dtype=np.float64), (n,))
        offset = np.asarray(self.offset, dtype=np.float64)
        if offset.shape != (n,):
            raise ValueError(f"ActionClip.offset has shape {offset.shape}, expected ({n},) (one per joint)")
        if not (np.all(np.isfinite(clip)) and np.all(clip >= 0)):
            raise ValueError(f"ActionClip.clip must be finite and >= 0, got {self.clip!r}")
        a = offset - scale * clip
        b = offset + scale * clip
        return _frozen(np.minimum(a, b)), _frozen(np.maximum(a, b))  # a negative scale swaps the ends


@dataclass(frozen=True, eq=False)
class SafetyLimits:
    """Every number the filters need, derived once from the spec (and the policy contract's clip)."""

    joint_names: tuple[str, ...]
    policy_period_s: float
    hard_lower: np.ndarray
    hard_upper: np.ndarray
    soft_lower: np.ndarray  # hard limits shrunk by soft_limit_margin_rad
    soft_upper: np.ndarray
    max_step: np.ndarray  # max_target_rate_rad_s × policy period, per joint
    torque_max: np.ndarray  # torque_limit_fraction × effort_limit
    damping_kd: float
    stale_after_s: float
    stale_state_periods: int
    max_consecutive_overruns: int
    max_tilt_rad: float | None
    cos_max_tilt: float  # cos(max_tilt_rad), or -1 (never) for robots without a tilt limit
    action_lower: np.ndarray | None = None  # target-space action clip bounds, None: no clip
    action_upper: np.ndarray | None = None
    kp_scale: float = 1.0  # the motors' measured kp and kd per commanded one (spec.safety.actuator_*_scale)
    kd_scale: float = 1.0

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)

    @classmethod
    def from_spec(cls, spec: RobotSpec, action_clip: ActionClip | None = None) -> SafetyLimits:
        s = spec.safety
        n = spec.num_joints
        margin = s.soft_limit_margin_rad
        soft_lower = spec.position_lower + margin
        soft_upper = spec.position_upper - margin
        for i, name in enumerate(spec.joint_names):
            if soft_lower[i] >= soft_upper[i]:
                raise ValueError(
                    f"{spec.source_file or spec.name}: joint {name!r}: soft_limit_margin_rad {margin} leaves no "
                    f"range inside position_limit [{spec.position_lower[i]}, {spec.position_upper[i]}]"
                )
            if not soft_lower[i] <= spec.default_positions[i] <= soft_upper[i]:
                raise ValueError(
                    f"{spec.source_file or spec.name}: joint {name!r}: default_position {spec.default_positions[i]} "
                    f"is outside the soft limits [{soft_lower[i]:.6g}, {soft_upper[i]:.6g}] (position_limit shrunk "
                    f"by soft_limit_margin_rad {margin}); the start-up ramp could never reach it"
                )
        period = spec.timing.policy_period_s
        lower = upper = None
        if action_clip is not None:
            lower, upper = action_clip.target_bounds(n)
        return cls(
            joint_names=spec.joint_names,
            policy_period_s=period,
            hard_lower=spec.position_lower,
            hard_upper=spec.position_upper,
            soft_lower=_frozen(soft_lower),
            soft_upper=_frozen(soft_upper),
            max_step=_frozen(np.full(n, s.max_target_rate_rad_s * period)),
            torque_max=_frozen(s.torque_limit_fraction * spec.effort_limits),
            damping_kd=s.damping_kd,
            # Half a period of slack: ticks come at fixed deadlines, so the N-th tick without a new state
            # faults even when `now` jitters a little early, and the (N-1)-th never does.
            stale_after_s=(s.stale_state_periods - 0.5) * period,
            stale_state_periods=s.stale_state_periods,
            max_consecutive_overruns=s.max_consecutive_overruns,
            max_tilt_rad=s.max_tilt_rad,
            cos_max_tilt=-1.0 if s.max_tilt_rad is None else math.cos(s.max_tilt_rad),
            action_lower=lower,
            action_upper=upper,
            kp_scale=s.actuator_kp_scale,
            kd_scale=s.actuator_kd_scale,
        )


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr, dtype=np.float64)
    arr.setflags(write=False)
    return arr


def _limit_event(
    filter_name: str, message: str, idx: np.ndarray, before: np.ndarray, after: np.ndarray, limits: SafetyLimits
) -> SafetyEvent:
    return SafetyEvent(filter_name, False, message, tuple(idx.tolist()), tuple(before[idx].tolist()),
                       tuple(after[idx].tolist()), limits.joint_names)


def _bound(
    q_target: np.ndarray, lo: np.ndarray, hi: np.ndarray, active: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """Clamp the active joints of q_target into [lo, hi]. Inside: the same array and None."""
    outside = (q_target < lo) | (q_target > hi)
    if not outside.any():
        return q_target, None
    changed = outside & active
    if not changed.any():
        return q_target, None
    out = np.where(changed, np.minimum(np.maximum(q_target, lo), hi), q_target)
    return out, changed.nonzero()[0]


# --- finite check --------------------------------------------------------------------------------------


def check_finite(
    state: RobotState, command: JointCommand, num_joints: int, action: np.ndarray | None = None,
    joint_names: tuple[str, ...] = (),
) -> SafetyEvent | None:
    """Fault on any NaN/inf (or wrongly shaped array) in the measured state, the command or the action.

    This runs first: a clip or a min/max passes NaN through, so no later filter could remove it.
    """
    n = num_joints
    fields = (
        ("state.q", state.q, (n,)), ("state.dq", state.dq, (n,)),
        ("state.base_quat", state.base_quat, (4,)), ("state.base_ang_vel", state.base_ang_vel, (3,)),
        ("command.q_target", command.q_target, (n,)), ("command.dq_target", command.dq_target, (n,)),
        ("command.kp", command.kp, (n,)), ("command.kd", command.kd, (n,)), ("command.tau_ff", command.tau_ff, (n,)),
    )
    if isinstance(action, np.ndarray):
        action = action.ravel()  # an ONNX output is often (1, n)
        fields += (("action", action, action.shape),)
    elif action is not None:
        fields += (("action", action, None),)
    for name, arr, shape in fields:
        if not isinstance(arr, np.ndarray) or arr.shape != shape:
            got = f"shape {arr.shape}" if isinstance(arr, np.ndarray) else type(arr).__name__
            return SafetyEvent(FINITE, True, f"{name}: expected a float array of shape {shape}, got {got}")
    # One pass over everything: the common case (all finite) costs a concatenate and one isfinite.
    if np.isfinite(np.concatenate([f[1] for f in fields])).all():
        return None
    bad: list[str] = []
    joints: set[int] = set()
    for name, arr, shape in fields:
        for i in np.flatnonzero(~np.isfinite(arr)).tolist():
            per_joint = shape == (n,) and name != "action" and i < len(joint_names)
            bad.append(f"{name}[{i}]{f' ({joint_names[i]})' if per_joint else ''} = {arr[i]}")
            if per_joint:
                joints.add(i)
    more = f" (+{len(bad) - 6} more)" if len(bad) > 6 else ""
    return SafetyEvent(FINITE, True, f"non-finite value: {', '.join(bad[:6])}{more}", tuple(sorted(joints)))


# --- motion filters (position targets) -----------------------------------------------------------------


def action_clip(
    q_target: np.ndarray, limits: SafetyLimits, active: np.ndarray
) -> tuple[np.ndarray, SafetyEvent | None]:
    """Keep targets inside the policy's action space (the contract's clip, mapped to targets)."""
    if limits.action_lower is None or limits.action_upper is None:
        return q_target, None
    out, idx = _bound(q_target, limits.action_lower, limits.action_upper, active)
    if idx is None:
        return q_target, None
    return out, _limit_event(ACTION_CLIP, "target outside the action clip", idx, q_target, out, limits)


def rate_limit(
    q_target: np.ndarray, reference: np.ndarray, limits: SafetyLimits, active: np.ndarray
) -> tuple[np.ndarray, SafetyEvent | None]:
    """Move each target at most max_target_rate_rad_s × policy period from the last target sent."""
    out, idx = _bound(q_target, reference - limits.max_step, reference + limits.max_step, active)
    if idx is None:
        return q_target, None
    message = "target step over max_target_rate_rad_s × policy period"
    return out, _limit_event(RATE, message, idx, q_target, out, limits)


def position_bounds(q: np.ndarray, limits: SafetyLimits) -> tuple[np.ndarray, np.ndarray]:
    """The soft limits, widened to the measured position for a joint already outside them.

    A robot may rest outside its soft range (lying on its stops). Holding it where it is, or moving it
    inward, is allowed; a target further out than the joint already is (or past the hard limit) is not.
    Without this the first start-up command could not equal the measured pose.
    """
    lo, hi = limits.soft_lower, limits.soft_upper
    if (q >= lo).all() and (q <= hi).all():
        return lo, hi
    lo = np.minimum(lo, np.maximum(q, limits.hard_lower))
    hi = np.maximum(hi, np.minimum(q, limits.hard_upper))
    return lo, hi


def position_limit(
    q_target: np.ndarray, q: np.ndarray, limits: SafetyLimits, active: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, SafetyEvent | None]:
    """Keep targets inside the soft position limits (``bounds``: position_bounds(q), if already computed)."""
    lo, hi = position_bounds(q, limits) if bounds is None else bounds
    out, idx = _bound(q_target, lo, hi, active)
    if idx is None:
        return q_target, None
    return out, _limit_event(POSITION, "target outside the soft position limits", idx, q_target, out, limits)


def velocity_aware_bounds(
    q: np.ndarray, dq: np.ndarray, limits: SafetyLimits, position: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Position bounds shrunk, on the side the joint moves toward, by the distance it covers in one period.

    Law: ``q* ≤ hi − max(q̇, 0)·Δt`` and ``q* ≥ lo − min(q̇, 0)·Δt`` with [lo, hi] from position_bounds and
    Δt the policy period. Why: the target is only updated once per period, so a joint moving at q̇ toward
    its limit travels q̇·Δt before the next command can react. Pulling the target in by that distance
    makes the PD torque kp·(q* − q) − kd·q̇ brake one period earlier than a target on the soft limit
    would. A true stopping-distance law needs the joint's inertia, which the spec does not give; this
    one needs none. A joint at rest or moving away from a limit is not restricted at all.
    """
    lo, hi = position_bounds(q, limits) if position is None else position
    dt = limits.policy_period_s
    vlo = lo - np.minimum(dq, 0.0) * dt
    vhi = hi - np.maximum(dq, 0.0) * dt
    # Faster than the whole range per period: the bounds would cross; pin to the far end instead.
    return np.minimum(vlo, hi), np.maximum(vhi, lo)


def velocity_aware_limit(
    q_target: np.ndarray, q: np.ndarray, dq: np.ndarray, limits: SafetyLimits, active: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, SafetyEvent | None]:
    """Keep targets inside :func:`velocity_aware_bounds` (``bounds``: those, if already computed)."""
    lo, hi = velocity_aware_bounds(q, dq, limits) if bounds is None else bounds
    out, idx = _bound(q_target, lo, hi, active)
    if idx is None:
        return q_target, None
    message = "target too close to a limit the joint moves toward"
    return out, _limit_event(VELOCITY, message, idx, q_target, out, limits)


def estimated_torque(q_target: np.ndarray, state: RobotState, command: JointCommand, kp_scale: float = 1.0,
                     kd_scale: float = 1.0) -> np.ndarray:
    """What the joint PD will ask for right now: kp·(q* − q) + kd·(q̇* − q̇) + τ_ff, with the gains the motors
    deliver (the commanded ones × the measured scales)."""
    return (command.kp * kp_scale * (q_target - state.q) + command.kd * kd_scale * (command.dq_target - state.dq)
            + command.tau_ff)


def torque_limited_targets(
    q_target: np.ndarray, q: np.ndarray, kp: np.ndarray, rest: np.ndarray, tau_max: np.ndarray,
    over: np.ndarray | None = None, bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The law of :func:`torque_limit`, on arrays of any batch shape (the chain's one robot, or the vectorized
    training env's N, which trains behind it): where ``over`` (default: where |kp·(q* − q) + rest| > ``tau_max``),
    the spring kp·(q* − q) shrunk so the total with ``rest`` (damping and feed-forward torque) is at ±``tau_max``,
    towards zero and never past it. Returns the targets and where they moved (a joint saturated by ``rest`` alone
    does not move)."""
    spring = kp * (q_target - q)
    if over is None:
        over = np.abs(spring + rest) > tau_max
    # The spring torque that puts the total at the limit, but not past zero (never reversing the pull).
    allowed = np.where(spring > 0, np.maximum(tau_max - rest, 0.0), np.minimum(-tau_max - rest, 0.0))
    shrink = over & (np.abs(allowed) < np.abs(spring))
    moved = q + allowed / np.where(shrink, kp, 1.0)  # kp > 0 wherever shrink holds
    if bounds is not None:
        moved = np.minimum(np.maximum(moved, bounds[0]), bounds[1])
    return np.where(shrink, moved, q_target), shrink


def torque_limit(
    q_target: np.ndarray, state: RobotState, command: JointCommand, limits: SafetyLimits, active: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, SafetyEvent | None]:
    """Move q* so the estimated PD torque is at torque_max instead of beyond it.

    Only the spring term kp·(q* − q) changes, and only toward zero, never past it: q* moves toward the
    measured q and never beyond, so the filter never turns the spring into a push the other way. A spring
    already opposing the excess is left alone (it lowers the total). When damping or feed-forward alone
    exceed the limit, the spring ends at zero (q* = q) and the event names the joint as saturated; a
    joint saturated by damping alone with no spring to take back raises no event (the motor clamps its
    torque, there is nothing to change). ``bounds`` (the chain passes :func:`position_bounds`) win over
    the torque limit: a target is never moved outside them. Moving q* toward q can exceed the rate limit
    relative to the last target; the torque does not jump, it is held at the limit.
    """
    kp = command.kp * limits.kp_scale  # what the motors deliver (the commanded gain, as measured)
    rest = command.kd * limits.kd_scale * (command.dq_target - state.dq) + command.tau_ff
    tau = kp * (q_target - state.q) + rest
    tau_max = limits.torque_max
    over = (tau > tau_max) | (tau < -tau_max)
    if not over.any():
        return q_target, None
    over &= active
    if not over.any():
        return q_target, None
    out, shrink = torque_limited_targets(q_target, state.q, kp, rest, tau_max, over, bounds)
    if not shrink.any():
        return q_target, None  # saturated by damping / feed-forward alone: nothing we may change
    idx = shrink.nonzero()[0]
    tau_after = estimated_torque(out, state, command, limits.kp_scale, limits.kd_scale)
    still = np.flatnonzero(over & ((tau_after > tau_max * (1 + 1e-9)) | (tau_after < -tau_max * (1 + 1e-9))))
    message = "estimated torque over the effort limit (N·m)"
    if len(still):
        saturated = ", ".join(limits.joint_names[i] for i in still.tolist())
        message += f"; still over (damping/feed-forward or a position bound), saturated: {saturated}"
    return out, _limit_event(TORQUE, message, idx, tau, tau_after, limits)


# --- fault checks ----------------------------------------------------------------------------------------


def tilt_check(base_quat: np.ndarray, limits: SafetyLimits) -> SafetyEvent | None:
    """Fault when the base tilts more than max_tilt_rad from upright (no-op for robots without a limit)."""
    if limits.max_tilt_rad is None:
        return None
    w, x, y, z = base_quat.tolist()
    norm2 = w * w + x * x + y * y + z * z
    if not 0.81 <= norm2 <= 1.21:  # |q| off 1 by more than 0.1: a corrupt IMU reading, not a rotation
        return SafetyEvent(TILT, True, f"base_quat {[w, x, y, z]} is not a unit quaternion (|q| = {norm2**0.5:.4g})")
    # Third row, third column of the rotation matrix: the body z axis projected on world z.
    cos_tilt = 1.0 - 2.0 * (x * x + y * y) / norm2
    if cos_tilt >= limits.cos_max_tilt:
        return None
    tilt = math.acos(max(-1.0, min(1.0, cos_tilt)))
    return SafetyEvent(TILT, True, f"base tilt {tilt:.3f} rad over the limit {limits.max_tilt_rad} rad")


class StaleWatchdog(NamedTuple):
    """Memory of the stale-state watchdog (a NamedTuple: rebuilt every tick, cheaply)."""

    last_tick: int | None = None  # None: nothing seen since the last reset
    fresh_at_s: float = 0.0  # `now` of the step that saw last_tick arrive


def stale_check(tick: int, now: float, watchdog: StaleWatchdog, limits: SafetyLimits
                ) -> tuple[StaleWatchdog, SafetyEvent | None]:
    """Fault when the state's tick has not advanced for stale_state_periods policy periods.

    Freshness is the tick, never the state's timestamp: a reader that re-stamps a frozen sensor stream
    still delivers stale state. A tick that goes backward (a robot-side restart) is a fault too.
    """
    last = watchdog.last_tick
    if last is None or tick > last:  # every tick: tuple.__new__, what the NamedTuple's __new__ calls, less its frame
        return tuple.__new__(StaleWatchdog, (tick, now)), None
    if tick < last:
        return watchdog, SafetyEvent(STALE, True, f"state tick went backward from {last} to {tick}")
    elapsed = now - watchdog.fresh_at_s
    if elapsed < limits.stale_after_s:
        return watchdog, None
    periods = elapsed / limits.policy_period_s
    detail = (f"no new state for {elapsed * 1e3:.1f} ms ({periods:.1f} policy periods, tick frozen at {tick}); "
              f"limit {limits.stale_state_periods} periods")
    return watchdog, SafetyEvent(STALE, True, detail)
