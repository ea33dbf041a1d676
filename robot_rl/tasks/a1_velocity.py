"""Unitree A1 velocity tracking: follow (lin_vel_x, lin_vel_y, ang_vel_z) commands, on flat or rough ground.

Rewards, observation scales and noise follow legged_gym's A1 setup; ranges of the randomization follow
the anchors collected in REFERENCE.md. Robot facts (base height, tilt limit) come from the A1 spec.
"""

from __future__ import annotations

import dataclasses

from robot_rl.robots.spec import load_robot
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm
from robot_rl.tasks.randomization import RandomizationCfg
from robot_rl.tasks.rewards import RewardsCfg, RewardTerm
from robot_rl.tasks.task import PPOCfg, TaskCfg, TerminationsCfg
from robot_rl.tasks.terms import velocity_tracking
from robot_rl.tasks.terrain import TerrainCfg

ROBOT = "a1"

# What the real A1 measures: IMU gyro and orientation, joint encoders, plus the command and its own last
# action. Noise is uniform, in each term's own units (rad/s, unit vector, rad, rad/s).
ACTOR_OBS = ObservationLayout(
    terms=(
        ObsTerm("base_ang_vel", scale=0.25, noise=0.2),
        ObsTerm("projected_gravity", noise=0.05),
        ObsTerm("command"),
        ObsTerm("joint_pos_rel", noise=0.01),
        ObsTerm("joint_vel", scale=0.05, noise=1.5),
        ObsTerm("last_action"),
    )
)

# The critic also gets the base linear velocity, which only the simulator knows exactly, and noise-free
# versions of the actor's terms.
CRITIC_OBS = ObservationLayout(
    terms=(
        ObsTerm("base_lin_vel", scale=2.0),
        ObsTerm("base_ang_vel", scale=0.25),
        ObsTerm("projected_gravity"),
        ObsTerm("command"),
        ObsTerm("joint_pos_rel"),
        ObsTerm("joint_vel", scale=0.05),
        ObsTerm("last_action"),
    )
)

COMMANDS = CommandSpec(
    names=("lin_vel_x", "lin_vel_y", "ang_vel_z"),
    ranges=((-1.0, 1.0), (-0.6, 0.6), (-1.0, 1.0)),
)

TRACKING_SIGMA = 0.25  # (m/s)² of the velocity-tracking exp kernels

REWARDS_FLAT = RewardsCfg(
    terms=(
        RewardTerm("tracking_lin_vel", 1.0, (("sigma", TRACKING_SIGMA),)),
        RewardTerm("tracking_ang_vel", 0.5, (("sigma", TRACKING_SIGMA),)),
        RewardTerm("lin_vel_z", -2.0),
        RewardTerm("ang_vel_xy", -0.05),
        RewardTerm("orientation", -1.0),
        RewardTerm("torques", -0.0002),
        RewardTerm("dof_acc", -2.5e-7),
        RewardTerm("action_rate", -0.01),
        RewardTerm("feet_air_time", 1.0, (("target_s", 0.5),)),  # steps longer than 0.5 s are rewarded
        RewardTerm("dof_pos_limits", -10.0),
    ),
    only_positive=True,
)

RANDOMIZATION = RandomizationCfg(
    friction_scale=(0.4, 1.0),
    base_mass_add_kg=(-1.0, 3.0),
    link_mass_scale=(0.9, 1.1),
    com_offset_m=0.05,
    kp_scale=(0.9, 1.1),
    kd_scale=(0.9, 1.1),
    motor_strength=(0.9, 1.1),
    action_latency_steps=(0, 1),
    push_interval_s=15.0,
    push_max_vel_m_s=1.0,
    init_joint_pos_rad=0.05,
    init_joint_vel_rad_s=0.1,
    observation_noise=True,
)

# 256 envs × 24 steps = 6144 samples per iteration. On 2 cores, collecting them takes ~0.8 s while the robots
# still fall (contacts make physics ~2× dearer) and ~0.4 s once they stand; the PPO update takes 0.19 s with
# 128-64-32 nets (0.43 s with 256-128-64, 0.98 s with legged_gym's 512-256-128, measured on one torch
# thread). A 30-minute budget (train --max-minutes 30) thus buys ~2000–3000 iterations, 12–18 M steps.
PPO = PPOCfg(
    num_envs=256,
    num_steps_per_env=24,
    max_iterations=3000,
    num_learning_epochs=5,
    num_mini_batches=4,
    learning_rate=1e-3,
    schedule="adaptive",
    desired_kl=0.01,
    entropy_coef=0.01,
    gamma=0.99,
    lam=0.95,
    actor_hidden_dims=(128, 64, 32),
    critic_hidden_dims=(128, 64, 32),
)


def _terminations() -> TerminationsCfg:
    spec = load_robot(ROBOT)
    return TerminationsCfg(max_tilt_rad=spec.safety.max_tilt_rad, min_base_height_m=0.12, base_contact=True)


def a1_flat() -> TaskCfg:
    return TaskCfg(
        name="a1-flat",
        robot=ROBOT,
        terms=velocity_tracking(standing_fraction=0.05),  # learn to stand still too
        description="A1 velocity tracking on flat ground",
        actor_obs=ACTOR_OBS,
        critic_obs=CRITIC_OBS,
        commands=COMMANDS,
        action=JointPositionAction(scale=0.25, clip=5.0),
        rewards=REWARDS_FLAT,
        terminations=_terminations(),
        randomization=RANDOMIZATION,
        episode_length_s=20.0,
        command_resample_s=10.0,
        ppo=PPO,
        # benchmarks/RESULTS_residual.md (A1 variants): 1e-3 recovered 0.41–0.57 of a kp ×0.7 / +4 kg / latency /
        # friction gap in 20k transitions over four seeds, the default 3e-4 0.07–0.50 (32 commands each).
        finetune_lr=1e-3,
        terrain=None,
    )


def a1_rough() -> TaskCfg:
    flat = a1_flat()
    # Slopes tilt the base on purpose: no orientation penalty there.
    terms = tuple(t for t in REWARDS_FLAT.terms if t.name != "orientation")
    return dataclasses.replace(
        flat,
        name="a1-rough",
        description="A1 velocity tracking on randomized heightfield terrain with a level curriculum",
        rewards=dataclasses.replace(REWARDS_FLAT, terms=terms),
        terrain=TerrainCfg(),
        # Terrain takes more capacity and more samples than flat ground.
        ppo=dataclasses.replace(PPO, max_iterations=5000, actor_hidden_dims=(256, 128, 64),
                                critic_hidden_dims=(256, 128, 64)),
    )
