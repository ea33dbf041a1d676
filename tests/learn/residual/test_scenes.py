"""Episode starts: commands, or push layouts drawn by the task's own sampler, with a fixed evaluation set."""

from __future__ import annotations

import numpy as np

from robot_rl.learn.residual.scenes import EVAL_SEED, eval_setups, initial_scene, sample_setups
from robot_rl.tasks import panda_push
from robot_rl.tasks.registry import make_task


def test_push_setups_are_the_tasks_layouts_with_the_cube_at_its_start():
    task = make_task("panda-push")
    setups = sample_setups(task, np.random.default_rng(5), 3)
    layouts = [panda_push.sample_episode(rng) for rng in [np.random.default_rng(5)] for _ in range(3)]
    for setup, layout in zip(setups, layouts, strict=True):
        np.testing.assert_array_equal(setup.command, layout.goal_xy)
        cube = {b.name: b for b in setup.scene.boxes}[panda_push.CUBE]
        assert setup.scene.tracked == panda_push.CUBE
        np.testing.assert_allclose(cube.pos, [*layout.cube_xy, panda_push.TABLE_TOP_Z + panda_push.CUBE_HALF_M])
    assert initial_scene(task) is not None and initial_scene(make_task("panda-reach")) is None


def test_the_evaluation_set_is_fixed_and_not_the_demos_layouts():
    task = make_task("panda-push")
    a, b = eval_setups(task, 4), eval_setups(task, 4)
    assert all(np.array_equal(x.command, y.command) and x.scene == y.scene for x, y in zip(a, b, strict=True))
    demos = sample_setups(task, np.random.default_rng(0), 4)  # collect_demos draws from seed 0
    assert not any(np.array_equal(x.command, y.command) for x in a for y in demos)
    assert EVAL_SEED not in (0, 10_000)


def test_reach_setups_are_plain_commands_and_only_push_has_an_object_source():
    task = make_task("panda-reach")
    setups = sample_setups(task, np.random.default_rng(1), 2)
    np.testing.assert_array_equal([s.command for s in setups], task.commands.sample(np.random.default_rng(1), 2))
    assert all(s.scene is None for s in setups)
    assert task.terms.source is None and initial_scene(task) is None
    assert make_task("panda-push").terms.source is panda_push.SOURCE
