"""The safety chain: every filter, in a fixed order, between the controller and the robot.

:func:`chain_step` is the pure composition — (limits, filter state, measured state, proposed command,
time) in, (output, new filter state) out. :class:`SafetyChain` holds the filter state and the counters
for the runtime, which calls :meth:`SafetyChain.step` once per policy period with *every* command it is
about to send (ramp, policy, damping), so the finite check and the watchdogs run in every controller
state.

Order: finite check → action clip → rate limit → soft position limits → velocity-aware position limit →
torque estimate → tilt → stale state → policy overrun. A fault from any of them latches: from then on
the output is damping (kp 0, kd = safety.damping_kd) until :meth:`SafetyChain.reset`.

:func:`late_check` runs the overrun watchdog once more between a tick's step and its write (a real-time
loop calls it when a deadline passed meanwhile): a command whose tick stalled past the overrun limit is
replaced by damping through the same latch, so it is never sent seconds late.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.robots.spec import RobotSpec
from robot_rl.safety.deadlines import late_command_check, overrun_check
from robot_rl.safety.filters import (
    FILTER_ORDER,
    ActionClip,
    SafetyEvent,
    SafetyLimits,
    StaleWatchdog,
    action_clip,
    check_finite,
    position_bounds,
    position_limit,
    rate_limit,
    stale_check,
    tilt_check,
    torque_limit,
    velocity_aware_bounds,
    velocity_aware_limit,
)
from robot_rl.safety.quiet_tick import QuietTickCheck


# NamedTuples rather than frozen dataclasses: both are rebuilt on every tick, and a NamedTuple is several
# times cheaper to construct; both are immutable.
class FilterState(NamedTuple):
    """Everything the chain remembers between ticks."""

    # Rate-limit reference: the last target sent on joints with kp > 0, the measured position on the
    # others. None after a reset: the first command is then limited relative to the measured pose.
    reference: np.ndarray | None = None
    stale: StaleWatchdog = StaleWatchdog()
    consecutive_missed: int = 0
    fault: tuple[SafetyEvent, ...] = ()  # the latched fault events; empty while armed


class SafetyOutput(NamedTuple):
    command: JointCommand  # what to send: the proposed command itself when no filter intervened
    events: tuple[SafetyEvent, ...]  # raised by this step (a latched fault is reported once, when it latches)
    faulted: bool


def damping_command(limits: SafetyLimits) -> JointCommand:
    return JointCommand.damping(limits.num_joints, limits.damping_kd)


_NO_EVENTS: tuple[SafetyEvent, ...] = ()
_new = tuple.__new__


def chain_step(
    limits: SafetyLimits, filter_state: FilterState, state: RobotState, proposed: JointCommand, now: float,
    *, action: np.ndarray | None = None, missed_deadlines: int = 0,
) -> tuple[SafetyOutput, FilterState]:
    """One tick of the chain, pure.

    ``now``: the tick's time (s, same clock every call; the scheduled deadline is best). ``action``: the
    policy's raw output, checked for NaN/inf. ``missed_deadlines``: deadlines passed since the previous
    tick (see :func:`robot_rl.safety.deadlines.missed_deadlines`). Every filter runs and the new rate-limit
    reference is a new array; :meth:`SafetyChain.step` adds the quiet-tick shortcut, with the same results.
    """
    if filter_state.fault:
        return SafetyOutput(damping_command(limits), _NO_EVENTS, True), filter_state
    fault = check_finite(state, proposed, limits.num_joints, action, limits.joint_names)
    if fault is not None:
        return SafetyOutput(damping_command(limits), (fault,), True), filter_state._replace(fault=(fault,))
    return _motion_filters(limits, filter_state, state, proposed, now, missed_deadlines)


def _motion_filters(
    limits: SafetyLimits, filter_state: FilterState, state: RobotState, proposed: JointCommand, now: float,
    missed_deadlines: int,
) -> tuple[SafetyOutput, FilterState]:
    """The chain after the finite check, every filter in order (the inputs are finite and of their shapes)."""
    events: list[SafetyEvent] = []
    q, dq = state.q, state.dq
    active = proposed.kp > 0
    reference = q if filter_state.reference is None else filter_state.reference
    target, ev = action_clip(proposed.q_target, limits, active)
    if ev is not None:
        events.append(ev)
    target, ev = rate_limit(target, reference, limits, active)
    if ev is not None:
        events.append(ev)
    pos_bounds = position_bounds(q, limits)
    target, ev = position_limit(target, q, limits, active, pos_bounds)
    if ev is not None:
        events.append(ev)
    vel_bounds = velocity_aware_bounds(q, dq, limits, pos_bounds)
    target, ev = velocity_aware_limit(target, q, dq, limits, active, vel_bounds)
    if ev is not None:
        events.append(ev)
    # The torque limit yields to the soft position bounds but not to the velocity-aware shrink: asking the
    # PD for more braking than the motor has buys nothing (the motor saturates).
    target, ev = torque_limit(target, state, proposed, limits, active, pos_bounds)
    if ev is not None:
        events.append(ev)
    if target is proposed.q_target:
        command = proposed
    else:
        command = JointCommand(target, proposed.dq_target, proposed.kp, proposed.kd, proposed.tau_ff)
    # np.where copies, so a caller reusing its command buffers cannot change our reference.
    return _fault_checks(limits, filter_state, state, proposed, now, missed_deadlines, events, command,
                         np.where(active, target, q))


def _fault_checks(
    limits: SafetyLimits, filter_state: FilterState, state: RobotState, proposed: JointCommand, now: float,
    missed_deadlines: int, events: list[SafetyEvent], command: JointCommand, new_reference: np.ndarray,
) -> tuple[SafetyOutput, FilterState]:
    """The rest of the chain after the motion filters: tilt, stale state, overrun; then the output."""
    ev = tilt_check(state.base_quat, limits)
    if ev is not None:
        events.append(ev)
    stale, ev = stale_check(state.tick, now, filter_state.stale, limits)
    if ev is not None:
        events.append(ev)
    consecutive, ev = overrun_check(missed_deadlines, filter_state.consecutive_missed, limits)
    if ev is not None:
        events.append(ev)

    if not events:  # tuple.__new__ is what a NamedTuple's __new__ calls, less its Python frame (the quiet tick's)
        return (_new(SafetyOutput, (command, _NO_EVENTS, False)),
                _new(FilterState, (new_reference, stale, consecutive, ())))
    faults = tuple(e for e in events if e.fault)
    if faults:
        new_state = FilterState(filter_state.reference, stale, consecutive, faults)
        return SafetyOutput(damping_command(limits), tuple(events), True), new_state
    return SafetyOutput(command, tuple(events), False), FilterState(new_reference, stale, consecutive, ())


def late_check(limits: SafetyLimits, filter_state: FilterState, missed_in_tick: int
               ) -> tuple[SafetyOutput | None, FilterState]:
    """Between a tick's :func:`chain_step` and its write, pure: ``missed_in_tick`` deadlines have passed since
    the tick's own. Past the overrun limit (with those missed in a row before it): the overrun fault latches
    and the output is damping, in place of the command the step returned. Otherwise (or with a fault
    already latched: the step's command is damping) None, and the state is unchanged."""
    if filter_state.fault:
        return None, filter_state
    fault = late_command_check(missed_in_tick, filter_state.consecutive_missed, limits)
    if fault is None:
        return None, filter_state
    new_state = filter_state._replace(consecutive_missed=filter_state.consecutive_missed + missed_in_tick,
                                      fault=(fault,))
    return SafetyOutput(damping_command(limits), (fault,), True), new_state


@dataclass
class SafetyReport:
    """Interventions and faults counted per filter (and per joint), for logs and diagnostics."""

    joint_names: tuple[str, ...]
    steps: int = 0
    resets: int = 0
    missed_deadlines: int = 0
    interventions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FILTER_ORDER, 0))
    faults: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FILTER_ORDER, 0))
    per_joint: dict[str, np.ndarray] = field(default_factory=dict)  # filter → interventions per joint
    last_fault: tuple[str, ...] = ()  # str() of the events of the latest fault

    def record(self, output: SafetyOutput, missed_deadlines: int) -> None:
        self.steps += 1
        if missed_deadlines > 0:
            self.missed_deadlines += missed_deadlines
        if output.events:  # a quiet tick: nothing else to count
            self.record_events(output)

    def record_events(self, output: SafetyOutput) -> None:
        """Count ``output``'s events (no step: :func:`late_check`'s output replaces a step's)."""
        for event in output.events:
            counts = self.faults if event.fault else self.interventions
            counts[event.filter_name] = counts.get(event.filter_name, 0) + 1
            if event.joints:
                per = self.per_joint.get(event.filter_name)
                if per is None:
                    per = self.per_joint[event.filter_name] = np.zeros(len(self.joint_names), dtype=np.int64)
                per[list(event.joints)] += 1
        if output.events and output.faulted:
            self.last_fault = tuple(str(e) for e in output.events if e.fault)

    def summary(self) -> dict:
        """Plain types only (JSON / diagnostics-ready); zero counts are left out of the per-joint part."""
        return {
            "steps": self.steps,
            "resets": self.resets,
            "missed_deadlines": self.missed_deadlines,
            "interventions": {k: v for k, v in self.interventions.items() if v},
            "faults": {k: v for k, v in self.faults.items() if v},
            "per_joint": {
                name: {self.joint_names[i]: int(c) for i, c in enumerate(per) if c}
                for name, per in self.per_joint.items()
            },
            "last_fault": list(self.last_fault),
        }


class SafetyChain:
    """The stateful wrapper the runtime uses: filter state and counters around :func:`chain_step`."""

    def __init__(self, limits: SafetyLimits):
        self.limits = limits
        self.filter_state = FilterState()
        self.report = SafetyReport(limits.joint_names)
        # The quiet-tick shortcut and two reference buffers used in turn: the one filter_state does not hold
        # receives the next reference, so a tick allocates no arrays. The reference in a FilterState read
        # from this chain is therefore valid until the next step after the next one (copy it to keep it).
        self._quiet = QuietTickCheck(limits)
        self._references = (np.zeros(limits.num_joints), np.zeros(limits.num_joints))

    @classmethod
    def from_spec(cls, spec: RobotSpec, action_clip: ActionClip | None = None) -> SafetyChain:
        return cls(SafetyLimits.from_spec(spec, action_clip))

    @property
    def faulted(self) -> bool:
        return bool(self.filter_state.fault)

    @property
    def fault(self) -> tuple[SafetyEvent, ...]:
        return self.filter_state.fault

    def step(
        self, state: RobotState, proposed: JointCommand, now: float,
        *, action: np.ndarray | None = None, missed_deadlines: int = 0,
    ) -> SafetyOutput:
        """:func:`chain_step` on this chain, with its results, made cheap on the common tick: the quiet-tick check
        (:mod:`robot_rl.safety.quiet_tick`) first tells in a few numpy calls that every array is finite and that
        no motion filter would act; then the command passes as it is, only the fault checks run, and the new
        rate-limit reference goes into the buffer the filter state does not hold. When it cannot tell, the
        whole chain runs."""
        filter_state, quiet = self.filter_state, self._quiet
        a, b = self._references
        out = b if filter_state.reference is a else a
        if filter_state.fault or not quiet.all_finite(state, proposed, action):  # latched, or check_finite decides
            output, filter_state = chain_step(self.limits, filter_state, state, proposed, now, action=action,
                                              missed_deadlines=missed_deadlines)
        elif quiet.quiet(filter_state.reference, state, proposed, out):
            output, filter_state = _fault_checks(self.limits, filter_state, state, proposed, now, missed_deadlines,
                                                 [], proposed, out)
        else:
            output, filter_state = _motion_filters(self.limits, filter_state, state, proposed, now, missed_deadlines)
        self.filter_state = filter_state
        self.report.record(output, missed_deadlines)
        return output

    def check_late(self, missed_in_tick: int) -> SafetyOutput | None:
        """:func:`late_check` on this chain: damping in place of the last step's command when its tick has
        overrun past the limit by now (the fault latches and is counted); None to send that command."""
        output, self.filter_state = late_check(self.limits, self.filter_state, missed_in_tick)
        if output is not None:
            # The deadlines themselves are counted by the next step (its missed_deadlines), not twice.
            self.report.record_events(output)
        return output

    def reset(self) -> None:
        """Re-arm: clear a latched fault and the watchdogs' memory (counters are kept).

        The next step starts afresh: its state counts as new, and its command is rate-limited relative to
        the measured pose. A condition that persists (NaN, tilt) faults again on that step.
        """
        self.filter_state = FilterState()
        self.report.resets += 1
