"""The explicit task registry: every task the project trains, by name."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from robot_rl.core.errors import RobotRLError
from robot_rl.tasks import panda_push as panda_push_module
from robot_rl.tasks.a1_velocity import a1_flat, a1_rough
from robot_rl.tasks.panda_push import panda_push
from robot_rl.tasks.panda_reach import panda_reach
from robot_rl.tasks.task import TaskCfg


class UnknownTaskError(RobotRLError, KeyError):
    """No task has this name. The message lists the known ones."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


TASKS: dict[str, Callable[[], TaskCfg]] = {
    "a1-flat": a1_flat,
    "a1-rough": a1_rough,
    "panda-reach": panda_reach,
    "panda-push": panda_push,
}


# Push tasks and the module of each: ``sample_episode(rng)`` (a layout: the object's start and the goal),
# ``push_scene(cube_xy)`` (the table and the object there), ``push_success(pos, goal)``, ``goal_distance``.
PUSH_TASK_MODULES: dict[str, ModuleType] = {panda_push_module.NAME: panda_push_module}


def push_task_module(task: TaskCfg) -> ModuleType:
    """The module of a push task (see PUSH_TASK_MODULES); a clear error for any other task."""
    if task.objective != "push" or task.name not in PUSH_TASK_MODULES:
        raise ValueError(f"task {task.name!r} ({task.objective}) is not a push task with a scene "
                         f"(known: {', '.join(PUSH_TASK_MODULES)})")
    return PUSH_TASK_MODULES[task.name]


def task_names() -> list[str]:
    return list(TASKS)


def make_task(name: str) -> TaskCfg:
    try:
        factory = TASKS[name]
    except KeyError:
        raise UnknownTaskError(f"unknown task {name!r} (known tasks: {', '.join(TASKS)})") from None
    return factory()
