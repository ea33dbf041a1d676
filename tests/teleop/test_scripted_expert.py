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
    # Issue 29: the fingers stay off the table and off the cube's top, so the chain never has to hold them back
    # (at the old 12 mm push height they pressed on the table and the torque limit clipped).
    assert sum(outcome.safety["interventions"].values()) == 0, outcome.safety["interventions"]


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


def test_fingertips_clear_the_table_at_push_height():
    """The push height leaves the lowest finger point ≥ 1 cm above the table (issue 29: at 12 mm the fingers
    pressed on it). The fingers' lowest point is measured on MuJoCo's model with the arm in a pushing pose."""
    import mujoco

    from robot_rl.robots.mujoco_model import build_mujoco_model
    from robot_rl.teleop.arm_ik import DifferentialIK
    from robot_rl.teleop.scripted_expert import PushExpertConfig

    push_z = PushExpertConfig().push_height_m
    ik = DifferentialIK(PANDA)
    target = np.array([0.5, 0.0, push_z])
    for _ in range(300):  # the tool to a pushing point, pointing down as the expert holds it
        tool, _ = ik.kin.tool_pose(ik.q)
        q = ik.step(np.clip(5.0 * (target - tool), -0.25, 0.25), np.zeros(3))
    tool, _ = ik.kin.tool_pose(q)
    assert abs(tool[2] - push_z) < 1e-3
    robot = build_mujoco_model(PANDA)
    model, data = robot.model, robot.make_data()
    adr = [model.joint(name).qposadr[0] for name in PANDA.joint_names]
    data.qpos[adr] = q
    mujoco.mj_forward(model, data)
    lowest = np.inf
    for g in range(model.ngeom):
        body = model.body(int(model.geom_bodyid[g])).name
        if "finger" in body and model.geom_contype[g] | model.geom_conaffinity[g]:
            # The geom's bounding box corners in the world (enough for a lower bound on clearance).
            half = model.geom_aabb[g, 3:]
            corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * half
            world = data.geom_xpos[g] + (corners + model.geom_aabb[g, :3]) @ data.geom_xmat[g].reshape(3, 3).T
            lowest = min(lowest, world[:, 2].min())
    base_z = data.xpos[model.body(PANDA.sim_model.base_body).id][2]
    assert np.isfinite(lowest)
    assert lowest - base_z - panda_push.TABLE_TOP_Z >= 0.01, f"fingers {lowest - base_z:.4f} m above the table"


def test_expert_does_not_descend_onto_the_cube():
    """Above pushing height and nearer the cube than the contact point, the rule backs off (reposition) rather
    than lowering the fingers onto the cube's top edge; from the pre-push point it descends."""
    from robot_rl.teleop.scripted_expert import PushExpertConfig

    cfg = PushExpertConfig()
    goal, cube = np.array([0.6, 0.0]), np.array([0.45, 0.0])
    expert = ScriptedPushExpert(PANDA, None, goal, np.random.default_rng(0), kinematics=ArmKinematics(PANDA))
    high = cfg.push_height_m + 0.03
    rate = expert.rates(np.array([cube[0] - cfg.contact_m + 0.005, 0.0, high]), cube)
    assert expert.zone == "reposition" and rate[2] >= 0.0
    expert.rates(np.array([cube[0] - expert.standoff, 0.0, high]), cube)
    assert expert.zone == "descend"
    expert.rates(np.array([cube[0] - cfg.contact_m + 0.005, 0.0, cfg.push_height_m]), cube)
    assert expert.zone == "push"  # low and in contact: keep pushing
