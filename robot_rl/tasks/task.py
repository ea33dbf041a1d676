"""A task: what the robot is asked to do in sim, and how it is trained.

``TaskCfg`` gathers everything about a task in one frozen value: the robot (by spec name), the actor's
and the critic's observations, the commands, the action decoding, rewards, terminations, randomization
ranges, terrain, episode length and PPO hyper-parameters, and its terms (``robot_rl.tasks.terms``: what its
kind adds — command sampling, task-side reward inputs, episode metrics, an object it observes, its gate), which
the env, the residual episodes and the gate run without asking which task it is. The policy contract is built
from ``(spec, actor_obs, commands, action)``; the rest only matters in training.

The actor sees only what the real robot measures. The critic (asymmetric actor-critic) may also see
quantities only a simulator knows, such as the base linear velocity; it is dropped at export.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.mirror import check_mirrorable
from robot_rl.tasks.observations import ObservationLayout
from robot_rl.tasks.randomization import RandomizationCfg
from robot_rl.tasks.rewards import RewardsCfg
from robot_rl.tasks.terms import TaskTerms
from robot_rl.tasks.terrain import TerrainCfg

# Observation terms a real robot of each kind measures. The actor may use no others. ``object_pos`` is
# measured on hardware by a perception source (camera tracker, mocap): the task's observation source.
# ``gait_phase`` is the runtime's own clock (the contract carries its period).
MEASURED_TERMS = frozenset(
    {"base_ang_vel", "projected_gravity", "command", "joint_pos_rel", "joint_vel", "last_action", "object_pos",
     "gait_phase"}
)


@dataclass(frozen=True)
class TerminationsCfg:
    max_tilt_rad: float | None = None  # base tilt from upright ends the episode (a fall)
    min_base_height_m: float | None = None  # base this close to the terrain ends the episode
    base_contact: bool = False  # the base body touching anything ends the episode


@dataclass(frozen=True)
class PPOCfg:
    """rsl_rl PPO and runner settings. Sized for a 2-core CPU: small nets, a few hundred envs."""

    num_envs: int = 256
    num_steps_per_env: int = 24
    max_iterations: int = 1500
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    learning_rate: float = 1e-3
    schedule: Literal["adaptive", "fixed"] = "adaptive"
    desired_kl: float = 0.01
    entropy_coef: float = 0.01
    gamma: float = 0.99
    lam: float = 0.95
    clip_param: float = 0.2
    value_loss_coef: float = 1.0
    max_grad_norm: float = 1.0
    actor_hidden_dims: tuple[int, ...] = (256, 128, 64)
    critic_hidden_dims: tuple[int, ...] = (256, 128, 64)
    activation: str = "elu"
    init_noise_std: float = 1.0
    save_interval: int = 50  # iterations between checkpoints
    # The policy's output projected onto what the deploy safety chain passes unchanged (rate, torque, clip), in the
    # exported graph and in play; PPO trains the MLP under it unprojected (robot_rl.learn.chain_projected says
    # why). The actor must observe joint_pos_rel, joint_vel and last_action.
    chain_projected_actor: bool = False
    # Left-right symmetry augmentation (rsl_rl's Symmetry extension): every mini-batch also holds its mirror image
    # (robot_rl.tasks.mirror: observations and actions reflected through the sagittal plane), so the policy and the
    # value learn from both sides of every state; legged velocity tasks only (the mirror must know every term).
    symmetry_augmentation: bool = False


@dataclass(frozen=True)
class TaskCfg:
    name: str
    robot: str  # spec name (hardware/robots/<robot>.yaml)
    terms: TaskTerms  # what the kind of task adds: commands, reward inputs, metrics, its object (tasks.terms)
    actor_obs: ObservationLayout
    critic_obs: ObservationLayout
    commands: CommandSpec
    action: JointPositionAction
    rewards: RewardsCfg
    terminations: TerminationsCfg
    randomization: RandomizationCfg
    episode_length_s: float
    ppo: PPOCfg
    terrain: TerrainCfg | None = None  # None: flat ground (or no ground, for an arm)
    command_resample_s: float | None = None  # None: one command per episode
    # Train behind the deploy safety chain's target rate limit (spec.safety.max_target_rate_rad_s): the env
    # moves each target at most that far per step from the last one sent, as the chain does on the robot.
    # Without it a policy that jumps pays for one step in training but is clipped for many ticks deployed.
    rate_limit_targets: bool = False
    # Train behind the chain's torque limit too: each target pulled in so the PD torque the chain estimates
    # (commanded gains × the spec's measured actuator scales) stays within the effort limits. On a robot weaker
    # than the chain believes (a shifted kp) it over-estimates the torque and clips targets the motor could have
    # followed; a residual that learns to lead the targets further must learn it behind that clip, as deployed.
    torque_limit_targets: bool = False
    # Residual fine-tuning (``robot-rl finetune``): the learning rate measured best for this task's residual;
    # None: the learner's default (SACCfg). A task fact like its PPO settings, not a robot fact.
    finetune_lr: float | None = None
    description: str = ""
    # A task whose checkpoints ``train --resume`` may continue under this one (same robot, observations, action and
    # networks: :func:`resume_mismatches`), as a rough-terrain task starts from a walking flat policy.
    starts_from: str | None = None

    def __post_init__(self) -> None:
        privileged = [t.name for t in self.actor_obs.terms if t.name not in MEASURED_TERMS]
        if privileged:
            raise ValueError(
                f"task {self.name!r}: the actor observes {privileged}, which a real robot does not measure; "
                "give such terms to the critic only"
            )
        periods = {self.actor_obs.gait_period_s, self.critic_obs.gait_period_s} - {None}
        if len(periods) > 1 or (periods and self.actor_obs.gait_period_s is None):
            raise ValueError(f"task {self.name!r}: the actor's gait clock ({self.actor_obs.gait_period_s} s) and the "
                             f"critic's ({self.critic_obs.gait_period_s} s) differ: one clock runs the episode")
        unclocked = self.rewards.readers("gait_phase")
        if unclocked and self.gait_period_s is None:
            raise ValueError(f"task {self.name!r}: reward terms {unclocked} read the gait clock, which the task does "
                             "not have (its actor observation's gait_period_s)")
        if self.episode_length_s <= 0:
            raise ValueError(f"task {self.name!r}: episode_length_s must be positive")
        if self.ppo.symmetry_augmentation:
            check_mirrorable(self.name, {"actor": self.actor_obs, "critic": self.critic_obs}, self.commands)
        problem = self.terms.commands.check(self.commands)
        if problem:
            raise ValueError(f"task {self.name!r}: {self.terms.name} {problem}")

    @property
    def gait_period_s(self) -> float | None:
        """The gait clock's period (the actor observes its phase; the phase-contact reward reads it); None: none."""
        return self.actor_obs.gait_period_s

    @property
    def objective(self) -> str:
        """The kind of task (its terms' name): a label for logs and per-kind settings tables, not a switch."""
        return self.terms.name


def resume_mismatches(task: TaskCfg, start: TaskCfg) -> list[str]:
    """What keeps a checkpoint of ``start`` from resuming under ``task`` (empty: it fits): the robot, the critic's
    observation, the command names, the action and the networks must be the same, and the actor's observation the
    same or ``start``'s with more past frames (the checkpoint is widened: :func:`actor_history_added`)."""
    fits = {"robot": task.robot == start.robot, "actor observation": task.actor_obs.extends_history_of(start.actor_obs),
            "critic observation": task.critic_obs == start.critic_obs,
            "commands": task.commands.names == start.commands.names, "action": task.action == start.action,
            "actor network": (task.ppo.actor_hidden_dims, task.ppo.activation) == (start.ppo.actor_hidden_dims,
                                                                                   start.ppo.activation),
            "critic network": task.ppo.critic_hidden_dims == start.ppo.critic_hidden_dims}
    return [name for name, fit in fits.items() if not fit]


def actor_history_added(task: TaskCfg, start: TaskCfg) -> bool:
    """Whether a checkpoint of ``start`` resumes under ``task`` only once its actor takes ``task``'s longer history."""
    return task.actor_obs != start.actor_obs and task.actor_obs.extends_history_of(start.actor_obs)
