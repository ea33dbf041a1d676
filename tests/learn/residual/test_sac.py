"""SAC over the residual learns a state-dependent correction, with either critic normalization."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.learn.residual.config import SACCfg
from robot_rl.learn.residual.sac import SAC


@pytest.mark.parametrize("norm", ["layernorm", "batchnorm"])
def test_sac_learns_the_best_residual_of_a_contextual_bandit(norm):
    """One-step episodes: reward −(a − 0.5·tanh(2s))², so the best unit residual depends on the state."""
    import torch

    torch.set_num_threads(1)
    cfg = SACCfg(critic_hidden=(32, 32), critic_norm=norm, batch_size=64, gamma=0.9, init_alpha=0.01,
                 target_entropy_per_dim=-3.0, lr=1e-3, reward_scale=1.0)
    sac = SAC(cfg, 2, 1, actor_hidden=(32, 32), seed=0)
    rng = np.random.default_rng(0)
    best = lambda s: 0.5 * np.tanh(2 * s[:, :1])  # noqa: E731
    for _ in range(600):
        s = rng.uniform(-1, 1, (cfg.batch_size, 2)).astype(np.float32)
        a = rng.uniform(-1, 1, (cfg.batch_size, 1)).astype(np.float32)
        r = -np.sum((a - best(s)) ** 2, axis=1).astype(np.float32)
        sac.update({"state": s, "action": a, "reward": r, "next_state": s, "discount": np.zeros(len(s), np.float32)})
    s = np.linspace(-1, 1, 21, dtype=np.float32)[:, None].repeat(2, axis=1)
    with torch.no_grad():
        mean, _ = sac.actor(torch.from_numpy(s))
    err = np.abs(np.tanh(mean.numpy()) - best(s))
    assert err.mean() < 0.1, err.ravel()
    state = sac.state_dict()
    other = SAC(cfg, 2, 1, actor_hidden=(32, 32), seed=1)
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.actor.flat_params(), sac.actor.flat_params())
    wrong = SAC(SACCfg(critic_norm="batchnorm" if norm == "layernorm" else "layernorm", critic_hidden=(32, 32)), 2, 1,
                actor_hidden=(32, 32))
    with pytest.raises(ValueError, match="normalization"):
        wrong.load_state_dict(state, "ckpt")


def _flat_reward_batch(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Reward 0 whatever the action: the critics' gradient is flat (a missed contact, say)."""
    s = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    return {"state": s, "action": rng.uniform(-1, 1, (n, 1)).astype(np.float32), "reward": np.zeros(n, np.float32),
            "next_state": s, "discount": np.zeros(n, np.float32)}


def test_the_actor_waits_for_the_critics_warm_up():
    cfg = SACCfg(critic_hidden=(16,), batch_size=16, actor_warmup_updates=20, reward_scale=1.0)
    sac = SAC(cfg, 2, 1, actor_hidden=(16,), seed=0)
    start, alpha = sac.actor.flat_params(), sac.alpha
    rng = np.random.default_rng(0)
    for _ in range(20):
        info = sac.update(_flat_reward_batch(rng, 16))
        assert "actor_loss" not in info
    np.testing.assert_array_equal(sac.actor.flat_params(), start)  # critics moved, the residual did not
    assert sac.alpha == alpha
    info = sac.update(_flat_reward_batch(rng, 16))
    assert "actor_loss" in info and not np.array_equal(sac.actor.flat_params(), start)


@pytest.mark.parametrize("penalty", [0.0, 1.0])
def test_the_residual_penalty_pulls_a_saturated_residual_back_where_q_is_flat(penalty):
    """A residual that starts near its bound (tanh 1.5 ≈ 0.9) on a task whose reward ignores it: the penalty
    brings it back towards 0 (the base alone); without it nothing does."""
    import torch

    torch.set_num_threads(1)
    cfg = SACCfg(critic_hidden=(16,), batch_size=64, residual_penalty=penalty, init_alpha=1e-4, alpha_lr=0.0,
                 lr=1e-3, reward_scale=1.0, init_log_std=-3.0)
    sac = SAC(cfg, 2, 1, actor_hidden=(16,), seed=0)
    with torch.no_grad():
        sac.actor.mean.bias.fill_(1.5)
    rng = np.random.default_rng(0)
    for _ in range(300):
        sac.update(_flat_reward_batch(rng, 64))
    with torch.no_grad():
        mean, _ = sac.actor(torch.from_numpy(rng.uniform(-1, 1, (100, 2)).astype(np.float32)))
    size = float(np.abs(np.tanh(mean.numpy())).mean())
    if penalty:
        assert size < 0.2, size
    else:
        assert size > 0.5, size


def _pulled_batch(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """A bandit whose reward wants the residual at −0.8 everywhere: the critics' gradient pulls the actor away
    from a start at +0.6."""
    action = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    return {"state": rng.uniform(-1, 1, (n, 2)).astype(np.float32), "action": action,
            "reward": (-((action[:, 0] + 0.8) ** 2)).astype(np.float32), "next_state": np.zeros((n, 2), np.float32),
            "discount": np.zeros(n, np.float32)}


def _anchored_residual(cfg: SACCfg, start: float = 0.6):
    """A SAC run started from a residual of ``start`` (``set_anchor``, as ``init_from`` does) after 600 updates on
    the bandit that pulls it to −0.8: (its mean residual on fresh states, the SAC, the states)."""
    import torch

    torch.set_num_threads(1)
    sac = SAC(cfg, 2, 1, actor_hidden=(16,), seed=0)
    with torch.no_grad():
        sac.actor.mean.bias.fill_(float(np.arctanh(start)))
    sac.set_anchor()
    rng = np.random.default_rng(0)
    for _ in range(600):
        sac.update(_pulled_batch(rng, 64))
    states = torch.from_numpy(rng.uniform(-1, 1, (100, 2)).astype(np.float32))
    with torch.no_grad():
        return float(torch.tanh(sac.actor(states)[0]).mean()), sac, states


@pytest.mark.parametrize("penalty", [0.0, 50.0])
def test_the_anchor_penalty_holds_a_started_residual_against_its_critics_pull(penalty):
    """A run started from a residual at +0.6: without the anchor the critics move it to the bandit's optimum −0.8;
    a strong anchor keeps it near where it started. A resumed checkpoint keeps its anchor."""
    import torch

    cfg = SACCfg(critic_hidden=(32,), batch_size=64, anchor_penalty=penalty, init_alpha=1e-4, alpha_lr=0.0,
                 lr=3e-3, reward_scale=1.0, init_log_std=-3.0)
    residual, sac, states = _anchored_residual(cfg)
    if penalty:
        assert residual > 0.3, residual
    else:
        assert residual < -0.5, residual
    again = SAC(cfg, 2, 1, actor_hidden=(16,), seed=1)
    again.load_state_dict(sac.state_dict())
    with torch.no_grad():
        np.testing.assert_allclose(again.anchor(states)[0].numpy(), sac.anchor(states)[0].numpy())


@pytest.mark.parametrize("scaled", [False, True])
def test_an_anchor_scaled_by_q_holds_whatever_the_size_of_the_returns(scaled):
    """The same bandit with rewards × 1000 (returns in the thousands, as rewards per second over a long horizon):
    an anchor of 50 no longer holds the start; one weighted by the batch's mean |Q| (TD3+BC) at 2 does."""
    cfg = SACCfg(critic_hidden=(32,), batch_size=64, anchor_penalty=2.0 if scaled else 50.0, anchor_q_scaled=scaled,
                 init_alpha=1e-4, alpha_lr=0.0, lr=3e-3, reward_scale=1000.0,
                 init_log_std=-3.0)
    residual, _, _ = _anchored_residual(cfg)
    if scaled:
        assert residual > 0.45, residual  # within 0.15 of its start
    else:
        assert residual < 0.3, residual  # moved more than halfway towards the critics' optimum
