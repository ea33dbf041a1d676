"""The env runs any task through its terms: a toy task, built from terms the env has never heard of, runs in it
with no edit to the env; the shipped kinds' terms compute what the task asks."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest

from robot_rl.sim import randomization as dr
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm
from robot_rl.tasks.registry import make_task
from robot_rl.tasks.rewards import RewardsCfg, RewardTerm
from robot_rl.tasks.task import PPOCfg, TaskCfg, TerminationsCfg
from robot_rl.tasks.terms import TaskSignals, TaskTerms, UniformCommands


@dataclass(frozen=True)
class ConstantCommands(UniformCommands):
    """A command term of the toy kind: always the middle of the range."""

    def sample(self, commands: CommandSpec, rng: np.random.Generator, k: int) -> np.ndarray:
        return np.tile((commands.low + commands.high) / 2, (k, 1))


def tool_height(s: TaskSignals) -> dict[str, np.ndarray]:
    """A reward-input term of the toy kind: the tool's height above the commanded one, as the 'ee_error'."""
    return {"ee_error": np.abs(s.tool_pos()[:, 2] - s.command[:, 0])}


@dataclass
class _Lengths:
    steps: np.ndarray

    def reset(self, ids):
        self.steps[ids] = 0

    def step(self, s):
        self.steps += 1

    def finish(self, ids, s):
        return {"Episode/toy_steps": self.steps[ids].astype(float),
                "Episode/toy_height_m": s.tool_pos()[ids, 2]}


@dataclass(frozen=True)
class StepsMetric:
    def make(self, n: int):
        return _Lengths(np.zeros(n, dtype=np.int64))


def _toy_task() -> TaskCfg:
    obs = ObservationLayout(terms=(ObsTerm("joint_pos_rel"), ObsTerm("joint_vel", scale=0.2), ObsTerm("command")))
    return TaskCfg(
        name="panda-hold-height", robot="panda",
        terms=TaskTerms("hold_height", "ppo", ConstantCommands(("height",)), reward_inputs=(tool_height,),
                        metrics=(StepsMetric(),), uses_tool=True),
        actor_obs=obs, critic_obs=obs, commands=CommandSpec(names=("height",), ranges=((0.3, 0.5),)),
        action=JointPositionAction(scale=0.5, clip=4.0),
        rewards=RewardsCfg(terms=(RewardTerm("reach_distance", -1.0), RewardTerm("action_rate", -0.01))),
        terminations=TerminationsCfg(), randomization=dr.NO_RANDOMIZATION, episode_length_s=0.1, ppo=PPOCfg(),
    )


def test_a_toy_task_of_its_own_terms_runs_in_the_env():
    task = _toy_task()
    env = MujocoVecEnv(task, 3, seed=0, nthread=1)
    try:
        np.testing.assert_allclose(env.commands, 0.4)  # its command term
        steps = env.max_episode_length
        for _ in range(steps):
            result = env.step(np.zeros((3, env.num_actions)))
            tool_z = env.end_effector_pos()[:, 2]
            # Its reward-input term feeds the reach_distance term (−1 per second; a zero action costs nothing).
            np.testing.assert_allclose(result.reward, -np.abs(tool_z - 0.4) * env.dt, atol=1e-12)
        assert result.truncated.all()
        np.testing.assert_array_equal(result.finished["Episode/toy_steps"], steps)  # its metric term
        assert "Episode/toy_height_m" in result.log and "Episode/success" not in result.finished
    finally:
        env.close()


def test_the_velocity_command_term_stands_a_share_and_the_slow_ones():
    task = make_task("a1-flat")
    term = task.terms.commands
    assert term.standing_fraction == 0.1
    cmd = term.sample(task.commands, np.random.default_rng(0), 2000)
    speed = np.linalg.norm(cmd[:, :2], axis=1)
    assert np.all((speed == 0) | (speed >= term.min_speed_m_s))
    assert 0.07 < np.mean(np.all(cmd == 0, axis=1)) < 0.25


def test_a_share_of_velocity_commands_turns_in_place():
    task = make_task("a1-flat")
    term = dataclasses.replace(task.terms.commands, turn_fraction=0.3)
    cmd = term.sample(task.commands, np.random.default_rng(0), 4000)
    still = np.all(cmd[:, :2] == 0, axis=1)
    turning = still & (cmd[:, 2] != 0)
    standing = np.all(cmd == 0, axis=1)
    # 30 % asked to turn, plus the slow draws (~5 %); the standing share is unchanged
    assert 0.30 < turning.mean() < 0.40 and 0.07 < standing.mean() < 0.13
    assert np.abs(cmd[turning, 2]).max() > 0.9  # at the drawn rates, the whole range


def test_only_a_task_with_an_object_source_builds_a_scene_and_its_layouts_set_the_command():
    reach = MujocoVecEnv(dataclasses.replace(make_task("panda-reach"), randomization=dr.NO_RANDOMIZATION), 2,
                         nthread=1)
    push_task = make_task("panda-push")
    push = MujocoVecEnv(push_task, 2, seed=4, nthread=1)
    try:
        assert reach.push is None and push.push is not None
        # Each env's command is its layout's goal, 10–18 cm from where the layout put the cube.
        cube = push._frame()["object_pos"][:, :2]
        distance = np.linalg.norm(push.commands - cube, axis=1)
        assert np.all((distance > 0.1 - 1e-9) & (distance < 0.18 + 1e-9))
        with pytest.raises(ValueError, match="cannot be fixed"):
            MujocoVecEnv(push_task, 1, fixed_command=(0.5, 0.0), nthread=1)
    finally:
        reach.close()
        push.close()
