"""The residual trained by PPO in the vectorized sim: its env adds the bounded residual to the real base policy,
and its actor becomes the residual actor the loop and the learner run (normalizer folded in)."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.learn.residual.actor import ResidualPolicy, residual_bound
from robot_rl.learn.residual.config import ResidualCfg
from robot_rl.learn.residual.networks import NumpyActor
from robot_rl.learn.residual.shifted_sim import RealityShift
from robot_rl.learn.residual.sim_ppo import (
    SimResidualCfg,
    actor_flat_from_rsl,
    actuator_compensation,
    payload_weight_torque,
    train_sim_residual,
)
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.tasks.registry import make_task

A1 = "policies/a1_flat/policy.onnx"
TINY = SimResidualCfg(iterations=2, num_envs=8, steps_per_env=6, nthread=1)


def _base():
    return load_policy(A1, read_contract(A1))


def test_the_env_steps_the_base_plus_the_bounded_residual():
    from robot_rl.learn.residual.shifted_sim import shifted_vec_env
    from robot_rl.learn.residual.sim_ppo import _rsl_env_class

    torch = pytest.importorskip("torch")
    task, base = make_task("a1-flat"), _base()
    env = shifted_vec_env(task, RealityShift(kp_scale=0.8), 4, seed=0, nthread=1)
    alpha = residual_bound(base.contract, 0.1)
    rsl = _rsl_env_class()(env, base, alpha)
    obs = rsl.get_observations()
    before = rsl.base_action.copy()
    np.testing.assert_allclose(obs["policy"][:, -12:].numpy(), before)  # the base's action is observed
    np.testing.assert_allclose(before, base.act_batch(env.actor_obs.astype(np.float32)), rtol=1e-6)
    huge = torch.full((4, 12), 1e6)  # an adversarial residual: tanh bounds it to α
    rsl.step(huge)
    np.testing.assert_allclose(env.action, before + alpha, rtol=1e-6)
    env.close()


def test_the_ppo_actor_becomes_the_residual_actor_exactly():
    """Random weights and normalizer statistics: the numpy residual actor built from the PPO actor gives the
    PPO actor's deterministic output on the same states."""
    torch = pytest.importorskip("torch")
    from rsl_rl.models import MLPModel
    from tensordict import TensorDict

    state_dim, hidden = 57, (32, 16)
    obs = TensorDict({"policy": torch.zeros(4, state_dim)}, batch_size=[4])
    actor = MLPModel(obs, {"actor": ["policy"]}, "actor", 12, hidden_dims=list(hidden), activation="relu",
                     obs_normalization=True, distribution_cfg={"class_name": "GaussianDistribution", "init_std": 0.5})
    g = torch.Generator().manual_seed(0)
    for _ in range(3):  # statistics that are not 0 / 1
        actor.update_normalization(TensorDict({"policy": torch.randn(64, state_dim, generator=g) * 3 + 1},
                                              batch_size=[64]))
    flat = actor_flat_from_rsl(actor, state_dim, 12, hidden, log_std=-1.2)
    numpy_actor = NumpyActor(state_dim, 12, hidden)
    numpy_actor.load(flat)
    states = torch.randn(5, state_dim, generator=g) * 3 + 1
    with torch.no_grad():
        expected = actor(TensorDict({"policy": states}, batch_size=[5])).numpy()
    for i in range(5):
        numpy_actor.forward(states[i].numpy())
        np.testing.assert_allclose(numpy_actor.mean, expected[i], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(numpy_actor.log_std, -1.2)
    with pytest.raises(ValueError, match="not the residual actor's"):
        actor_flat_from_rsl(actor, state_dim, 12, (64, 64), log_std=-1.0)


@pytest.mark.timeout(120)
def test_a_short_sim_residual_run_gives_a_bounded_residual_for_the_loop():
    task, base = make_task("a1-flat"), _base()
    cfg = ResidualCfg()
    result = train_sim_residual(task, base, RealityShift(kp_scale=0.7, latency_steps=1), cfg, TINY)
    assert result.transitions == 2 * 8 * 6
    assert [h["iteration"] for h in result.history] == [1, 2]
    policy = ResidualPolicy(base, cfg)
    policy.load_weights(result.flat)
    obs = np.zeros((1, base.contract.obs_dim), np.float32)
    out = policy.act(obs)
    assert np.all(np.abs(out - policy.base_action) <= policy.alpha + 1e-6)


@pytest.mark.parametrize("bad", [dict(iterations=-1), dict(num_envs=0), dict(init_noise_std=0.0),
                                 dict(critic_warmup=-1), dict(start="random"), dict(start_steps=0)])
def test_bad_sim_residual_settings_are_refused(bad):
    with pytest.raises(ValueError, match="sim residual"):
        SimResidualCfg(**bad)


def test_the_actuator_compensation_makes_the_weaker_motors_apply_the_nominal_torque():
    from robot_rl.robots.spec import load_robot

    task, spec = make_task("panda-push"), load_robot("panda")
    shift = RealityShift(kp_scale=0.5, kd_scale=1.4)
    rng = np.random.default_rng(0)
    a = rng.normal(0, 0.5, (5, 7))
    q = spec.default_positions + rng.normal(0, 0.2, (5, 7))
    dq = rng.normal(0, 1.0, (5, 7))
    tau_w = rng.normal(0, 2.0, (5, 7))
    r = actuator_compensation(task, spec, shift, a, q, dq, tau_w)
    nominal = spec.kp * (task.action.decode(a, spec.default_positions) - q) - spec.kd * dq
    weaker = (spec.kp * shift.kp_scale * (task.action.decode(a + r, spec.default_positions) - q)
              - spec.kd * shift.kd_scale * dq + tau_w)
    np.testing.assert_allclose(weaker, nominal, atol=1e-9)
    np.testing.assert_allclose(actuator_compensation(task, spec, RealityShift(), a, q, dq), 0.0, atol=1e-12)


def test_the_payload_torque_is_what_the_arm_sags_under():
    """An arm holding its default pose under an uncompensated payload sags; the payload term of the compensation
    takes the sag out (the torque is MuJoCo's, from the payload body's Jacobian)."""
    from robot_rl.learn.residual.shifted_sim import shifted_vec_env

    task = make_task("panda-push")
    shift = RealityShift(payload_kg=2.0)
    sag = {}
    for compensate in (False, True):
        env = shifted_vec_env(task, shift, 2, seed=0, nthread=1)
        for _ in range(100):
            q, dq = env.joint_state()
            tau_w = payload_weight_torque(env, shift)
            r = actuator_compensation(task, env.spec, shift, np.zeros((2, 7)), q, dq, tau_w) if compensate else 0.0
            env.step(np.zeros((2, 7)) + r)
        sag[compensate] = np.abs(env.joint_state()[0] - env.default_q).max()
    assert sag[False] > 0.01 and sag[True] < 0.1 * sag[False]
    assert payload_weight_torque(shifted_vec_env(task, RealityShift(), 1, nthread=1), RealityShift()) is None


def test_the_actuators_start_fits_the_compensation_and_counts_its_sim_transitions(push_base):
    task, base = make_task("panda-push"), load_policy(push_base, read_contract(push_base))
    cfg = SimResidualCfg(iterations=0, num_envs=8, steps_per_env=6, nthread=1, start="actuators", start_steps=60)
    result = train_sim_residual(task, base, RealityShift(kp_scale=0.5, payload_kg=0.5), ResidualCfg(), cfg)
    fit = result.start_fit
    assert fit["rounds"] == 2 and fit["samples"] == 2 * 8 * 60 and result.transitions == 2 * 8 * 60  # DAgger: 2 rounds
    assert fit["mse_after"] < 0.1 * fit["mse_zero"]


def test_critic_warmup_leaves_the_actor_where_it_started(push_base):
    """Critic-only iterations (``critic_warmup``) train the value function alone: from the base alone (a zero last
    layer) the residual is still exactly zero after them."""
    task, base = make_task("panda-push"), load_policy(push_base, read_contract(push_base))
    cfg = SimResidualCfg(iterations=0, critic_warmup=2, num_envs=8, steps_per_env=6, nthread=1)
    result = train_sim_residual(task, base, RealityShift(kp_scale=0.5), ResidualCfg(), cfg)
    assert len(result.history) == 2 and result.transitions == 2 * 8 * 6
    policy = ResidualPolicy(base, ResidualCfg())
    policy.load_weights(result.flat)
    obs = np.random.default_rng(0).normal(size=(1, base.contract.obs_dim)).astype(np.float32)
    np.testing.assert_allclose(policy.act(obs), policy.base_action, atol=1e-7)
    moved = train_sim_residual(task, base, RealityShift(kp_scale=0.5), ResidualCfg(),
                               SimResidualCfg(iterations=2, num_envs=8, steps_per_env=6, nthread=1))
    policy.load_weights(moved.flat)
    assert np.abs(policy.act(obs) - policy.base_action).max() > 1e-6  # without the warm-up the actor does move
