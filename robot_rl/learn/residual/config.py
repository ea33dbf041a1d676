"""Settings of residual fine-tuning, as typed frozen dataclasses (they cross into the learner process pickled).

Units: the residual lives in the base policy's *raw action* space (before the contract's clip, scale and
offset). ``ResidualCfg.fraction`` bounds it to a fraction of the contract's action clip, so on the joints it
is at most ``fraction · clip · scale`` rad; e.g. the Panda reach contract (clip 4, scale 0.5) with the
default 0.1 allows ±0.2 rad around what the base commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

CriticNorm = Literal["layernorm", "batchnorm"]
Algorithm = Literal["sac", "td3"]


@dataclass(frozen=True)
class ResidualCfg:
    """The residual term: action = base(o) + α·tanh(μ(o, base(o)))."""

    fraction: float = 0.1  # α = fraction · contract action clip (raw action units), the same on every joint
    hidden: tuple[int, ...] = (256, 256)  # actor hidden layers (ReLU)
    # Frames (observation ‖ base action) the residual and its critics see, newest first. 1: this tick's alone.
    # More: the recent past too, where a shifted robot shows itself (an actuator latency makes the last
    # observation non-Markov; soft gains or a payload show in how the joints followed the last targets).
    history: int = 1
    sync_every: int = 10  # control ticks between polls of the learner's latest weights
    learner_timeout_s: float = 2.0  # no learner heartbeat for this long → the actor drives the base alone
    # The transition records the residual the safety chain let through (the target it sent, read back as a unit
    # residual) where the chain changed the proposed one, instead of the residual the actor sampled: the critics
    # then learn the value of what the robot did. Where the chain's rate limit is tight against the exploration
    # (the Panda: 0.08 action units a tick against the residual's ±0.3 noise), a sampled action is most of the time
    # not what happened.
    learn_sent: bool = False

    def state_dim(self, obs_dim: int, num_actions: int) -> int:
        """Width of the residual's (and its critics') input: ``history`` frames of observation ‖ base action."""
        return self.history * (obs_dim + num_actions)

    def __post_init__(self) -> None:
        if not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"residual fraction must be in (0, 1] (a share of the action clip), got {self.fraction}")
        if self.sync_every < 1:
            raise ValueError(f"residual sync_every must be ≥ 1 tick, got {self.sync_every}")
        if self.history < 1:
            raise ValueError(f"residual history must be ≥ 1 frame, got {self.history}")
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise ValueError(f"residual hidden layers must be positive widths, got {self.hidden}")


@dataclass(frozen=True)
class SACCfg:
    """The off-policy learner over the residual action: soft actor-critic (``algorithm="sac"``, the default) or
    TD3 (``"td3"``: a deterministic residual with fixed exploration noise, target-policy smoothing and delayed
    actor updates; the same critics, buffer and n-step returns). ``critic_norm="batchnorm"`` is CrossQ:
    batch-renormalized critics without target networks, current and next state-actions through one joint
    forward pass."""

    algorithm: Algorithm = "sac"
    critic_hidden: tuple[int, ...] = (256, 256)
    critic_norm: CriticNorm = "layernorm"
    num_critics: int = 2  # clipped double Q: the minimum over the ensemble
    critic_dropout: float = 0.0  # > 0: DroQ (0.01 there), for high utd_ratio; targets and the actor see it too
    gamma: float = 0.97
    # × every reward at update time. None: 1 / policy period (finetune fills it in), i.e. rewards per second,
    # the unit the task's reward weights are written in, so Q values and the entropy term have sane sizes.
    reward_scale: float | None = None
    tau: float = 0.005  # Polyak rate of the target critics (layernorm only; CrossQ has none)
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    alpha_lr: float = 3e-4
    init_alpha: float = 0.05
    target_entropy_per_dim: float = -1.0  # SAC's usual −|A|
    batch_size: int = 256
    utd_ratio: float = 2.0  # gradient updates per transition received
    actor_delay: int | None = None  # actor (and temperature) update every this many critic updates (None: SAC 1, TD3 2)
    warmup_transitions: int = 500  # updates start once the buffer holds this many online transitions
    # Critic-only updates before the actor (and temperature) first move: the residual stays at its start until
    # the critics have fit the data, so its first steps follow a fitted Q instead of a random one's gradient.
    actor_warmup_updates: int = 0
    # × the mean squared unit residual, added to the actor's loss: pulls the residual back to 0 (the base) where
    # the critics' gradient is flat, e.g. after a missed contact, instead of letting it drift to the bound.
    residual_penalty: float = 0.0
    # × the mean squared distance of the deterministic unit residual from that of the actor the run started from
    # (``init_from``: a sim run, a calibrated start), added to the actor's loss: a residual that starts good stays
    # where the robot's data does not show it wrong, instead of following fresh critics' early gradients.
    anchor_penalty: float = 0.0
    # The anchor's weight × the batch's mean |Q(s, π(s))| (TD3+BC's normalization, Fujimoto & Gu 2021): its pull
    # is then the same share of the actor's loss whatever the size of the returns. Unscaled, a task whose Q values
    # run to hundreds (rewards per second) outweighs an anchor of 1–10 (panda-push: the start lost by 8.5k).
    # anchor_penalty 0.4 with it is TD3+BC's α = 2.5.
    anchor_q_scaled: bool = False
    # > 0: also keep an exponential moving average of the actor's weights (this rate per actor update) and export
    # it next to the last iterate (policy_residual_ema.onnx): SAC's last iterate can drop late in a run.
    actor_ema_rate: float = 0.0
    init_log_std: float = -1.0  # pre-tanh exploration noise at the start (σ ≈ 0.37)
    batchnorm_momentum: float = 0.01  # CrossQ's running-statistics rate
    # TD3 only. Noise is pre-tanh, where SAC's lives, so the loop's actor explores both the same way:
    # r = tanh(μ + σ·ε). 0.2 ≈ 0.2 of the bound around r = 0 and less near it, where tanh flattens.
    explore_std: float = 0.2  # σ of the loop's exploration (kept in the actor's log σ head, frozen)
    target_noise: float = 0.2  # σ of the smoothing noise on the target action a' (TD3's 0.2)
    target_noise_clip: float = 0.5  # that noise clipped to ± this (TD3's 0.5)

    def __post_init__(self) -> None:
        if min(self.actor_lr, self.critic_lr) <= 0 or self.alpha_lr < 0:  # alpha_lr 0: a fixed temperature
            raise ValueError(f"learning rates must be > 0 (the temperature's ≥ 0), got actor {self.actor_lr}, critic "
                             f"{self.critic_lr}, temperature {self.alpha_lr}")
        if self.critic_norm not in ("layernorm", "batchnorm"):
            raise ValueError(f"critic_norm must be 'layernorm' or 'batchnorm', got {self.critic_norm!r}")
        if not 0.0 <= self.critic_dropout < 1.0:
            raise ValueError(f"critic_dropout must be in [0, 1), got {self.critic_dropout}")
        if self.num_critics < 2:
            raise ValueError(f"num_critics must be ≥ 2 (clipped double Q), got {self.num_critics}")
        if self.utd_ratio <= 0:
            raise ValueError(f"utd_ratio must be > 0, got {self.utd_ratio}")
        if not 0.0 <= self.actor_ema_rate < 1.0:
            raise ValueError(f"actor_ema_rate must be in [0, 1), got {self.actor_ema_rate}")
        if self.actor_warmup_updates < 0 or self.residual_penalty < 0 or self.anchor_penalty < 0:
            raise ValueError(f"actor_warmup_updates, residual_penalty and anchor_penalty must be ≥ 0, got "
                             f"{self.actor_warmup_updates}, {self.residual_penalty} and {self.anchor_penalty}")
        if not 0.0 < self.gamma < 1.0:
            raise ValueError(f"gamma must be in (0, 1), got {self.gamma}")
        if self.algorithm not in ("sac", "td3"):
            raise ValueError(f"algorithm must be 'sac' or 'td3', got {self.algorithm!r}")
        if self.actor_delay is not None and self.actor_delay < 1:
            raise ValueError(f"actor_delay must be ≥ 1 update, got {self.actor_delay}")
        if self.explore_std <= 0 or self.target_noise < 0 or self.target_noise_clip < 0:
            raise ValueError(f"TD3 noise must be explore_std > 0, target_noise ≥ 0 and target_noise_clip ≥ 0, got "
                             f"{self.explore_std}, {self.target_noise} and {self.target_noise_clip}")

    @property
    def actor_period(self) -> int:
        """Critic updates per actor update: ``actor_delay``, else each algorithm's usual (SAC 1, TD3 2)."""
        if self.actor_delay is not None:
            return self.actor_delay
        return 2 if self.algorithm == "td3" else 1


def finetune_lr(task) -> float:
    """The learning rate a residual run uses on ``task`` unless told otherwise: the task's measured one
    (``TaskCfg.finetune_lr``), else SAC's default."""
    return task.finetune_lr if task.finetune_lr is not None else SACCfg.actor_lr


@dataclass(frozen=True)
class ReplayCfg:
    capacity: int = 200_000
    n_step: int = 3
    prior_fraction: float = 0.5  # share of each batch drawn from the prior data (RLPD: 0.5), when there is any
    prior_path: str | None = None  # an .npz of transitions (a previous run's buffer, demos, sim rollouts)

    def __post_init__(self) -> None:
        if self.n_step < 1:
            raise ValueError(f"n_step must be ≥ 1, got {self.n_step}")
        if not 0.0 <= self.prior_fraction < 1.0:
            raise ValueError(f"prior_fraction must be in [0, 1), got {self.prior_fraction}")


@dataclass(frozen=True)
class LearnerCfg:
    """What the learner process needs: network shapes, the algorithm, the buffer, where to save."""

    state_dim: int  # residual input: history × (observation + base action)
    action_dim: int
    residual: ResidualCfg = field(default_factory=ResidualCfg)
    sac: SACCfg = field(default_factory=SACCfg)
    replay: ReplayCfg = field(default_factory=ReplayCfg)
    run_dir: str | None = None  # checkpoints and the buffer go here
    checkpoint_every_updates: int = 5000
    resume_from: str | None = None  # a checkpoint.pt written by a previous learner: continue it (buffer, counts)
    init_from: str | None = None  # a checkpoint.pt whose networks start this run (e.g. a run in sim); nothing else
    seed: int = 0
    torch_threads: int = 1
    publish_every_updates: int = 20  # learner → actor weight publication period, in updates
