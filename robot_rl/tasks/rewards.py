"""Reward terms: pure functions of a batch of sim quantities, registered by name, weighted by the task.

Weights are per second of sim time and multiplied by the policy period when summed (the legged_gym
convention), so a task's weights don't change meaning when its policy rate does.

Each term's settings (a kernel's length scale, a success tolerance) live with the term the task lists
(``RewardTerm.params``, over the term's defaults), not in one config holding every kind of task's fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

Params = tuple[tuple[str, float | None], ...]


@dataclass(frozen=True)
class RewardTerm:
    name: str  # a key of REWARD_TERMS
    weight: float  # per second
    params: Params = ()  # this term's settings over its defaults (REWARD_TERMS[name].defaults)

    def __post_init__(self) -> None:
        if self.name not in REWARD_TERMS:
            raise ValueError(f"unknown reward term {self.name!r} (known: {', '.join(REWARD_TERMS)})")
        defaults = REWARD_TERMS[self.name].defaults
        unknown = [k for k, _ in self.params if k not in defaults]
        if unknown:
            raise ValueError(f"reward term {self.name!r} has no setting {unknown} (its settings: "
                             f"{', '.join(defaults) or 'none'})")

    def settings(self) -> dict[str, float | None]:
        return {**REWARD_TERMS[self.name].defaults, **dict(self.params)}

    def param(self, key: str) -> float | None:
        return self.settings()[key]


@dataclass(frozen=True)
class RewardsCfg:
    terms: tuple[RewardTerm, ...]
    soft_limit_fraction: float = 0.9  # the soft joint range (dof_pos_limits penalizes beyond this fraction)
    only_positive: bool = False  # clip the summed reward at 0 (helps early locomotion learning)

    def readers(self, field: str) -> list[str]:
        """The terms that read the optional input ``field`` (an env computes it only for them)."""
        return [t.name for t in self.terms if field in REWARD_TERMS[t.name].reads]

    def for_robot(self, base_height_m: float) -> RewardsCfg:
        """The robot's facts filled in: a base-height term without its own target holds the spec's height."""
        terms = tuple(
            replace(t, params=(*t.params, ("target_m", base_height_m)))
            if t.name == "base_height" and t.param("target_m") is None else t for t in self.terms)
        return replace(self, terms=terms)


@dataclass
class RewardInputs:
    """Everything a reward term may read, batched over N envs. Terms a robot lacks are None."""

    dt: float  # policy period
    command: np.ndarray  # (N, C)
    q: np.ndarray  # (N, J)
    dq: np.ndarray  # (N, J)
    last_dq: np.ndarray  # (N, J)
    default_q: np.ndarray  # (J,)
    q_soft_lower: np.ndarray  # (J,)
    q_soft_upper: np.ndarray  # (J,)
    torque: np.ndarray  # (N, J) actuator torque, mean over the substeps
    action: np.ndarray  # (N, A) raw policy output this step
    last_action: np.ndarray  # (N, A)
    terminated: np.ndarray  # (N,) bool, ended by a failure (not a time-out)
    base_lin_vel: np.ndarray | None = None  # (N, 3) body frame
    base_ang_vel: np.ndarray | None = None  # (N, 3) body frame
    projected_gravity: np.ndarray | None = None  # (N, 3)
    base_height: np.ndarray | None = None  # (N,) above the terrain under the base
    first_contact: np.ndarray | None = None  # (N, F) bool, foot touched down this step
    air_time: np.ndarray | None = None  # (N, F) s, length of the swing that just ended (where first_contact)
    foot_contact: np.ndarray | None = None  # (N, F) bool, the foot is on the ground (filtered as first_contact)
    foot_height: np.ndarray | None = None  # (N, F) m, each foot body's origin above the ground under it
    gait_phase: np.ndarray | None = None  # (N,) in [0, 1): the task's gait clock (TaskCfg.gait_period_s)
    ee_error: np.ndarray | None = None  # (N,) m, end effector to target
    object_pos: np.ndarray | None = None  # (N, 3) m, the pushed object's centre, base frame (command = goal x, y)
    tool_pos: np.ndarray | None = None  # (N, 3) m, the tool point, base frame
    # The largest change of the raw action per step that the deploy safety chain's target rate limit lets
    # through unmodified: spec.safety.max_target_rate_rad_s × dt / action scale (None: not provided).
    max_action_step: float | None = None
    # The raw action the rate limit measures steps from: the last one sent to the robot (rate-limited where
    # the env limits targets as the safety chain does). None: the last policy output.
    sent_action: np.ndarray | None = None
    # Where the safety chain holds this step's targets (rad, (N, joints)): its soft position limits shrunk toward
    # the way each joint moves (``robot_rl.safety.filters.velocity_aware_bounds``), and the action's scale (rad per
    # unit), for the chain_clips term (None: not provided).
    target_lower: np.ndarray | None = None
    target_upper: np.ndarray | None = None
    action_scale: float | None = None


def _sq(x: np.ndarray) -> np.ndarray:
    return np.sum(np.square(x), axis=1)


def _moving_command(i: RewardInputs) -> np.ndarray:
    return np.linalg.norm(i.command[:, :2], axis=1) > 0.1


def leg_phase_offsets(num_feet: int) -> np.ndarray:
    """(feet,): each foot's offset on the gait clock, in periods, for feet listed in left/right pairs front to back
    (the specs' order: a biped's left, right; a quadruped's FR, FL, RR, RL). The two feet of a pair are half a period
    apart, and so are consecutive pairs: a biped's walk, a quadruped's trot (diagonal feet together)."""
    k = np.arange(num_feet)
    return 0.5 * ((k + k // 2) % 2)


def leg_phases(phase: np.ndarray, num_feet: int) -> np.ndarray:
    """(N, feet): each foot's phase of the gait clock (``leg_phase_offsets``)."""
    return (phase[:, None] + leg_phase_offsets(num_feet)) % 1.0


def _object_to_goal(i: RewardInputs) -> np.ndarray:
    return np.linalg.norm(i.object_pos[:, :2] - i.command[:, :2], axis=1)


RewardFn = Callable[[RewardInputs, dict], np.ndarray]  # (inputs, the term's settings) → (N,)


@dataclass(frozen=True)
class RewardTermDef:
    compute: RewardFn
    defaults: dict = field(default_factory=dict)  # the term's settings and their defaults
    # The optional RewardInputs fields the term reads (None where the caller cannot measure them: a robot's state
    # has no foot contacts, for one; robot_rl.learn.residual.rewards drops such terms).
    reads: tuple[str, ...] = ()


def chain_clip_mask(i: RewardInputs) -> np.ndarray:
    """(N, joints) bool: the targets the safety chain's rate limit or its position and velocity-aware bounds
    (``target_lower`` / ``target_upper``, computed by the caller with the chain's own law) would move; the raw
    action decoded without its clip."""
    q_target = i.default_q + i.action_scale * i.action
    ref = i.last_action if i.sent_action is None else i.sent_action
    return (q_target < i.target_lower) | (q_target > i.target_upper) | (np.abs(i.action - ref) > i.max_action_step)


def _t(compute: RewardFn, reads: tuple[str, ...] = (), **defaults: float | None) -> RewardTermDef:
    return RewardTermDef(compute, defaults, reads)


REWARD_TERMS: dict[str, RewardTermDef] = {
    # velocity tracking (command = lin_vel_x, lin_vel_y, ang_vel_z); sigma: (m/s)² of the exp kernels
    "tracking_lin_vel": _t(lambda i, c: np.exp(-_sq(i.command[:, :2] - i.base_lin_vel[:, :2]) / c["sigma"]),
                           reads=("base_lin_vel",), sigma=0.25),
    "tracking_ang_vel": _t(lambda i, c: np.exp(-np.square(i.command[:, 2] - i.base_ang_vel[:, 2]) / c["sigma"]),
                           reads=("base_ang_vel",), sigma=0.25),
    "lin_vel_z": _t(lambda i, c: np.square(i.base_lin_vel[:, 2]), reads=("base_lin_vel",)),
    "ang_vel_xy": _t(lambda i, c: _sq(i.base_ang_vel[:, :2]), reads=("base_ang_vel",)),
    "orientation": _t(lambda i, c: _sq(i.projected_gravity[:, :2]), reads=("projected_gravity",)),
    # target_m None: the spec's sim_model.base_height (RewardsCfg.for_robot)
    "base_height": _t(lambda i, c: np.square(i.base_height - c["target_m"]), reads=("base_height",), target_m=None),
    # steps longer than target_s are rewarded, shorter ones penalized
    "feet_air_time": _t(lambda i, c: np.sum((i.air_time - c["target_s"]) * i.first_contact, axis=1)
                        * _moving_command(i), reads=("first_contact", "air_time"), target_s=0.5),
    # the gait clock's pattern (unitree_rl_gym's G1 "contact"): each foot on the ground in the first stance_fraction
    # of its phase and in the air after; pays per foot that matches, at any command (it steps in place at zero).
    "feet_phase_contact": _t(lambda i, c: np.sum(
        i.foot_contact == (leg_phases(i.gait_phase, i.foot_contact.shape[1]) < c["stance_fraction"]), axis=1
    ).astype(float), reads=("foot_contact", "gait_phase"), stance_fraction=0.55),
    # each foot in the air at target_m (its body origin: the G1's ankle, as unitree_rl_gym's feet_swing_height)
    "feet_swing_height": _t(lambda i, c: np.sum(np.square(i.foot_height - c["target_m"]) * ~i.foot_contact, axis=1),
                            reads=("foot_contact", "foot_height"), target_m=0.08),
    "stand_still": _t(lambda i, c: np.sum(np.abs(i.q - i.default_q), axis=1) * ~_moving_command(i)),
    # effort and smoothness
    "torques": _t(lambda i, c: _sq(i.torque)),
    "dof_vel": _t(lambda i, c: _sq(i.dq)),
    "dof_acc": _t(lambda i, c: _sq((i.dq - i.last_dq) / i.dt)),
    "action_rate": _t(lambda i, c: _sq(i.action - i.last_action)),
    # How far each joint's step overshoots the safety chain's rate limit, in units of that limit. A policy
    # that overshoots is rate-limited on the robot: every clip is a safety intervention the gate counts,
    # and the motion it planned is not the one executed. Trained against, it learns to ramp instead.
    "target_rate_excess": _t(lambda i, c: np.sum(np.clip(
        np.abs(i.action - (i.last_action if i.sent_action is None else i.sent_action)) - i.max_action_step, 0.0,
        None), axis=1) / i.max_action_step),
    # How many joints' targets the deploy safety chain would clip this step: outside its soft position limits
    # shrunk by the distance the joint covers in a period toward them (position and velocity-aware limits), or
    # a step over its rate limit. Each is an intervention the sim2sim gate counts; the rate excess above says how
    # far, this term how often, which is what the gate measures.
    "chain_clips": _t(lambda i, c: np.sum(chain_clip_mask(i), axis=1).astype(float)),
    "dof_pos_limits": _t(lambda i, c: np.sum(
        np.clip(i.q_soft_lower - i.q, 0.0, None) + np.clip(i.q - i.q_soft_upper, 0.0, None), axis=1
    )),
    "termination": _t(lambda i, c: i.terminated.astype(float)),
    # 1 every step: what a fall loses is the bonus it no longer collects (unitree_rl_gym's "alive")
    "alive": _t(lambda i, c: np.ones(len(i.q))),
    # reaching (command = target position in the base frame); tolerance_m: tip this close counts as success
    "reach_distance": _t(lambda i, c: i.ee_error, reads=("ee_error",)),
    "reach_kernel": _t(lambda i, c: np.exp(-np.square(i.ee_error / c["sigma_m"])), reads=("ee_error",),
                       sigma_m=0.1),
    "reach_success": _t(lambda i, c: (i.ee_error < c["tolerance_m"]).astype(float), reads=("ee_error",),
                        tolerance_m=0.02),
    # pushing an object (command = goal x, y in the base frame; distances in the table plane)
    "push_distance": _t(lambda i, c: _object_to_goal(i), reads=("object_pos",)),
    "push_kernel": _t(lambda i, c: np.exp(-np.square(_object_to_goal(i) / c["sigma_m"])), reads=("object_pos",),
                      sigma_m=0.05),
    "push_success": _t(lambda i, c: (_object_to_goal(i) < c["tolerance_m"]).astype(float), reads=("object_pos",),
                       tolerance_m=0.03),
    # shaping: the tool towards the object (a push starts with contact); in 3-D, so hovering above it is not free
    "tool_to_object": _t(lambda i, c: np.linalg.norm(i.tool_pos - i.object_pos, axis=1),
                         reads=("object_pos", "tool_pos")),
}


def soft_limits(lower: np.ndarray, upper: np.ndarray, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """The middle ``fraction`` of each joint's range."""
    mid = (lower + upper) / 2
    half = (upper - lower) / 2 * fraction
    return mid - half, mid + half


def compute_rewards(cfg: RewardsCfg, inputs: RewardInputs) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(total reward per env, each term's weighted contribution per env)."""
    total = np.zeros(len(inputs.q))
    parts: dict[str, np.ndarray] = {}
    for term in cfg.terms:
        value = REWARD_TERMS[term.name].compute(inputs, term.settings()) * (term.weight * inputs.dt)
        parts[term.name] = value
        total += value
    if cfg.only_positive:
        total = np.clip(total, 0.0, None)
    return total, parts
