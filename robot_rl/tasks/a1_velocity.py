"""Unitree A1 velocity tracking: follow (lin_vel_x, lin_vel_y, ang_vel_z) commands, on flat or rough ground.

Rewards, observation scales and noise follow legged_gym's A1 setup. The randomization ranges are the ones
common to the open legged-robot recipes (MuJoCo Playground's Go1 joystick, unitree_rl_gym, Isaac Lab, mjlab):
friction ×0.4–1.0, base mass −1..+3 kg, link masses ×0.9–1.1, COM ±5 cm, gains and motor strength ×0.9–1.1,
up to one step of action latency. What the sim2sim robustness suite asks beyond those recipes: pushes at random
times (every 4 s on average) from any direction up to 1 m/s, ramped in over the first ~600 iterations; each
quantity at an end of its range 30 % of the time; contact stiffness randomized, and a quarter of the envs on the
gate's elliptic friction cone. Robot facts (base height, tilt limit) come from the A1 spec.
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

# The same measurements, each but the command with its last 5 policy ticks (0.1 s), oldest first. One frame cannot
# tell a payload or weak motors apart from the nominal robot; how the joints answered the last actions can.
HISTORY_FRAMES = 5
ACTOR_OBS_HISTORY = ObservationLayout(
    terms=tuple(t if t.name == "command" else dataclasses.replace(t, history_length=HISTORY_FRAMES)
                for t in ACTOR_OBS.terms)
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
        # Without it, pushes every few seconds teach a crouch (base ~0.14 m, half the standing height): low is
        # stable, and the gate calls it a fall. Target: the spec's sim_model.base_height.
        RewardTerm("base_height", -20.0),
        RewardTerm("torques", -0.0002),
        RewardTerm("dof_acc", -2.5e-7),
        RewardTerm("action_rate", -0.01),
        RewardTerm("feet_air_time", 1.0, (("target_s", 0.5),)),  # steps longer than 0.5 s are rewarded
        RewardTerm("dof_pos_limits", -10.0),
        # The deploy chain clipped 8 % of a walking tick's targets of the first robust policy (position and
        # velocity-aware limits, rate): every clip is an intervention the gate counts.
        RewardTerm("chain_clips", -0.5),
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
    push_interval_s=4.0,
    push_max_vel_m_s=1.0,
    push_ramp_s=300.0,  # ≈ 600 iterations of 24 steps
    init_joint_pos_rad=0.05,
    init_joint_vel_rad_s=0.1,
    observation_noise=True,
    corner_probability=0.3,
    contact_timeconst_s=(0.01, 0.03),  # 2 physics steps (the stiffest MuJoCo takes) to 1.5 × its default 0.02
    stiff_contact_fraction=0.25,  # the elliptic cone costs 3.3× the pyramidal one per env step
)

# 256 envs × 24 steps = 6144 samples per iteration, sized for 2 CPU cores: the nets are smaller than legged_gym's
# 512-256-128 because on one torch thread the PPO update's cost grows with them, and a 30-minute budget
# (train --max-minutes 30) should still buy thousands of iterations (timings: benchmarks/results/RESULTS_training.md
# and RESULTS_env_throughput.md).
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
    # Half the nominal base height: where the sim2sim gate calls it a fall (GateConfig.fall_height_fraction).
    return TerminationsCfg(max_tilt_rad=spec.safety.max_tilt_rad, min_base_height_m=0.5 * spec.sim_model.base_height,
                           base_contact=True)


def a1_flat() -> TaskCfg:
    return TaskCfg(
        name="a1-flat",
        robot=ROBOT,
        terms=velocity_tracking(standing_fraction=0.1),  # learn to stand still too (and take shoves standing)
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
        # Higher than SAC's 3e-4: on the A1 sim-as-real benchmark, 1e-3 closed more of the gap within the
        # robot-transition budget, consistently across seeds (benchmarks/results/RESULTS_residual.md).
        finetune_lr=1e-3,
        terrain=None,
    )


def a1_flat_history() -> TaskCfg:
    """a1-flat with the actor's observation history, and the training the shipped a1_flat line ended with: 15 % of
    command draws turn in place, a fifth of the envs at every DR corner at once, kicks to 1.3 × the claimed range.
    It starts from an a1-flat checkpoint too (``starts_from``): ``train --resume`` widens its actor to the history so
    that it acts the same (``robot_rl.learn.history_widening``)."""
    flat = a1_flat()
    return dataclasses.replace(
        flat,
        name="a1-flat-history",
        description="A1 velocity tracking on flat ground, observation history of 5 ticks",
        terms=dataclasses.replace(flat.terms, commands=dataclasses.replace(flat.terms.commands, turn_fraction=0.15)),
        actor_obs=ACTOR_OBS_HISTORY,
        randomization=dataclasses.replace(flat.randomization, all_corners_probability=0.2, push_overshoot=1.3),
        starts_from="a1-flat",
    )


def a1_rough() -> TaskCfg:
    """a1-flat's observation, network and the training the shipped a1_flat line ended with (as a1-flat-history), on
    the terrain curriculum. The same network as a1-flat, so that a rough run can start from a walking flat policy
    (``starts_from``: train --resume takes an a1-flat checkpoint) instead of from scratch."""
    flat = a1_flat()
    # Slopes tilt the base on purpose: no orientation penalty there.
    terms = tuple(t for t in REWARDS_FLAT.terms if t.name != "orientation")
    return dataclasses.replace(
        flat,
        name="a1-rough",
        description="A1 velocity tracking on randomized heightfield terrain with a level curriculum",
        terms=dataclasses.replace(flat.terms, commands=dataclasses.replace(flat.terms.commands, turn_fraction=0.15)),
        rewards=dataclasses.replace(REWARDS_FLAT, terms=terms),
        randomization=dataclasses.replace(flat.randomization, all_corners_probability=0.2, push_overshoot=1.3),
        # A heightfield's faces are its grid's triangles: at 0.1 m a 12 cm block is a 50° ramp that a sliding foot
        # pushes up, and the policy trained on it stopped at the suite's boxes (vertical, as real steps are) from
        # 3.5 cm up; at 2 cm the block's side is 80°.
        terrain=TerrainCfg(resolution_m=0.02),
        ppo=dataclasses.replace(PPO, max_iterations=5000),
        starts_from="a1-flat",
    )


# A trot clock for the A1: 2 Hz, diagonal feet together (rewards.leg_phase_offsets), each foot's contact rewarded
# against it and its swing apex pulled to 8 cm (the toe sphere's centre; ~6 cm of clearance). A clock makes the feet
# step high and never lets the closed loop settle at a fixed point, which is how the clock-free rough line stopped at
# the suite's steps (RESULTS_robustness.md).
TROT_PERIOD_S = 0.5


def _trotting(task: TaskCfg, name: str, description: str) -> TaskCfg:
    """``task`` with the trot clock observed (actor and critic) and rewarded in place of air time."""
    terms = (
        *(t for t in task.rewards.terms if t.name != "feet_air_time"),
        RewardTerm("feet_phase_contact", 0.18, (("stance_fraction", 0.5),)),
        RewardTerm("feet_swing_height", -20.0, (("target_m", 0.08),)),
    )
    return dataclasses.replace(
        task,
        name=name,
        description=description,
        actor_obs=task.actor_obs.with_gait_clock(TROT_PERIOD_S),
        critic_obs=task.critic_obs.with_gait_clock(TROT_PERIOD_S),
        rewards=dataclasses.replace(task.rewards, terms=terms),
        starts_from=None,  # a wider input than any clock-free checkpoint: from scratch
    )


def a1_rough_trot() -> TaskCfg:
    """a1-rough trotting to the clock (a new network: trained from scratch)."""
    return _trotting(a1_rough(), "a1-rough-trot",
                     "A1 velocity tracking on the terrain curriculum, trotting to a 2 Hz gait clock")


def a1_flat_trot() -> TaskCfg:
    """a1-rough-trot on flat ground, resumed from an a1-rough-trot checkpoint (``starts_from``). Its rewards are the
    rough line's, without a1-flat's orientation penalty: with it, or trained on flat ground from scratch, the trot
    fell under the suite's 1 m/s side shoves that the rough line takes (RESULTS_robustness.md, session 28)."""
    return dataclasses.replace(
        a1_rough_trot(),
        name="a1-flat-trot",
        description="A1 velocity tracking on flat ground, trotting to a 2 Hz gait clock",
        terrain=None,
        starts_from="a1-rough-trot",  # the same observations, action and network
    )

