"""A task's actor observation of one robot state, outside the vectorized env: what a dataset records.

Teleop sessions and scripted-expert demos both record ``observation.state`` as the task's actor
observation, built by the same ``ObservationBuilder`` the policy controller uses, so a policy cloned from
a dataset is fed on the robot exactly what it learned from. Both recorders, and BC reading a dataset back,
need the builder, the element names and the task's instruction text; they live here, beside the
observation terms, so that teleop and learning share them without importing each other.
"""

from __future__ import annotations

import numpy as np

from robot_rl.core.types import RobotState
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.observations import ObservationBuilder, ObsInputs
from robot_rl.tasks.task import TaskCfg

# The instruction a LeRobot dataset stores for each episode (its "task"). A task's description is written
# for people reading the registry (panda-push's names how it was learned), so a task that has a plain
# instruction lists it here; any other records its description.
TASK_TEXTS: dict[str, str] = {"panda-push": "push the red cube to the goal on the table"}


def task_text(task: TaskCfg) -> str:
    """The instruction recorded with ``task``'s episodes."""
    return TASK_TEXTS.get(task.name, task.description)


class TaskObservation:
    """The task's actor observation of one ``RobotState`` (N = 1), as the policy controller builds it."""

    def __init__(self, task: TaskCfg, spec: RobotSpec):
        j, c = spec.num_joints, task.commands.size
        self.builder = ObservationBuilder(task.actor_obs, 1, j, c, j, noise=False)
        self.dim = self.builder.dim
        self.default_q = spec.default_positions
        self.last_action = np.zeros((1, j))
        self.names = observation_names(task, spec)

    def reset(self) -> None:
        self.builder.reset()
        self.last_action.fill(0.0)

    def __call__(self, state: RobotState, command: np.ndarray, object_pos: np.ndarray | None = None) -> np.ndarray:
        """``object_pos``: the task's object with this state (its observation source; RobotState has none)."""
        inputs = ObsInputs(
            q=state.q[None], dq=state.dq[None], default_q=self.default_q, base_quat=state.base_quat[None],
            base_ang_vel=state.base_ang_vel[None], command=np.asarray(command, dtype=np.float64)[None],
            last_action=self.last_action,
            base_lin_vel=None if state.base_lin_vel is None else state.base_lin_vel[None],
            object_pos=None if object_pos is None else np.asarray(object_pos)[None],
        )
        return self.builder.compute(inputs)[0].copy()


def observation_names(task: TaskCfg, spec: RobotSpec) -> tuple[str, ...]:
    """One name per observation element, e.g. ``joint_pos_rel.panda_joint1``, ``command.goal_x``, in order."""
    j, c = spec.num_joints, task.commands.size
    per_term = {"joint_pos_rel": spec.joint_names, "joint_vel": spec.joint_names, "last_action": spec.joint_names,
                "command": task.commands.names, "object_pos": ("x", "y", "z"), "base_lin_vel": ("x", "y", "z"),
                "base_ang_vel": ("x", "y", "z"), "projected_gravity": ("x", "y", "z")}
    names: list[str] = []
    for term, size in zip(task.actor_obs.terms, task.actor_obs.term_sizes(j, c, j), strict=True):
        parts = per_term.get(term.name, tuple(str(i) for i in range(size)))
        for h in range(term.history_length):
            suffix = f"[t-{term.history_length - 1 - h}]" if term.history_length > 1 else ""
            names += [f"{term.name}{suffix}.{p}" for p in parts]
    return tuple(names)
