"""Torch twins of the vectorized env's numpy terms, for the warp backend (``robot_rl.sim.warp_vec_env``): the
rotation helpers, the observation builder, the reward terms, the feet's air time, the action delay and the
velocity-tracking metric, computed on the device's tensors.

Each twin computes what its numpy original computes (``robot_rl.sim.env_math``, ``robot_rl.tasks.observations``,
``robot_rl.tasks.rewards``, ``robot_rl.sim.feet``, ``robot_rl.sim.randomization``, ``robot_rl.tasks.terms``), so a
policy sees the same observation layout and is trained on the same rewards on either backend;
``tests/sim/test_torch_terms.py`` checks every twin against its original on the same inputs. The task's
settings (term lists, scales, weights) are read from the task: only the arithmetic is written twice.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from robot_rl.sim.feet import CONTACT_FORCE_N
from robot_rl.tasks.observations import OBS_TERMS, ObservationLayout, ObsInputs
from robot_rl.tasks.rewards import RewardInputs, RewardsCfg, leg_phase_offsets

Tensor = torch.Tensor


# ---------------------------------------------------------------------------------------------------------
# Rotations (quaternions w, x, y, z)


def quat_rotate_inverse(quat: Tensor, vec: Tensor) -> Tensor:
    w, u = quat[:, :1], quat[:, 1:]
    return vec * (2.0 * w * w - 1.0) - 2.0 * w * torch.linalg.cross(u, vec) + 2.0 * u * (u * vec).sum(1, keepdim=True)


def projected_gravity(quat: Tensor) -> Tensor:
    w, x, y, z = quat.unbind(1)
    return torch.stack([-2.0 * (x * z - w * y), -2.0 * (y * z + w * x), -(1.0 - 2.0 * (x * x + y * y))], dim=1)


def tilt_angle(gravity_in_base: Tensor) -> Tensor:
    return torch.arccos(torch.clamp(-gravity_in_base[:, 2], -1.0, 1.0))


def yaw_quat(yaw: Tensor) -> Tensor:
    zero = torch.zeros_like(yaw)
    return torch.stack([torch.cos(yaw / 2), zero, zero, torch.sin(yaw / 2)], dim=1)


def quat_mul(a: Tensor, b: Tensor) -> Tensor:
    """Hamilton product of (N, 4) and (N, 4) or (4,)."""
    w1, x1, y1, z1 = a.unbind(-1)
    w2, x2, y2, z2 = b.unbind(-1)
    return torch.stack([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2], dim=-1)


# ---------------------------------------------------------------------------------------------------------
# Observations


def _lin_vel(i: ObsInputs) -> Tensor:
    if i.base_lin_vel is None:
        raise ValueError("observation term 'base_lin_vel' needs the base linear velocity (a floating base)")
    return i.base_lin_vel


# The same names as OBS_TERMS (the builder takes widths from there); tensors in, tensors out.
TORCH_OBS_TERMS: dict[str, Callable[[ObsInputs], Tensor]] = {
    "base_lin_vel": _lin_vel,
    "base_ang_vel": lambda i: i.base_ang_vel,
    "projected_gravity": lambda i: projected_gravity(i.base_quat),
    "command": lambda i: i.command,
    "joint_pos_rel": lambda i: i.q - i.default_q,
    "joint_vel": lambda i: i.dq,
    "last_action": lambda i: i.last_action,
    "gait_phase": lambda i: torch.stack([torch.sin(2 * torch.pi * i.gait_phase),
                                         torch.cos(2 * torch.pi * i.gait_phase)], dim=1),
}


class TorchObservationBuilder:
    """``ObservationBuilder`` on tensors: each term's frame scaled, clipped, noised (uniform ±noise in the term's
    units, before scaling, as the numpy builder), kept in a term-major history; float32 out."""

    def __init__(self, layout: ObservationLayout, num_envs: int, num_joints: int, num_commands: int,
                 num_actions: int, *, device: torch.device, generator: torch.Generator | None = None,
                 noise: bool = False):
        for term in layout.terms:
            if term.name not in TORCH_OBS_TERMS:
                raise ValueError(f"observation term {term.name!r} has no torch twin (torch terms: "
                                 f"{', '.join(TORCH_OBS_TERMS)})")
        assert set(TORCH_OBS_TERMS) <= set(OBS_TERMS)
        self.layout = layout
        self.sizes = layout.term_sizes(num_joints, num_commands, num_actions)
        self.dim = layout.size(num_joints, num_commands, num_actions)
        self.noise = noise
        self.generator = generator
        self._history = [torch.zeros(num_envs, t.history_length, s, device=device)
                         for t, s in zip(layout.terms, self.sizes, strict=True)]
        self._fresh = torch.ones(num_envs, dtype=torch.bool, device=device)

    def reset(self, env_ids: Tensor | None = None) -> None:
        if env_ids is None:
            self._fresh[:] = True
        else:
            self._fresh[env_ids] = True

    def compute(self, inputs: ObsInputs) -> Tensor:
        out = []
        fresh = self._fresh[:, None, None]
        for term, hist in zip(self.layout.terms, self._history, strict=True):
            frame = TORCH_OBS_TERMS[term.name](inputs).to(hist.dtype).expand(hist.shape[0], -1)
            if self.noise and term.noise > 0.0:
                unit = torch.rand(frame.shape, device=frame.device, generator=self.generator) * 2 - 1
                frame = frame + unit * term.noise
            frame = frame * term.scale
            if term.clip is not None:
                frame = frame.clamp(-term.clip, term.clip)
            shifted = torch.cat([hist[:, 1:], frame[:, None]], dim=1)
            hist.copy_(torch.where(fresh, frame[:, None].expand_as(hist), shifted))
            out.append(hist.flatten(1))
        self._fresh[:] = False
        return torch.cat(out, dim=1).to(torch.float32)


# ---------------------------------------------------------------------------------------------------------
# Rewards


def _sq(x: Tensor) -> Tensor:
    return (x * x).sum(1)


def _moving(i: RewardInputs) -> Tensor:
    return torch.linalg.norm(i.command[:, :2], dim=1) > 0.1


def _leg_phases(phase: Tensor, num_feet: int) -> Tensor:
    """``robot_rl.tasks.rewards.leg_phases`` on tensors (the offsets are that module's)."""
    offsets = torch.as_tensor(leg_phase_offsets(num_feet), dtype=phase.dtype, device=phase.device)
    return (phase[:, None] + offsets) % 1.0


def _rate_excess(i: RewardInputs, c: dict) -> Tensor:
    ref = i.last_action if i.sent_action is None else i.sent_action
    return torch.clamp((i.action - ref).abs() - i.max_action_step, min=0.0).sum(1) / i.max_action_step


def velocity_aware_bounds(dq: Tensor, lower: Tensor, upper: Tensor, dt: float) -> tuple[Tensor, Tensor]:
    """``robot_rl.safety.filters.velocity_aware_bounds`` on the device, given the position bounds."""
    lo = torch.minimum(lower - torch.clamp(dq, max=0.0) * dt, upper)
    hi = torch.maximum(upper - torch.clamp(dq, min=0.0) * dt, lower)
    return lo, hi


def _chain_clips(i: RewardInputs, c: dict) -> Tensor:
    q_target = i.default_q + i.action_scale * i.action
    ref = i.last_action if i.sent_action is None else i.sent_action
    clipped = (q_target < i.target_lower) | (q_target > i.target_upper) | ((i.action - ref).abs() > i.max_action_step)
    return clipped.sum(1).to(i.q.dtype)


# The robot-side terms of REWARD_TERMS (the tool and object terms need task-side inputs the warp env lacks).
TORCH_REWARD_TERMS: dict[str, Callable[[RewardInputs, dict], Tensor]] = {
    "tracking_lin_vel": lambda i, c: torch.exp(-_sq(i.command[:, :2] - i.base_lin_vel[:, :2]) / c["sigma"]),
    "tracking_ang_vel": lambda i, c: torch.exp(-torch.square(i.command[:, 2] - i.base_ang_vel[:, 2]) / c["sigma"]),
    "lin_vel_z": lambda i, c: torch.square(i.base_lin_vel[:, 2]),
    "ang_vel_xy": lambda i, c: _sq(i.base_ang_vel[:, :2]),
    "orientation": lambda i, c: _sq(i.projected_gravity[:, :2]),
    "base_height": lambda i, c: torch.square(i.base_height - c["target_m"]),
    "feet_air_time": lambda i, c: ((i.air_time - c["target_s"]) * i.first_contact).sum(1) * _moving(i),
    "feet_phase_contact": lambda i, c: (i.foot_contact == (_leg_phases(i.gait_phase, i.foot_contact.shape[1])
                                                           < c["stance_fraction"])).sum(1).to(i.q.dtype),
    "feet_swing_height": lambda i, c: ((i.foot_height - c["target_m"]).square() * ~i.foot_contact).sum(1),
    "stand_still": lambda i, c: (i.q - i.default_q).abs().sum(1) * ~_moving(i),
    "torques": lambda i, c: _sq(i.torque),
    "dof_vel": lambda i, c: _sq(i.dq),
    "dof_acc": lambda i, c: _sq((i.dq - i.last_dq) / i.dt),
    "action_rate": lambda i, c: _sq(i.action - i.last_action),
    "target_rate_excess": _rate_excess,
    "chain_clips": _chain_clips,
    "dof_pos_limits": lambda i, c: (torch.clamp(i.q_soft_lower - i.q, min=0.0)
                                    + torch.clamp(i.q - i.q_soft_upper, min=0.0)).sum(1),
    "termination": lambda i, c: i.terminated.to(i.q.dtype),
    "alive": lambda i, c: torch.ones_like(i.q[:, 0]),
}


def check_reward_terms(cfg: RewardsCfg) -> None:
    missing = [t.name for t in cfg.terms if t.name not in TORCH_REWARD_TERMS]
    if missing:
        raise ValueError(f"reward terms {missing} have no torch twin (torch terms: {', '.join(TORCH_REWARD_TERMS)})")


def compute_rewards(cfg: RewardsCfg, inputs: RewardInputs) -> tuple[Tensor, dict[str, Tensor]]:
    """``robot_rl.tasks.rewards.compute_rewards`` on tensors."""
    total = torch.zeros_like(inputs.q[:, 0])
    parts: dict[str, Tensor] = {}
    for term in cfg.terms:
        value = TORCH_REWARD_TERMS[term.name](inputs, term.settings()) * (term.weight * inputs.dt)
        parts[term.name] = value
        total = total + value
    if cfg.only_positive:
        total = torch.clamp(total, min=0.0)
    return total, parts


# ---------------------------------------------------------------------------------------------------------
# Per-env bookkeeping


class FootAirTime:
    """``robot_rl.sim.feet.FootAirTime`` on tensors."""

    def __init__(self, num_envs: int, num_feet: int, dt: float, device: torch.device):
        self.dt = dt
        self.air_time = torch.zeros(num_envs, num_feet, device=device)
        self.last_contact = torch.zeros(num_envs, num_feet, dtype=torch.bool, device=device)
        self.contact = torch.zeros(num_envs, num_feet, dtype=torch.bool, device=device)

    def reset(self, env_ids: Tensor) -> None:
        for tensor in (self.air_time, self.last_contact, self.contact):
            tensor[env_ids] = 0

    def update(self, max_force: Tensor) -> tuple[Tensor, Tensor]:
        """``max_force``: (N, feet) the largest contact force of each foot over the step's substeps."""
        contact = max_force > CONTACT_FORCE_N
        settled = contact | self.last_contact
        self.last_contact = contact
        first = (self.air_time > 0) & settled
        self.air_time += self.dt
        air = self.air_time.clone()
        self.air_time *= ~settled
        self.contact = settled
        return first, air


class ActionDelay:
    """``robot_rl.sim.randomization.ActionDelay`` on tensors."""

    def __init__(self, num_envs: int, num_actions: int, max_steps: int, device: torch.device):
        self.buffer = torch.zeros(num_envs, max_steps + 1, num_actions, device=device)
        self.latency = torch.zeros(num_envs, dtype=torch.long, device=device)
        self._rows = torch.arange(num_envs, device=device)

    def reset(self, env_ids: Tensor, latency: Tensor, fill: Tensor) -> None:
        self.latency[env_ids] = latency
        self.buffer[env_ids] = fill[:, None, :].to(self.buffer.dtype)

    def push(self, action: Tensor) -> Tensor:
        self.buffer = torch.roll(self.buffer, 1, dims=1)
        self.buffer[:, 0] = action
        return self.buffer[self._rows, self.latency]


class VelocityErrors:
    """``robot_rl.tasks.terms.VelocityTrackingMetric``'s state on tensors."""

    def __init__(self, num_envs: int, device: torch.device):
        self.err_sum = torch.zeros(num_envs, device=device)
        self.signed_sum = torch.zeros(num_envs, 2, device=device)
        self.steps = torch.zeros(num_envs, dtype=torch.long, device=device)

    def reset(self, ids: Tensor) -> None:
        self.err_sum[ids], self.signed_sum[ids], self.steps[ids] = 0.0, 0.0, 0

    def step(self, base_lin_vel: Tensor, command: Tensor) -> None:
        err = base_lin_vel[:, :2] - command[:, :2]
        self.err_sum += torch.linalg.norm(err, dim=1)
        self.signed_sum += err
        self.steps += 1

    def finish(self, ids: Tensor) -> dict[str, Tensor]:
        steps = torch.clamp(self.steps[ids], min=1)
        return {"Episode/lin_vel_error_m_s": self.err_sum[ids] / steps,
                "Episode/mean_vel_error_m_s": torch.linalg.norm(self.signed_sum[ids], dim=1) / steps}
