"""Task terms: what a kind of task adds to the robot — its commands, reward inputs, episode metrics and the
state it needs that the robot does not measure — declared by the task, run by whoever steps it.

In the style of mjlab / Isaac Lab managers, but small: a task's :class:`TaskTerms` lists its terms, and the
vectorized env (``robot_rl.sim``), the residual episodes (``robot_rl.learn.residual``) and the sim2sim gate
(``robot_rl.evaluation``) run them without asking which task it is. Terms read a :class:`TaskSignals` (the
command and the task-side quantities: the tool point, the task object), which the env fills from its state
rows for N envs and the robot-side code for one robot, so both compute the same numbers with the same code.

Layering: tasks are configuration; ``sim`` and ``learn`` import tasks, never the other way round. The gate's
scenario and scoring depend on the evaluation's own types, so a task names its gate (:attr:`TaskTerms.gate`)
and ``robot_rl.evaluation`` keeps its scenario and checks under that name (``SCENARIOS``, ``GATE_CHECKS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from robot_rl.tasks.commands import CommandSpec


@dataclass
class TaskSignals:
    """Task-side quantities of N envs (the robot side: N = 1). None: not available (no tool, no object)."""

    command: np.ndarray  # (N, C)
    tool_pos: Callable[[], np.ndarray] | None = None  # (N, 3) tool point, base frame; computed on demand
    object_pos: np.ndarray | None = None  # (N, 3) the task's object, base frame (its observation source)
    base_lin_vel: np.ndarray | None = None  # (N, 3) body frame, where known (a simulator, an estimator)


# ---------------------------------------------------------------------------------------------------------
# Commands (a reset term: each episode's command)


@dataclass(frozen=True)
class UniformCommands:
    """Commands drawn uniformly over the task's ranges."""

    required: tuple[str, ...] | None = None  # the command names the other terms read, in order (None: any)

    def check(self, commands: CommandSpec) -> str | None:
        """A reason the task's commands don't fit these terms, or None."""
        if self.required is not None and commands.names[: len(self.required)] != self.required:
            return f"needs commands {', '.join(self.required)}"
        return None

    def sample(self, commands: CommandSpec, rng: np.random.Generator, k: int) -> np.ndarray:
        return commands.sample(rng, k)


@dataclass(frozen=True)
class VelocityCommands(UniformCommands):
    """Base velocity commands: too slow to walk is standing (as legged_gym), a share stands on purpose, and a
    share turns in place (uniform draws make a pure turn rare: only those below ``min_speed_m_s``)."""

    required: tuple[str, ...] | None = ("lin_vel_x", "lin_vel_y", "ang_vel_z")
    standing_fraction: float = 0.0  # share of commands set to zero (learn to stand still too)
    turn_fraction: float = 0.0  # share of commands with the linear part zeroed: turn in place at the drawn rate
    min_speed_m_s: float = 0.2

    def sample(self, commands: CommandSpec, rng: np.random.Generator, k: int) -> np.ndarray:
        cmd = commands.sample(rng, k)
        small = np.linalg.norm(cmd[:, :2], axis=1) < self.min_speed_m_s
        cmd[small, :2] = 0.0
        standing, turning = self.shares(rng.random(k))
        cmd[standing] = 0.0
        cmd[turning, :2] = 0.0
        return cmd

    def shares(self, draw):
        """(standing, turning) masks of commands from one uniform [0, 1) draw each: numpy or torch arrays alike,
        so the warp env's device sampler splits them as this one does."""
        standing = draw < self.standing_fraction
        return standing, ~standing & (draw < self.standing_fraction + self.turn_fraction)


# ---------------------------------------------------------------------------------------------------------
# The task's observation source: an object whose state the robot does not measure


class Layout(Protocol):
    """One episode's start: where the object starts (table plane) and the command (the goal)."""

    cube_xy: np.ndarray

    @property
    def command(self) -> np.ndarray: ...


@dataclass(frozen=True)
class ObjectSource:
    """A task object observed as ``object_pos``: a simulator builds ``scene_at`` and fills it from the tracked
    body; on hardware a perception source (camera tracker, mocap) would. Episodes start from its layouts, so
    the command is each layout's goal (it is neither fixed nor resampled within an episode)."""

    sample_episode: Callable[[np.random.Generator], Layout]
    scene_at: Callable[[np.ndarray], object]  # object xy → the scene (a hardware.sim_robot.SimScene)
    goal_distance: Callable[[np.ndarray, np.ndarray], float]  # (object pos, goal) → m
    success: Callable[[np.ndarray | None, np.ndarray], bool]  # (object pos, goal) → the task's criterion


# ---------------------------------------------------------------------------------------------------------
# Reward inputs: the task-side fields of RewardInputs


RewardInputTerm = Callable[[TaskSignals], dict[str, np.ndarray]]


def tool_target_error(s: TaskSignals) -> dict[str, np.ndarray]:
    """Reach: the tool point's distance to the commanded target."""
    if s.tool_pos is None:
        return {}
    return {"ee_error": np.linalg.norm(s.tool_pos() - s.command, axis=1)}


def object_and_tool(s: TaskSignals) -> dict[str, np.ndarray]:
    """Push: the object (and the tool point, for the tool → object shaping)."""
    if s.object_pos is None:
        return {}
    out = {"object_pos": s.object_pos}
    if s.tool_pos is not None:
        out["tool_pos"] = s.tool_pos()
    return out


# ---------------------------------------------------------------------------------------------------------
# Episode metrics (the env's "Episode/..." logs, per finished env)


class MetricState(Protocol):
    def reset(self, ids: np.ndarray) -> None: ...
    def step(self, s: TaskSignals) -> None: ...
    def finish(self, ids: np.ndarray, s: TaskSignals) -> dict[str, np.ndarray]: ...


@dataclass
class _VelocityErrors:
    err_sum: np.ndarray  # Σ |v_xy − command_xy|
    signed_sum: np.ndarray  # Σ (v_xy − command_xy): the error of the mean velocity
    steps: np.ndarray

    def reset(self, ids: np.ndarray) -> None:
        self.err_sum[ids], self.signed_sum[ids], self.steps[ids] = 0.0, 0.0, 0

    def step(self, s: TaskSignals) -> None:
        err = s.base_lin_vel[:, :2] - s.command[:, :2]
        self.err_sum += np.linalg.norm(err, axis=1)
        self.signed_sum += err
        self.steps += 1

    def finish(self, ids: np.ndarray, s: TaskSignals) -> dict[str, np.ndarray]:
        steps = np.maximum(self.steps[ids], 1)
        return {"Episode/lin_vel_error_m_s": self.err_sum[ids] / steps,
                "Episode/mean_vel_error_m_s": np.linalg.norm(self.signed_sum[ids], axis=1) / steps}


@dataclass(frozen=True)
class VelocityTrackingMetric:
    """Mean speed error over the episode, and the error of the mean velocity (drift)."""

    def make(self, n: int) -> MetricState:
        return _VelocityErrors(np.zeros(n), np.zeros((n, 2)), np.zeros(n, dtype=np.int64))


@dataclass(frozen=True)
class _Final:
    fn: Callable[[np.ndarray, TaskSignals], dict[str, np.ndarray]]

    def reset(self, ids: np.ndarray) -> None:
        pass

    def step(self, s: TaskSignals) -> None:
        pass

    def finish(self, ids: np.ndarray, s: TaskSignals) -> dict[str, np.ndarray]:
        return self.fn(ids, s)


@dataclass(frozen=True)
class ReachSuccessMetric:
    """The tool point's final distance to the target; success within ``tolerance_m``."""

    tolerance_m: float

    def make(self, n: int) -> MetricState:
        def final(ids: np.ndarray, s: TaskSignals) -> dict[str, np.ndarray]:
            err = np.linalg.norm(s.tool_pos()[ids] - s.command[ids], axis=1)
            return {"Episode/final_distance_m": err, "Episode/success": (err < self.tolerance_m).astype(float)}

        return _Final(final)


@dataclass(frozen=True)
class ObjectGoalMetric:
    """The object's final distance to the goal and the task's own success test (its ObjectSource's)."""

    source: ObjectSource

    def make(self, n: int) -> MetricState:
        def final(ids: np.ndarray, s: TaskSignals) -> dict[str, np.ndarray]:
            pairs = list(zip(s.object_pos[ids], s.command[ids], strict=True))
            return {"Episode/final_distance_m": np.array([self.source.goal_distance(p, g) for p, g in pairs]),
                    "Episode/success": np.array([self.source.success(p, g) for p, g in pairs], dtype=float)}

        return _Final(final)


class MetricTerm(Protocol):
    def make(self, n: int) -> MetricState: ...


# ---------------------------------------------------------------------------------------------------------
# The terms of a task


@dataclass(frozen=True)
class TaskTerms:
    """Everything task-kind-specific, as terms. ``name`` labels the kind in logs and settings tables."""

    name: str
    trained_by: Literal["ppo", "demos"]  # demos: behaviour cloning; `train` runs PPO on the others only
    commands: UniformCommands = field(default_factory=UniformCommands)
    reward_inputs: tuple[RewardInputTerm, ...] = ()
    metrics: tuple[MetricTerm, ...] = ()
    source: ObjectSource | None = None  # the task's observation source (None: the robot state is all)
    uses_tool: bool = False  # reads the tool point (an arm's end effector): sensors in sim, kinematics on robots
    # The command is a tool-point target with this success radius (m): residual episodes track the tip's error,
    # the play video draws the target. None: no tool-point target.
    tool_target_m: float | None = None
    track_velocity: bool = False  # residual episodes log the base velocity's error to the command
    gate: str | None = None  # the sim2sim gate's scenario and checks (robot_rl.evaluation); None: no gate

    @property
    def state_success(self) -> bool:
        """Success is decided from a state (the object's, by the source's test): evaluations rank by it first."""
        return self.source is not None


def velocity_tracking(standing_fraction: float = 0.0, turn_fraction: float = 0.0) -> TaskTerms:
    return TaskTerms("velocity_tracking", "ppo", VelocityCommands(standing_fraction=standing_fraction,
                                                                  turn_fraction=turn_fraction),
                     metrics=(VelocityTrackingMetric(),), track_velocity=True, gate="velocity_tracking")


def reach(tolerance_m: float) -> TaskTerms:
    return TaskTerms("reach", "ppo", UniformCommands(("target_x", "target_y", "target_z")),
                     reward_inputs=(tool_target_error,), metrics=(ReachSuccessMetric(tolerance_m),), uses_tool=True,
                     tool_target_m=tolerance_m, gate="reach")


def push(source: ObjectSource) -> TaskTerms:
    return TaskTerms("push", "demos", reward_inputs=(object_and_tool,), metrics=(ObjectGoalMetric(source),),
                     source=source, uses_tool=True, gate="object_goal")
