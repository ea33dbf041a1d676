"""Franka Panda push: slide a cube across a table to a goal with the closed fingers.

The robot stands at the table's edge (its base at table height); the cube starts in front of it and the
goal — the task command ``(goal_x, goal_y)``, base frame — lies 10–18 cm away, within 60° of straight
away from the robot (pushes towards the base would need the hand beyond the cube, at the edge of
reach). The actor observes the joints, the cube's position (``object_pos``, from the task's observation source
:data:`SOURCE`: simulators read their scene, on hardware a perception source must) and the goal. Success: the
cube's centre within 3 cm of the goal (in the table plane) at the end of the episode.

The task is learned from demonstrations (scripted expert or teleop → LeRobot dataset → behaviour cloning,
``robot_rl.learn.bc``), not by PPO from scratch: its PPO settings are unused. The scene is built in every
simulator by the same scene hook (``SimRobot``, and the vectorized env's world). Its rewards (:data:`REWARDS`)
are read by residual fine-tuning (:mod:`robot_rl.learn.residual`): on the robot from ``RobotState`` (the cube's
position and the tool point), and in the vectorized env where a calibrated start trains the residual by PPO.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_rl.hardware.sim_robot import SceneBox, SimScene
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm
from robot_rl.tasks.randomization import NO_RANDOMIZATION
from robot_rl.tasks.rewards import RewardsCfg, RewardTerm
from robot_rl.tasks.task import PPOCfg, TaskCfg, TerminationsCfg
from robot_rl.tasks.terms import ObjectSource, push

ROBOT = "panda"
NAME = "panda-push"

SUCCESS_RADIUS_M = 0.03
EPISODE_LENGTH_S = 10.0
CUBE = "cube"
CUBE_HALF_M = 0.025
CUBE_MASS_KG = 0.2
CUBE_FRICTION = 0.5
TABLE_TOP_Z = 0.0  # the base stands on the table: its top is the base frame's z = 0
TABLE = SceneBox("table", half_size=(0.45, 0.6, 0.02), pos=(0.55, 0.0, TABLE_TOP_Z - 0.02),
                 friction=CUBE_FRICTION, rgba=(0.55, 0.45, 0.35, 1.0))
# Where the cube starts, and how far and in which directions (from +x, away from the robot) it is pushed.
CUBE_X_RANGE, CUBE_Y_RANGE = (0.40, 0.52), (-0.12, 0.12)
PUSH_DISTANCE_RANGE_M = (0.10, 0.18)
PUSH_ANGLE_RANGE_RAD = (-np.pi / 3, np.pi / 3)

# Joint velocities are observed, but behaviour cloning trains with heavy noise on them
# (``BCConfig.velocity_noise``): a demo's action (the IK target) leads the measured joints by an amount that
# grows with their speed, so a cloned policy that trusts velocities learns "faster → lead more" and drives
# itself into oscillation (causal confusion, de Haan et al. 2019; measured here: 0 % success, the safety
# chain rate-limiting most ticks). Without them the lead is unpredictable and the arm crawls.
ACTOR_OBS = ObservationLayout(
    terms=(
        ObsTerm("joint_pos_rel"),
        ObsTerm("joint_vel", scale=0.2),
        ObsTerm("object_pos"),
        ObsTerm("command"),
    )
)

# Used by residual fine-tuning only (on the robot, and the calibrated start's sim residual). Weights are per second.
# Dense: the cube's distance to the goal and a kernel that sharpens within a few cm; the success term pays every
# tick the cube is inside the task's success radius, so holding it there (not passing through) is what counts, as
# the criterion is taken at the episode's end. The tool → cube term is small shaping only: once the cube is at the
# goal the base policy retreats home, and a strong pull towards the cube would fight that.
REWARDS = RewardsCfg(
    terms=(
        RewardTerm("push_distance", -5.0),
        RewardTerm("push_kernel", 1.0, (("sigma_m", 0.05),)),
        RewardTerm("push_success", 2.0, (("tolerance_m", SUCCESS_RADIUS_M),)),
        RewardTerm("tool_to_object", -0.2),
        RewardTerm("action_rate", -0.01),
    ),
)

# Every goal sample_episode can draw lies inside these (checked by the tests).
COMMANDS = CommandSpec(names=("goal_x", "goal_y"), ranges=((0.25, 0.75), (-0.35, 0.35)))


@dataclass(frozen=True)
class PushEpisode:
    """One episode's layout: where the cube starts and where it must go, base frame (m)."""

    cube_xy: np.ndarray
    goal_xy: np.ndarray

    @property
    def command(self) -> np.ndarray:
        return np.asarray(self.goal_xy, dtype=np.float64)


LAYOUT_RANGES = (CUBE_X_RANGE, CUBE_Y_RANGE, PUSH_ANGLE_RANGE_RAD, PUSH_DISTANCE_RANGE_M)


def layout_at(unit: np.ndarray) -> PushEpisode:
    """The layout at ``unit`` ∈ [0, 1)⁴ of (cube x, cube y, push angle, push distance) over their ranges."""
    x, y, angle, distance = (lo + u * (hi - lo) for u, (lo, hi) in zip(unit, LAYOUT_RANGES, strict=True))
    cube = np.array([x, y])
    return PushEpisode(cube, cube + distance * np.array([np.cos(angle), np.sin(angle)]))


def sample_episode(rng: np.random.Generator) -> PushEpisode:
    return layout_at(rng.random(len(LAYOUT_RANGES)))


def push_scene(cube_xy: np.ndarray) -> SimScene:
    """The table and the cube at ``cube_xy`` (resting on the table); the cube fills ``object_pos``."""
    cube = SceneBox(CUBE, half_size=(CUBE_HALF_M,) * 3,
                    pos=(float(cube_xy[0]), float(cube_xy[1]), TABLE_TOP_Z + CUBE_HALF_M),
                    mass_kg=CUBE_MASS_KG, friction=CUBE_FRICTION, rgba=(0.85, 0.2, 0.2, 1.0))
    return SimScene(boxes=(TABLE, cube), tracked=CUBE)


def goal_distance(object_pos: np.ndarray, goal_xy: np.ndarray) -> float:
    """Distance of the cube's centre to the goal in the table plane (m)."""
    return float(np.linalg.norm(np.asarray(object_pos)[:2] - np.asarray(goal_xy)))


def push_success(object_pos: np.ndarray | None, goal_xy: np.ndarray) -> bool:
    """Cube within SUCCESS_RADIUS_M of the goal and still on the table."""
    if object_pos is None or not np.all(np.isfinite(object_pos)):
        return False
    on_table = object_pos[2] > TABLE_TOP_Z
    return bool(on_table and goal_distance(object_pos, goal_xy) < SUCCESS_RADIUS_M)


# The cube, as the task's observation source: its scene, its episode layouts, the task's success test.
SOURCE = ObjectSource(sample_episode=sample_episode, scene_at=push_scene, goal_distance=goal_distance,
                      success=push_success)


def panda_push() -> TaskCfg:
    return TaskCfg(
        name=NAME,
        robot=ROBOT,
        terms=push(SOURCE),
        description="Panda pushes a cube across a table to a goal with its closed fingers (learned from demos)",
        actor_obs=ACTOR_OBS,
        critic_obs=ACTOR_OBS,
        commands=COMMANDS,
        action=JointPositionAction(scale=0.5, clip=4.0),
        rewards=REWARDS,  # for residual fine-tuning only (module docstring)
        terminations=TerminationsCfg(),
        randomization=NO_RANDOMIZATION,
        episode_length_s=EPISODE_LENGTH_S,
        ppo=PPOCfg(),
        # A residual trained in the vectorized sim (a calibrated start) trains behind the chain's target filters,
        # as it runs deployed: without them, one trained under the push shift scored 0.20 in the vectorized env
        # and 0.0 on the robot, its targets clipped by the chain's rate and torque limits ~every tick.
        rate_limit_targets=True,
        torque_limit_targets=True,
        terrain=None,
    )
