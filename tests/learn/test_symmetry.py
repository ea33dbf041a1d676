"""Symmetry augmentation through rsl_rl: the function returns what rsl_rl's Symmetry extension expects (originals
first, then their mirrors, for every observation group and the actions), and PPO trains with it when the task's
recipe turns it on."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from rsl_rl.extensions import Symmetry
from tensordict import TensorDict

from robot_rl.learn.ppo import ACTOR_GROUP, CRITIC_GROUP, RslRlVecEnv, TaskRunner
from robot_rl.learn.symmetry import SymmetryAugmentation, task_mirror
from robot_rl.robots.joint_mirror import MirrorError
from robot_rl.robots.spec import load_robot
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.registry import make_task


@pytest.fixture(scope="module")
def mirror():
    return task_mirror(make_task("a1-flat"), load_robot("a1"))


def _batch(b: int = 6) -> tuple[TensorDict, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    obs = TensorDict({ACTOR_GROUP: torch.randn(b, 45, generator=gen), CRITIC_GROUP: torch.randn(b, 48, generator=gen)},
                     batch_size=[b])
    return obs, torch.randn(b, 12, generator=gen)


def test_augmentation_returns_originals_then_mirrors(mirror):
    augment = SymmetryAugmentation(mirror)
    obs, actions = _batch()
    obs_aug, actions_aug = augment(env=None, obs=obs, actions=actions)
    assert obs_aug.batch_size == torch.Size([12]) and set(obs_aug.keys()) == {ACTOR_GROUP, CRITIC_GROUP}
    assert actions_aug.shape == (12, 12) and actions_aug.dtype == actions.dtype
    for key, vm in ((ACTOR_GROUP, mirror.actor), (CRITIC_GROUP, mirror.critic)):
        assert torch.equal(obs_aug[key][:6], obs[key])
        np.testing.assert_array_equal(obs_aug[key][6:].numpy(), vm.apply(obs[key].numpy()))
    assert torch.equal(actions_aug[:6], actions)
    np.testing.assert_array_equal(actions_aug[6:].numpy(), mirror.action.apply(actions.numpy()))
    # rsl_rl asks for one half alone (the mirror loss mirrors the action means only).
    assert augment(env=None, obs=None, actions=actions)[0] is None
    assert augment(env=None, obs=obs, actions=None)[1] is None


def test_rsl_rl_symmetry_extension_takes_it(mirror):
    """rsl_rl's own Symmetry.compute_loss: a policy that is its own mirror (here: zero actions) has zero loss."""
    symmetry = Symmetry(env=None, data_augmentation_func=SymmetryAugmentation(mirror), use_data_augmentation=True)
    obs, actions = _batch()

    class Batch:
        observations, old_actions_log_prob = obs, torch.zeros(6, 1)
        values, advantages, returns = torch.zeros(6, 1), torch.zeros(6, 1), torch.zeros(6, 1)

    batch = Batch()
    batch.actions = actions
    symmetry.augment_batch(batch, 6)
    assert batch.observations.batch_size[0] == 12 and batch.returns.shape == (12, 1)
    loss = symmetry.compute_loss(lambda o: torch.zeros(o.batch_size[0], 12), batch, 6)
    assert float(loss) == 0.0


def test_an_unknown_group_is_an_error(mirror):
    obs = TensorDict({"height_scan": torch.zeros(2, 3)}, batch_size=[2])
    with pytest.raises(MirrorError, match="'height_scan'"):
        SymmetryAugmentation(mirror)(env=None, obs=obs, actions=None)


@pytest.mark.parametrize("on", [False, True])
def test_ppo_trains_with_the_recipe_setting(on):
    task = make_task("a1-flat")
    ppo = dataclasses.replace(task.ppo, actor_hidden_dims=(16,), critic_hidden_dims=(16,), num_steps_per_env=8,
                              symmetry_augmentation=on)
    task = dataclasses.replace(task, ppo=ppo)
    vec = RslRlVecEnv(MujocoVecEnv(task, 4, seed=0, nthread=1))
    runner = TaskRunner(vec, task, log_dir=None)
    assert (runner.alg.symmetry is not None) is on
    before = [p.detach().clone() for p in runner.alg.actor.parameters()]
    runner.learn(2)
    assert any(not torch.equal(a, b) for a, b in zip(before, runner.alg.actor.parameters(), strict=True))
    if on:
        assert runner.alg.symmetry.use_data_augmentation and not runner.alg.symmetry.use_mirror_loss
        assert runner._provenance["symmetry_augmentation"] is True
    vec.close()
