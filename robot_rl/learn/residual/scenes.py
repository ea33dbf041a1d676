"""What each fine-tuning episode starts from: the task command and, for push tasks, the scene's layout.

A reach or walking episode is a command. A push episode is a layout — where the object starts and where
it must go (the goal is the command) — drawn by the task's own sampler (``panda_push.sample_episode``), so
the episodes fine-tuning learns from and evaluates on are the task's episode distribution. On a simulated
robot the layout is applied by resetting the scene (:meth:`ShiftedSimRobot.reset_scene`): the object is put
back at its start at rest, after the arm has ramped to its default pose and before the policy's first
recorded tick, as a person would set it down between episodes on hardware.

Every evaluation uses one fixed, seeded set (:func:`eval_setups`); training draws from its own stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_rl.hardware.sim_robot import SimScene
from robot_rl.tasks.task import TaskCfg

EVAL_SEED = 12345  # not the demos' (0) nor the BC evaluation's (10 000 + seed): layouts never trained on


@dataclass(frozen=True)
class EpisodeSetup:
    """One episode's start: the task command and, for push tasks, the scene with the object at its start."""

    command: np.ndarray
    scene: SimScene | None = None


def sample_setups(task: TaskCfg, rng: np.random.Generator, n: int) -> list[EpisodeSetup]:
    """``n`` episode starts drawn from ``rng``: commands, or push layouts from the task's sampler."""
    source = task.terms.source
    if source is None:
        return [EpisodeSetup(c) for c in task.commands.sample(rng, n)]
    layouts = [source.sample_episode(rng) for _ in range(n)]
    return [EpisodeSetup(layout.command, source.scene_at(layout.cube_xy)) for layout in layouts]


def eval_setups(task: TaskCfg, n: int, seed: int = EVAL_SEED) -> list[EpisodeSetup]:
    """A fixed, seeded set: every evaluation (and every method compared) uses the same."""
    return sample_setups(task, np.random.default_rng(seed), n)


def initial_scene(task: TaskCfg) -> SimScene | None:
    """The scene a simulated robot is built with for ``task`` (objects at some layout; each episode then
    resets it to its own); None for tasks without objects."""
    if task.terms.source is None:
        return None
    return sample_setups(task, np.random.default_rng(0), 1)[0].scene
