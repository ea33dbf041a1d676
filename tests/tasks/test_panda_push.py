"""The panda-push task: registry entry, episode sampling, the scene in both simulators, success."""

import numpy as np
import pytest

from robot_rl.core.types import JointCommand
from robot_rl.hardware.sim_robot import SceneBox, SimRobot, SimScene
from robot_rl.robots.spec import load_robot
from robot_rl.tasks import panda_push
from robot_rl.tasks.observations import ObservationBuilder, ObsInputs
from robot_rl.tasks.registry import make_task

PANDA = load_robot("panda")


def test_registered_with_the_object_in_its_observation():
    task = make_task("panda-push")
    assert task.robot == "panda" and task.objective == "push" and task.terms.source is panda_push.SOURCE
    assert [t.name for t in task.actor_obs.terms] == ["joint_pos_rel", "joint_vel", "object_pos", "command"]
    assert task.commands.names == ("goal_x", "goal_y")


def test_sampled_goals_lie_in_the_command_ranges_and_on_the_table():
    rng = np.random.default_rng(0)
    task = make_task("panda-push")
    table_lo = np.array(panda_push.TABLE.pos[:2]) - panda_push.TABLE.half_size[:2]
    table_hi = np.array(panda_push.TABLE.pos[:2]) + panda_push.TABLE.half_size[:2]
    for _ in range(2000):
        ep = panda_push.sample_episode(rng)
        assert np.all(ep.goal_xy >= task.commands.low) and np.all(ep.goal_xy <= task.commands.high)
        assert np.all(ep.goal_xy > table_lo + 0.05) and np.all(ep.goal_xy < table_hi - 0.05)
        distance = np.linalg.norm(ep.goal_xy - ep.cube_xy)
        assert panda_push.PUSH_DISTANCE_RANGE_M[0] - 1e-9 <= distance <= panda_push.PUSH_DISTANCE_RANGE_M[1] + 1e-9


def test_success_is_the_cube_within_3_cm_of_the_goal_on_the_table():
    goal = np.array([0.5, 0.1])
    assert panda_push.push_success(np.array([0.52, 0.1, 0.025]), goal)
    assert not panda_push.push_success(np.array([0.531, 0.1, 0.025]), goal)
    assert not panda_push.push_success(np.array([0.5, 0.1, -0.3]), goal)  # fell off the table
    assert not panda_push.push_success(None, goal)
    assert not panda_push.push_success(np.array([np.nan, 0.1, 0.025]), goal)


@pytest.mark.parametrize("simulator", ["mujoco", "pybullet"])
def test_the_cube_rests_on_the_table_and_the_scene_reports_it(simulator):
    cube_xy = np.array([0.45, -0.08])
    hold = JointCommand.hold(PANDA.default_positions, PANDA.kp, PANDA.kd)
    with SimRobot(PANDA, simulator, scene=panda_push.push_scene(cube_xy)) as robot:
        first = robot.object_position()  # the task's observation source, not the robot state
        for _ in range(25):  # 0.5 s
            robot.write(hold)
        last = robot.object_position()
    assert first is not None
    expected = np.array([*cube_xy, panda_push.CUBE_HALF_M])
    np.testing.assert_allclose(last, expected, atol=2e-3)  # neither floating nor sinking


@pytest.mark.parametrize("simulator", ["mujoco", "pybullet"])
def test_the_closed_fingers_push_the_cube(simulator):
    """Drive the tool through the cube's spot at pushing height: the cube must move along +x in both sims."""
    from robot_rl.teleop.arm_ik import DifferentialIK

    ik = DifferentialIK(PANDA)
    cube_xy = np.array([0.45, 0.0])
    tool, _ = ik.kin.tool_pose(ik.q)
    with SimRobot(PANDA, simulator, scene=panda_push.push_scene(cube_xy)) as robot:
        # Down to 1.2 cm above the table, 8 cm behind the cube, then 12 cm forward.
        waypoints = [np.array([0.37, 0.0, 0.1]), np.array([0.37, 0.0, 0.012]), np.array([0.49, 0.0, 0.012])]
        for target in waypoints:
            for _ in range(150):
                tool, _ = ik.kin.tool_pose(robot.read().q)
                q = ik.step(np.clip(4.0 * (target - tool), -0.2, 0.2), np.zeros(3), robot.read().q)
                robot.write(JointCommand.hold(q, PANDA.kp, PANDA.kd))
        cube = robot.object_position()
    assert 0.05 < cube[0] - cube_xy[0] < 0.1, cube
    assert abs(cube[1]) < 0.02 and abs(cube[2] - panda_push.CUBE_HALF_M) < 0.005


def test_object_pos_term_without_an_object_names_what_is_missing():
    task = make_task("panda-push")
    j = PANDA.num_joints
    builder = ObservationBuilder(task.actor_obs, 1, j, 2, j)
    inputs = ObsInputs(q=PANDA.default_positions[None], dq=np.zeros((1, j)), default_q=PANDA.default_positions,
                       base_quat=np.array([[1.0, 0, 0, 0]]), base_ang_vel=np.zeros((1, 3)), command=np.zeros((1, 2)),
                       last_action=np.zeros((1, j)))
    with pytest.raises(ValueError, match=r"object_pos.*perception source"):
        builder.compute(inputs)
    inputs.object_pos = np.array([[0.4, 0.1, 0.025]])
    obs = builder.compute(inputs)
    np.testing.assert_allclose(obs[0, 2 * j : 2 * j + 3], [0.4, 0.1, 0.025], rtol=1e-6)


def test_scene_refuses_an_unknown_tracked_object_and_duplicate_names():
    box = SceneBox("a", (0.1, 0.1, 0.1), (0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="tracked object 'b'"):
        SimScene(boxes=(box,), tracked="b")
    with pytest.raises(ValueError, match="unique"):
        SimScene(boxes=(box, box))
