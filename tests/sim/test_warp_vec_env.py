"""The MuJoCo Warp backend against the CPU env, on warp's CPU device (no GPU needed).

Cost: the first run on a machine compiles MuJoCo Warp's kernels (≈ 50 s on 2 busy cores: this file took 87 s cold,
25–40 s warm); warp caches them under the user cache directory (``~/.cache/warp``) and later runs load them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("mujoco_warp", reason="the warp backend needs the gpu extra: pip install 'robot-rl[gpu]'")

import torch

from robot_rl.core.errors import RobotRLError
from robot_rl.learn.ppo import read_checkpoint_info
from robot_rl.learn.train import TrainArgs, train
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.sim.warp_vec_env import WarpVecEnv
from robot_rl.tasks.registry import make_task
from robot_rl.typed_yaml import ConfigError

N = 4
STEPS = 300  # 6 s of walking in place at 50 Hz
# Tolerances: MuJoCo Warp integrates in float32, the CPU env in float64. Over these 300 steps the A1 (4 envs,
# a stepping gait from the actions below) measured ≤ 1e-6 rad / 1e-5 rad/s / 4e-7 m / 2e-8 reward apart on
# this machine; the bounds leave 3 orders of magnitude for other CPUs' rounding and MuJoCo Warp's solver
# iterations without letting a diverging trajectory (a foot landing elsewhere: ≥ 1e-2) pass.
TOL_Q, TOL_DQ, TOL_BASE, TOL_REWARD = 1e-3, 1e-2, 1e-3, 1e-4


def _gait(k: int, dt: float) -> np.ndarray:
    """Each env its own phase of a stepping motion (every joint ±0.3 raw action at 1.5 Hz)."""
    return 0.3 * np.sin(2 * np.pi * 1.5 * k * dt + 0.7 * np.arange(12)[None] + np.arange(N)[:, None])


# Warp's CPU device everywhere; a GPU too where torch and warp see one (a session lent a GPU runs both).
DEVICES = ["cpu", *(["cuda:0"] if torch.cuda.is_available() else [])]


def _np(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy()


@pytest.mark.parametrize("device", DEVICES)
def test_warp_env_follows_the_cpu_env_from_the_same_state_under_the_same_actions(device: str) -> None:
    task = make_task("a1-flat")
    cmd = (0.5, 0.0, 0.0)
    cpu = MujocoVecEnv(task, N, seed=0, randomize=False, nthread=1, fixed_command=cmd)
    gpu = WarpVecEnv(task, N, seed=0, randomize=False, device=device, fixed_command=cmd)
    nq, nv = cpu.models[0].nq, cpu.models[0].nv
    gpu.set_physics_state(cpu.state[:, 1 : 1 + nq], cpu.state[:, 1 + nq : 1 + nq + nv])  # the same random yaw
    np.testing.assert_allclose(_np(gpu.actor_obs), cpu.actor_obs, atol=1e-6)
    np.testing.assert_allclose(_np(gpu.critic_obs), cpu.critic_obs, atol=1e-6)
    worst = dict.fromkeys(("q", "dq", "base", "reward", "obs", "feet"), 0.0)
    for k in range(STEPS):
        action = _gait(k, cpu.dt)
        a, b = cpu.step(action), gpu.step(torch.as_tensor(action, device=device))
        q_a, dq_a = cpu.joint_state()
        q_b, dq_b = gpu.joint_state()
        np.testing.assert_array_equal(_np(b.terminated), a.terminated)
        worst["q"] = max(worst["q"], float(np.abs(_np(q_b) - q_a).max()))
        worst["dq"] = max(worst["dq"], float(np.abs(_np(dq_b) - dq_a).max()))
        worst["base"] = max(worst["base"], float(np.abs(_np(gpu.qpos[:, :7]) - cpu.state[:, 1:8]).max()))
        worst["reward"] = max(worst["reward"], float(np.abs(_np(b.reward) - a.reward).max()))
        worst["obs"] = max(worst["obs"], float(np.abs(_np(b.critic_obs) - a.critic_obs).max()))
        worst["feet"] = max(worst["feet"], float(np.abs(_np(gpu.foot_height()) - cpu.foot_height()).max()))
    assert not a.terminated.any()  # the comparison ran on standing, stepping robots, not on resets
    assert worst["q"] < TOL_Q and worst["dq"] < TOL_DQ and worst["base"] < TOL_BASE, worst
    assert worst["feet"] < TOL_BASE, worst
    assert worst["reward"] < TOL_REWARD and worst["obs"] < 10 * TOL_Q, worst
    assert np.abs(_np(gpu.qpos[:, :2]) - cpu.state[:, 1:3]).max() < TOL_BASE
    assert np.abs(cpu.state[:, 1:3] - cpu._template[1:3]).max() > 1e-3  # the bases moved: a real trajectory
    cpu.close()


def test_randomization_writes_per_world_model_fields_and_their_derived_constants() -> None:
    task = make_task("a1-flat")
    env = WarpVecEnv(task, N, seed=1, randomize=True, device="cpu")
    nom, cfg = env.nominal, task.randomization
    friction = env.batched.friction[:, 0, 0].numpy() / nom.base_friction
    assert np.all((friction >= cfg.friction_scale[0] - 1e-6) & (friction <= cfg.friction_scale[1] + 1e-6))
    assert len(np.unique(friction.round(6))) == N  # one draw per world
    mass = env.batched.mass.numpy()
    base_add = mass[:, nom.base_body] - nom.body_mass[nom.base_body]  # the base's links scale is 1 ± 10 %
    assert np.all(np.abs(base_add) < cfg.base_mass_add_kg[1] + 0.1 * nom.body_mass[nom.base_body])
    # mujoco_warp.set_const ran per world: the world body's subtree mass is each world's total mass.
    import warp as wp

    subtree = wp.to_torch(env.model.body_subtreemass)[:, 0].numpy()
    np.testing.assert_allclose(subtree, mass.sum(axis=1), rtol=1e-5)
    rng = np.random.default_rng(0)
    for _ in range(20):
        result = env.step(torch.as_tensor(rng.uniform(-0.5, 0.5, size=(N, 12))))
        assert torch.isfinite(result.actor_obs).all() and result.actor_obs.shape == (N, env.num_actor_obs)
        assert result.critic_obs.shape == (N, env.num_critic_obs) and result.reward.shape == (N,)


def test_a_fallen_robot_terminates_and_restarts() -> None:
    env = WarpVecEnv(make_task("a1-flat"), 2, seed=2, randomize=False, device="cpu")
    qpos, qvel = env.qpos.clone(), env.qvel.clone()
    qpos[0, 2] = 0.05  # base on the ground: below the task's minimum height, the trunk touching the floor
    env.set_physics_state(qpos, qvel)
    for _ in range(3):
        result = env.step(torch.zeros(2, 12))
        if result.terminated[0]:
            break
    assert bool(result.terminated[0]) and not bool(result.terminated[1])
    assert int(env.episode_length[0]) == 0 and float(env.qpos[0, 2]) > 0.2  # restarted, standing
    assert set(result.log) >= {"Episode/length_s", "Episode/fell", "Episode/lin_vel_error_m_s"}
    assert float(result.log["Episode/fell"]) == 1.0


@pytest.mark.parametrize("device", DEVICES)
def test_training_runs_on_the_warp_backend(tmp_path, device: str) -> None:
    final = train(TrainArgs(task="a1-flat", log_dir=tmp_path, backend="warp", device=device, num_envs=4,
                            max_iterations=2, num_steps_per_env=8, progress=False))
    info = read_checkpoint_info(final)
    assert final.name == "model_1.pt" and info["backend"] == "warp" and info["env_steps"] == 2 * 4 * 8
    # a1-flat trains a quarter of its envs on the stiff contact: PPO gets both cones, as on the CPU
    assert info["backend_notes"] == ["contact mix: 2 MuJoCo Warp envs, one per friction cone (1 elliptic, 3 training)"]


def test_unsupported_tasks_and_devices_fail_with_one_line() -> None:
    with pytest.raises(RobotRLError, match="terrain"):
        WarpVecEnv(make_task("a1-rough"), 2, device="cpu")
    with pytest.raises(RobotRLError, match="--device 'tpu'"):
        WarpVecEnv(make_task("a1-flat"), 2, device="tpu")
    with pytest.raises(ConfigError, match="needs --backend warp"):
        train(TrainArgs(task="a1-flat", device="cuda:0", log_dir=None))


def test_a_randomized_model_steps_alike_on_both_backends() -> None:
    """One draw of the model terms (friction, masses, COM, gains, motor strength) written into the CPU env's model
    copies (``dr.apply_model_sample``, ``mj_setConst``) and into the warp env's batched fields (``set_const``):
    the robots then move alike, as in the DR-off comparison."""
    import dataclasses

    from robot_rl.sim import randomization as dr

    task = make_task("a1-flat")
    quiet = dr.with_overrides(task.randomization, {"action_latency_steps": (0, 0), "push_interval_s": None,
                                                   "observation_noise": False, "init_joint_pos_rad": 0.0,
                                                   "init_joint_vel_rad_s": 0.0, "stiff_contact_fraction": 0.0})
    task = dataclasses.replace(task, randomization=quiet)  # the model terms only
    cmd = (0.5, 0.0, 0.0)
    cpu = MujocoVecEnv(task, N, seed=0, nthread=1, fixed_command=cmd)
    gpu = WarpVecEnv(task, N, seed=0, device="cpu", fixed_command=cmd)
    sample = dr.sample_model(quiet, cpu.nominal, np.random.default_rng(5), N)
    for i in range(N):
        dr.apply_model_sample(cpu.models[i], cpu._scratch, cpu.nominal, sample.row(i))
    cpu.kp[:] = cpu.spec.kp * sample.kp_scale * sample.motor_strength
    cpu.kd[:] = cpu.spec.kd * sample.kd_scale * sample.motor_strength
    gpu.apply_model_sample(torch.arange(N), {f.name: torch.as_tensor(getattr(sample, f.name), dtype=torch.float32)
                                            for f in dataclasses.fields(sample)})
    nq, nv = cpu.models[0].nq, cpu.models[0].nv
    gpu.set_physics_state(cpu.state[:, 1 : 1 + nq], cpu.state[:, 1 + nq : 1 + nq + nv])
    import warp as wp

    for name in ("body_mass", "body_invweight0", "dof_invweight0", "body_subtreemass", "geom_friction", "geom_solref"):
        warp_values = wp.to_torch(getattr(gpu.model, name)).numpy().reshape(N, -1)
        cpu_values = np.stack([getattr(m, name).ravel() for m in cpu.models])
        np.testing.assert_allclose(warp_values, cpu_values, rtol=1e-4, atol=1e-6, err_msg=name)
    worst = 0.0
    for k in range(150):
        action = _gait(k, cpu.dt)
        a, b = cpu.step(action), gpu.step(torch.as_tensor(action))
        np.testing.assert_array_equal(b.terminated.numpy(), a.terminated)
        worst = max(worst, float(np.abs(gpu.joint_state()[0].numpy() - cpu.joint_state()[0]).max()))
        assert float(np.abs(b.reward.numpy() - a.reward).max()) < TOL_REWARD
    assert worst < TOL_Q, worst
    cpu.close()


def test_the_gymnasium_adapter_runs_the_warp_backend() -> None:
    from robot_rl.sim.gym_vector import MujocoGymVectorEnv

    env = MujocoGymVectorEnv("a1-flat", 3, seed=0, backend="warp", device="cpu")
    obs, info = env.reset(seed=1)
    assert isinstance(obs, np.ndarray) and obs.shape == (3, 45) and info["critic_obs"].shape == (3, 48)
    env.action_space.seed(0)
    for _ in range(400):
        obs, rew, term, _, info = env.step(env.action_space.sample())
        assert obs.shape == (3, 45) and rew.shape == (3,) and rew.dtype == np.float64
        if term.any():
            break
    assert term.any(), "random actions should make an A1 fall within 8 s"
    i = int(np.flatnonzero(term)[0])
    joints = slice(9, 21)  # the finished env's final observation is its fallen state, obs the fresh reset
    assert info["_final_obs"][i] and np.abs(info["final_obs"][i, joints]).max() > 0.2
    assert np.abs(obs[i, joints]).max() < 0.1
    assert isinstance(info["episode"]["Episode/fell"], float)
    env.close()


def test_the_warp_sampler_puts_every_quantity_of_an_env_at_a_corner_together() -> None:
    """``all_corners_probability`` on the device, as ``dr.sample_model`` draws it (tests/sim/test_randomization.py)."""
    from robot_rl.sim.warp_model import sample_model

    task = make_task("a1-flat")
    cfg = dataclasses.replace(task.randomization, corner_probability=0.0, all_corners_probability=0.25)
    nominal = MujocoVecEnv(task, 1, seed=0).nominal
    s = {k: v.numpy() for k, v in sample_model(cfg, nominal, 4000, torch.device("cpu"),
                                                   torch.Generator().manual_seed(0)).items()}

    def ends(x, r):
        x = x.reshape(len(x), -1)
        return (np.isclose(x, r[0], atol=1e-6) | np.isclose(x, r[1], atol=1e-6)).all(axis=1)

    at_end = np.stack([ends(s["friction_scale"], cfg.friction_scale), ends(s["base_mass_add"], cfg.base_mass_add_kg),
                       ends(s["com_offset"], (-cfg.com_offset_m, cfg.com_offset_m)), ends(s["kp_scale"], cfg.kp_scale),
                       ends(s["motor_strength"], cfg.motor_strength), ends(s["link_mass_scale"], cfg.link_mass_scale)])
    assert np.array_equal(at_end.all(axis=0), at_end.any(axis=0))
    assert 0.22 < at_end[0].mean() < 0.28


def test_the_warp_backend_follows_the_robustness_recipe() -> None:
    """a1-flat's randomization on warp: corners drawn as the CPU env draws them, contact stiffness per world, pushes
    from random directions at random times up to the ramped maximum, and — one cone for all worlds — every world on
    the builder's elliptic cone, said in the env's notes."""
    import mujoco

    task = make_task("a1-flat")
    # with a share of the commands turning in place (off in the recipe; the CPU env's draw is tested in test_task_terms)
    turning = dataclasses.replace(task.terms.commands, turn_fraction=0.3)
    task = dataclasses.replace(task, terms=dataclasses.replace(task.terms, commands=turning))
    env = WarpVecEnv(task, 64, seed=0, device="cpu")
    cmd = env._sample_commands(4000).numpy()
    still = np.all(cmd[:, :2] == 0, axis=1)
    assert 0.30 < np.mean(still & (cmd[:, 2] != 0)) < 0.40 and 0.07 < np.mean(np.all(cmd == 0, axis=1)) < 0.13
    assert int(env.robot.model.opt.cone) == int(mujoco.mjtCone.mjCONE_ELLIPTIC)
    assert env.notes and "elliptic" in env.notes[0]
    import warp as wp

    tc = wp.to_torch(env.model.geom_solref)[:, 0, 0].numpy()
    lo, hi = task.randomization.contact_timeconst_s
    assert tc.min() >= lo - 1e-9 and tc.max() <= hi + 1e-9
    at_end = np.isclose(tc, lo, rtol=0, atol=1e-7) | np.isclose(tc, hi, rtol=0, atol=1e-7)  # float32 on the device
    assert 0.1 < at_end.mean() < 0.6  # corner_probability 0.3 of 64 envs
    v = env._v
    before = env.qvel[:, v : v + 2].clone()
    env.continue_curriculum(10**6)  # past the push ramp
    env._push_probability = 1.0  # every env pushed on this step
    env.step(torch.zeros(64, env.num_actions))
    kick = torch.linalg.norm(env.qvel[:, v : v + 2] - before, dim=1).numpy()
    assert kick.max() > 0.5


def test_the_contact_mix_runs_each_share_of_the_envs_on_its_own_cone() -> None:
    """MuJoCo Warp has one cone per model, so the task's stiff share is a second env: the mix has as many envs per
    contact as the CPU env, and each part steps as that env alone (the concatenation loses and mixes nothing)."""
    import mujoco

    from robot_rl.sim.randomization import stiff_contact_envs
    from robot_rl.sim.warp_contact_mix import SEED_STRIDE, ContactMixVecEnv, make_warp_env

    task = make_task("a1-flat")  # a quarter of the envs on the stiff contact
    mix = make_warp_env(task, 8, seed=3, device="cpu")
    assert isinstance(mix, ContactMixVecEnv) and mix.num_envs == 8
    stiff, soft = mix.parts
    assert stiff.num_envs == int(stiff_contact_envs(8, 0.25).sum()) == 2 and soft.num_envs == 6
    elliptic, pyramidal = int(mujoco.mjtCone.mjCONE_ELLIPTIC), int(mujoco.mjtCone.mjCONE_PYRAMIDAL)
    assert int(stiff.robot.model.opt.cone) == elliptic and int(soft.robot.model.opt.cone) == pyramidal
    assert mix.stiff_contact.tolist() == [True] * 2 + [False] * 6
    single = make_warp_env(task, 8, device="cpu", mix_contacts=False)  # the off-policy loop's: the elliptic cone
    assert isinstance(single, WarpVecEnv) and int(single.robot.model.opt.cone) == elliptic
    assert isinstance(make_warp_env(task, 8, device="cpu", randomize=False), WarpVecEnv)  # no DR: one contact

    alone = WarpVecEnv(task, 6, seed=3 + SEED_STRIDE, device="cpu", stiff_contact=False)
    end = mix.max_episode_length - 10  # env i runs out of time at step 10 - i
    mix.episode_length[:] = end + torch.arange(8)  # as rsl_rl writes it: in place, and the parts count on from it
    alone.episode_length[:] = end + torch.arange(2, 8)
    assert stiff.episode_length.tolist() == [end, end + 1]
    assert soft.episode_length.tolist() == alone.episode_length.tolist()
    torch.testing.assert_close(mix.actor_obs[2:], alone.actor_obs)
    finished = 0
    for k in range(12):
        action = torch.tensor(_gait(k, mix.dt)[:1], dtype=torch.float32).repeat(8, 1)
        result, own = mix.step(action), alone.step(action[2:])
        assert result.actor_obs.shape == (8, mix.num_actor_obs) and result.critic_obs.shape == (8, mix.num_critic_obs)
        torch.testing.assert_close(result.actor_obs[2:], own.actor_obs)
        torch.testing.assert_close(result.critic_obs[2:], own.critic_obs)
        torch.testing.assert_close(result.reward[2:], own.reward)
        assert torch.equal(result.terminated[2:], own.terminated) and torch.equal(result.truncated[2:], own.truncated)
        done = int((result.terminated | result.truncated).sum())
        finished += done
        if done:  # the episode metrics are over every finished env of both parts
            assert len(result.finished["Episode/fell"]) == done
            for key, values in result.finished.items():
                assert float(result.log[key]) == pytest.approx(float(values.mean()))
        else:
            assert result.log == {}
    assert finished == 8 and mix.episode_length.max() < 12  # every env's episode ended once, in both parts
