"""FastTD3's learner: the C51 projection, clipped double-Q over distributions, per-env exploration noise, and
an actor that finds the best action of a one-step problem through its critics."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from robot_rl.learn.offpolicy.config import FastTD3Cfg
from robot_rl.learn.offpolicy.fasttd3 import FastTD3, inference_policy, pessimistic, project

SUPPORT = torch.linspace(-10.0, 10.0, 101)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """As the trainer runs it (set_torch_threads on 2 cores): two spinning intra-op threads on a loaded 2-core
    machine made these updates 30× slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_projection_conserves_mass_and_shifts_the_mean():
    probs = torch.softmax(torch.randn(2, 64, 101, generator=torch.Generator().manual_seed(0)), -1)
    reward, discount = torch.linspace(-1.0, 1.0, 64), torch.full((64,), 0.9)
    out = project(probs, reward, discount, SUPPORT)
    assert torch.allclose(out.sum(-1), torch.ones(2, 64), atol=1e-5)
    mean_before, mean_after = (probs * SUPPORT).sum(-1), (out * SUPPORT).sum(-1)
    assert torch.allclose(mean_after, reward + 0.9 * mean_before, atol=1e-4)  # inside the support: exact


def test_projection_lands_exact_atoms_whole_and_clamps_at_the_support_ends():
    point = torch.zeros(3, 101)
    point[:, 50] = 1.0  # all mass on z = 0
    out = project(point, torch.tensor([0.2, 0.0, 50.0]), torch.zeros(3), SUPPORT)  # 0.2 is exactly atom 51
    assert out[0, 51] == pytest.approx(1.0) and out[1, 50] == pytest.approx(1.0)
    assert out[2, 100] == pytest.approx(1.0)  # beyond v_max: clamped to the last atom
    terminal = project(point, torch.tensor([-0.1, -0.1, -0.1]), torch.zeros(3), SUPPORT)
    assert torch.allclose(terminal[:, 49:51], torch.tensor([[0.5, 0.5]] * 3), atol=1e-5)


def test_clipped_double_q_takes_the_lower_critics_distribution_per_sample():
    logits = torch.full((2, 2, 101), -20.0)
    logits[0, 0, 80] = logits[1, 0, 20] = 20.0  # sample 0: critic 1 is lower
    logits[0, 1, 10] = logits[1, 1, 90] = 20.0  # sample 1: critic 0 is lower
    chosen = pessimistic(logits, SUPPORT)
    assert chosen[0].argmax() == 20 and chosen[1].argmax() == 10


def test_exploration_noise_is_drawn_per_env_and_redrawn_only_at_an_episode_start():
    cfg = FastTD3Cfg(std_min=0.1, std_max=0.3, actor_hidden=(8,), critic_hidden=(8,))
    learner = FastTD3(cfg, 3, 4, 2, num_envs=64)
    std = learner.noise_std.clone()
    assert std.shape == (64, 1) and float(std.min()) >= 0.1 and float(std.max()) <= 0.3 and std.std() > 0.02
    new = torch.zeros(64, dtype=torch.bool)
    new[:5] = True
    action = learner.explore(torch.randn(64, 3), new)
    assert action.shape == (64, 2) and float(action.abs().max()) <= 1.0
    assert torch.equal(learner.noise_std[5:], std[5:]) and not torch.equal(learner.noise_std[:5], std[:5])


def test_the_actor_finds_the_best_action_of_a_one_step_problem():
    """Reward 1 − 4 (a − 0.5)², no bootstrap: the critics learn it from random actions and the actor climbs to
    a ≈ 0.5 through them (the learner end to end: projection, cross-entropy, delayed actor, AdamW, targets)."""
    cfg = dataclasses.replace(FastTD3Cfg(), actor_hidden=(32, 32), critic_hidden=(64, 64), critic_lr=1e-3,
                              weight_decay=0.0)
    learner = FastTD3(cfg, 2, 2, 1, num_envs=1, seed=0)
    g = torch.Generator().manual_seed(1)
    for _ in range(400):
        obs = torch.randn(256, 2, generator=g)
        action = torch.rand(256, 1, generator=g) * 2 - 1
        reward = 1 - 4 * (action[:, 0] - 0.5) ** 2
        learner.update({"actor_obs": obs, "critic_obs": obs, "action": action, "reward": reward,
                        "next_actor_obs": obs, "next_critic_obs": obs, "discount": torch.zeros(256)})
    with torch.no_grad():
        best = learner.actor(learner.actor_norm(torch.randn(100, 2, generator=g)))
    assert float((best - 0.5).abs().mean()) < 0.15


def test_the_inference_policy_is_normalizer_actor_and_bound():
    cfg = FastTD3Cfg(actor_hidden=(8,), critic_hidden=(8,), action_bound=1.5)
    learner = FastTD3(cfg, 3, 4, 2, num_envs=4)
    learner.observe(torch.randn(50, 3) * 4 + 2, torch.randn(50, 4))
    obs = torch.randn(10, 3)
    with torch.no_grad():
        expected = learner.actor(learner.actor_norm(obs)) * 1.5
    assert torch.allclose(inference_policy(learner.state_dict())(obs), expected)
