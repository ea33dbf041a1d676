"""go2-flat and g1-flat: registered, trainable in the vectorized env on the upstream models (from a user's checkout
or ../shared/external), and the G1's is legs-only end to end: env, contract, exported policy, deploy runtime."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from robot_rl.control.runtime import DeployRuntime
from robot_rl.core.types import RobotState
from robot_rl.policy.contract import PolicyContract, Provenance
from robot_rl.policy.export import export_onnx
from robot_rl.policy.model_card import write_model_card
from robot_rl.policy.onnx_policy import PolicyLoadError
from robot_rl.robots.spec import load_robot
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.registry import TASKS, make_task


def test_both_tasks_are_registered_for_their_robots():
    assert make_task("go2-flat").robot == "go2" and make_task("g1-flat").robot == "g1"
    assert {"go2-flat", "g1-flat"} <= set(TASKS)
    g1 = make_task("g1-flat")
    assert g1.terminations.max_tilt_rad == load_robot("g1").safety.max_tilt_rad
    assert g1.gait_period_s == g1.actor_obs.gait_period_s == g1.critic_obs.gait_period_s == 0.8
    with pytest.raises(ValueError, match="needs the layout's gait_period_s"):
        dataclasses.replace(g1.actor_obs, gait_period_s=None)
    with pytest.raises(ValueError, match="a positive period"):
        dataclasses.replace(g1.actor_obs, gait_period_s=0.0)
    with pytest.raises(ValueError, match="differ: one clock runs the episode"):
        dataclasses.replace(g1, critic_obs=dataclasses.replace(g1.critic_obs, gait_period_s=1.0))
    go2 = make_task("go2-flat")
    assert go2.gait_period_s is None
    with pytest.raises(ValueError, match=r"\['feet_phase_contact'\] read the gait clock"):
        dataclasses.replace(go2, rewards=g1.rewards)


def test_g1_env_drives_the_legs_and_holds_waist_and_arms_at_default(spec_or_skip):
    spec = spec_or_skip("g1")
    env = MujocoVecEnv(make_task("g1-flat"), 3, seed=0, nthread=1)
    assert (env.num_joints, env.num_actions) == (12, 12)
    assert env.actor_obs.shape == (3, 47)  # 3 + 3 + 3 + 12 + 12 + 12: the legs only; 2: the gait clock
    rng = np.random.default_rng(0)
    robot, n = env.robot, spec.num_joints
    charged = np.zeros(3, dtype=bool)  # envs the chain_clips term has cost something, in a step of one episode
    for _ in range(50):
        clips_before = env._episode_sums["chain_clips"].copy()
        r = env.step(rng.normal(size=(3, 12)))
        same_episode = ~(r.terminated | r.truncated)
        charged |= same_episode & (env._episode_sums["chain_clips"] < clips_before)
        assert np.isfinite(r.actor_obs).all() and np.isfinite(r.reward).all()
        ctrl = env._ctrl[:, 0]
        targets = ctrl[:, robot.torque_ctrl] / ctrl[:, robot.kp_ctrl]  # kp·q* / kp: every joint's target
        np.testing.assert_allclose(targets[:, 12:], np.tile(spec.default_positions[12:], (3, 1)), atol=1e-12)
        assert np.abs(targets[:, :12] - spec.default_positions[:12]).max() > 0.05
    assert targets.shape == (3, n)
    # The deploy chain's clips of the legs' targets are trained against, as for the quadrupeds: random actions
    # overshoot the G1's 10 rad/s target-rate limit, so the term has cost every env something.
    assert charged.all()
    env.close()


def test_g1_gait_clock_runs_from_each_episodes_start_in_the_observation_and_the_reward(spec_or_skip):
    spec_or_skip("g1")
    task = make_task("g1-flat")
    env = MujocoVecEnv(task, 2, seed=0, nthread=1)
    period, dt = task.gait_period_s, env.dt
    assert period == 0.8
    np.testing.assert_allclose(env.actor_obs[:, -2:], [[0, 1], [0, 1]], atol=1e-6)  # phase 0 at the first observation
    for k in range(1, 31):
        r = env.step(np.zeros((2, 12)))
        assert not (r.terminated | r.truncated).any()
        angle = 2 * np.pi * (k * dt % period) / period
        np.testing.assert_allclose(r.actor_obs[:, -2:], [[np.sin(angle), np.cos(angle)]] * 2, atol=1e-5)
        np.testing.assert_allclose(r.critic_obs[:, -2:], r.actor_obs[:, -2:], atol=1e-6)
    assert env._episode_sums["feet_phase_contact"][0] > 0  # standing on both feet matches the stance half
    env._reset_envs(np.array([1]))
    env._compute_obs()
    np.testing.assert_allclose(env.gait_phase(), [(30 * dt % period) / period, 0.0], atol=1e-9)
    env.close()


def test_go2_env_steps(spec_or_skip):
    spec_or_skip("go2")
    env = MujocoVecEnv(make_task("go2-flat"), 2, seed=0, nthread=1)
    assert env.num_actions == 12 and env.actor_obs.shape == (2, 45)
    rng = np.random.default_rng(1)
    for _ in range(50):
        r = env.step(rng.normal(size=(2, 12)))
        assert np.isfinite(r.actor_obs).all() and np.isfinite(r.reward).all()
    env.close()


def test_a_g1_flat_policy_exports_and_loads_in_the_deploy_runtime(tmp_path):
    spec = load_robot("g1")
    task = make_task("g1-flat")
    contract = PolicyContract.expected_from(spec, task.actor_obs, task.commands, task.action,
                                            provenance=Provenance(task="g1-flat"))
    actor = torch.nn.Sequential(torch.nn.Linear(contract.obs_dim, 32), torch.nn.ELU(), torch.nn.Linear(32, 12))
    export_onnx(actor, None, contract, tmp_path / "g1.onnx")
    runtime = DeployRuntime.load("g1", tmp_path / "g1.onnx")
    assert runtime.contract.joint_names == spec.policy_joint_names and runtime.contract.num_actions == 12
    assert runtime.controller.num_joints == spec.num_joints
    # The gait clock is the contract's (its observation's period): the controller counts it from its first tick.
    assert runtime.contract.observation.gait_period_s == 0.8
    controller, dt = runtime.controller, spec.timing.policy_period_s
    state = RobotState(timestamp=0.0, tick=0, q=spec.default_positions.copy(), dq=np.zeros(spec.num_joints),
                       tau=np.zeros(spec.num_joints))
    for tick in range(45):
        controller.step(state)
        angle = 2 * np.pi * (tick * dt % 0.8) / 0.8
        np.testing.assert_allclose(controller.last_obs[0, -2:], [np.sin(angle), np.cos(angle)], atol=1e-6)
    controller.reset()  # (re)starting to drive: the clock starts again
    controller.step(state)
    np.testing.assert_allclose(controller.last_obs[0, -2:], [0.0, 1.0], atol=1e-7)
    write_model_card(str(tmp_path / "g1.onnx"), "sim/train.py --task g1-flat")
    assert "gait clock period 0.8 s, from the first tick" in (tmp_path / "MODEL_CARD.md").read_text()
    # A file trained with another period (or none) does not load for this task, naming the field.
    other = dataclasses.replace(contract, observation=dataclasses.replace(contract.observation, gait_period_s=0.6))
    export_onnx(actor, None, other, tmp_path / "g1_other.onnx")
    with pytest.raises(PolicyLoadError, match=r"observation\.gait_period_s: model has 0\.6, task has 0\.8"):
        DeployRuntime.load("g1", tmp_path / "g1_other.onnx")


def test_a_contract_without_a_clock_reads_and_writes_as_before():
    task, spec = make_task("go2-flat"), load_robot("go2")
    contract = PolicyContract.expected_from(spec, task.actor_obs, task.commands, task.action)
    assert "gait_period_s" not in contract.to_json()
    g1 = make_task("g1-flat")
    clocked = PolicyContract.expected_from(load_robot("g1"), g1.actor_obs, g1.commands, g1.action)
    assert '"gait_period_s":0.8' in clocked.to_json()
    assert PolicyContract.from_json(clocked.to_json()) == clocked
    assert PolicyContract.from_json(contract.to_json()).observation.gait_period_s is None
