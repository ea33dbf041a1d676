"""The explicit task registry: every task the project trains, by name."""

from __future__ import annotations

from collections.abc import Callable

from robot_rl.core.errors import RobotRLError
from robot_rl.tasks.a1_velocity import a1_flat, a1_flat_history, a1_flat_trot, a1_rough, a1_rough_trot
from robot_rl.tasks.panda_push import panda_push
from robot_rl.tasks.panda_reach import panda_reach
from robot_rl.tasks.task import TaskCfg
from robot_rl.tasks.unitree_velocity import g1_flat, go2_flat


class UnknownTaskError(RobotRLError, KeyError):
    """No task has this name. The message lists the known ones."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


TASKS: dict[str, Callable[[], TaskCfg]] = {
    "a1-flat": a1_flat,
    "a1-flat-history": a1_flat_history,
    "a1-flat-trot": a1_flat_trot,
    "a1-rough": a1_rough,
    "a1-rough-trot": a1_rough_trot,
    "go2-flat": go2_flat,
    "g1-flat": g1_flat,
    "panda-reach": panda_reach,
    "panda-push": panda_push,
}


def task_names() -> list[str]:
    return list(TASKS)


def make_task(name: str) -> TaskCfg:
    try:
        factory = TASKS[name]
    except KeyError:
        raise UnknownTaskError(f"unknown task {name!r} (known tasks: {', '.join(TASKS)})") from None
    return factory()
