"""Franka Panda reach: move the tool point to a random target given in the base frame.

The command is the target (x, y, z) in the base frame; actions are joint position targets around the
ready pose. Success is the tip within 2 cm of the target at the end of the episode.
"""

from __future__ import annotations

from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm
from robot_rl.tasks.randomization import RandomizationCfg
from robot_rl.tasks.rewards import RewardsCfg, RewardTerm
from robot_rl.tasks.task import PPOCfg, TaskCfg, TerminationsCfg
from robot_rl.tasks.terms import reach

ROBOT = "panda"

ACTOR_OBS = ObservationLayout(
    terms=(
        ObsTerm("joint_pos_rel", noise=0.005),
        ObsTerm("joint_vel", scale=0.2, noise=0.05),
        ObsTerm("command"),
        ObsTerm("last_action"),
    )
)
CRITIC_OBS = ObservationLayout(
    terms=(
        ObsTerm("joint_pos_rel"),
        ObsTerm("joint_vel", scale=0.2),
        ObsTerm("command"),
        ObsTerm("last_action"),
    )
)

# A box in front of the robot, inside the Panda's reach from its ready pose.
COMMANDS = CommandSpec(
    names=("target_x", "target_y", "target_z"),
    ranges=((0.3, 0.65), (-0.35, 0.35), (0.15, 0.65)),
)

SUCCESS_RADIUS_M = 0.02  # the tip this close to the target at the episode's end: success

REWARDS = RewardsCfg(
    terms=(
        RewardTerm("reach_distance", -2.0),
        RewardTerm("reach_kernel", 1.0, (("sigma_m", 0.1),)),
        RewardTerm("reach_success", 1.0, (("tolerance_m", SUCCESS_RADIUS_M),)),
        RewardTerm("action_rate", -0.05),
        RewardTerm("dof_vel", -0.005),
    ),
)

RANDOMIZATION = RandomizationCfg(
    link_mass_scale=(0.9, 1.1),
    kp_scale=(0.9, 1.1),
    kd_scale=(0.9, 1.1),
    action_latency_steps=(0, 1),
    init_joint_pos_rad=0.1,
    init_joint_vel_rad_s=0.0,
    observation_noise=True,
)


def panda_reach() -> TaskCfg:
    return TaskCfg(
        name="panda-reach",
        robot=ROBOT,
        terms=reach(SUCCESS_RADIUS_M),
        description="Panda end effector to random targets in the base frame",
        actor_obs=ACTOR_OBS,
        critic_obs=CRITIC_OBS,
        commands=COMMANDS,
        action=JointPositionAction(scale=0.5, clip=4.0),
        rewards=REWARDS,
        terminations=TerminationsCfg(),
        randomization=RANDOMIZATION,
        episode_length_s=4.0,
        command_resample_s=None,
        # The policy steps its targets inside the safety chain's rate and torque limits
        # (robot_rl.learn.chain_projected): unprojected, it jumps them and the chain clips 17–50 % of its ticks.
        ppo=PPOCfg(num_envs=128, num_steps_per_env=24, max_iterations=500, chain_projected_actor=True),
        terrain=None,
    )
