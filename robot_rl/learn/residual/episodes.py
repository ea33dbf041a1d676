"""Episodes on a robot through the deploy runtime: reset by the state machine, transitions to the learner.

One episode:

    stop → damping (``settle_s``) → reset → arm → ramp to the default pose (the runtime's state machine)
    → push tasks: the scene is reset to the episode's layout (the object put at its start, at rest)
    → RUNNING: every tick the controller runs base + residual (:class:`ResidualPolicy`) through the safety
      chain; the transition of the previous tick is completed with this tick's state and reward and
      written to the learner's ring
    → ends on the time limit (truncated), the task's failure (terminal), a person's success signal
      (terminal, with ``success_bonus``), a person's stop, or a safety-chain fault (truncated, with
      ``safety_stop_penalty``); then the next reset starts with ``stop``.

The scene is reset after the ramp, with the arm at its default pose clear of the table, so the ramp
cannot knock the object from its start; the tick that ends the ramp already runs the policy once on the
old scene, but that tick opens no transition (the first one recorded starts on the reset scene).

A fault latched by the safety chain ends the episode cleanly: the robot is already damping, the last
transition is closed with the state of the faulting tick, and the next reset acknowledges the fault before
re-arming. An e-stop from a person ends the episode the same way (the transition of that tick closes it,
then the runtime damps).

Clock: real time (a :class:`RateLoop` on fixed deadlines; hardware, the DDS sim bridge) or lockstep
(a simulated robot's ``write`` advances its physics one period; ``now`` is sim time). Only lockstep may
pace itself to the learner (``pace``): a real loop never waits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from robot_rl.control.runtime import DeployRuntime, StepResult
from robot_rl.control.state_machine import ControllerMode
from robot_rl.core.loop_timing import RateLoop
from robot_rl.core.types import JointCommand, ObjectSensor, RobotInterface, RobotState
from robot_rl.hardware.gantry import needs_gantry
from robot_rl.hardware.sim_robot import SimScene
from robot_rl.learn.residual.actor import ResidualPolicy
from robot_rl.learn.residual.interventions import NO_INPUT, InterventionSource
from robot_rl.learn.residual.replay import StepCodec
from robot_rl.learn.residual.rewards import StateReward


@dataclass(frozen=True)
class EpisodeCfg:
    length_s: float  # evaluation episodes (and training ones unless train_length_s is set)
    # Training (learning) episodes only: shorter ones give a fixed transition budget more resets, so more
    # commands and starts to learn from (20 s episodes: 20 commands in 20k transitions); the time limit is a
    # truncation, so the critics bootstrap through it. Evaluation keeps ``length_s``, the task's yardstick.
    train_length_s: float | None = None
    settle_s: float = 0.0  # damping before re-arming (let a real robot come to rest)
    success_bonus: float = 10.0
    safety_stop_penalty: float = 0.0
    tail_s: float = 1.0  # the reach metric averages the tip error over the episode's last tail_s
    # Legged: after the episode, the policy stands still (zero command) this long before the stop, so the robot
    # is at rest when it is damped and ramped up again (not recorded, not learned from).
    stand_s: float = 1.0

    def __post_init__(self) -> None:
        if self.train_length_s is not None and self.train_length_s <= 0:
            raise ValueError(f"train_length_s must be positive, got {self.train_length_s}")

    def length_for(self, learn: bool) -> float:
        """Seconds of a learning (``learn``) or an evaluation episode."""
        return self.train_length_s if learn and self.train_length_s is not None else self.length_s


@dataclass
class EpisodeResult:
    ended_by: str  # time_limit | success | failure | safety_stop | operator_stop | estop
    ticks: int = 0  # policy ticks
    transitions: int = 0  # written to the learner
    episode_return: float = 0.0
    interventions: int = 0  # ticks a person drove
    residual_off_ticks: int = 0  # ticks the base drove alone (no weights yet, or the learner silent)
    missed_deadlines: int = 0
    safety_events: int = 0
    final_tip_error_m: float | None = None
    tail_tip_error_m: float | None = None
    tip_errors: list[float] = field(default_factory=list)
    vel_error_m_s: float | None = None  # velocity tracking: mean |command − v| (xy, body frame) when measured
    final_object_error_m: float | None = None  # push: object to goal at the end (table plane)
    success: bool | None = None  # the task's own success criterion at the end (push), None where it has none
    _vel_errors: list[float] = field(default_factory=list, repr=False)


def ramp_tick_limit(spec) -> int:
    """Policy ticks to allow a ramp to the default pose before calling it stuck: ten ramp durations + 5 s."""
    return round((spec.safety.ramp_duration_s * 10 + 5) / spec.timing.policy_period_s)


def rt_running(runtime: DeployRuntime) -> bool:
    return runtime.mode is ControllerMode.RUNNING


class TickRecorder(Protocol):
    """Sees every tick's state and the command written for it (e.g. ``CalibrationRecorder``)."""

    def __call__(self, state: RobotState, command: JointCommand) -> None: ...
    def new_segment(self) -> None: ...


class EpisodeLoop:
    RAMP_ATTEMPTS = 3

    def __init__(self, runtime: DeployRuntime, robot: RobotInterface, policy: ResidualPolicy, reward: StateReward,
                 cfg: EpisodeCfg, *, realtime: bool, write: Callable[[np.ndarray], None] | None = None,
                 intervention: InterventionSource | None = None, pace: Callable[[int], None] | None = None,
                 recorder: TickRecorder | None = None):
        if runtime.controller is None or runtime.controller.policy is not policy:
            raise ValueError("the runtime's controller must run this ResidualPolicy")
        if not realtime and not hasattr(robot, "sim_time"):
            raise ValueError("lockstep needs a simulated robot (one with sim_time()); use realtime for hardware")
        if realtime and pace is not None:
            raise ValueError("a real-time loop never waits for the learner: pace is for lockstep simulation only")
        if reward.task.terms.source is not None and not hasattr(robot, "reset_scene"):
            raise ValueError(f"task {reward.task.name!r} needs its scene reset every episode: a simulated robot "
                             "with reset_scene() (on hardware, a person and a perception source; not supported)")
        self.runtime, self.robot, self.policy, self.reward, self.cfg = runtime, robot, policy, reward, cfg
        # The task's observation source (a simulated scene's object), read with every state: not in RobotState.
        self.objects = robot if isinstance(robot, ObjectSensor) else None
        runtime.observe_objects(robot)
        self.write, self.intervention, self.pace, self.recorder = write, intervention, pace, recorder
        self.codec = StepCodec(policy.state_dim, policy.action_dim)
        self.period = runtime.spec.timing.policy_period_s
        # A simulated humanoid hangs from a gantry while it ramps (robot_rl.hardware.gantry); hardware and the DDS
        # sim bridge lower theirs by themselves (a person; the bridge's release time).
        self.hangs = needs_gantry(runtime.spec) and hasattr(robot, "release_gantry")
        self.loop = RateLoop(self.period) if realtime else None
        self.transitions_written = 0
        self.human = NO_INPUT
        self._prev_intervened = False
        self.ramp_faults = 0  # faults during a ramp, acknowledged and retried
        self._prev_state = np.zeros(policy.state_dim, np.float32)
        self._prev_unit = np.zeros(policy.action_dim, np.float32)
        self._prev_action = np.zeros(policy.action_dim)
        self._prev2_action = np.zeros(policy.action_dim)

    # -- one control tick ----------------------------------------------------------------------------
    def _tick(self, human_poll: bool = False) -> tuple[RobotState, StepResult, int]:
        missed = 0
        if self.loop is not None:
            tick = self.loop.wait_next()
            now, missed = tick.deadline, tick.missed
        else:
            now = self.robot.sim_time()
        state = self.robot.read()
        self.reward.observe_object(None if self.objects is None else self.objects.object_position())
        self.human = NO_INPUT
        if human_poll and self.intervention is not None:
            self.human = self.intervention.poll(state, self.runtime.controller.last_command)
        self.policy.override = self.human.action
        result = self.runtime.step(state, now, missed_deadlines=missed)
        self.robot.write(result.command)
        if self.recorder is not None:  # the command as the host sent it, not as the robot reports applying it
            self.recorder(state, result.command)
        return state, result, missed

    def _reset(self, command: np.ndarray) -> None:
        rt = self.runtime
        if self.recorder is not None:  # a person may set the robot down between episodes: the log breaks here
            self.recorder.new_segment()
        rt.stop()
        for _ in range(round(self.cfg.settle_s / self.period)):
            self._tick()
        if self.hangs or self.reward.failed(self.robot.read()):
            # A fallen robot cannot ramp back up by itself: a person sets it on its feet (in a simulator,
            # ``reposition``); without either, the next episode starts from wherever it lies. A humanoid cannot
            # stand through a ramp at all: it is hung back on its gantry (a simulator's reposition re-engages it).
            reposition = getattr(self.robot, "reposition", None)
            if reposition is not None:
                reposition()
        rt.set_command(command)
        limit = ramp_tick_limit(rt.spec)
        faults = []
        for _ in range(self.RAMP_ATTEMPTS):
            rt.reset_fault()
            rt.arm()
            for _ in range(limit):
                self._tick()  # the first tick applies stop → reset → arm: the mode is RAMP after it
                if rt.mode is not ControllerMode.RAMP:
                    break
            if rt.mode is ControllerMode.RUNNING:
                if self.hangs:  # the policy balances it from this tick on: lowered as deploy's run_loop does
                    self.robot.release_gantry()
                return
            reposition = getattr(self.robot, "reposition", None)
            if reposition is not None and self.reward.failed(self.robot.read()):
                reposition()  # it fell while standing up: set it on its feet (a person, on hardware)
            # A fault while ramping (a stale state or an overrun: a hiccup of the link or the machine) is
            # acknowledged and the ramp retried from where the robot is; a persistent one stops fine-tuning.
            faults.append(rt.diagnostics()["fault"])
            self.ramp_faults += 1
        raise RuntimeError(f"the robot faulted on {self.RAMP_ATTEMPTS} ramps to the default pose in a row: {faults}")

    # -- an episode ------------------------------------------------------------------------------------
    def run_episode(self, command: np.ndarray, *, explore: bool, learn: bool, scene: SimScene | None = None
                    ) -> EpisodeResult:
        """Reset, then run the policy until the episode ends. ``learn``: write transitions to the learner.
        ``command``: the episode's command.
        ``scene``: the episode's layout (push tasks; required there), set on the robot after the ramp."""
        cfg, policy = self.cfg, self.policy
        command = np.asarray(command, dtype=np.float64).reshape(-1)
        length_s = cfg.length_for(learn)
        pushing = self.reward.task.terms.source is not None
        if pushing and scene is None:
            raise ValueError(f"task {self.reward.task.name!r}: every episode needs its scene (the object's start)")
        self._reset(command)
        if scene is not None:
            self.robot.reset_scene(scene)
        policy.explore = explore
        self.reward.reset()
        if self.intervention is not None:
            self.intervention.reset()
        max_ticks = round(length_s / self.period)
        tail_ticks = max(1, round(cfg.tail_s / self.period))
        res = EpisodeResult(ended_by="time_limit")
        have_prev = False
        self._prev_action[:] = 0.0
        arm = self.reward.kinematics is not None and self.reward.task.terms.tool_target_m is not None
        walking = self.reward.task.terms.track_velocity
        while True:
            policy_ticks = policy.ticks
            state, result, missed = self._tick(human_poll=True)
            acted = policy.ticks != policy_ticks
            res.missed_deadlines += missed
            res.safety_events += len(result.events)
            faulted = result.mode is ControllerMode.DAMPING
            if acted:
                res.ticks += 1
                res.interventions += policy.intervened
                res.residual_off_ticks += not policy.residual_active and not policy.intervened
            if arm:
                res.tip_errors.append(self.reward.tip_error(state, self.runtime.controller.last_command))
            elif walking and acted and state.base_lin_vel is not None:
                res._vel_errors.append(float(np.linalg.norm(command[:2] - state.base_lin_vel[:2])))

            ended_by = None
            if faulted:
                ended_by = "estop" if self.human.estop else "safety_stop"
            elif not acted:
                ended_by = "operator_stop"  # stopped from outside (another thread) before this tick
            elif self.human.estop:
                ended_by = "estop"
            elif self.human.success:
                ended_by = "success"
            elif self.human.stop:
                ended_by = "operator_stop"
            elif self.reward.failed(state):
                ended_by = "failure"
            elif res.ticks >= max_ticks:
                ended_by = "time_limit"

            if have_prev:
                terminal = ended_by in ("failure", "success")
                r = self.reward(state, command, self._prev_action, self._prev2_action, terminated=ended_by == "failure")
                r += cfg.success_bonus if ended_by == "success" else 0.0
                r -= cfg.safety_stop_penalty if ended_by == "safety_stop" else 0.0
                res.episode_return += r
                # Without a policy tick there is no new state: close on the last one (a one-tick bootstrap bias).
                next_state = policy.state if acted else self._prev_state
                if learn and self.write is not None:
                    self.write(self.codec.pack(self._prev_state, self._prev_unit, r, next_state, terminal,
                                               ended_by is not None, self._prev_intervened))
                    res.transitions += 1
                    self.transitions_written += 1
                    if self.pace is not None:
                        self.pace(self.transitions_written)
            if ended_by is not None:
                res.ended_by = ended_by
                break
            have_prev = True
            np.copyto(self._prev_state, policy.state)
            np.copyto(self._prev_unit, policy.unit_residual)
            self._prev_intervened = policy.intervened
            self._prev2_action[:] = self._prev_action
            self._prev_action[:] = policy.action

        if self.human.estop:
            self.runtime.estop()
        elif walking and res.ended_by in ("time_limit", "operator_stop") and rt_running(self.runtime):
            policy.explore = False
            self.runtime.set_command(np.zeros_like(command))
            for _ in range(round(cfg.stand_s / self.period)):
                self._tick()
        if pushing:  # the task's criterion on the scene as the episode leaves it
            final = self.robot.read()
            self.reward.observe_object(None if self.objects is None else self.objects.object_position())
            res.final_object_error_m = self.reward.object_error(final, command)
            res.success = self.reward.success(final, command) and res.ended_by not in ("safety_stop", "estop")
        self.runtime.stop()
        policy.override = None
        if res._vel_errors:
            res.vel_error_m_s = float(np.mean(res._vel_errors))
        if arm and res.tip_errors:
            res.final_tip_error_m = res.tip_errors[-1]
            res.tail_tip_error_m = float(np.mean(res.tip_errors[-tail_ticks:]))
        return res
