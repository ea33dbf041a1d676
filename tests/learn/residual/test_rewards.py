"""The reward on the robot is the task's training reward, computed from what the robot reports."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from robot_rl.core.types import RobotState
from robot_rl.learn.residual.rewards import StateReward
from robot_rl.robots.spec import load_robot
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.registry import make_task


def _state(q: np.ndarray, dq: np.ndarray, **extra) -> RobotState:
    return RobotState(timestamp=0.0, tick=0, q=q, dq=dq, tau=np.zeros_like(q), **extra)


def test_reach_reward_from_robot_state_matches_the_training_env():
    task = make_task("panda-reach")
    spec = load_robot("panda")
    env = MujocoVecEnv(task, 1, seed=3, randomize=False, nthread=1, fixed_command=(0.5, 0.1, 0.4))
    reward = StateReward(task, spec)
    rng = np.random.default_rng(0)
    last = np.zeros(env.num_actions)
    try:
        for _ in range(10):
            action = rng.normal(0.0, 0.5, (1, env.num_actions))
            result = env.step(action)
            f = env._frame()
            mine = reward(_state(f["q"][0], f["dq"][0]), env.commands[0], action[0], last)
            assert mine == pytest.approx(float(result.reward[0]), rel=1e-3, abs=1e-6)
            last = action[0]
    finally:
        env.close()
    assert reward.used == tuple(t.name for t in task.rewards.terms) and reward.dropped == ()


def test_terms_the_robot_cannot_measure_are_dropped_once_and_listed():
    task, spec = make_task("a1-flat"), load_robot("a1")
    reward = StateReward(task, spec)
    j = spec.num_joints
    hardware_like = _state(spec.default_positions, np.zeros(j))  # no base velocity, no position, no contacts
    value = reward(hardware_like, np.array([0.5, 0.0, 0.0]), np.zeros(j), np.zeros(j))
    assert np.isfinite(value)
    assert set(reward.dropped) == {"tracking_lin_vel", "lin_vel_z", "feet_air_time", "base_height"}
    assert "tracking_ang_vel" in reward.used and "orientation" in reward.used


def test_failure_from_tilt_and_a_clear_error_for_the_wrong_robot():
    task, spec = make_task("a1-flat"), load_robot("a1")
    reward = StateReward(task, spec)
    j = spec.num_joints
    upright = _state(spec.default_positions, np.zeros(j))
    on_its_side = _state(spec.default_positions, np.zeros(j), base_quat=np.array([np.cos(0.7), np.sin(0.7), 0, 0]))
    assert not reward.failed(upright) and reward.failed(on_its_side)
    with pytest.raises(ValueError, match="for robot 'a1', got the spec of 'panda'"):
        StateReward(task, load_robot("panda"))


def test_push_reward_from_the_robot_state_matches_the_task_terms():
    from robot_rl.tasks import panda_push
    from robot_rl.tasks.rewards import RewardInputs, compute_rewards

    task, spec = make_task("panda-push"), load_robot("panda")
    reward = StateReward(task, spec)
    goal = np.array([0.6, 0.05])
    q = spec.default_positions + 0.1
    cube = np.array([0.55, 0.02, panda_push.CUBE_HALF_M])
    action, last = np.full(7, 0.2), np.zeros(7)
    reward.observe_object(cube)  # the task's observation source, with the state
    mine = reward(_state(q, np.zeros(7)), goal, action, last)
    tool = reward.kinematics.tool_pose(q)[0]
    z = np.zeros((1, 7))
    expected, parts = compute_rewards(task.rewards, RewardInputs(
        dt=spec.timing.policy_period_s, command=goal[None], q=q[None], dq=z, last_dq=z,
        default_q=spec.default_positions, q_soft_lower=reward.soft_lower, q_soft_upper=reward.soft_upper, torque=z,
        action=action[None], last_action=last[None], terminated=np.zeros(1, bool), object_pos=cube[None],
        tool_pos=tool[None]))
    assert mine == pytest.approx(float(expected[0]))
    assert reward.used == tuple(t.name for t in task.rewards.terms) and reward.dropped == ()
    assert parts["tool_to_object"][0] < 0 and parts["push_distance"][0] < 0
    state = _state(q, np.zeros(7))
    assert reward.object_error(state, goal) == pytest.approx(np.hypot(0.05, 0.03))
    reward.observe_object(np.array([0.61, 0.05, panda_push.CUBE_HALF_M]))
    assert reward.success(state, goal)
    reward.observe_object(np.array([0.6, 0.05, -0.3]))  # fell off the table
    assert not reward.success(state, goal)
    reward.observe_object(None)
    assert not reward.success(state, goal)  # nothing seen: not a success


def test_push_terms_are_dropped_without_an_object_position():
    task, spec = make_task("panda-push"), load_robot("panda")
    reward = StateReward(task, spec)  # a robot with no perception source: no object observed
    value = reward(_state(spec.default_positions, np.zeros(7)), np.array([0.6, 0.0]), np.zeros(7), np.zeros(7))
    assert np.isfinite(value)
    assert set(reward.dropped) == {"push_distance", "push_kernel", "push_success", "tool_to_object"}
    assert reward.object_error(_state(spec.default_positions, np.zeros(7)), np.array([0.6, 0.0])) == np.inf
    with pytest.raises(ValueError, match="has no tool-point target"):
        reward.tip_error(_state(spec.default_positions, np.zeros(7)), np.array([0.6, 0.0]))


def test_a_legs_only_policys_reward_is_over_the_joints_it_drives():
    """The G1's policy drives its 12 legs of 29 joints: the joint terms and the chain's clips pair the legs' state
    with the 12 actions, as the training env computes them (it observes the policy joints only)."""
    from robot_rl.safety.filters import SafetyLimits, velocity_aware_bounds
    from robot_rl.tasks.rewards import RewardInputs, compute_rewards

    task, spec = make_task("g1-flat"), load_robot("g1")
    legs = spec.policy_joint_indices
    assert (len(legs), spec.num_joints) == (12, 29)
    reward = StateReward(task, spec)
    rng = np.random.default_rng(4)
    q = spec.default_positions + rng.normal(0.0, 0.05, spec.num_joints)
    dq = rng.normal(0.0, 0.5, spec.num_joints)
    action, last = rng.normal(0.0, 1.0, 12), np.zeros(12)
    action[0] = 10.0  # one leg's target far past its limit (and its rate): the chain would clip it
    state = _state(q, dq, base_quat=np.array([1.0, 0, 0, 0]), base_ang_vel=np.zeros(3))
    mine = reward(state, np.array([0.5, 0.0, 0.0]), action, last)
    chain = SafetyLimits.from_spec(spec)
    legs_only = RewardInputs(
        dt=spec.timing.policy_period_s, command=np.array([[0.5, 0.0, 0.0]]), q=q[legs][None], dq=dq[legs][None],
        last_dq=dq[legs][None], default_q=spec.default_positions[legs], q_soft_lower=reward.soft_lower,
        q_soft_upper=reward.soft_upper, torque=np.zeros((1, 12)), action=action[None], last_action=last[None],
        terminated=np.zeros(1, bool), base_ang_vel=np.zeros((1, 3)), projected_gravity=np.array([[0.0, 0.0, -1.0]]),
        max_action_step=task.action.max_step(spec.safety.max_target_rate_rad_s, spec.timing.policy_period_s),
        action_scale=task.action.scale)
    legs_only.target_lower, legs_only.target_upper = velocity_aware_bounds(
        q[legs][None], dq[legs][None], chain, position=(chain.soft_lower[legs], chain.soft_upper[legs]))
    cfg = task.rewards.for_robot(spec.sim_model.base_height)
    cfg = dataclasses.replace(cfg, terms=tuple(t for t in cfg.terms if t.name in reward.used))
    expected, parts = compute_rewards(cfg, legs_only)
    assert mine == pytest.approx(float(expected[0]))
    assert "chain_clips" in reward.used and parts["chain_clips"][0] < 0
