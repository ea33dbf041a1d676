"""TD3 over the residual: learns the same state-dependent correction SAC does, explores with a fixed σ that the
loop's actor reads from the published weights, updates its actor every second step, and keeps its checkpoints
apart from SAC's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from robot_rl.learn.residual.config import SACCfg
from robot_rl.learn.residual.sac import SAC
from robot_rl.learn.residual.td3 import TD3, build_learner


def _bandit_batch(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """One-step episodes: reward −(a − 0.5·tanh(2s))², so the best unit residual depends on the state."""
    s = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    a = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    r = -np.sum((a - 0.5 * np.tanh(2 * s[:, :1])) ** 2, axis=1).astype(np.float32)
    return {"state": s, "action": a, "reward": r, "next_state": s, "discount": np.zeros(n, np.float32)}


@pytest.mark.parametrize("norm", ["layernorm", "batchnorm"])
def test_td3_learns_the_best_residual_of_a_contextual_bandit(norm):
    import torch

    torch.set_num_threads(1)
    cfg = SACCfg(algorithm="td3", critic_hidden=(32, 32), critic_norm=norm, batch_size=64, gamma=0.9,
                 actor_lr=1e-3, critic_lr=1e-3, reward_scale=1.0)
    td3 = build_learner(cfg, 2, 1, actor_hidden=(32, 32), seed=0)
    assert isinstance(td3, TD3) and (td3.target_actor is None) == (norm == "batchnorm")  # CrossQ: no targets
    rng = np.random.default_rng(0)
    for _ in range(800):
        td3.update(_bandit_batch(rng, cfg.batch_size))
    s = np.linspace(-1, 1, 21, dtype=np.float32)[:, None].repeat(2, axis=1)
    with torch.no_grad():
        mean, log_std = td3.actor(torch.from_numpy(s))
    err = np.abs(np.tanh(mean.numpy()) - 0.5 * np.tanh(2 * s[:, :1]))
    assert err.mean() < 0.1, err.ravel()
    # the exploration σ never moved: it is what the loop reads
    np.testing.assert_allclose(log_std.numpy(), np.log(cfg.explore_std), rtol=1e-6)


def test_the_loop_explores_with_the_fixed_sigma_from_the_published_weights():
    """The flat vector the learner publishes drives ResidualPolicy's exploration: r = tanh(μ + σ·ε), σ fixed."""
    from robot_rl.learn.residual.networks import NumpyActor

    cfg = SACCfg(algorithm="td3", explore_std=0.3, critic_hidden=(16,), batch_size=16, reward_scale=1.0)
    td3 = TD3(cfg, 4, 3, actor_hidden=(16,), seed=0)
    rng = np.random.default_rng(0)
    for _ in range(10):  # moved weights, still a fixed σ
        batch = _bandit_batch(rng, 16)
        td3.update({k: (np.repeat(v, 2, axis=1) if k in ("state", "next_state") else v) for k, v in batch.items()}
                   | {"action": rng.uniform(-1, 1, (16, 3)).astype(np.float32)})
    actor = NumpyActor(4, 3, (16,))
    actor.load(td3.actor.flat_params())
    for state in rng.normal(size=(5, 4)).astype(np.float32):
        actor.forward(state)
        np.testing.assert_allclose(np.exp(actor.log_std), 0.3, rtol=1e-5)


def test_the_actor_moves_every_second_update_and_the_target_actor_trails_it():
    cfg = SACCfg(algorithm="td3", critic_hidden=(16,), batch_size=16, reward_scale=1.0, actor_lr=1e-2)
    td3 = TD3(cfg, 2, 1, actor_hidden=(16,), seed=0)
    assert cfg.actor_period == 2 and SACCfg().actor_period == 1
    assert SACCfg(algorithm="td3", actor_delay=3).actor_period == 3
    rng = np.random.default_rng(0)
    start = td3.actor.flat_params()
    info = td3.update(_bandit_batch(rng, 16))
    assert "actor_loss" not in info
    np.testing.assert_array_equal(td3.actor.flat_params(), start)
    info = td3.update(_bandit_batch(rng, 16))
    assert "actor_loss" in info and td3.alpha == 0.0
    moved = td3.actor.flat_params()
    target = td3.target_actor.flat_params()
    np.testing.assert_allclose(target, start + cfg.tau * (moved - start), rtol=1e-5, atol=1e-7)


def test_checkpoints_round_trip_and_a_sac_checkpoint_is_refused():
    cfg = SACCfg(algorithm="td3", critic_hidden=(16,), batch_size=16, reward_scale=1.0)
    td3 = TD3(cfg, 2, 1, actor_hidden=(16,), seed=0)
    rng = np.random.default_rng(0)
    for _ in range(6):
        td3.update(_bandit_batch(rng, 16))
    other = TD3(cfg, 2, 1, actor_hidden=(16,), seed=1)
    other.load_state_dict(td3.state_dict())
    np.testing.assert_array_equal(other.actor.flat_params(), td3.actor.flat_params())
    np.testing.assert_array_equal(other.target_actor.flat_params(), td3.target_actor.flat_params())
    assert other.updates == 6
    wider = TD3(dataclasses.replace(cfg, explore_std=0.5), 2, 1, actor_hidden=(16,), seed=1)
    wider.load_state_dict(td3.state_dict())  # the settings' σ, not the checkpoint's: it is not learned
    np.testing.assert_allclose(np.exp(wider.actor.log_std.bias.detach().numpy()), 0.5, rtol=1e-6)
    np.testing.assert_array_equal(wider.actor.mean.weight.detach().numpy(), td3.actor.mean.weight.detach().numpy())
    sac_state = SAC(SACCfg(critic_hidden=(16,)), 2, 1, actor_hidden=(16,)).state_dict()
    with pytest.raises(ValueError, match=r"trained by 'sac'.*'td3'"):
        other.load_weights(sac_state, "ckpt")
    with pytest.raises(ValueError, match=r"trained by 'td3'.*'sac'"):
        SAC(SACCfg(critic_hidden=(16,)), 2, 1, actor_hidden=(16,)).load_weights(td3.state_dict(), "ckpt")


@pytest.mark.parametrize("bad", [{"algorithm": "ppo"}, {"explore_std": 0.0}, {"target_noise": -0.1},
                                 {"actor_delay": 0}])
def test_bad_td3_settings_are_refused(bad):
    with pytest.raises(ValueError):
        SACCfg(**bad)
