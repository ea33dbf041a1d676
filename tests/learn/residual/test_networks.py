"""The loop's numpy actor against the learner's torch actor, through the flat vector they share."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.learn.residual.networks import (
    NumpyActor,
    actor_layout,
    build_actor,
    build_critics,
    layout_size,
    unflatten,
)


def test_numpy_actor_matches_torch_actor_after_a_flat_copy():
    import torch

    actor = build_actor(10, 3, (16, 8), init_log_std=-1.0)
    with torch.no_grad():
        for p in actor.parameters():
            p.normal_(0.0, 0.5)  # away from the near-zero init, so a layout mistake would show
    mirror = NumpyActor(10, 3, (16, 8))
    mirror.load(actor.flat_params())
    states = np.random.default_rng(0).normal(size=(20, 10)).astype(np.float32)
    with torch.no_grad():
        mean, log_std = actor(torch.from_numpy(states))
    for i, s in enumerate(states):
        mirror.forward(s)
        np.testing.assert_allclose(mirror.mean, mean[i].numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(mirror.log_std, log_std[i].numpy(), rtol=1e-5, atol=1e-5)


def test_flat_round_trip_and_layout_errors():
    actor = build_actor(5, 2, (4,), init_log_std=-1.0)
    flat = actor.flat_params()
    assert flat.shape == (layout_size(actor_layout(5, 2, (4,))),)
    other = build_actor(5, 2, (4,), init_log_std=0.0)
    other.load_flat(flat)
    np.testing.assert_array_equal(other.flat_params(), flat)
    with pytest.raises(ValueError, match="layout needs"):
        unflatten(flat[:-1], actor_layout(5, 2, (4,)))


def test_fresh_actor_starts_with_a_near_zero_residual():
    actor = build_actor(12, 4, (32, 32), init_log_std=-1.0)
    mirror = NumpyActor(12, 4, (32, 32))
    mirror.load(actor.flat_params())
    mirror.forward(np.ones(12, np.float32) * 3.0)
    assert np.max(np.abs(np.tanh(mirror.mean))) < 0.05
    np.testing.assert_allclose(mirror.log_std, -1.0, atol=0.05)


def test_sampled_log_prob_matches_the_squashed_gaussian_density():
    import torch

    torch.manual_seed(0)
    actor = build_actor(3, 1, (8,), init_log_std=-0.5)
    state = torch.zeros(200_000, 3)
    with torch.no_grad():
        action, log_prob = actor.sample(state)
    # The density integrates to one: E_a[1/p(a)] over (−1, 1) equals the interval's length, 2.
    assert float(torch.mean(torch.exp(-log_prob))) == pytest.approx(2.0, rel=0.03)
    assert float(action.abs().max()) < 1.0


@pytest.mark.parametrize("norm", ["layernorm", "batchnorm", "none"])
def test_critic_ensemble_shapes(norm):
    import torch

    critics = build_critics(6, 2, (16, 16), num=3, norm=norm)
    out = critics(torch.zeros(5, 6), torch.zeros(5, 2))
    assert out.shape == (3, 5)
    distributional = build_critics(6, 2, (16, 16), num=2, norm=norm, outputs=11)  # logits over 11 value atoms
    assert distributional(torch.zeros(5, 6), torch.zeros(5, 2)).shape == (2, 5, 11)


def test_plain_critics_have_no_normalization_layers_and_unknown_norms_are_refused():
    import torch

    critics = build_critics(6, 2, (16,), num=2, norm="none")
    assert not any(isinstance(m, (torch.nn.LayerNorm, torch.nn.BatchNorm1d)) for m in critics.modules())
    with pytest.raises(ValueError, match="layernorm, batchnorm, none"):
        build_critics(6, 2, (16,), num=2, norm="groupnorm")


