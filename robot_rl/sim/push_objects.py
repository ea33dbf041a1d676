"""A push task's object in the vectorized env: where its free joint sits in every env's state row, where each
episode puts it, where it is, and whether the episode succeeded.

The task's own module (``tasks.registry.push_task_module``) gives the scene (table, cube), the layout sampler
(the cube's start; the goal is the episode's command) and the success test, so the env trains on the task's
episode distribution and scores it as the robot-side fine-tuning does.
"""

from __future__ import annotations

import mujoco
import numpy as np

from robot_rl.hardware.sim_robot import SimScene, base_frame
from robot_rl.tasks.registry import push_task_module
from robot_rl.tasks.task import TaskCfg


class PushObject:
    def __init__(self, task: TaskCfg):
        self.task_module = push_task_module(task)
        # The world is built with the cube where some layout puts it; every reset moves it to its episode's own.
        self.scene: SimScene = self.scene_at(self.task_module.sample_episode(np.random.default_rng(0)).cube_xy)
        self.qpos: np.ndarray | None = None  # state-row columns of the tracked body's free joint (pos, quat)
        self.qvel: np.ndarray | None = None

    def scene_at(self, cube_xy: np.ndarray) -> SimScene:
        return self.task_module.push_scene(cube_xy)

    def locate(self, model: mujoco.MjModel, qpos_offset: int, qvel_offset: int) -> None:
        """Find the tracked body's free joint in ``model``'s state rows (FULLPHYSICS: offsets of qpos and qvel)."""
        joint = model.body(self.scene.tracked).jntadr[0]
        self.qpos = qpos_offset + model.jnt_qposadr[joint] + np.arange(7)
        self.qvel = qvel_offset + model.jnt_dofadr[joint] + np.arange(6)

    def reset(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Lay out one episode per row: the cube at its start, at rest; returns the goals (the commands)."""
        layouts = [self.task_module.sample_episode(rng) for _ in range(len(rows))]
        starts = [_tracked(self.scene_at(layout.cube_xy)).pos for layout in layouts]
        rows[:, self.qpos] = [[*pos, 1.0, 0.0, 0.0, 0.0] for pos in starts]
        rows[:, self.qvel] = 0.0
        return np.array([layout.command for layout in layouts])

    def position(self, state: np.ndarray, base_pos: np.ndarray, base_rot: np.ndarray) -> np.ndarray:
        """(N, 3) the object's position in the robot's base frame."""
        return base_frame(state[:, self.qpos[:3]], base_pos, base_rot)

    def episode_metrics(self, object_pos: np.ndarray, goals: np.ndarray) -> dict[str, np.ndarray]:
        """The task's own distance and success test, per finished episode (object positions in the base frame)."""
        pairs = list(zip(object_pos, goals, strict=True))
        return {"Episode/final_distance_m": np.array([self.task_module.goal_distance(p, g) for p, g in pairs]),
                "Episode/success": np.array([self.task_module.push_success(p, g) for p, g in pairs], dtype=float)}


def _tracked(scene: SimScene):
    return next(box for box in scene.boxes if box.name == scene.tracked)
