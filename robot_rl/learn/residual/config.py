"""Settings of residual fine-tuning, as typed frozen dataclasses (they cross into the learner process pickled).

The command line (``robot-rl finetune``, :mod:`robot_rl.learn.residual.settings`) shows the fields a user picks per
run; the others (``Suppress``) are measured defaults there, which code may still set.

Units: the residual lives in the base policy's *raw action* space (before the contract's clip, scale and
offset). ``ResidualCfg.fraction`` bounds it to a fraction of the contract's action clip, so on the joints it
is at most ``fraction · clip · scale`` rad; e.g. the Panda reach contract (clip 4, scale 0.5) with the
default 0.1 allows ±0.2 rad around what the base commands.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Literal

import tyro
from tyro.conf import Suppress

CriticNorm = Literal["layernorm", "batchnorm"]

_CHECKS_DEFERRED = contextvars.ContextVar("residual_settings_checks_deferred", default=False)


@contextlib.contextmanager
def checks_deferred():
    """Settings built inside skip their checks until :func:`check` (the command line: tyro turns a failed check in a
    nested dataclass into a box of text; the command wants its one-line error)."""
    token = _CHECKS_DEFERRED.set(True)
    try:
        yield
    finally:
        _CHECKS_DEFERRED.reset(token)


def deferred() -> bool:
    """Inside :func:`checks_deferred`: a ``__post_init__`` returns without checking."""
    return _CHECKS_DEFERRED.get()


def check(settings) -> None:
    """Run the checks of ``settings`` and of every dataclass nested in it (ValueError naming the bad value)."""
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            check(value)
    post_init = getattr(settings, "__post_init__", None)
    if post_init is not None:
        post_init()


@dataclass(frozen=True)
class ResidualCfg:
    """The residual term: action = base(o) + α·tanh(μ(o, base(o)))."""

    fraction: float = 0.1
    """residual bound, as a fraction of the contract's action clip (raw action units), the same on every joint."""
    hidden: Suppress[tuple[int, ...]] = (256, 256)  # actor hidden layers (ReLU)
    sync_every: Suppress[int] = 10  # control ticks between polls of the learner's latest weights
    learner_timeout_s: Suppress[float] = 2.0  # no learner heartbeat for this long → the actor drives the base alone

    @staticmethod
    def state_dim(obs_dim: int, num_actions: int) -> int:
        """Width of the residual's (and its critics') input: this tick's observation ‖ base action."""
        return obs_dim + num_actions

    def __post_init__(self) -> None:
        if deferred():
            return
        if not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"residual fraction must be in (0, 1] (a share of the action clip), got {self.fraction}")
        if self.sync_every < 1:
            raise ValueError(f"residual sync_every must be ≥ 1 tick, got {self.sync_every}")
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise ValueError(f"residual hidden layers must be positive widths, got {self.hidden}")


SAC_LR = 3e-4  # SAC's usual learning rate: where neither the settings nor the task give one


@dataclass(frozen=True)
class SACCfg:
    """The off-policy learner over the residual action: soft actor-critic."""

    # critic_norm "batchnorm" is CrossQ: batch-renormalized critics without target networks, current and next
    # state-actions through one joint forward pass (on the A1 benchmark no better than the default: 0.32).

    critic_hidden: Suppress[tuple[int, ...]] = (256, 256)
    critic_norm: Suppress[CriticNorm] = "layernorm"
    num_critics: Suppress[int] = 2  # clipped double Q: the minimum over the ensemble
    gamma: Suppress[float] = 0.97
    # × every reward at update time. None: 1 / policy period (finetune fills it in), i.e. rewards per second,
    # the unit the task's reward weights are written in, so Q values and the entropy term have sane sizes.
    reward_scale: Suppress[float | None] = None
    tau: Suppress[float] = 0.005  # Polyak rate of the target critics (layernorm only; CrossQ has none)
    lr: float | None = None
    """learning rate of the residual actor, the critics and the temperature (None: the policy's task's measured
    one, TaskCfg.finetune_lr, else 3e-4; a run fills it in)."""
    alpha_lr: Suppress[float | None] = None  # the temperature's (None: ``lr``; 0: a fixed temperature)
    init_alpha: Suppress[float] = 0.05
    target_entropy_per_dim: Suppress[float] = -1.0  # SAC's usual −|A|
    batch_size: Suppress[int] = 256
    utd_ratio: Annotated[float, tyro.conf.arg(name="utd")] = 2.0
    """gradient updates per transition (update-to-data ratio)."""
    warmup_transitions: Suppress[int] = 500  # updates start once the buffer holds this many online transitions
    # Critic-only updates before the actor (and temperature) first move: the residual stays at its start until
    # the critics have fit the data, so its first steps follow a fitted Q instead of a random one's gradient.
    actor_warmup_updates: Annotated[int, tyro.conf.arg(name="actor-warmup")] = 0
    """critic-only updates before the residual first moves (fresh critics fitting a started residual's value)."""
    # × the mean squared unit residual, added to the actor's loss: pulls the residual back to 0 (the base) where
    # the critics' gradient is flat, e.g. after a missed contact, instead of letting it drift to the bound.
    residual_penalty: Suppress[float] = 0.0
    # × the mean squared distance of the deterministic unit residual from that of the actor the run started from
    # (``init_from``: a sim run, a calibrated start), added to the actor's loss: a residual that starts good stays
    # where the robot's data does not show it wrong, instead of following fresh critics' early gradients.
    anchor_penalty: float = 0.0
    """× the squared distance of the residual from the one the run started from (calibrated start, --init-from),
    in the actor's loss: keeps a good start where the robot's data does not show it wrong."""
    # The anchor's weight × the batch's mean |Q(s, π(s))| (TD3+BC's normalization, Fujimoto & Gu 2021): its pull
    # is then the same share of the actor's loss whatever the size of the returns. Unscaled, a task whose Q values
    # run to hundreds (rewards per second) outweighs an anchor of 1–10 (panda-push: the start lost by 8.5k).
    # anchor_penalty 0.4 with it is TD3+BC's α = 2.5.
    anchor_q_scaled: Suppress[bool] = False
    init_log_std: Suppress[float] = -1.0  # pre-tanh exploration noise at the start (σ ≈ 0.37)
    batchnorm_momentum: Suppress[float] = 0.01  # CrossQ's running-statistics rate

    @property
    def learning_rate(self) -> float:
        """The actor's and the critics' learning rate (``lr``, else SAC_LR)."""
        return SAC_LR if self.lr is None else self.lr

    @property
    def temperature_lr(self) -> float:
        return self.learning_rate if self.alpha_lr is None else self.alpha_lr

    def __post_init__(self) -> None:
        if deferred():
            return
        if (self.lr is not None and self.lr <= 0) or (self.alpha_lr is not None and self.alpha_lr < 0):
            raise ValueError(f"learning rates must be > 0 (the temperature's ≥ 0: 0 is a fixed temperature), got "
                             f"{self.lr} and temperature {self.alpha_lr}")
        if self.critic_norm not in ("layernorm", "batchnorm"):
            raise ValueError(f"critic_norm must be 'layernorm' or 'batchnorm', got {self.critic_norm!r}")
        if self.num_critics < 2:
            raise ValueError(f"num_critics must be ≥ 2 (clipped double Q), got {self.num_critics}")
        if self.utd_ratio <= 0:
            raise ValueError(f"utd_ratio must be > 0, got {self.utd_ratio}")
        if self.actor_warmup_updates < 0 or self.residual_penalty < 0 or self.anchor_penalty < 0:
            raise ValueError(f"actor_warmup_updates, residual_penalty and anchor_penalty must be ≥ 0, got "
                             f"{self.actor_warmup_updates}, {self.residual_penalty} and {self.anchor_penalty}")
        if not 0.0 < self.gamma < 1.0:
            raise ValueError(f"gamma must be in (0, 1), got {self.gamma}")


def finetune_lr(task) -> float:
    """The learning rate a residual run uses on ``task`` unless told otherwise: the task's measured one
    (``TaskCfg.finetune_lr``), else SAC's default."""
    return task.finetune_lr if task.finetune_lr is not None else SAC_LR


@dataclass(frozen=True)
class ReplayCfg:
    capacity: Suppress[int] = 200_000
    n_step: Suppress[int] = 3
    prior_fraction: Suppress[float] = 0.5  # share of each batch drawn from the prior data (RLPD: 0.5), if any
    prior_path: Suppress[str | None] = None  # an .npz of transitions (a previous run's buffer, demos, sim rollouts)

    def __post_init__(self) -> None:
        if deferred():
            return
        if self.n_step < 1:
            raise ValueError(f"n_step must be ≥ 1, got {self.n_step}")
        if not 0.0 <= self.prior_fraction < 1.0:
            raise ValueError(f"prior_fraction must be in [0, 1), got {self.prior_fraction}")


@dataclass(frozen=True)
class LearnerCfg:
    """What the learner process needs: network shapes, the learner, the buffer, where to save."""

    state_dim: int  # residual input: observation + base action
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
