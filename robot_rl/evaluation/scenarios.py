"""Scripted scenarios for the sim2sim gate: what the operator commands, and when the robot is shoved.

A scenario starts when the runtime is armed (loop time 0): the state machine ramps from the measured pose
to the default pose for the spec's ``safety.ramp_duration_s`` (the *lead-in*), the policy takes over, and
the script runs. Segment and push times are given from the end of the lead-in, so the same script fits
robots with different ramps.

- Velocity tasks (``lin_vel_x, lin_vel_y, ang_vel_z``): stand, forward 0.5 m/s (shoved sideways at
  0.6 m/s halfway through), turn in place, walk sideways, walk backwards, stop (shoved forward at
  0.7 m/s). 18 s of script; with the A1's 2 s ramp, 20 s of simulated time.
- Reach tasks (``target_x, target_y, target_z``): four targets spread over the trained box, 3 s each.
  No pushes: an arm's base is fixed.
- Object-to-goal tasks (a task with an observation source, e.g. panda-push): the source's scene with its
  object where the source lays it out with seed 0, that layout's goal commanded for the task's episode
  length. The object cannot be put back mid-run, so the gate runs this scenario again for layout seeds
  1, 2, … (``Scenario.relayout``; how many: ``GateConfig.object_goal_layouts``) and scores the share that
  ends at the goal: one layout would judge an 80–90 % policy by luck.

Every command is clamped into the task's trained ranges when the scenario is built, so the script never
asks a policy for something it was not trained on (the controller would clamp it anyway, silently).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np

from robot_rl.control.deploy_loop import CommandStep, Push
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.commands import CommandSpec

GateName = Literal["velocity_tracking", "reach", "object_goal"]  # the gates a task can name (TaskTerms.gate)
OBJECT_GATE_LAYOUT_SEED = 0  # the object-goal gate's layout: the source's first draw with this seed


@dataclass(frozen=True)
class Segment:
    """From ``start_s`` (after the lead-in) for ``duration_s``, the operator commands ``command``."""

    label: str
    start_s: float
    duration_s: float
    command: tuple[float, ...]

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True)
class Scenario:
    name: str
    gate: GateName  # which gate checks score it (scoring.GATE_CHECKS)
    command_names: tuple[str, ...]
    segments: tuple[Segment, ...]  # back to back, in time order
    pushes: tuple[Push, ...]  # times after the lead-in; world-frame velocity added to the base
    lead_in_s: float  # arm → ramp → policy: the spec's ramp duration
    tracks_tool_point: bool = False  # the commands are tool-point targets: the run records the tip
    # Object-goal gates: the simulator's scene (a hardware.sim_robot.SimScene, its object at the layout's start)
    # and the task's distance of an object position to the goal (the command). None: no object.
    scene: object | None = None
    goal_distance: Callable[[np.ndarray, np.ndarray], float] | None = None
    # Object-goal gates: the same scenario with the object laid out by another seed (the gate scores several).
    relayout: Callable[[int], Scenario] | None = None

    def __post_init__(self) -> None:
        if not self.segments:
            raise ValueError(f"scenario {self.name!r} has no segments")
        t = 0.0
        for seg in self.segments:
            if len(seg.command) != len(self.command_names):
                raise ValueError(f"scenario {self.name!r}, segment {seg.label!r}: {len(seg.command)} command values "
                                 f"for {len(self.command_names)} commands {self.command_names}")
            if abs(seg.start_s - t) > 1e-9 or seg.duration_s <= 0:
                raise ValueError(f"scenario {self.name!r}: segment {seg.label!r} must start at {t:g} s (back to back) "
                                 f"and last > 0 s (starts {seg.start_s:g}, lasts {seg.duration_s:g})")
            t = seg.end_s
        for push in self.pushes:
            if not 0.0 <= push.t_s < t:
                raise ValueError(f"scenario {self.name!r}: push at {push.t_s:g} s is outside the script (0–{t:g} s)")

    @property
    def script_s(self) -> float:
        return self.segments[-1].end_s

    @property
    def total_s(self) -> float:
        """Simulated time of one run: lead-in plus script."""
        return self.lead_in_s + self.script_s

    def command_steps(self) -> list[CommandStep]:
        """The script in ``run_loop``'s clock (seconds since arming). The first segment's command is set
        from arming on, so the policy takes over with it."""
        steps = [CommandStep(self.lead_in_s + s.start_s, s.command) for s in self.segments]
        return [CommandStep(0.0, self.segments[0].command), *steps[1:]]

    def loop_pushes(self) -> list[Push]:
        return [Push(self.lead_in_s + p.t_s, p.velocity) for p in self.pushes]

    def push_times(self) -> np.ndarray:
        """Push times in loop time (seconds since arming)."""
        return np.array([self.lead_in_s + p.t_s for p in self.pushes])

    def segment_bounds(self) -> list[tuple[Segment, float, float]]:
        """(segment, start, end) in loop time."""
        return [(s, self.lead_in_s + s.start_s, self.lead_in_s + s.end_s) for s in self.segments]


def _clamped(commands: CommandSpec, values: dict[str, float]) -> tuple[float, ...]:
    vector = np.array([values.get(name, 0.0) for name in commands.names])
    return tuple(float(v) for v in commands.clip(vector))


def _back_to_back(commands: CommandSpec, script: Sequence[tuple[str, float, dict[str, float]]],
                  time_scale: float) -> tuple[Segment, ...]:
    segments, t = [], 0.0
    for label, duration, values in script:
        segments.append(Segment(label, t, duration * time_scale, _clamped(commands, values)))
        t += duration * time_scale
    return tuple(segments)


def velocity_scenario(commands: CommandSpec, lead_in_s: float, time_scale: float = 1.0) -> Scenario:
    """Stand, forward, turn, lateral, backwards, stop, with two shoves. ``time_scale`` stretches every
    duration and push time (tests use short scripts)."""
    if commands.names[:3] != ("lin_vel_x", "lin_vel_y", "ang_vel_z"):
        raise ValueError(f"velocity scenario needs commands lin_vel_x, lin_vel_y, ang_vel_z first; "
                         f"got {commands.names}")
    script = (
        ("stand", 2.0, {}),
        ("forward", 4.0, {"lin_vel_x": 0.5}),
        ("turn", 3.0, {"ang_vel_z": 0.6}),
        ("lateral", 3.0, {"lin_vel_y": 0.3}),
        ("backwards", 3.0, {"lin_vel_x": -0.4}),
        ("stop", 3.0, {}),
    )
    pushes = (Push(4.0 * time_scale, (0.0, 0.6, 0.0)), Push(16.0 * time_scale, (0.7, 0.0, 0.0)))
    return Scenario("velocity: stand, forward, turn, lateral, backwards, stop", "velocity_tracking",
                    commands.names, _back_to_back(commands, script, time_scale), pushes, lead_in_s)


def reach_scenario(commands: CommandSpec, lead_in_s: float, time_scale: float = 1.0) -> Scenario:
    """Four targets spread over the trained box (fractions of each range), 3 s each."""
    if commands.names != ("target_x", "target_y", "target_z"):
        raise ValueError(f"reach scenario needs commands target_x, target_y, target_z; got {commands.names}")
    fractions = ((0.5, 0.5, 0.5), (0.75, 0.8, 0.3), (0.3, 0.2, 0.75), (0.6, 0.5, 0.2))
    script = []
    for i, frac in enumerate(fractions):
        point = commands.low + np.array(frac) * (commands.high - commands.low)
        script.append((f"target {i + 1}", 3.0, dict(zip(commands.names, point.tolist(), strict=True))))
    return Scenario("reach: four targets", "reach", commands.names, _back_to_back(commands, script, time_scale), (),
                    lead_in_s, tracks_tool_point=True)


def object_goal_scenario(commands: CommandSpec, lead_in_s: float, time_scale: float = 1.0, source=None,
                         episode_s: float = 10.0, layout_seed: int = OBJECT_GATE_LAYOUT_SEED) -> Scenario:
    """The object where ``source`` (the task's ObjectSource) lays it out first with ``layout_seed``, its goal
    commanded for ``episode_s``. ``relayout(k)`` gives the same scenario for layout seed k."""
    if source is None:
        raise ValueError("an object-goal scenario needs the task's observation source (TaskTerms.source)")
    layout = source.sample_episode(np.random.default_rng(layout_seed))
    goal = dict(zip(commands.names, np.asarray(layout.command, dtype=float).tolist(), strict=True))
    script = (("to the goal", episode_s, goal),)
    return Scenario(f"object to goal: layout seed {layout_seed}", "object_goal", commands.names,
                    _back_to_back(commands, script, time_scale), (), lead_in_s,
                    scene=source.scene_at(np.asarray(layout.cube_xy)), goal_distance=source.goal_distance,
                    relayout=partial(object_goal_scenario, commands, lead_in_s, time_scale, source, episode_s))


# The gate's scenario of each gate a task can name (TaskTerms.gate).
SCENARIOS = {"velocity_tracking": velocity_scenario, "reach": reach_scenario, "object_goal": object_goal_scenario}


def scenario_for(gate: str | None, commands: CommandSpec, spec: RobotSpec, time_scale: float = 1.0,
                 source=None, episode_s: float = 10.0) -> Scenario:
    """The scenario of the gate a task names (its ``terms.gate``), with the robot's ramp as lead-in; an
    object-goal gate also takes the task's observation ``source`` and episode length."""
    if time_scale <= 0:
        raise ValueError(f"time_scale must be positive, got {time_scale!r}")
    if gate not in SCENARIOS:
        raise ValueError(f"no sim2sim scenario for gate {gate!r} (known: {', '.join(SCENARIOS)})")
    if gate == "object_goal":
        return object_goal_scenario(commands, spec.safety.ramp_duration_s, time_scale, source, episode_s)
    return SCENARIOS[gate](commands, spec.safety.ramp_duration_s, time_scale)


def rotated_pushes(pushes: tuple[Push, ...], rng: np.random.Generator) -> tuple[Push, ...]:
    """``pushes`` at their times and magnitudes, each from a random horizontal direction."""
    out = []
    for p in pushes:
        mag = float(np.hypot(p.velocity[0], p.velocity[1]))
        a = rng.uniform(0, 2 * math.pi)
        out.append(Push(p.t_s, (mag * math.cos(a), mag * math.sin(a), p.velocity[2])))
    return tuple(out)


def random_targets(commands: CommandSpec, lead_in: float, rng: np.random.Generator) -> Scenario:
    """The reach gate's script with its targets drawn at random inside the trained box."""
    gate = reach_scenario(commands, lead_in)
    low, high = commands.low, commands.high
    segments = tuple(Segment(s.label, s.start_s, s.duration_s,
                             tuple(float(v) for v in low + rng.uniform(0.15, 0.85, 3) * (high - low)))
                     for s in gate.segments)
    return dataclasses.replace(gate, name="reach: four random targets", segments=segments)


def steps_scene(height: float, rng: np.random.Generator):
    """Six boxes up to ``height`` ahead of the robot, with gaps: a walk over random steps."""
    from robot_rl.hardware.sim_robot import SceneBox, SimScene

    boxes, x = [], 0.6
    for i in range(6):  # up and down: a block, a gap, the next block
        h = float(rng.uniform(0.3, 1.0) * height)
        depth = float(rng.uniform(0.3, 0.5))
        boxes.append(SceneBox(f"step{i}", (depth / 2, 1.0, h / 2), (x + depth / 2, 0.0, h / 2)))
        x += depth + float(rng.uniform(0.3, 0.6))
    return SimScene(tuple(boxes))
