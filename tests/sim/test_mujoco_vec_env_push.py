"""The vectorized env on a push task: the scene is the simulated robot's, each episode a layout of the task's own
sampler, the cube observed, rewarded and scored as the robot-side fine-tuning does."""

import dataclasses

import mujoco
import numpy as np
import pytest

from robot_rl.hardware.sim_robot import SimRobot
from robot_rl.sim import randomization as dr
from robot_rl.sim.mujoco_vec_env import FULLPHYSICS, MujocoVecEnv
from robot_rl.tasks import panda_push
from robot_rl.tasks.registry import make_task


def _env(n: int = 4, seed: int = 0, **randomization) -> MujocoVecEnv:
    task = make_task("panda-push")
    task = dataclasses.replace(task, randomization=dataclasses.replace(dr.NO_RANDOMIZATION, **randomization))
    return MujocoVecEnv(task, n, seed=seed, nthread=1)


def _term(env: MujocoVecEnv, name: str) -> slice:
    """Where an observation term sits in the actor observation (read from the task's layout)."""
    layout = env.task.actor_obs
    sizes = layout.term_sizes(env.num_joints, env.num_commands, env.num_actions)
    k = [t.name for t in layout.terms].index(name)
    return slice(sum(sizes[:k]), sum(sizes[: k + 1]))


def _cube_world(env: MujocoVecEnv, i: int) -> np.ndarray:
    model = env.models[i]
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, env.state[i], FULLPHYSICS)
    mujoco.mj_forward(model, data)
    return data.xpos[model.body(panda_push.CUBE).id].copy()


def test_each_env_starts_at_a_layout_of_the_task_with_the_cube_at_rest_and_observed():
    env = _env(n=16, seed=3)
    lo = (panda_push.CUBE_X_RANGE[0], panda_push.CUBE_Y_RANGE[0])
    hi = (panda_push.CUBE_X_RANGE[1], panda_push.CUBE_Y_RANGE[1])
    obs_cube = env.actor_obs[:, _term(env, "object_pos")]
    assert np.allclose(env.actor_obs[:, _term(env, "command")], env.commands)
    for i in range(env.num_envs):
        cube = _cube_world(env, i)
        assert np.all(cube[:2] >= lo) and np.all(cube[:2] <= hi)
        assert cube[2] == pytest.approx(panda_push.TABLE_TOP_Z + panda_push.CUBE_HALF_M)
        assert np.allclose(obs_cube[i], cube, atol=1e-6)  # the Panda's base sits at the origin, unrotated
        distance = np.linalg.norm(env.commands[i] - cube[:2])
        assert panda_push.PUSH_DISTANCE_RANGE_M[0] - 1e-9 <= distance <= panda_push.PUSH_DISTANCE_RANGE_M[1] + 1e-9
    assert np.all(env.state[:, env.push.qvel] == 0.0)
    assert len({tuple(c) for c in env.commands.round(6)}) == env.num_envs  # a layout per env, not one for all


def test_the_cube_at_its_goal_is_rewarded_and_scored_a_success():
    env = _env(n=2)
    goal = env.commands[0]
    env.state[0, env.push.qpos[:2]] = goal  # env 0: the cube on its goal; env 1 as laid out
    r = env.step(np.zeros((2, env.num_actions)))
    assert r.reward[0] > r.reward[1]
    assert env._episode_sums["push_success"][0] > 0 and env._episode_sums["push_success"][1] == 0
    assert np.all(env._episode_sums["tool_to_object"] < 0)  # the hand, at its ready pose, is away from the cube
    env.episode_length[:] = env.max_episode_length - 1
    r = env.step(np.zeros((2, env.num_actions)))
    assert r.truncated.all()
    assert r.finished["Episode/success"].tolist() == [1.0, 0.0]
    assert r.finished["Episode/final_distance_m"][0] < 1e-3


def test_friction_and_mass_randomization_leave_the_table_and_cube_alone():
    env = _env(n=3, friction_scale=(0.3, 0.3), link_mass_scale=(1.5, 1.5))
    model = env.models[1]
    for box in (panda_push.TABLE.name, panda_push.CUBE):
        assert model.geom_friction[model.geom(box).id, 0] == pytest.approx(panda_push.CUBE_FRICTION)
    cube = model.body(panda_push.CUBE).id
    assert model.body_mass[cube] == pytest.approx(panda_push.CUBE_MASS_KG)
    assert model.body_gravcomp[cube] == 0.0  # the arm's gravity compensation does not float the cube
    hand = model.body("panda_hand").id
    assert model.body_mass[hand] == pytest.approx(1.5 * env.nominal.body_mass[hand])


def test_a_push_goal_cannot_be_fixed():
    with pytest.raises(ValueError, match="cannot be fixed"):
        MujocoVecEnv(make_task("panda-push"), 1, fixed_command=(0.5, 0.0))


def test_the_cube_moves_as_on_the_simulated_robot_under_the_same_commands():
    """The same joint targets, held per policy period, on the simulated robot (SimRobot, mj_step) and in the
    vectorized env (rollout): the hand comes down beside the cube and sweeps through it; both move it alike."""
    env = _env(n=1)
    cube_xy = np.array([0.45, 0.0])
    env.state[0, env.push.qpos[:2]] = cube_xy
    robot = SimRobot(env.spec, "mujoco", realtime=False, scene=panda_push.push_scene(cube_xy))
    robot.connect()
    try:
        data = robot._backend.data
        cube = robot._backend.robot.model.body(panda_push.CUBE).id
        down = [np.array([-0.4, 2.6, 0, 0.5, 0, 1.0, 0])] * 60  # the hand down, beside the cube
        sweep = [np.array([-0.4 + 0.8 * t / 80, 2.6, 0, 0.5, 0, 1.0, 0]) for t in range(80)]  # and across it
        for a in down + sweep:
            robot.write(_command(env, env.task.action.decode(a, env.default_q)))  # lockstep: one policy period
            env.step(a[None])
        mujoco.mj_forward(robot._backend.robot.model, data)
        on_robot = data.xpos[cube].copy()
    finally:
        robot.close()
    assert np.linalg.norm(on_robot[:2] - cube_xy) > 0.02  # the sweep did push the cube
    assert np.allclose(_cube_world(env, 0), on_robot, atol=2e-3)


def _command(env, q_target):
    from robot_rl.core.types import JointCommand

    n = env.num_joints
    return JointCommand(q_target=q_target, dq_target=np.zeros(n), kp=env.spec.kp.copy(), kd=env.spec.kd.copy(),
                        tau_ff=np.zeros(n))
