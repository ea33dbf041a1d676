"""An actor whose targets the safety chain passes unchanged: the MLP's proposal projected onto the chain's limits.

Deployed, the safety chain clips a target that moves further than ``max_target_rate_rad_s`` × period from the
last one sent (rate limit), or whose PD torque estimate exceeds the effort limit (torque limit); every clip is an
intervention the sim2sim gate counts, and the motion the policy planned is not the one executed. A plain MLP
jumps its targets when the goal changes and passes observation noise on to them.

:class:`ChainProjectedMLP` maps the MLP's proposal ``p`` (raw action units) through, per joint,

1. the torque bounds: ``q* = default + scale·a`` such that ``|kp'·(q* − q) − kd'·q̇| ≤ TORQUE_MARGIN·τ_max``,
   with ``q``, ``q̇`` read from the observation (``joint_pos_rel``, ``joint_vel``) and kp', kd', τ_max those the
   chain estimates with (:class:`~robot_rl.safety.filters.SafetyLimits`, from the robot spec);
2. the rate window ``last ± RATE_MARGIN·max_step`` around the previous action (``last_action``: deployed, the
   runtime feeds back the action that ran), applied last so that it always holds (the chain checks the rate
   first, against the last target it sent; where the two windows do not meet, the torque filter may still act);
3. the contract's action clip.

It is the chain's own law, inside the exported graph (and in ``play``): the targets move at most at 0.8 × the
chain's rate and lead the joints by at most what 0.7 × the effort limit allows, so the chain has nothing to clip.

PPO trains the MLP unprojected (``TaskRunner.learn`` switches the projection off). Every way of training with the
limits in the loop that was tried learned the reach slowly or not at all, and fine-tuning the trained MLP behind
the projection made it worse (measured: benchmarks/results/RESULTS_training.md, panda-reach): exploration noise
several allowed steps wide either random-walks a rate-limited target or, fed back as its mean, leaves PPO's
gradient blind to the ramp. The suite (``robot-rl sim2sim --suite full``) judges the projected policy as it runs.
"""

from __future__ import annotations

import torch
from rsl_rl.models import MLPModel
from rsl_rl.modules import EmpiricalNormalization

from robot_rl.robots.spec import RobotSpec
from robot_rl.safety.filters import SafetyLimits
from robot_rl.tasks.observations import ObservationLayout
from robot_rl.tasks.task import TaskCfg

# Fractions of the chain's limits the projection aims at. Observation noise makes the policy's q, q̇ differ from
# the state the chain measures (the torque estimate moves by kp·δq + kd·δq̇: about 3 of the wrist's 12 N·m at the
# training noise), and a rate window at the full step would tie with the chain's check to the last bit.
RATE_MARGIN = 0.8
TORQUE_MARGIN = 0.7


def newest_frame_columns(layout: ObservationLayout, term: str, sizes: list[int]) -> tuple[int, int]:
    """[start, stop) of the newest frame of ``term`` in the flat observation (``sizes``: one frame's width per
    term, :meth:`ObservationLayout.term_sizes`). Term-major history keeps a term's frames oldest first."""
    col = 0
    for t, size in zip(layout.terms, sizes, strict=True):
        if t.name == term:
            start = col + (t.history_length - 1) * size
            return start, start + size
        col += t.history_length * size
    raise ValueError(f"the observation has no {term!r} term (terms: {', '.join(t.name for t in layout.terms)})")


def projection_settings(task: TaskCfg, spec: RobotSpec, layout: ObservationLayout | None = None) -> dict:
    """The keyword arguments of :class:`ChainProjectedMLP` for ``task`` on ``spec`` (observation ``layout``: the
    actor's by default): where q, q̇ and the last action sit in the observation, and the chain's numbers."""
    layout = layout or task.actor_obs
    sizes = layout.term_sizes(spec.num_joints, task.commands.size, spec.num_joints)
    scales = {t.name: t.scale for t in layout.terms}
    limits = SafetyLimits.from_spec(spec)
    columns = {}
    for term in ("joint_pos_rel", "joint_vel", "last_action"):
        if term not in scales:
            raise ValueError(f"task {task.name!r}: a chain-projected actor needs {term} in its observation")
        columns[term] = (*newest_frame_columns(layout, term, sizes), float(scales[term]))
    return {
        "q_rel": columns["joint_pos_rel"], "dq": columns["joint_vel"], "last_action": columns["last_action"],
        "kp": (spec.kp * limits.kp_scale).tolist(), "kd": (spec.kd * limits.kd_scale).tolist(),
        "torque_max": (TORQUE_MARGIN * limits.torque_max).tolist(),
        "max_step": float(RATE_MARGIN * limits.max_step[0] / task.action.scale),
        "action_scale": float(task.action.scale), "action_clip": float(task.action.clip),
    }


class ChainProjection(torch.nn.Module):
    """Raw observation and the MLP's proposal → the projected action (module docstring), batched."""

    def __init__(self, q_rel, dq, last_action, kp, kd, torque_max, max_step: float, action_scale: float,
                 action_clip: float):
        super().__init__()
        self.q_rel, self.dq, self.last_action = tuple(q_rel), tuple(dq), tuple(last_action)
        self.max_step, self.action_scale, self.action_clip = max_step, action_scale, action_clip
        for name, values in (("kp", kp), ("kd", kd), ("torque_max", torque_max)):
            # Not in checkpoints: the spec is their source (and a plain MLP's checkpoint loads into this model).
            self.register_buffer(name, torch.tensor(values, dtype=torch.float32), persistent=False)

    @staticmethod
    def _read(raw: torch.Tensor, where: tuple) -> torch.Tensor:
        start, stop, scale = where
        return raw[:, start:stop] / scale

    def forward(self, raw: torch.Tensor, proposal: torch.Tensor) -> torch.Tensor:
        q_rel, dq, last = self._read(raw, self.q_rel), self._read(raw, self.dq), self._read(raw, self.last_action)
        # |kp·(q* − q) − kd·q̇| ≤ τ  ⇔  q* − q ∈ [(−τ + kd·q̇)/kp, (τ + kd·q̇)/kp]; q* − default = scale·a.
        lower = (q_rel + (self.kd * dq - self.torque_max) / self.kp) / self.action_scale
        upper = (q_rel + (self.kd * dq + self.torque_max) / self.kp) / self.action_scale
        action = torch.minimum(torch.maximum(proposal, lower), upper)
        action = torch.minimum(torch.maximum(action, last - self.max_step), last + self.max_step)
        return action.clamp(-self.action_clip, self.action_clip)


class _ProjectedHead(torch.nn.Module):
    """The exported head: normalized observation → MLP → projection (the raw observation recovered from the
    normalizer's statistics), so the ONNX file computes what the trained actor does."""

    def __init__(self, mlp: torch.nn.Module, normalizer: torch.nn.Module, projection: ChainProjection):
        super().__init__()
        self.mlp, self.projection = mlp, projection
        if isinstance(normalizer, EmpiricalNormalization):
            std, mean = normalizer._std + normalizer.eps, normalizer._mean
        else:
            std, mean = torch.ones(1), torch.zeros(1)
        self.register_buffer("std", std.detach().clone())
        self.register_buffer("mean", mean.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(x * self.std + self.mean, self.mlp(x))


class ChainProjectedMLP(MLPModel):
    """rsl_rl's MLP actor with its output (the Gaussian's mean) projected by :class:`ChainProjection`. Built from
    ``projection`` (:func:`projection_settings`); the weights are an ``MLPModel``'s."""

    def __init__(self, obs, obs_groups, obs_set: str, output_dim: int, *, projection: dict, **kwargs):
        super().__init__(obs, obs_groups, obs_set, output_dim, **kwargs)
        if self.distribution is not None and self.distribution.input_dim != output_dim:
            raise ValueError("ChainProjectedMLP needs a distribution parameterized by its mean alone")
        self.projection = ChainProjection(**projection)
        self.projecting = True  # False while PPO trains the MLP (TaskRunner.learn); exported graphs always project

    def forward(self, obs, masks=None, hidden_state=None, stochastic_output: bool = False) -> torch.Tensor:
        raw = torch.cat([obs[g] for g in self.obs_groups], dim=-1)
        out = self.mlp(self.obs_normalizer(raw))
        if self.projecting:
            out = self.projection(raw, out)
        if self.distribution is None:
            return out
        if stochastic_output:
            self.distribution.update(out)
            return self.distribution.sample()
        return self.distribution.deterministic_output(out)

    def as_onnx(self, verbose: bool) -> torch.nn.Module:
        view = super().as_onnx(verbose)
        view.mlp = _ProjectedHead(view.mlp, view.obs_normalizer, self.projection)
        return view

    def as_jit(self) -> torch.nn.Module:
        view = super().as_jit()
        view.mlp = _ProjectedHead(view.mlp, view.obs_normalizer, self.projection)
        return view

