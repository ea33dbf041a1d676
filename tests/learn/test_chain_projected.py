"""The chain-projected actor: its targets pass the real safety chain unchanged; PPO trains its MLP unprojected."""

import dataclasses

import numpy as np
import pytest
import torch

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.learn.chain_projected import (
    RATE_MARGIN,
    TORQUE_MARGIN,
    ChainProjectedMLP,
    ChainProjection,
    newest_frame_columns,
    projection_settings,
)
from robot_rl.learn.ppo import RslRlVecEnv, TaskRunner
from robot_rl.robots.spec import load_robot
from robot_rl.safety.filters import SafetyLimits, rate_limit, torque_limit
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.registry import make_task

TASK = make_task("panda-reach")
SPEC = load_robot("panda")


@pytest.mark.parametrize("extra_history", [0, 2])
def test_term_columns_are_where_the_env_writes_them(extra_history):
    task = dataclasses.replace(TASK, actor_obs=TASK.actor_obs.with_more_history(extra_history))
    env = MujocoVecEnv(task, 3, seed=0, nthread=1)
    try:
        sizes = task.actor_obs.term_sizes(env.spec.num_joints, task.commands.size, env.num_actions)
        action = np.random.default_rng(0).uniform(-0.5, 0.5, (3, env.num_actions))
        env.step(action)
        start, stop = newest_frame_columns(task.actor_obs, "last_action", sizes)
        np.testing.assert_allclose(env.actor_obs[:, start:stop], action, rtol=1e-6)
        start, stop = newest_frame_columns(task.actor_obs, "command", sizes)
        np.testing.assert_allclose(env.actor_obs[:, start:stop], env.commands, rtol=1e-6)
    finally:
        env.close()
    with pytest.raises(ValueError, match="no 'base_lin_vel' term"):
        newest_frame_columns(task.actor_obs, "base_lin_vel", sizes)


def test_settings_come_from_the_spec_and_the_chain():
    s = projection_settings(TASK, SPEC)
    limits = SafetyLimits.from_spec(SPEC)
    assert s["q_rel"] == (0, 7, 1.0) and s["dq"] == (7, 14, 0.2) and s["last_action"] == (17, 24, 1.0)
    np.testing.assert_allclose(s["torque_max"], TORQUE_MARGIN * SPEC.effort_limits)
    np.testing.assert_allclose(s["kp"], SPEC.kp * limits.kp_scale)
    assert s["max_step"] == pytest.approx(RATE_MARGIN * SPEC.safety.max_target_rate_rad_s
                                          * SPEC.timing.policy_period_s / TASK.action.scale)
    blind = dataclasses.replace(TASK, actor_obs=dataclasses.replace(TASK.actor_obs, terms=TASK.actor_obs.terms[:3]))
    with pytest.raises(ValueError, match="needs last_action"):
        projection_settings(blind, SPEC)


def test_projected_targets_pass_the_safety_chains_rate_and_torque_filters_unchanged():
    """Random states, last actions and wild proposals: the chain's own filters find nothing to clip."""
    projection = ChainProjection(**projection_settings(TASK, SPEC))
    limits = SafetyLimits.from_spec(SPEC)
    rng = np.random.default_rng(1)
    n, j = 500, SPEC.num_joints
    q_rel = rng.uniform(-0.5, 0.5, (n, j))
    dq = rng.uniform(-1.0, 1.0, (n, j))
    # The last target where a joint tracking it would be: ahead by the lead its damping needs (kd·q̇/kp), ± a bit.
    last = (q_rel + SPEC.kd * dq / SPEC.kp) / TASK.action.scale + rng.uniform(-0.05, 0.05, (n, j))
    raw = np.zeros((n, 24), dtype=np.float32)
    raw[:, 0:7], raw[:, 7:14], raw[:, 17:24] = q_rel, 0.2 * dq, last
    proposal = rng.normal(0.0, 3.0, (n, j))
    action = projection(torch.tensor(raw), torch.tensor(proposal, dtype=torch.float32)).double().numpy()
    assert np.all(np.abs(action) <= TASK.action.clip)
    active = np.ones(j, dtype=bool)
    overlapping = 0
    for i in range(n):
        q = SPEC.default_positions + q_rel[i]
        target = TASK.action.decode(action[i], SPEC.default_positions)
        reference = TASK.action.decode(last[i], SPEC.default_positions)
        _, ev = rate_limit(target, reference, limits, active)
        assert ev is None, ev
        state = RobotState(timestamp=0.0, tick=i, q=q, dq=dq[i], tau=np.zeros(j))
        command = JointCommand(target, np.zeros(j), SPEC.kp, SPEC.kd, np.zeros(j))
        _, ev = torque_limit(target, state, command, limits, active)
        # The rate window wins over the torque bounds when they do not meet (a joint far behind a fast last
        # target): there the chain's torque filter may still act. It never does when the windows overlap.
        lo = (q_rel[i] + (SPEC.kd * dq[i] - TORQUE_MARGIN * limits.torque_max) / SPEC.kp) / TASK.action.scale
        hi = (q_rel[i] + (SPEC.kd * dq[i] + TORQUE_MARGIN * limits.torque_max) / SPEC.kp) / TASK.action.scale
        step = RATE_MARGIN * limits.max_step / TASK.action.scale
        overlap = (np.maximum(lo, last[i] - step) <= np.minimum(hi, last[i] + step)).all()
        if overlap:
            assert ev is None, ev
        overlapping += overlap
    assert overlapping > n // 2  # the assertion above ran on most cases


def _runner(vec, **ppo):
    cfg = dataclasses.replace(TASK.ppo, actor_hidden_dims=(16,), critic_hidden_dims=(16,), num_steps_per_env=12,
                              chain_projected_actor=True, **ppo)
    return TaskRunner(vec, TASK, log_dir=None, ppo=cfg)


def test_the_runner_builds_the_projected_actor_and_trains_its_mlp_unprojected():
    vec = RslRlVecEnv(MujocoVecEnv(TASK, 6, seed=0, nthread=1))
    try:
        runner = _runner(vec, init_noise_std=0.5)
        actor = runner.alg.actor
        assert isinstance(actor, ChainProjectedMLP) and actor.projecting
        seen = []
        act = runner.alg.act
        runner.alg.act = lambda obs: (seen.append(actor.projecting), act(obs))[1]
        runner.learn(1)
        assert seen and not any(seen)  # the rollouts ran the plain MLP
        assert actor.projecting  # and the policy projects again after
        obs = vec.get_observations()
    finally:
        vec.close()
    with torch.no_grad():
        actor.mlp[-1].weight.mul_(50.0)
        projected = actor(obs)
        actor.projecting = False
        plain = actor(obs)
    last = obs["policy"][:, 17:24]
    assert float((projected - last).abs().max()) <= actor.projection.max_step * (1 + 1e-5)
    assert float((plain - last).abs().max()) > actor.projection.max_step


def test_export_bakes_the_projection_into_the_onnx_graph(tmp_path):
    import onnxruntime as ort

    from robot_rl.policy import contract_for_task, export_rsl_rl_policy

    vec = RslRlVecEnv(MujocoVecEnv(TASK, 4, seed=0, nthread=1))
    try:
        runner = _runner(vec)
        runner.learn(1)  # normalizer statistics that are not the identity
        obs = vec.get_observations()
    finally:
        vec.close()
    actor = runner.alg.actor
    with torch.no_grad():
        actor.mlp[-1].weight.mul_(50.0)  # proposals far outside the limits: the projection decides
        expected = actor(obs).numpy()
    path = tmp_path / "policy.onnx"
    export_rsl_rl_policy(actor, contract_for_task(TASK, SPEC), path)
    session = ort.InferenceSession(str(path))
    got = session.run(None, {session.get_inputs()[0].name: obs["policy"].numpy()})[0]
    np.testing.assert_allclose(got, expected, atol=1e-4)
    last = obs["policy"][:, 17:24].numpy()
    assert np.all(np.abs(got - last) <= actor.projection.max_step * (1 + 1e-4))


def test_a_plain_task_keeps_rsl_rls_mlp():
    vec = RslRlVecEnv(MujocoVecEnv(TASK, 2, seed=0, nthread=1))
    try:
        cfg = dataclasses.replace(TASK.ppo, actor_hidden_dims=(8,), critic_hidden_dims=(8,),
                                  chain_projected_actor=False)
        runner = TaskRunner(vec, TASK, log_dir=None, ppo=cfg)
    finally:
        vec.close()
    assert type(runner.alg.actor).__name__ == "MLPModel" and type(runner.alg).__name__ == "PPO"
