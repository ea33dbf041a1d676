"""go2-flat and g1-flat: registered, trainable in the vectorized env on the upstream models (from a user's checkout
or ../shared/external), and the G1's is legs-only end to end: env, contract, exported policy, deploy runtime."""

from __future__ import annotations

import numpy as np
import torch

from robot_rl.control.runtime import DeployRuntime
from robot_rl.policy.contract import PolicyContract, Provenance
from robot_rl.policy.export import export_onnx
from robot_rl.robots.spec import load_robot
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.registry import TASKS, make_task


def test_both_tasks_are_registered_for_their_robots():
    assert make_task("go2-flat").robot == "go2" and make_task("g1-flat").robot == "g1"
    assert {"go2-flat", "g1-flat"} <= set(TASKS)
    g1 = make_task("g1-flat")
    assert g1.terminations.max_tilt_rad == load_robot("g1").safety.max_tilt_rad


def test_g1_env_drives_the_legs_and_holds_waist_and_arms_at_default(spec_or_skip):
    spec = spec_or_skip("g1")
    env = MujocoVecEnv(make_task("g1-flat"), 3, seed=0, nthread=1)
    assert (env.num_joints, env.num_actions) == (12, 12)
    assert env.actor_obs.shape == (3, 45)  # 3 + 3 + 3 + 12 + 12 + 12: the legs only
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
