"""The warp backend's torch twins compute what the CPU env's numpy terms compute, on the same inputs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from robot_rl.sim import env_math, feet
from robot_rl.sim import randomization as dr
from robot_rl.sim import torch_terms as tt
from robot_rl.tasks import rewards as rw
from robot_rl.tasks.observations import ObservationBuilder, ObservationLayout, ObsInputs, ObsTerm, projected_gravity
from robot_rl.tasks.registry import make_task
from robot_rl.tasks.terms import VelocityTrackingMetric

N, J = 6, 12
T = torch.as_tensor


def _quats(rng: np.random.Generator) -> np.ndarray:
    q = rng.normal(size=(N, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def test_rotations_agree() -> None:
    rng = np.random.default_rng(0)
    quat, vec = _quats(rng), rng.normal(size=(N, 3))
    np.testing.assert_allclose(tt.quat_rotate_inverse(T(quat), T(vec)).numpy(), env_math.quat_rotate_inverse(quat, vec),
                               atol=1e-12)
    gravity = projected_gravity(quat)
    np.testing.assert_allclose(tt.projected_gravity(T(quat)).numpy(), gravity, atol=1e-12)
    np.testing.assert_allclose(tt.tilt_angle(T(gravity)).numpy(), env_math.tilt_angle(gravity), atol=1e-12)
    yaw = rng.uniform(-np.pi, np.pi, N)
    np.testing.assert_allclose(tt.yaw_quat(T(yaw)).numpy(), env_math.yaw_quat(yaw), atol=1e-12)
    rot = env_math.quat_rotate_inverse(quat[:1], np.eye(3)).T  # a rotation matrix
    q_rot = np.empty(4)
    import mujoco

    mujoco.mju_mat2Quat(q_rot, rot.ravel())
    np.testing.assert_allclose(tt.quat_mul(T(quat), T(q_rot)).numpy(), env_math.quat_mul_rot(quat, rot), atol=1e-12)


def _obs_inputs(rng: np.random.Generator, tensor: bool) -> ObsInputs:
    values = dict(q=rng.normal(size=(N, J)), dq=rng.normal(size=(N, J)), default_q=rng.normal(size=J),
                  base_quat=_quats(rng), base_ang_vel=rng.normal(size=(N, 3)), command=rng.normal(size=(N, 3)),
                  last_action=rng.normal(size=(N, J)), base_lin_vel=rng.normal(size=(N, 3)),
                  gait_phase=rng.uniform(0, 1, N))
    return ObsInputs(**{k: T(v) if tensor else v for k, v in values.items()})


@pytest.mark.parametrize("history", [1, 3])
def test_observation_builder_agrees_with_history_and_resets(history: int) -> None:
    task = make_task("a1-flat")
    terms = [dataclasses.replace(t, history_length=history, clip=0.8 if t.name == "joint_vel" else t.clip)
             for t in task.critic_obs.terms]
    layout = ObservationLayout((*terms, ObsTerm("gait_phase", scale=0.5)), gait_period_s=0.8)
    numpy_builder = ObservationBuilder(layout, N, J, 3, J)
    torch_builder = tt.TorchObservationBuilder(layout, N, J, 3, J, device=torch.device("cpu"))
    assert torch_builder.dim == numpy_builder.dim
    for step in range(5):
        seed = np.random.default_rng(step)
        a = numpy_builder.compute(_obs_inputs(seed, tensor=False)).copy()
        b = torch_builder.compute(_obs_inputs(np.random.default_rng(step), tensor=True))
        np.testing.assert_allclose(b.numpy(), a, atol=1e-6)
        if step == 2:
            ids = np.array([1, 4])
            numpy_builder.reset(ids)
            torch_builder.reset(T(ids))


def test_observation_noise_is_uniform_within_each_terms_bound() -> None:
    layout = ObservationLayout((ObsTerm("joint_vel", scale=0.05, noise=1.5), ObsTerm("command")))
    builder = tt.TorchObservationBuilder(layout, N, J, 3, J, device=torch.device("cpu"), noise=True,
                                         generator=torch.Generator().manual_seed(0))
    inputs = _obs_inputs(np.random.default_rng(0), tensor=True)
    noisy = builder.compute(inputs)
    delta = noisy[:, :J] - (inputs.dq * 0.05).float()
    assert 0 < float(delta.abs().max()) <= 1.5 * 0.05 + 1e-6
    torch.testing.assert_close(noisy[:, J:], inputs.command.float())  # a term without noise: none


@pytest.mark.parametrize("feet", [2, 4])  # a biped's clock, a quadruped's trot clock
def test_every_torch_reward_term_agrees(feet: int) -> None:
    rng = np.random.default_rng(1)
    cmd = rng.uniform(-1, 1, size=(N, 3))
    cmd[0] = 0.0  # a standing command: stand_still and feet_air_time's moving gate
    values = dict(dt=0.02, command=cmd, q=rng.normal(size=(N, J)), dq=rng.normal(size=(N, J)),
                  last_dq=rng.normal(size=(N, J)), default_q=rng.normal(size=J), q_soft_lower=-np.ones(J) * 0.5,
                  q_soft_upper=np.ones(J) * 0.5, torque=rng.normal(size=(N, J)) * 10, action=rng.normal(size=(N, J)),
                  last_action=rng.normal(size=(N, J)), terminated=rng.random(N) < 0.5, max_action_step=0.3,
                  sent_action=rng.normal(size=(N, J)), base_lin_vel=rng.normal(size=(N, 3)),
                  base_ang_vel=rng.normal(size=(N, 3)), projected_gravity=rng.normal(size=(N, 3)),
                  base_height=rng.uniform(0.2, 0.4, N), first_contact=rng.random((N, 4)) < 0.5,
                  air_time=rng.uniform(0, 1, (N, 4)), foot_contact=rng.random((N, feet)) < 0.5,
                  foot_height=rng.uniform(0, 0.2, (N, feet)), gait_phase=rng.uniform(0, 1, N),
                  target_lower=-np.ones(J) * 0.8, target_upper=np.ones(J) * 0.8, action_scale=0.25)
    terms = tuple(rw.RewardTerm(name, 0.5) for name in tt.TORCH_REWARD_TERMS)
    cfg = rw.RewardsCfg(terms).for_robot(0.3)
    scalars = ("dt", "max_action_step", "action_scale")
    total, parts = rw.compute_rewards(cfg, rw.RewardInputs(**values))
    t_total, t_parts = tt.compute_rewards(cfg, rw.RewardInputs(**{k: v if k in scalars else T(v)
                                                                  for k, v in values.items()}))
    for name, value in parts.items():
        np.testing.assert_allclose(t_parts[name].numpy(), value, rtol=1e-12, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(t_total.numpy(), total, rtol=1e-12)
    with pytest.raises(ValueError, match="reach_distance"):
        tt.check_reward_terms(rw.RewardsCfg((rw.RewardTerm("reach_distance", 1.0),)))


def test_feet_delay_and_velocity_metric_agree_over_steps() -> None:
    rng = np.random.default_rng(2)
    a, b = feet.FootAirTime(N, 4, 0.02), tt.FootAirTime(N, 4, 0.02, torch.device("cpu"))
    da, db = dr.ActionDelay(N, J, 2), tt.ActionDelay(N, J, 2, torch.device("cpu"))
    latency = rng.integers(0, 3, N)
    fill = rng.normal(size=(N, J))
    da.reset(np.arange(N), latency, fill)
    db.reset(T(np.arange(N)), T(latency), T(fill))
    ma = VelocityTrackingMetric().make(N)
    mb = tt.VelocityErrors(N, torch.device("cpu"))
    for step in range(12):
        force = rng.uniform(0, 2, size=(N, 4, 4))  # (N, substeps, feet)
        first_a, air_a = a.update(force)
        first_b, air_b = b.update(T(force.max(axis=1)))
        np.testing.assert_array_equal(first_b.numpy(), first_a)
        np.testing.assert_allclose(air_b.numpy(), air_a, atol=1e-6)
        np.testing.assert_array_equal(b.contact.numpy(), a.contact)
        action = rng.normal(size=(N, J))
        np.testing.assert_allclose(db.push(T(action).float()).numpy(), da.push(action), atol=1e-6)
        vel, cmd = rng.normal(size=(N, 3)), rng.normal(size=(N, 3))
        from robot_rl.tasks.terms import TaskSignals

        ma.step(TaskSignals(cmd, base_lin_vel=vel))
        mb.step(T(vel).float(), T(cmd).float())
        if step == 5:
            ids = np.array([0, 3])
            a.reset(ids), b.reset(T(ids)), ma.reset(ids), mb.reset(T(ids))
    ids = np.arange(N)
    expected = ma.finish(ids, None)
    for key, value in mb.finish(T(ids)).items():
        np.testing.assert_allclose(value.numpy(), expected[key], rtol=1e-5, err_msg=key)


def test_velocity_aware_bounds_agree_with_the_safety_chains_law() -> None:
    from robot_rl.robots.spec import load_robot
    from robot_rl.safety.filters import SafetyLimits, velocity_aware_bounds

    limits = SafetyLimits.from_spec(load_robot("a1"))
    rng = np.random.default_rng(3)
    q = rng.uniform(limits.soft_lower, limits.soft_upper, size=(N, 12))
    dq = rng.normal(scale=30.0, size=(N, 12))  # fast enough that some bounds would cross and are pinned
    position = (limits.soft_lower, limits.soft_upper)
    lo, hi = velocity_aware_bounds(q, dq, limits, position=position)
    t_lo, t_hi = tt.velocity_aware_bounds(T(dq), T(position[0]), T(position[1]), limits.policy_period_s)
    np.testing.assert_allclose(t_lo.numpy(), lo, rtol=0, atol=1e-12)
    np.testing.assert_allclose(t_hi.numpy(), hi, rtol=0, atol=1e-12)
