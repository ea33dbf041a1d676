"""A task's object in the vectorized env (its observation source, ``tasks.terms.ObjectSource``): where its free
joint sits in every env's state row, where each episode puts it, and where it is.

The task's source gives the scene (table, cube) and the layout sampler (the object's start; the goal is the
episode's command), so the env trains on the task's episode distribution; the task's metric terms score it as
the robot-side fine-tuning does.
"""

from __future__ import annotations

import mujoco
import numpy as np

from robot_rl.hardware.sim_robot import SimScene, base_frame
from robot_rl.tasks.terms import ObjectSource


class PushObject:
    def __init__(self, source: ObjectSource):
        self.source = source
        # The world is built with the cube where some layout puts it; every reset moves it to its episode's own.
        self.scene: SimScene = self.scene_at(source.sample_episode(np.random.default_rng(0)).cube_xy)
        self.qpos: np.ndarray | None = None  # state-row columns of the tracked body's free joint (pos, quat)
        self.qvel: np.ndarray | None = None

    def scene_at(self, cube_xy: np.ndarray) -> SimScene:
        return self.source.scene_at(cube_xy)

    def locate(self, model: mujoco.MjModel, qpos_offset: int, qvel_offset: int) -> None:
        """Find the tracked body's free joint in ``model``'s state rows (FULLPHYSICS: offsets of qpos and qvel)."""
        joint = model.body(self.scene.tracked).jntadr[0]
        self.qpos = qpos_offset + model.jnt_qposadr[joint] + np.arange(7)
        self.qvel = qvel_offset + model.jnt_dofadr[joint] + np.arange(6)

    def reset(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Lay out one episode per row: the cube at its start, at rest; returns the goals (the commands)."""
        layouts = [self.source.sample_episode(rng) for _ in range(len(rows))]
        starts = [_tracked(self.scene_at(layout.cube_xy)).pos for layout in layouts]
        rows[:, self.qpos] = [[*pos, 1.0, 0.0, 0.0, 0.0] for pos in starts]
        rows[:, self.qvel] = 0.0
        return np.array([layout.command for layout in layouts])

    def position(self, state: np.ndarray, base_pos: np.ndarray, base_rot: np.ndarray) -> np.ndarray:
        """(N, 3) the object's position in the robot's base frame."""
        return base_frame(state[:, self.qpos[:3]], base_pos, base_rot)


def _tracked(scene: SimScene):
    return next(box for box in scene.boxes if box.name == scene.tracked)
