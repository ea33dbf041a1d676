"""The vectorized MuJoCo env: stepping, observations, rewards, and that each randomization acts on the sim."""

import dataclasses

import mujoco
import numpy as np
import pytest

from robot_rl.robots.assets import model_source_missing
from robot_rl.robots.spec import load_robot
from robot_rl.sim import randomization as dr
from robot_rl.sim.mujoco_vec_env import FULLPHYSICS, MujocoVecEnv
from robot_rl.tasks.registry import TASKS, make_task

OFF = dr.NO_RANDOMIZATION


def _env(task: str = "a1-flat", n: int = 4, seed: int = 0, **randomization) -> MujocoVecEnv:
    """An env whose randomization is only what the test names (everything else off)."""
    cfg = make_task(task)
    cfg = dataclasses.replace(cfg, randomization=dataclasses.replace(OFF, **randomization))
    return MujocoVecEnv(cfg, n, seed=seed, nthread=1)


PPO_TASKS = list(TASKS)  # every task runs in the env through its terms (tests/sim/test_task_terms.py)


@pytest.mark.parametrize("name", PPO_TASKS)
def test_every_task_steps_200_random_actions_with_finite_results(name):
    missing = model_source_missing(load_robot(make_task(name).robot))
    if missing:
        pytest.skip(f"model source not on this machine: {missing}")
    env = MujocoVecEnv(make_task(name), 3, seed=1, nthread=1)
    rng = np.random.default_rng(0)
    task = env.task
    dims = (env.num_joints, env.num_commands, env.num_actions)
    assert env.actor_obs.shape == (3, task.actor_obs.size(*dims))
    assert env.critic_obs.shape == (3, task.critic_obs.size(*dims))
    for _ in range(200):
        r = env.step(rng.normal(size=(3, env.num_actions)))
        for array in (r.actor_obs, r.critic_obs, r.reward):
            assert np.all(np.isfinite(array))
        assert r.actor_obs.shape == env.actor_obs.shape
    env.close()


def test_a_fixed_command_is_held_and_clamped_to_the_trained_range():
    cfg = make_task("a1-flat")
    env = MujocoVecEnv(cfg, 2, seed=0, nthread=1, fixed_command=(5.0, 0.0, 0.0))
    assert env.commands.tolist() == [[cfg.commands.high[0], 0.0, 0.0]] * 2
    with pytest.raises(ValueError, match="takes 3 command values"):
        MujocoVecEnv(cfg, 2, fixed_command=(0.5,))


def test_bad_actions_are_refused():
    env = _env(n=2)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="non-finite"):
        env.step(np.full((2, 12), np.nan))


def test_friction_mass_and_com_differ_per_env_within_their_ranges():
    env = _env(n=6, friction_scale=(0.4, 1.0), base_mass_add_kg=(-1.0, 3.0), com_offset_m=0.05)
    nominal = _env(n=1).models[0]
    b = env.robot.base_body_id
    friction = np.array([m.geom_friction[0, 0] for m in env.models])
    mass_add = np.array([m.body_mass[b] for m in env.models]) - nominal.body_mass[b]
    com = np.array([m.body_ipos[b] for m in env.models]) - nominal.body_ipos[b]
    assert np.all((friction >= 0.4) & (friction <= 1.0)) and np.ptp(friction) > 0.05
    assert np.all((mass_add >= -1.0) & (mass_add <= 3.0)) and np.ptp(mass_add) > 0.2
    assert np.abs(com).max() <= 0.05 and np.abs(com).min() < 0.05 and np.ptp(com) > 0.01


def _first_substep_torque(env: MujocoVecEnv, action: np.ndarray) -> np.ndarray:
    env.step(action)
    return env._sens[:, 0, env.world.sensors.joint_torque]  # measured at the (shared) initial state


def test_kp_kd_scale_change_the_pd_torque():
    env = _env(n=4, kp_scale=(0.5, 1.5), kd_scale=(0.5, 1.5))
    spec = env.spec
    assert np.ptp(env.kp / spec.kp) > 0.1 and np.ptp(env.kd / spec.kd) > 0.1
    action = np.full((4, 12), 0.4)
    torque = _first_substep_torque(env, action)
    error = env.task.action.decode(action, env.default_q) - env.default_q
    # At rest at the default pose the torque is kp·error: each env's own kp.
    assert np.allclose(torque, env.kp * error, rtol=1e-6)
    assert np.allclose(env._ctrl[:, 0, env.robot.kd_ctrl], env.kd)


def test_motor_strength_scales_torque_and_effort_limit():
    env = _env(n=4, motor_strength=(0.5, 1.5))
    strength = env.strength
    assert np.ptp(strength) > 0.1
    limits = np.array([m.jnt_actfrcrange[env.robot.joint_ids, 1] for m in env.models])
    assert np.allclose(limits, strength * env.spec.effort_limits)
    action = np.full((4, 12), 0.4)
    torque = _first_substep_torque(env, action)
    error = env.task.action.decode(action, env.default_q) - env.default_q
    assert np.allclose(torque, strength * env.spec.kp * error, rtol=1e-6)


def test_latency_applies_the_action_from_k_steps_ago():
    k = 2
    env = _env(n=2, action_latency_steps=(k, k))
    actions = [np.full((2, 12), 0.1 * (t + 1)) for t in range(5)]
    targets = []
    for a in actions:
        env.step(a)
        targets.append(env._ctrl[:, 0, env.robot.torque_ctrl] / env.kp)  # kp·q* (+ kd·0) per joint
    for t in range(5):
        sent = actions[t - k] if t >= k else np.zeros((2, 12))
        assert np.allclose(targets[t], env.task.action.decode(sent, env.default_q)), t


def test_observation_noise_only_on_the_actor_and_within_its_amplitude():
    noisy = _env(n=8, observation_noise=True)
    term = next(t for t in noisy.task.actor_obs.terms if t.name == "projected_gravity")
    actor_cols = slice(3, 6)  # base_ang_vel (3) then projected_gravity (3)
    critic_cols = slice(6, 9)  # base_lin_vel (3), base_ang_vel (3), projected_gravity (3)
    diff = noisy.actor_obs[:, actor_cols] - noisy.critic_obs[:, critic_cols]
    assert 0 < np.abs(diff).max() <= term.noise + 1e-6
    clean = _env(n=8, observation_noise=False)
    assert np.allclose(clean.actor_obs[:, actor_cols], clean.critic_obs[:, critic_cols])


def test_initial_joint_state_is_randomized_at_reset():
    env = _env(n=8, init_joint_pos_rad=0.1)
    q = env.state[:, env._qpos_idx]
    assert 0.02 < np.abs(q - env.default_q).max() <= 0.1
    assert np.allclose(_env(n=2).state[:, _env(n=2)._qpos_idx], env.default_q)


def test_pushes_change_the_base_velocity():
    dt = make_task("a1-flat").randomization.push_interval_s
    assert dt is not None  # the task pushes by default
    pushed = _env(n=4, push_interval_s=1e-4, push_max_vel_m_s=1.0)
    still = _env(n=4)
    zero = np.zeros((4, 12))
    pushed.step(zero)
    still.step(zero)
    v = pushed._qvel_off + pushed.robot.free_qvel_adr
    kick = pushed.state[:, v : v + 2] - still.state[:, v : v + 2]
    assert np.abs(kick).max() > 0.1


def test_base_velocity_observation_matches_mujoco():
    env = _env(n=2, seed=3)
    rng = np.random.default_rng(0)
    for _ in range(10):
        env.step(rng.normal(scale=0.3, size=(2, 12)))
    model, data = env.models[0], mujoco.MjData(env.models[0])
    mujoco.mj_setState(model, data, env.state[0], FULLPHYSICS)
    mujoco.mj_forward(model, data)
    vel = np.zeros(6)
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, env.robot.base_body_id, vel, 1)
    lin_scale = env.task.critic_obs.terms[0].scale
    assert np.allclose(env.critic_obs[0, :3] / lin_scale, vel[3:], atol=1e-5)  # base_lin_vel, body frame
    assert np.allclose(env.critic_obs[0, 3:6] / 0.25, vel[:3], atol=1e-5)  # base_ang_vel, body frame


def test_end_effector_position_matches_mujoco_kinematics():
    env = _env("panda-reach", n=2, seed=2)
    rng = np.random.default_rng(0)
    for _ in range(5):
        env.step(rng.normal(size=(2, 7)))
    model, data = env.models[1], mujoco.MjData(env.models[1])
    mujoco.mj_setState(model, data, env.state[1], FULLPHYSICS)
    mujoco.mj_forward(model, data)
    ee_body = model.body(env.spec.sim_model.end_effector_body).id
    base = env.robot.base_body_id
    expected = (data.xpos[ee_body] - data.xpos[base]) @ data.xmat[base].reshape(3, 3)
    assert np.allclose(env.end_effector_pos()[1], expected, atol=2e-4)


def test_foot_height_matches_mujoco_kinematics_on_flat_ground_and_over_terrain():
    """Each foot body's origin above the ground under it (the swing-height reward's input), from the last
    substep's sensors: within one substep's motion of MuJoCo's kinematics at the env's state. Over terrain it
    subtracts the env's patch under each foot (raised by 5 cm here after the steps, so the terrain's share shows)."""
    rough = make_task("a1-rough")
    for cfg in (make_task("a1-flat"), rough):
        env = MujocoVecEnv(dataclasses.replace(cfg, randomization=OFF), 2, seed=3, nthread=1)
        rng = np.random.default_rng(0)
        for _ in range(5):
            env.step(0.3 * rng.normal(size=(2, 12)))
        ground = 0.0
        if cfg.terrain is not None:
            ground = 0.05
            env.heights[1] = ground
        model, data = env.models[1], mujoco.MjData(env.models[1])
        mujoco.mj_setState(model, data, env.state[1], FULLPHYSICS)
        mujoco.mj_kinematics(model, data)
        feet = env.robot.foot_body_ids
        assert np.allclose(env.foot_height()[1], data.xpos[feet, 2] - ground, atol=5e-3), cfg.name
        assert np.all(env.foot_height()[0] > -0.01) and np.all(env.foot_height()[0] < 0.2), cfg.name


def test_reach_success_is_reported_at_the_end_of_an_episode():
    env = _env("panda-reach", n=2)
    env.step(np.zeros((2, 7)))  # the tip position is read from the last step's sensors
    env.commands[0] = env.end_effector_pos()[0]  # already there: a success if it holds still
    env.commands[1] = env.end_effector_pos()[1] + [0.1, 0.0, 0.0]
    for _ in range(env.max_episode_length - 1):
        r = env.step(np.zeros((2, 7)))
    assert r.truncated.all()
    assert r.finished["Episode/success"].tolist() == [1.0, 0.0]


def test_an_exploding_env_is_terminated_and_reset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo appends its warning to MUJOCO_LOG.TXT in the working directory
    env = _env(n=2)
    v = env._qvel_off + env.robot.free_qvel_adr
    env.state[0, v : v + 3] = 1e12  # MuJoCo resets such a state inside the step (and warns)
    r = env.step(np.zeros((2, 12)))
    assert r.terminated.tolist() == [True, False]
    assert r.reward[0] == 0.0
    assert env.episode_length[0] == 0


def test_rough_terrain_spawns_each_robot_on_its_own_patch():
    cfg = make_task("a1-rough")
    cfg = dataclasses.replace(cfg, terrain=dataclasses.replace(cfg.terrain, initial_max_level=5))
    env = MujocoVecEnv(cfg, 6, seed=4, nthread=1)
    assert env.heights.shape[0] == 6 and env.heights.max() > 0
    hfield = env.world.hfield_id
    first = env.models[0].hfield_data[env.models[0].hfield_adr[hfield]:]
    assert any(not np.array_equal(first, m.hfield_data[m.hfield_adr[hfield]:]) for m in env.models[1:])
    f = env._frame()
    assert np.allclose(env.base_height(f), env.spec.sim_model.base_height, atol=1e-6)
    for _ in range(30):
        r = env.step(np.zeros((6, 12)))
        assert np.all(np.isfinite(r.reward))


def test_a_rate_limited_task_moves_targets_as_the_safety_chain_would():
    """A task trained behind the chain's target rate limit (panda-reach here): a jump is spread over many steps (as the
    robot will execute it) and the excess is charged on every one of them, not only the first."""
    env = _env("panda-reach", n=2)
    env.task = dataclasses.replace(env.task, rate_limit_targets=True)
    step = env.max_action_step
    rate = env.spec.safety.max_target_rate_rad_s * env.dt
    assert step * env.task.action.scale == pytest.approx(rate)  # one fact: the spec's rate limit
    jump = np.full((2, 7), 1.0)
    for t in range(3):
        env.step(jump)
        q_target = env._ctrl[:, 0, env.robot.torque_ctrl] / env.kp
        assert np.allclose(q_target - env.default_q, rate * (t + 1))
        assert np.allclose(env.sent_action, step * (t + 1))
    env.step(jump)
    # What the target_rate_excess reward is given: the policy's output against the last target sent.
    assert np.allclose(env.last_sent_action, 3 * step) and np.all(np.abs(env.action - env.last_sent_action) > step)


def test_a_task_without_the_rate_limit_applies_the_action_directly():
    env = _env("a1-flat", n=2)
    assert not env.task.rate_limit_targets
    env.step(np.full((2, 12), 1.0))
    q_target = env._ctrl[:, 0, env.robot.torque_ctrl] / env.kp
    assert np.allclose(q_target, env.task.action.decode(np.full(12, 1.0), env.default_q))


def test_a_task_trained_behind_the_torque_limit_sends_what_the_chain_would():
    """The chain estimates the PD torque from the commanded gains (it cannot know a weaker motor): a target past
    the effort limit is pulled in to that estimate, on the weaker robot too, and becomes the next reference."""
    env = _env("panda-reach", n=2, kp_scale=(0.5, 0.5))
    env.task = dataclasses.replace(env.task, torque_limit_targets=True)
    action = np.zeros((2, 7))
    action[:, 6] = 3.0  # joint 7: 1.5 rad from its default, kp 50 → 75 N·m estimated, limit 12
    env.step(action)
    limit = env.chain_limits.torque_max[6] / env.spec.kp[6]
    q_target = env._ctrl[:, 0, env.robot.torque_ctrl] / env.kp
    assert np.allclose(q_target[:, 6] - env.default_q[6], limit)
    assert np.allclose(q_target[:, :6], env.default_q[:6])  # the others, at rest on their targets, untouched
    assert np.allclose(env.sent_action[:, 6], limit / env.task.action.scale)


def test_a_chain_told_the_measured_motors_lets_twice_the_offset_through():
    from robot_rl.learn.residual.shifted_sim import RealityShift, with_measured_actuators
    from robot_rl.robots.spec import load_robot

    spec = load_robot("panda")
    weak = with_measured_actuators(spec, RealityShift(kp_scale=0.5))
    assert weak.spec_hash == spec.spec_hash  # a safety setting: policies trained on the spec still load
    task = dataclasses.replace(make_task("panda-reach"), torque_limit_targets=True,
                               randomization=dataclasses.replace(OFF, kp_scale=(0.5, 0.5)))
    env = MujocoVecEnv(task, 1, seed=0, nthread=1, spec=weak)
    action = np.zeros((1, 7))
    action[0, 6] = 3.0
    env.step(action)
    q_target = env._ctrl[:, 0, env.robot.torque_ctrl] / env.kp
    assert np.allclose(q_target[0, 6] - env.default_q[6], env.chain_limits.torque_max[6] / (0.5 * spec.kp[6]))
    with pytest.raises(ValueError, match="not on the given spec"):
        MujocoVecEnv(make_task("a1-flat"), 1, spec=spec)


def test_stiff_contact_envs_run_the_builders_cone_and_the_rest_the_training_cone():
    env = _env(n=8, stiff_contact_fraction=0.25)
    cones = [int(m.opt.cone) for m in env.models]
    elliptic, pyramidal = int(mujoco.mjtCone.mjCONE_ELLIPTIC), int(mujoco.mjtCone.mjCONE_PYRAMIDAL)
    assert cones == [pyramidal] * 3 + [elliptic] + [pyramidal] * 3 + [elliptic]
    assert [m.opt.impratio for m in env.models[2:4]] == [1.0, 100.0]
    r = env.step(np.zeros((8, 12)))
    assert np.all(np.isfinite(r.actor_obs)) and not r.terminated.any()


def test_contact_timeconst_is_drawn_per_env_at_reset():
    env = _env(n=6, contact_timeconst_s=(0.01, 0.03))
    tc = np.array([m.geom_solref[0, 0] for m in env.models])
    assert np.all((tc >= 0.01) & (tc <= 0.03)) and np.ptp(tc) > 0.002
    assert all(np.all(m.geom_solref[:, 0] == m.geom_solref[0, 0]) for m in env.models)


def test_push_curriculum_ramps_the_kick_and_resumes_from_a_checkpoint():
    def kicks(env):
        still = _env(n=64)
        zero = np.zeros((64, 12))
        env.step(zero)
        still.step(zero)
        v = env._qvel_off + env.robot.free_qvel_adr
        return np.linalg.norm(env.state[:, v : v + 2] - still.state[:, v : v + 2], axis=1)

    ramp = dict(push_interval_s=1e-4, push_max_vel_m_s=1.0, push_ramp_s=100.0)
    early = kicks(_env(n=64, **ramp))  # the first step: 0.02 s of a 100 s ramp
    assert early.max() < 0.01
    resumed = _env(n=64, **ramp)
    resumed.continue_curriculum(10_000)  # 200 s of policy time: the full range
    late = kicks(resumed)
    assert late.max() > 0.7 and np.mean(late > 0.05) > 0.9  # nearly every env pushed (Poisson, interval ≪ dt)
