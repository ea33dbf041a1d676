"""The controller state machine: PASSIVE → RAMP → RUNNING → DAMPING, and the commands of each state.

Everything here is pure. :func:`transition` maps (mode, event) to the next mode; :func:`apply_event`
does the same for a :class:`ControllerState` and captures the ramp's start (the *measured* pose) on ARM;
:func:`state_command` gives the command to send in every mode but RUNNING (where the policy commands).

Rules:

- STOP, ESTOP and FAULT are accepted in every mode and always lead to DAMPING — a stop is never refused.
  The damping command is what the very next tick sends.
- ARM (from PASSIVE or DAMPING) always leads to RAMP; nothing reaches RUNNING except RAMP + RAMP_DONE, so
  every (re-)arm ramps from the measured pose. ARM is refused while a safety fault is latched.
- RESET (DAMPING → PASSIVE) acknowledges a stop.
- Any other (mode, event) pair is refused: :class:`IllegalTransition` (a ValueError) names the mode, the
  event and what is allowed. Refusing rather than ignoring, because a request that silently does
  nothing (ARM while RUNNING) hides a bug in the caller; the caller can check :func:`allowed_events`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.core.types import JointCommand
from robot_rl.robots.spec import RobotSpec


class ControllerMode(enum.Enum):
    PASSIVE = "passive"  # zero torque or damping, before arming
    RAMP = "ramp"  # measured pose → default pose
    RUNNING = "running"  # the policy commands (through the safety chain)
    DAMPING = "damping"  # after stop, e-stop or fault: kp 0, kd = safety.damping_kd


class ControllerEvent(enum.Enum):
    ARM = "arm"
    RAMP_DONE = "ramp_done"
    STOP = "stop"
    ESTOP = "estop"
    FAULT = "fault"
    RESET = "reset"


PassiveMode = Literal["zero_torque", "damping"]

_STOPPING = frozenset({ControllerEvent.STOP, ControllerEvent.ESTOP, ControllerEvent.FAULT})
_TRANSITIONS: dict[tuple[ControllerMode, ControllerEvent], ControllerMode] = {
    (ControllerMode.PASSIVE, ControllerEvent.ARM): ControllerMode.RAMP,
    (ControllerMode.DAMPING, ControllerEvent.ARM): ControllerMode.RAMP,
    (ControllerMode.RAMP, ControllerEvent.RAMP_DONE): ControllerMode.RUNNING,
    (ControllerMode.DAMPING, ControllerEvent.RESET): ControllerMode.PASSIVE,
}

# Peak speed of the min-jerk profile s(τ) = 10τ³ − 15τ⁴ + 6τ⁵, as a multiple of distance / duration.
MIN_JERK_PEAK_SPEED = 1.875


class IllegalTransition(RobotRLError, ValueError):
    """An event that does not apply in the current mode (or ARM with a latched fault)."""


def allowed_events(mode: ControllerMode) -> tuple[ControllerEvent, ...]:
    return tuple(e for e in ControllerEvent if e in _STOPPING or (mode, e) in _TRANSITIONS)


def transition(mode: ControllerMode, event: ControllerEvent, *, fault_active: bool = False) -> ControllerMode:
    """The next mode. Raises IllegalTransition for a pair the machine does not allow."""
    if event in _STOPPING:
        return ControllerMode.DAMPING
    if event is ControllerEvent.ARM and fault_active:
        raise IllegalTransition(
            f"cannot ARM in {mode.name}: a safety fault is latched; clear it (reset the safety chain) first"
        )
    nxt = _TRANSITIONS.get((mode, event))
    if nxt is None:
        allowed = ", ".join(e.name for e in allowed_events(mode))
        raise IllegalTransition(f"{event.name} is not allowed in {mode.name} (allowed there: {allowed})")
    return nxt


@dataclass(frozen=True, eq=False)
class ControllerState:
    """The mode plus what the ramp needs. Replaced, never mutated, by :func:`apply_event`."""

    mode: ControllerMode = ControllerMode.PASSIVE
    since_s: float = 0.0  # `now` when this mode was entered
    ramp_start: np.ndarray | None = None  # measured pose at ARM (read-only copy)
    ramp_duration_s: float = 0.0


def ramp_duration(spec: RobotSpec, start: np.ndarray) -> float:
    """safety.ramp_duration_s, stretched when needed so the ramp never outruns max_target_rate_rad_s.

    The min-jerk profile peaks at 1.875 × distance / duration; a far start pose would otherwise ask for
    steps the safety chain's rate limit would cut, and the ramp would not end at the default pose.
    """
    duration = spec.safety.ramp_duration_s
    rate = spec.safety.max_target_rate_rad_s
    if rate > 0:
        distance = float(np.max(np.abs(spec.default_positions - start)))
        duration = max(duration, MIN_JERK_PEAK_SPEED * distance / rate * 1.001)  # 0.1 %: float headroom
    return duration


def apply_event(
    cs: ControllerState, event: ControllerEvent, now: float, *, spec: RobotSpec,
    measured_q: np.ndarray | None = None, fault_active: bool = False,
) -> ControllerState:
    """The controller state after ``event`` at time ``now``. ARM needs ``measured_q`` (the ramp starts there)."""
    mode = transition(cs.mode, event, fault_active=fault_active)
    if mode is ControllerMode.RAMP:
        start = _checked_pose(spec, measured_q)
        return ControllerState(mode, now, start, ramp_duration(spec, start))
    if mode is cs.mode:
        return cs  # e.g. STOP while DAMPING: keep the original entry time
    return ControllerState(mode, now)


def _checked_pose(spec: RobotSpec, measured_q: np.ndarray | None) -> np.ndarray:
    if measured_q is None:
        raise IllegalTransition("ARM needs the measured joint positions (measured_q): the ramp starts there")
    q = np.array(measured_q, dtype=np.float64)
    if q.shape != (spec.num_joints,):
        raise IllegalTransition(f"cannot ARM: measured_q has shape {q.shape}, expected ({spec.num_joints},)")
    bad = np.flatnonzero(~np.isfinite(q))
    if len(bad):
        i = int(bad[0])
        raise IllegalTransition(f"cannot ARM: measured_q[{i}] ({spec.joint_names[i]}) is {q[i]}")
    q.setflags(write=False)
    return q


def min_jerk(tau: float) -> float:
    """0 → 1 over τ ∈ [0, 1] with zero speed and acceleration at both ends."""
    return tau * tau * tau * (10.0 + tau * (-15.0 + 6.0 * tau))


def ramp_target(start: np.ndarray, goal: np.ndarray, elapsed_s: float, duration_s: float) -> np.ndarray:
    """Min-jerk interpolation: exactly ``start`` at 0 and exactly ``goal`` from ``duration_s`` on."""
    if elapsed_s >= duration_s:
        return np.array(goal, dtype=np.float64)
    if elapsed_s <= 0.0:
        return np.array(start, dtype=np.float64)
    s = min_jerk(elapsed_s / duration_s)
    return (1.0 - s) * start + s * goal


def ramp_done(cs: ControllerState, now: float) -> bool:
    """True once the ramp's last command (the default pose exactly) is due: fire RAMP_DONE then."""
    return cs.mode is ControllerMode.RAMP and now - cs.since_s >= cs.ramp_duration_s


def state_command(
    mode: ControllerMode, spec: RobotSpec, *, ramp_start: np.ndarray | None = None, elapsed_s: float = 0.0,
    ramp_duration_s: float | None = None, passive: PassiveMode = "damping",
) -> JointCommand:
    """The command of a non-RUNNING mode. RAMP needs ``ramp_start`` (the measured pose at ARM) and the
    time since ARM; its duration defaults to :func:`ramp_duration` for that start."""
    n = spec.num_joints
    if mode is ControllerMode.DAMPING:
        return JointCommand.damping(n, spec.safety.damping_kd)
    if mode is ControllerMode.PASSIVE:
        if passive == "zero_torque":
            return JointCommand.passive(n)
        if passive == "damping":
            return JointCommand.damping(n, spec.safety.damping_kd)
        raise ValueError(f"passive must be 'zero_torque' or 'damping', got {passive!r}")
    if mode is ControllerMode.RAMP:
        if ramp_start is None:
            raise ValueError("RAMP needs ramp_start: the measured pose when the ramp began")
        duration = ramp_duration(spec, ramp_start) if ramp_duration_s is None else ramp_duration_s
        target = ramp_target(ramp_start, spec.default_positions, elapsed_s, duration)
        return JointCommand.hold(target, spec.kp, spec.kd)
    raise ValueError(f"no built-in command for {mode.name}: the policy commands while RUNNING")


def command_for(cs: ControllerState, spec: RobotSpec, now: float, passive: PassiveMode = "damping") -> JointCommand:
    """:func:`state_command` for a ControllerState at time ``now``."""
    return state_command(cs.mode, spec, ramp_start=cs.ramp_start, elapsed_s=now - cs.since_s,
                         ramp_duration_s=cs.ramp_duration_s, passive=passive)
