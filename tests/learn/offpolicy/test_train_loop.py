"""``robot-rl train --algo fasttd3`` end to end at toy size on the real A1 env: it trains, checkpoints with the
same stamps as PPO, resumes, exports an ONNX contract policy that matches its torch actor, and that policy
runs in ``play``, the sim2sim gate and the model card unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from robot_rl.evaluation.sim2sim import policy_gate
from robot_rl.learn.export_checkpoint import export_checkpoint
from robot_rl.learn.offpolicy.fasttd3 import inference_policy
from robot_rl.learn.offpolicy.train_loop import check_algorithm, fasttd3_settings
from robot_rl.learn.play import PlayArgs, play
from robot_rl.learn.ppo import CheckpointError, read_checkpoint_info
from robot_rl.learn.train import TrainArgs, train
from robot_rl.policy.contract import contract_for_task
from robot_rl.policy.model_card import write_model_card
from robot_rl.policy.onnx_policy import load_policy
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task
from robot_rl.typed_yaml import ConfigError

# 12 iterations: 10 of exploration (learning_starts), then 2 with 2 updates each.
TINY = dict(task="a1-flat", algo="fasttd3", num_envs=4, max_iterations=12, progress=False, physics_threads=1,
            torch_threads=1)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return train(TrainArgs(log_dir=tmp_path_factory.mktemp("runs"), seed=3, **TINY))


@pytest.fixture(scope="module")
def exported(checkpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "a1_fasttd3.onnx"
    assert export_checkpoint(str(checkpoint), str(out)) == 0
    return out


def test_a_run_writes_stamped_checkpoints_logs_and_its_profile(checkpoint):
    assert checkpoint.name == "model_11.pt" and (checkpoint.parent / "model_0.pt").is_file()
    info = read_checkpoint_info(checkpoint)
    assert info["algorithm"] == "fasttd3" and info["task"] == "a1-flat" and info["seed"] == 3
    assert info["env_steps"] == 12 * 4 and info["iteration"] == 11
    data = torch.load(checkpoint, weights_only=False)
    assert data["updates"] == 2 * 2
    run_dir = checkpoint.parent
    assert any(p.name.startswith("events.out.tfevents") for p in run_dir.iterdir())
    assert json.loads((run_dir / "config.json").read_text())["fasttd3"]["num_envs"] == 4
    profile = json.loads((run_dir / "profile.json").read_text())
    assert profile["iterations"] == 12 and profile["seconds"]["update"] > 0 and profile["seconds"]["env"] > 0
    assert sum(profile["share"].values()) == pytest.approx(1.0)


def test_resume_continues_the_count_the_networks_and_the_curriculum(checkpoint, tmp_path, monkeypatch):
    from robot_rl.sim.mujoco_vec_env import MujocoVecEnv

    continued = []
    original = MujocoVecEnv.continue_curriculum
    monkeypatch.setattr(MujocoVecEnv, "continue_curriculum",
                        lambda env, steps: (continued.append(steps), original(env, steps)))
    final = train(TrainArgs(log_dir=tmp_path, resume=checkpoint, **{**TINY, "max_iterations": 3, "num_envs": None}))
    info = read_checkpoint_info(final)
    assert final.name == "model_14.pt" and info["env_steps"] == 12 * 4 + 3 * 4
    assert continued == [12]  # the push curriculum resumes after the 12 policy steps per env already taken
    before, after = torch.load(checkpoint, weights_only=False), torch.load(final, weights_only=False)
    # 3 iterations refill the replay (learning_starts) without updating: the networks are the stored ones.
    assert after["updates"] == before["updates"]
    for name, tensor in before["actor_state_dict"].items():
        assert torch.equal(after["actor_state_dict"][name], tensor)
    assert after["actor_normalizer"]["count"] > before["actor_normalizer"]["count"]
    # the run's record names the settings it ran with: the checkpoint's (its envs), not the recipe's defaults
    assert json.loads((final.parent / "config.json").read_text())["fasttd3"]["num_envs"] == 4


def test_the_export_is_a_contract_policy_that_matches_the_torch_actor(checkpoint, exported):
    task = make_task("a1-flat")
    policy = load_policy(exported, contract_for_task(task, load_robot("a1")))  # raises on any mismatch
    assert policy.contract.normalizer_baked_in and policy.contract.provenance.notes["algorithm"] == "fasttd3"
    assert policy.contract.provenance.env_steps == 12 * 4
    actor = inference_policy(torch.load(checkpoint, weights_only=False))
    obs = np.random.default_rng(0).normal(0.0, 1.0, (64, policy.contract.obs_dim)).astype(np.float32)
    with torch.no_grad():
        expected = actor(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(policy.act_batch(obs), expected, atol=1e-5, rtol=1e-4)


def test_play_the_gate_and_the_model_card_take_it_unchanged(checkpoint, exported, tmp_path):
    report = play(PlayArgs(checkpoint=checkpoint, num_envs=2, episodes=2, physics_threads=1))
    assert report.episodes >= 2 and "Episode/lin_vel_error_m_s" in report.metrics
    result = policy_gate(exported, simulators=("mujoco",), time_scale=1 / 6)
    (score,) = result.scores
    assert score.error is None and result.task == "a1-flat"  # an untrained policy: scored, not crashed
    card = tmp_path / "MODEL_CARD.md"
    assert write_model_card(str(exported), "robot-rl train --algo fasttd3", out=str(card)) == 0
    assert "fasttd3" in card.read_text()


def test_a_wall_clock_budget_stops_and_saves(tmp_path):
    final = train(TrainArgs(log_dir=tmp_path, max_minutes=0.0, **{**TINY, "max_iterations": 50}))
    assert final.name == "model_0.pt" and read_checkpoint_info(final)["env_steps"] == 4


def test_ppo_only_flags_and_another_algorithms_checkpoint_are_refused(checkpoint, tmp_path):
    with pytest.raises(ConfigError, match="num-steps-per-env"):
        train(TrainArgs(log_dir=tmp_path, num_steps_per_env=8, **TINY))
    with pytest.raises(ConfigError, match="torchrun: fasttd3 runs in one process"):
        fasttd3_settings(4, 12, None, world_size=2)
    with pytest.raises(CheckpointError, match="trained with fasttd3, not ppo; pass --algo fasttd3"):
        train(TrainArgs(log_dir=tmp_path, resume=checkpoint, **{**TINY, "algo": "ppo"}))
    assert not any(tmp_path.iterdir())  # refused before writing anything
    with pytest.raises(CheckpointError, match="trained with ppo, not fasttd3"):
        check_algorithm({"task": "a1-flat"}, "fasttd3", checkpoint)  # PPO checkpoints record no algorithm
    # a1-flat-history starts from a1-flat checkpoints by widening an rsl_rl actor: not FastTD3's networks
    with pytest.raises(CheckpointError, match="only PPO checkpoints are widened to a longer history"):
        train(TrainArgs(log_dir=tmp_path, resume=checkpoint, **{**TINY, "task": "a1-flat-history"}))
    assert not any(tmp_path.iterdir())


def test_a_gpu_learner_takes_the_recipes_gpu_sizes_and_the_command_lines_envs():
    cpu, gpu = fasttd3_settings(None, None, None), fasttd3_settings(None, None, None, device="cuda:0")
    assert (cpu.num_envs, cpu.batch_size, cpu.critic_hidden) == (128, 2048, (256, 128, 64))
    assert (gpu.num_envs, gpu.batch_size, gpu.critic_hidden) == (1024, 32768, (1024, 512, 256))
    assert gpu.actor_hidden == cpu.actor_hidden  # the deployed policy is the same size on either
    assert fasttd3_settings(4096, 10, None, device="cuda").num_envs == 4096
