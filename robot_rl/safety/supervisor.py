"""The supervisor's decision logic: when does a watchdog take ``rt/lowcmd`` over with damping, and when
does it give the robot back. Pure: time and observations come in as arguments, the next state and what to
do go out, so every transition can be driven tick by tick with bad input (fault injection).

Why a supervisor at all: a Unitree robot in low-level mode executes the last ``LowCmd`` it received until
another one arrives; nothing times out. A controller that dies (SIGKILL, the OOM killer, a segfault) or
hangs (a deadlock, SIGSTOP, a swapping machine) leaves a kp-20 position target in force forever. Its own
signal handlers cannot help there; only another process can. The supervisor (``robot_rl.control.
supervisor``) runs next to the controller, watches the command stream the robot receives, and when that
stream stops for longer than the robot's stale limit it sends the damping command itself, and keeps
sending it.

What it watches is the ``rt/lowcmd`` stream itself, not a heartbeat from the controller: a heartbeat
thread can keep beating while the thread that commands the robot is stuck, and the stream is what the
robot actually executes. (The controller's own re-publish thread stops re-sending a command older than
its age limit, so a hung control loop silences the stream too; see ``UnitreeDdsRobot``.)

Modes:

    WAITING  ──first controller command──►  WATCHING  ──stale, last command not damping──►  DAMPING
       │                                     │    ▲                                            │
       │                 stale, last command │    │ commands again                             │
       │                         damping     ▼    │                                            │
       │                                    IDLE ─┘                                            │
       └──controller gone──► DONE ◄── released (any mode); IDLE + gone; handback + gone ───────┘

- WAITING: no controller command seen yet. Nothing is commanded, so there is nothing to protect; the
  supervisor never damps a robot nobody has commanded. If the controller goes away first: DONE.
- WATCHING: the controller commands. The supervisor sends nothing (it never fights a healthy controller).
- DAMPING: the stream went stale on a command that is not damping (a pose target, held forever by the
  robot); the supervisor sends damping on every step. It gives the robot back only to a stream that has
  been fresh, without a stale gap, for ``handback_s`` (a controller that came back, or a new deploy). If
  its own controller is gone by then, the new controller has its own supervisor: DONE.
- IDLE: the stream went stale on a damping command: the robot already holds the safe command, so there is
  nothing to take over (a controller that ended, or paused, after its own damping - e.g. the garbage
  collection between a deploy's stop and its damping ticks). Commands again: WATCHING; controller gone: DONE.
- DONE: the controller released the supervisor (it ended cleanly, damping sent), or nothing to protect.

Bad time values fail safe: a non-finite ``now`` or arrival never counts as a fresh command, an arrival
later than ``now`` counts as arriving at ``now`` (a bogus future time must not postpone a takeover), and an
arrival older than the newest one seen changes nothing.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from robot_rl.robots.spec import RobotSpec


class SupervisorMode(enum.Enum):
    WAITING = "waiting"
    WATCHING = "watching"
    DAMPING = "damping"
    IDLE = "idle"
    DONE = "done"


@dataclass(frozen=True)
class SupervisorLimits:
    stale_s: float  # no controller command for longer than this → take over with damping
    handback_s: float  # a controller stream fresh (no gap > stale_s) this long gets the robot back

    def __post_init__(self) -> None:
        for name in ("stale_s", "handback_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"supervisor {name} must be a positive number of seconds, got {value!r}")

    @classmethod
    def from_spec(cls, spec: RobotSpec) -> SupervisorLimits:
        """The robot's own stale limit (``stale_state_periods`` policy periods): the controller commands every
        policy period, so a command stream that has stopped that long is as dead as a state stream would be."""
        stale = spec.safety.stale_state_periods * spec.timing.policy_period_s
        return cls(stale_s=stale, handback_s=stale)


@dataclass(frozen=True)
class SupervisorState:
    mode: SupervisorMode = SupervisorMode.WAITING
    last_command_s: float | None = None  # arrival of the newest controller command
    fresh_since_s: float | None = None  # DAMPING: start of the current gap-free run of controller commands
    since_s: float = 0.0  # when this mode was entered
    takeovers: int = 0
    handbacks: int = 0


@dataclass(frozen=True)
class SupervisorInput:
    """What the supervisor observed since its previous step."""

    now: float  # this step's time (monotonic seconds)
    arrival: float | None = None  # arrival time of the newest controller command since the last step
    controller_gone: bool = False  # the controller's process has ended (its pipe closed)
    released: bool = False  # the controller ended cleanly (damping sent) and released the supervisor
    # The newest controller command is a damping command (kp 0, kd > 0 on every joint). Only read when the
    # stream has gone stale, so the caller may decode the command only then.
    last_command_damping: bool = False


@dataclass(frozen=True)
class SupervisorDecision:
    state: SupervisorState
    send_damping: bool  # send the damping command on this step
    event: str | None = None  # what changed, for a person (takeover / handback / done)


def _arrival(inp: SupervisorInput, last: float | None) -> float | None:
    """The usable arrival time: finite, never after ``now``, never older than the newest one seen."""
    a = inp.arrival
    if a is None or not math.isfinite(a) or not math.isfinite(inp.now):
        return None
    a = min(a, inp.now)
    if last is not None and a <= last:
        return None
    return a


def supervise_step(limits: SupervisorLimits, state: SupervisorState, inp: SupervisorInput) -> SupervisorDecision:
    """One step of the supervisor: the next state and whether to send damping now."""
    now, mode = inp.now, state.mode
    if mode is SupervisorMode.DONE:
        return SupervisorDecision(state, False)
    if inp.released:
        return SupervisorDecision(_enter(state, SupervisorMode.DONE, now), False, "released by the controller")
    arrival = _arrival(inp, state.last_command_s)
    last = arrival if arrival is not None else state.last_command_s

    if mode in (SupervisorMode.WAITING, SupervisorMode.IDLE):
        if arrival is not None:
            return SupervisorDecision(_enter(state, SupervisorMode.WATCHING, now, last_command_s=last), False,
                                      "controller commanding: watching")
        if inp.controller_gone:
            why = "before commanding the robot" if mode is SupervisorMode.WAITING else "after damping the robot"
            return SupervisorDecision(_enter(state, SupervisorMode.DONE, now), False, f"controller gone {why}")
        return SupervisorDecision(state, False)

    age = now - last if last is not None else math.inf
    if mode is SupervisorMode.WATCHING:
        if not age <= limits.stale_s and inp.last_command_damping and math.isfinite(now):
            return SupervisorDecision(_enter(state, SupervisorMode.IDLE, now, last_command_s=last), False,
                                      f"no rt/lowcmd for {_ms(age)} after a damping command: the robot holds it")
        if not age <= limits.stale_s:  # `not <=`: a NaN age (bad `now`) takes over too
            taken = _enter(state, SupervisorMode.DAMPING, now, last_command_s=last, fresh_since_s=None,
                           takeovers=state.takeovers + 1)
            return SupervisorDecision(taken, True, f"no rt/lowcmd for {_ms(age)}: taking over with damping")
        return SupervisorDecision(_replace(state, last_command_s=last), False)

    # DAMPING: keep damping until a controller stream has been fresh, gap-free, for handback_s.
    fresh_since = state.fresh_since_s
    if arrival is not None and (fresh_since is None or state.last_command_s is None
                                or arrival - state.last_command_s > limits.stale_s):
        fresh_since = arrival  # a new run of commands starts (the first, or after a stale gap)
    if fresh_since is not None and not age <= limits.stale_s:
        fresh_since = None  # the run broke off
    # Commands must have kept arriving across the whole window, not merely started handback_s ago.
    if fresh_since is not None and last - fresh_since >= limits.handback_s:
        if inp.controller_gone:
            return SupervisorDecision(_enter(state, SupervisorMode.DONE, now, last_command_s=last,
                                             handbacks=state.handbacks + 1), False,
                                      "another controller commands the robot: handing back, done")
        back = _enter(state, SupervisorMode.WATCHING, now, last_command_s=last, fresh_since_s=None,
                      handbacks=state.handbacks + 1)
        return SupervisorDecision(back, False, f"controller commanding again for {_ms(last - fresh_since)}: "
                                               "handing back")
    return SupervisorDecision(_replace(state, last_command_s=last, fresh_since_s=fresh_since), True)


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.0f} ms" if math.isfinite(seconds) else "ever"


def _replace(state: SupervisorState, **changes: object) -> SupervisorState:
    if all(getattr(state, k) == v for k, v in changes.items()):
        return state
    return SupervisorState(**{**state.__dict__, **changes})


def _enter(state: SupervisorState, mode: SupervisorMode, now: float, **changes: object) -> SupervisorState:
    return SupervisorState(**{**state.__dict__, **changes, "mode": mode, "since_s": now})
