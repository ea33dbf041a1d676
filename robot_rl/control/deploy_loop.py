"""The deploy loop: read → runtime.step → write, once per policy period, against any RobotInterface.

Real time: fixed deadlines from :class:`RateLoop` (sleep, then spin the last part of the period), garbage
collection paused, missed deadlines counted and handed to the safety chain's overrun watchdog. The watchdog
looks once more just before the write: a tick that stalled between its read and its write (SIGSTOP, swap,
a blocking call) past the overrun limit sends damping instead of the command it computed before the stall
(``DeployRuntime.check_late``); without that, a policy command seconds old would go out first and the
fault would only come on the next tick.
Lockstep (simulated robots only): no waiting; the robot's ``write`` advances the simulation one period and
``now`` is simulated time, so a run is deterministic and as fast as the CPU allows.

The record of a run (states, commands before/after the safety chain, modes, events, timing) is kept in
preallocated arrays so the loop itself allocates little; reports and plots are made from it afterwards.
With ``log`` (a :class:`robot_rl.data.mcap_log.DeployLogWriter`) every tick is also queued for the MCAP
deploy log after the command went out: the state, the command proposed and the one sent, the safety
events and the tick's timing. Queuing copies a few small arrays; the JSON and the file are written on the
log's own thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from robot_rl.control.runtime import DeployRuntime, StepResult
from robot_rl.control.state_machine import ControllerMode
from robot_rl.core.loop_timing import RateLoop
from robot_rl.core.tick_trace import TickTrace
from robot_rl.core.types import JointCommand, RobotInterface, RobotState
from robot_rl.safety import missed_deadlines

if TYPE_CHECKING:
    from robot_rl.data.mcap_log import DeployLogWriter


@dataclass(frozen=True)
class CommandStep:
    """From ``t_s`` on (seconds since the loop started), the operator command is ``value``."""

    t_s: float
    value: tuple[float, ...]


@dataclass(frozen=True)
class Push:
    """At ``t_s``, add ``velocity`` (m/s, world frame) to the base — a shove. Simulated robots only."""

    t_s: float
    velocity: tuple[float, float, float]


@dataclass
class RunRecord:
    """What happened, one row per policy tick."""

    t: np.ndarray
    mode: list[str]
    q: np.ndarray
    q_target_proposed: np.ndarray
    q_target_sent: np.ndarray
    command: np.ndarray
    base_pos: np.ndarray  # NaN where the robot does not report it
    base_lin_vel: np.ndarray  # body frame; NaN where the robot does not report it
    base_quat: np.ndarray
    events: list[tuple[float, str]] = field(default_factory=list)
    timing: dict = field(default_factory=dict)
    diagnostics: dict = field(default_factory=dict)
    wall_time_s: float = 0.0
    ticks: int = 0

    def trim(self) -> RunRecord:
        n = self.ticks
        for name in ("t", "q", "q_target_proposed", "q_target_sent", "command", "base_pos", "base_lin_vel",
                     "base_quat"):
            setattr(self, name, getattr(self, name)[:n])
        self.mode = self.mode[:n]
        return self


def _command_at(schedule: Sequence[CommandStep], t: float, default: np.ndarray) -> np.ndarray:
    value = default
    for step in schedule:
        if t + 1e-9 >= step.t_s:
            value = np.asarray(step.value, dtype=np.float64)
    return value


def _log_tick(log: DeployLogWriter, state: RobotState, result: StepResult, sent: JointCommand,
              now: float | None) -> None:
    """Queue one tick's records for the deploy log (after the write: the command is not held up by logging);
    its timing record is queued after the tick's trace ended."""
    log.log_state(state)
    log.log_command(result.proposed, sent=False, t=now)
    log.log_command(sent, sent=True, t=now)
    for event in result.events:
        log.log_event(event, t=now)


class _Untraced:
    """Lockstep's stand-in for :class:`TickTrace`: simulated time has no deadlines to explain. It lets the tick
    mark its phases unconditionally, so the real-time path has no per-phase ``if`` (lockstep pays the calls)."""

    def mark(self) -> None:
        pass

    def row(self) -> None:
        return None


def run_loop(
    runtime: DeployRuntime,
    robot: RobotInterface,
    duration_s: float,
    *,
    realtime: bool,
    commands: Sequence[CommandStep] = (),
    pushes: Sequence[Push] = (),
    arm: bool = True,
    on_tick: Callable[[int, float], None] | None = None,
    fifo_priority: int | None = None,
    log: DeployLogWriter | None = None,
) -> RunRecord:
    """Run ``runtime`` on a connected ``robot`` for ``duration_s``. Arms at the start when ``arm``.

    ``on_tick(k, t)`` runs before each tick's read (tests inject e-stops and faults there). ``log``: queue
    every tick for that deploy log (the caller closes it). Its times are the tick's deadline in real time
    (``time.perf_counter()``, the same clock as ``time.monotonic()`` on Linux), the log's own
    ``time.monotonic()`` in lockstep.
    """
    spec = runtime.spec
    period = spec.timing.policy_period_s
    n_ticks = max(1, round(duration_s / period))
    n_cmd = len(runtime.contract.commands.names) if runtime.contract is not None else 0
    j = spec.num_joints
    rec = RunRecord(
        t=np.zeros(n_ticks), mode=[""] * n_ticks, q=np.zeros((n_ticks, j)), q_target_proposed=np.zeros((n_ticks, j)),
        q_target_sent=np.zeros((n_ticks, j)), command=np.zeros((n_ticks, n_cmd)),
        base_pos=np.full((n_ticks, 3), np.nan), base_lin_vel=np.full((n_ticks, 3), np.nan),
        base_quat=np.zeros((n_ticks, 4)),
    )
    pushes_left = sorted(pushes, key=lambda p: p.t_s)
    zero_command = np.zeros(n_cmd)
    runtime.observe_objects(robot)  # a simulated scene's object (a push task's cube), where there is one
    if arm:
        runtime.arm()

    loop = RateLoop(period) if realtime else None
    sim_clock = getattr(robot, "sim_time", None)
    if not realtime and sim_clock is None:
        raise ValueError("lockstep needs a simulated robot (one with sim_time()); use realtime=True for hardware")
    t0_wall = time.perf_counter()
    t0 = sim_clock() if not realtime else 0.0
    # A simulated humanoid hangs from a gantry until the policy takes over; the operator lowers it then (see
    # robot_rl.hardware.gantry). Hardware has no such method: there a person lowers the real gantry.
    release_gantry = getattr(robot, "release_gantry", None)

    def body() -> None:
        nonlocal release_gantry
        for k in range(n_ticks):
            missed, lateness, wake = 0, float("nan"), 0.0
            if loop is not None:
                tick = loop.wait_next()
                trace.begin(tick.deadline, tick.wake)
                missed, lateness, wake = tick.missed, tick.lateness, tick.wake
                now = tick.deadline
                t = now - loop.deadline(0)
            else:
                now = sim_clock()
                t = now - t0
            if on_tick is not None:
                on_tick(k, t)
            while pushes_left and t + 1e-9 >= pushes_left[0].t_s:
                robot.push(np.asarray(pushes_left.pop(0).velocity))
            if n_cmd:
                runtime.set_command(_command_at(commands, t, zero_command))
            state = robot.read()
            trace.mark()  # read
            result = runtime.step(state, now, missed_deadlines=missed)
            if loop is not None:
                late = time.perf_counter() - now  # the loop's clock; `now` is this tick's deadline
                if late > period:  # a later deadline passed while this tick ran: may its command still go?
                    result = runtime.check_late(result, state, now, missed_deadlines(late, period))
            if release_gantry is not None and result.mode is ControllerMode.RUNNING:
                release_gantry()
                release_gantry = None
            trace.mark()  # step
            sent = robot.write(result.command)
            trace.mark()  # write
            if log is not None:
                _log_tick(log, state, result, sent, now if loop is not None else None)

            rec.t[k] = t
            rec.mode[k] = result.mode.value
            rec.q[k] = state.q
            rec.q_target_proposed[k] = result.proposed.q_target
            rec.q_target_sent[k] = result.command.q_target
            if n_cmd:
                rec.command[k] = runtime.controller.last_command
            if state.base_pos is not None:
                rec.base_pos[k] = state.base_pos
            if state.base_lin_vel is not None:
                rec.base_lin_vel[k] = state.base_lin_vel
            rec.base_quat[k] = state.base_quat
            for event in result.events:
                rec.events.append((t, str(event)))
            rec.ticks = k + 1
            trace.mark()  # record: the arrays above and the log queue
            if log is not None:
                work = time.perf_counter() - wake if loop is not None else float("nan")
                log.log_timing(k, lateness, work, missed, t=now if loop is not None else None,
                               trace=trace.row())

    if loop is not None:
        trace = TickTrace()
        try:
            with loop.realtime(fifo_priority=fifo_priority):
                body()
        finally:
            trace.close()
        rec.timing = loop.stats.summary() | {"slowest_ticks": trace.slowest()}
    else:
        trace = _Untraced()
        body()
    rec.wall_time_s = time.perf_counter() - t0_wall
    rec.diagnostics = runtime.diagnostics()
    return rec.trim()
