"""The scripted push expert: a teleop device that solves panda-push through arm teleop and the runtime."""

import numpy as np

from robot_rl.learn.demos import expert_episode
from robot_rl.robots.spec import load_robot
from robot_rl.tasks import panda_push
from robot_rl.tasks.registry import make_task
from robot_rl.teleop.arm_ik import ArmKinematics
from robot_rl.teleop.scripted_expert import ScriptedPushExpert

PANDA = load_robot("panda")
TASK = make_task("panda-push")


def test_expert_pushes_the_cube_to_the_goal_on_a_seeded_episode():
    rng = np.random.default_rng(3)
    episode = panda_push.sample_episode(rng)
    start_distance = panda_push.goal_distance(np.append(episode.cube_xy, 0.0), episode.goal_xy)
    outcome = expert_episode(PANDA, TASK, episode, rng)
    assert outcome.success and not outcome.faulted
    assert outcome.final_distance_m < panda_push.SUCCESS_RADIUS_M < start_distance
    assert outcome.safety["faults"] == {}


class _Frozen:
    """Stands in for a robot interface and its scene: always returns one recorded (state, cube)."""

    def __init__(self, state):
        self.state = state

    def read(self):
        return self.state[0]

    def object_position(self):
        return self.state[1]


def _state(q, cube):
    from robot_rl.core.types import RobotState

    n = len(q)
    return RobotState(0.0, 0, np.asarray(q, float), np.zeros(n), np.zeros(n)), np.asarray(cube, float)


def test_expert_commands_are_normalized_and_press_start_first():
    rng = np.random.default_rng(0)
    kin = ArmKinematics(PANDA)
    source = _Frozen(_state(PANDA.default_positions, [0.45, 0.05, 0.025]))
    expert = ScriptedPushExpert(PANDA, source, np.array([0.58, 0.05]), rng, kinematics=kin)
    first = expert.poll()
    assert first.buttons.start and not first.buttons.stop
    assert not expert.poll().buttons.start
    for _ in range(50):
        cmd = expert.poll()
        assert cmd.ee_delta.shape == (6,) and np.all(np.abs(cmd.ee_delta) <= 1.0)
    # From the start pose (above and behind the cube) it heads down towards the pre-push point.
    assert expert.zone == "reposition" and cmd.ee_delta[2] < -0.3


def test_clean_command_is_the_polled_command_without_the_noise():
    """DART demos label with the rule's own answer: the same command, less the expert's OU noise."""
    from dataclasses import replace

    from robot_rl.teleop.scripted_expert import PushExpertConfig

    kin = ArmKinematics(PANDA)
    source = _Frozen(_state(PANDA.default_positions, [0.45, 0.05, 0.025]))
    goal = np.array([0.58, 0.05])
    noisy = ScriptedPushExpert(PANDA, source, goal, np.random.default_rng(0), kinematics=kin)
    quiet = ScriptedPushExpert(PANDA, source, goal, np.random.default_rng(0), kinematics=kin,
                               cfg=replace(PushExpertConfig(), noise=0.0))
    for _ in range(20):
        sent, silent = noisy.poll(), quiet.poll()
        np.testing.assert_allclose(noisy.clean_command.ee_delta, silent.ee_delta)
        np.testing.assert_array_equal(quiet.clean_command.ee_delta, silent.ee_delta)
    assert np.abs(sent.ee_delta[:3] - noisy.clean_command.ee_delta[:3]).max() > 1e-3


def test_expert_is_memoryless_apart_from_noise():
    """Same scene → same rates, whatever came before (a cloned policy can reproduce a function of the state)."""
    kin = ArmKinematics(PANDA)
    goal = np.array([0.58, 0.05])
    expert = ScriptedPushExpert(PANDA, None, goal, np.random.default_rng(0), kinematics=kin)
    tool, _ = kin.tool_pose(PANDA.default_positions)
    scenes = [(tool, np.array([0.45, 0.05])), (np.array([0.39, 0.05, 0.012]), np.array([0.45, 0.05])),
              (np.array([0.54, 0.05, 0.02]), np.array([0.575, 0.05]))]
    first = [(expert.rates(ee, cube).copy(), expert.zone) for ee, cube in scenes]
    again = [(expert.rates(ee, cube).copy(), expert.zone) for ee, cube in reversed(scenes)][::-1]
    for (a, zone_a), (b, zone_b) in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
        assert zone_a == zone_b
    assert [z for _, z in first] == ["reposition", "push", "retreat"]


def test_expert_stops_at_home_only_while_the_cube_is_at_the_goal():
    from robot_rl.teleop.arm_ik import DifferentialIK
    from robot_rl.teleop.scripted_expert import PushExpertConfig

    kin = ArmKinematics(PANDA)
    goal = np.array([0.5, 0.0])
    home = np.array(PushExpertConfig().home_m)
    ik = DifferentialIK(PANDA)  # a joint pose with the tool at home
    for _ in range(200):
        tool, _ = ik.kin.tool_pose(ik.q)
        q = ik.step(np.clip(5.0 * (home - tool), -0.25, 0.25), np.zeros(3))
    scene = _Frozen(_state(q, [0.505, 0.0, 0.025]))  # cube 5 mm from the goal: done
    expert = ScriptedPushExpert(PANDA, scene, goal, np.random.default_rng(0), kinematics=kin)
    pressed = [expert.poll().buttons for _ in range(40)]
    assert expert.zone == "home"
    assert sum(b.stop and b.success for b in pressed) == 1  # once, after hold_s at home
    scene.state = _state(q, [0.6, 0.0, 0.025])  # the cube knocked away: back to work, no stop
    expert = ScriptedPushExpert(PANDA, scene, goal, np.random.default_rng(0), kinematics=kin)
    assert not any(expert.poll().buttons.stop for _ in range(40))
    assert expert.zone == "reposition"
