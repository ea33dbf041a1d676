"""The rsl_rl adapter: VecEnv contract, runner config, checkpoints that name their task."""

import dataclasses

import pytest
import torch
from rsl_rl.modules import EmpiricalNormalization

from robot_rl.learn.ppo import (
    ACTOR_GROUP,
    CRITIC_GROUP,
    CheckpointError,
    RslRlVecEnv,
    TaskRunner,
    check_checkpoint,
    read_checkpoint_info,
)
from robot_rl.robots.spec import load_robot
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.registry import make_task


@pytest.fixture(scope="module")
def vec():
    env = RslRlVecEnv(MujocoVecEnv(make_task("a1-flat"), 3, seed=0, nthread=1))
    yield env
    env.close()


def test_observation_groups_and_step_contract(vec):
    obs = vec.get_observations()
    assert set(obs.keys()) == {ACTOR_GROUP, CRITIC_GROUP}
    assert obs[ACTOR_GROUP].shape == (3, vec.env.num_actor_obs)
    assert obs[CRITIC_GROUP].shape == (3, vec.env.num_critic_obs)
    obs, rew, dones, extras = vec.step(torch.zeros(3, vec.num_actions))
    assert rew.shape == (3,) and rew.dtype == torch.float32
    assert dones.shape == (3,)
    assert extras["time_outs"].shape == (3,)
    assert isinstance(extras["log"], dict)


def test_observations_are_copies_the_next_step_does_not_overwrite(vec):
    first = vec.get_observations()[ACTOR_GROUP].clone()
    kept = vec.get_observations()[ACTOR_GROUP]
    vec.step(torch.ones(3, vec.num_actions))
    assert torch.equal(kept, first)


def test_episode_length_buffer_is_shared_with_the_env(vec):
    vec.episode_length_buf = torch.tensor([5, 6, 7])
    assert vec.env.episode_length.tolist() == [5, 6, 7]
    assert vec.episode_length_buf.tolist() == [5, 6, 7]


def test_runner_normalizes_observations_and_stamps_checkpoints(vec, tmp_path):
    task = make_task("a1-flat")
    runner = TaskRunner(vec, task, log_dir=None, ppo=dataclasses.replace(task.ppo, actor_hidden_dims=(16,),
                                                                        critic_hidden_dims=(16,)))
    assert isinstance(runner.alg.actor.obs_normalizer, EmpiricalNormalization)
    assert isinstance(runner.alg.critic.obs_normalizer, EmpiricalNormalization)
    assert runner.alg.actor.obs_dim == vec.env.num_actor_obs  # the actor sees only the policy group
    path = tmp_path / "model.pt"
    runner.save(str(path))
    info = read_checkpoint_info(path)
    spec = load_robot("a1")
    assert {k: info[k] for k in ("task", "robot", "spec_hash")} == {"task": "a1-flat", "robot": "a1",
                                                                    "spec_hash": spec.spec_hash}
    assert info["actor_hidden_dims"] == [16] and info["env_steps"] == 0
    assert check_checkpoint(path, task, spec) == info

    with pytest.raises(CheckpointError, match="trained for task 'a1-flat', not 'panda-reach'"):
        check_checkpoint(path, make_task("panda-reach"), load_robot("panda"))
    changed = dataclasses.replace(spec, joints=(dataclasses.replace(spec.joints[0], kp=99.0), *spec.joints[1:]))
    with pytest.raises(CheckpointError, match="spec hash"):
        check_checkpoint(path, task, changed)


def test_critic_only_iterations_leave_the_actor_and_reset_the_learning_rate(vec):
    task = make_task("a1-flat")
    ppo = dataclasses.replace(task.ppo, actor_hidden_dims=(16,), critic_hidden_dims=(16,), num_steps_per_env=4)
    runner = TaskRunner(vec, task, log_dir=None, ppo=ppo)
    actor = {k: v.clone() for k, v in runner.alg.actor.mlp.state_dict().items()}
    critic = {k: v.clone() for k, v in runner.alg.critic.mlp.state_dict().items()}
    runner.alg.learning_rate = 0.05  # as if the adaptive schedule had moved it
    runner.learn_critic_only(2, learning_rate=ppo.learning_rate)
    assert all(torch.equal(v, actor[k]) for k, v in runner.alg.actor.mlp.state_dict().items())
    assert not all(torch.equal(v, critic[k]) for k, v in runner.alg.critic.mlp.state_dict().items())
    assert runner.alg.learning_rate == ppo.learning_rate
    assert all(g["lr"] == ppo.learning_rate for g in runner.alg.optimizer.param_groups)
    runner.learn(1)  # the actor learns again after
    assert not all(torch.equal(v, actor[k]) for k, v in runner.alg.actor.mlp.state_dict().items())


def test_files_that_are_not_our_checkpoints_are_refused(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        read_checkpoint_info(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable torch checkpoint"):
        read_checkpoint_info(junk)
    foreign = tmp_path / "foreign.pt"
    torch.save({"actor_state_dict": {}, "infos": None}, foreign)
    with pytest.raises(CheckpointError, match="does not record its task"):
        read_checkpoint_info(foreign)
