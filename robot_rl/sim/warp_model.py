"""The training world's MuJoCo model on a warp device (``mujoco_warp``), with per-env domain randomization written
as batched model fields.

MuJoCo Warp keeps most model fields once for all worlds (leading dimension 1) and lets some be batched
(leading dimension nworld). The terms the CPU env writes into its per-env ``MjModel`` copies map to batched
fields here:

==========================  ====================================  =============================================
DR term                     warp env                              as the CPU env
==========================  ====================================  =============================================
friction_scale              per world: ``geom_friction``          ``randomized_friction``
contact_timeconst_s         per world: ``geom_solref``            ``randomized_solref``
base_mass_add, link_mass    per world: ``body_mass``,             ``randomized_inertia``, then the constants
  _scale, com_offset_m        ``body_inertia``, ``body_ipos``,    derived from masses (``mujoco_warp.set_const``
                              derived fields batched too           as ``mj_setConst``)
motor_strength (limits)     per world: ``jnt_actfrcrange``        ``randomized_effort_limits``
kp/kd_scale, strength       per env ``ctrl`` (the PD actuators)   the same
latency, pushes, noise,     torch on the device                   numpy
  initial joint state
==========================  ====================================  =============================================

``corner_probability`` and ``all_corners_probability`` draw as ``dr.sample_model``. ``stiff_contact_fraction``: one
friction cone for all worlds, so training splits the share into two envs (``warp_contact_mix``).

Not supported: terrain (a heightfield is one per model in MuJoCo Warp, not per world) and a task's scene objects.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import torch

from robot_rl.core.errors import RobotRLError
from robot_rl.sim import randomization as dr

# Fields the DR terms write, and the ones mj_setConst derives from the masses (written per world by set_const).
DR_FIELDS = ("geom_friction", "geom_solref", "body_mass", "body_inertia", "body_ipos", "jnt_actfrcrange")
DERIVED_FIELDS = ("body_subtreemass", "body_invweight0", "dof_invweight0", "actuator_acc0")


class WarpUnavailable(RobotRLError, ImportError):
    """The warp backend was asked for where ``mujoco-warp`` is not installed."""


def import_warp():
    """(warp, mujoco_warp), warp initialised quietly. Compiled kernels persist in warp's kernel cache (under the
    user cache directory, ``~/.cache/warp``): the first run compiles them (≈ 40–50 s on warp's CPU device, 2 cores),
    later runs load them."""
    try:
        import warp
    except ImportError as exc:
        raise WarpUnavailable(f"--backend warp needs MuJoCo Warp: pip install 'robot-rl[gpu]' ({exc})") from None
    warp.config.log_level = warp.LOG_WARNING  # no line per kernel module loaded
    try:
        import mujoco_warp
    except ImportError as exc:
        raise WarpUnavailable(f"--backend warp needs MuJoCo Warp: pip install 'robot-rl[gpu]' ({exc})") from None
    warp.init()
    return warp, mujoco_warp


def warp_device(device: str) -> str:
    """The warp and torch device name: ``cpu`` or ``cuda:N`` (``cuda`` is ``cuda:0``)."""
    if device == "cuda":
        return "cuda:0"
    if device == "cpu" or device.startswith("cuda:"):
        return device
    raise RobotRLError(f"--device {device!r}: expected cpu, cuda or cuda:N")


@dataclass
class BatchedModel:
    """The device model and torch views of its per-world DR fields (writes go straight to the device arrays)."""

    model: object  # mujoco_warp.Model
    nominal: dr.NominalModel
    friction: torch.Tensor  # (N, ngeom, 3)
    solref: torch.Tensor  # (N, ngeom, 2)
    mass: torch.Tensor  # (N, nbody)
    inertia: torch.Tensor  # (N, nbody, 3)
    ipos: torch.Tensor  # (N, nbody, 3)
    actfrcrange: torch.Tensor  # (N, njnt, 2)
    randomizes_masses: bool  # set_const must run after a reset that drew new masses

    @classmethod
    def put(cls, mjw, wp, mjm: mujoco.MjModel, nominal: dr.NominalModel, cfg: dr.RandomizationCfg,
            n: int) -> BatchedModel:
        masses = cfg.base_mass_add_kg is not None or cfg.link_mass_scale is not None or cfg.com_offset_m > 0
        batched = DR_FIELDS + (DERIVED_FIELDS if masses else ())
        sizes = {name: n for name in batched if _has_rows(mjm, name)}
        m = mjw.put_model(mjm, batch_sizes=sizes)
        views = {name: _view(wp, m, name, n) for name in DR_FIELDS}
        return cls(m, nominal, views["geom_friction"], views["geom_solref"], views["body_mass"], views["body_inertia"],
                   views["body_ipos"], views["jnt_actfrcrange"], masses)

    def apply(self, ids: torch.Tensor, sample: dict[str, torch.Tensor]) -> None:
        """Write the draws of envs ``ids`` (``sample_model``'s rows) as ``dr.apply_model_sample`` does per model."""
        nom, k = self.nominal, len(ids)
        dev = self.friction.device

        def t(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(a, dtype=torch.float32, device=dev)

        friction = t(nom.geom_friction).expand(k, -1, -1).clone()
        friction[:, :, 0] = nom.base_friction * sample["friction_scale"][:, None]
        friction[:, nom.object_geoms] = t(nom.geom_friction[nom.object_geoms])
        self.friction[ids] = friction
        solref = t(nom.geom_solref).expand(k, -1, -1).clone()
        tc = sample["contact_timeconst"]
        solref[:, :, 0] = torch.where(tc[:, None] > 0, tc[:, None], solref[:, :, 0])  # 0: the model's own
        solref[:, nom.object_geoms] = t(nom.geom_solref[nom.object_geoms])
        self.solref[ids] = solref
        bodies, b = torch.as_tensor(nom.robot_bodies, device=dev), nom.base_body
        mass = t(nom.body_mass).expand(k, -1).clone()
        inertia = t(nom.body_inertia).expand(k, -1, -1).clone()
        ipos = t(nom.body_ipos).expand(k, -1, -1).clone()
        mass[:, bodies] *= sample["link_mass_scale"]
        inertia[:, bodies] *= sample["link_mass_scale"][:, :, None]
        payload = (mass[:, b] + sample["base_mass_add"]) / mass[:, b]
        mass[:, b] *= payload
        inertia[:, b] *= payload[:, None]
        ipos[:, b] += sample["com_offset"]
        self.mass[ids], self.inertia[ids], self.ipos[ids] = mass, inertia, ipos
        limits = t(nom.jnt_actfrcrange).expand(k, -1, -1).clone()
        limits[:, torch.as_tensor(nom.spec_joints, device=dev)] *= sample["motor_strength"][:, :, None]
        self.actfrcrange[ids] = limits


def _has_rows(mjm: mujoco.MjModel, name: str) -> bool:
    return getattr(mjm, name).size > 0


def _view(wp, m, name: str, n: int) -> torch.Tensor:
    view = wp.to_torch(getattr(m, name))
    if view.shape[0] != n:
        raise AssertionError(f"mujoco_warp field {name} is not batched over {n} worlds: {tuple(view.shape)}")
    return view


def sample_model(cfg: dr.RandomizationCfg, nominal: dr.NominalModel, k: int, device: torch.device,
                 gen: torch.Generator) -> dict[str, torch.Tensor]:
    """``dr.sample_model`` on the device: the same ranges (1.0 / 0.0 where a term is off), k envs."""
    nu, nb = len(nominal.spec_joints), len(nominal.robot_bodies)

    def rand(*shape: int) -> torch.Tensor:
        return torch.rand(shape, device=device, generator=gen)

    every = rand(k) < cfg.all_corners_probability if cfg.all_corners_probability > 0 else None

    def scale(r: dr.Range | None, *shape: int, off: float = 1.0) -> torch.Tensor:
        if r is None:
            return torch.full(shape, off, device=device)
        x = r[0] + (r[1] - r[0]) * rand(*shape)
        if cfg.corner_probability > 0 or every is not None:  # a whole row (an env) at one end, as dr._uniform
            row = (-1,) + (1,) * (len(shape) - 1)
            at_end = rand(shape[0]) < cfg.corner_probability
            if every is not None:  # every quantity of these envs (each COM axis: rows k·3 of the flat draw)
                at_end |= every.repeat_interleave(shape[0] // k)
            end = torch.where(rand(shape[0]) < 0.5, r[0], r[1]).reshape(row)
            x = torch.where(at_end.reshape(row), end, x)
        return x

    c = cfg.com_offset_m
    return {"friction_scale": scale(cfg.friction_scale, k),
            "base_mass_add": scale(cfg.base_mass_add_kg, k, off=0.0),
            "link_mass_scale": scale(cfg.link_mass_scale, k, nb),
            "com_offset": scale((-c, c), k * 3).reshape(k, 3),
            "kp_scale": scale(cfg.kp_scale, k, nu), "kd_scale": scale(cfg.kd_scale, k, nu),
            "motor_strength": scale(cfg.motor_strength, k, nu),
            "contact_timeconst": scale(cfg.contact_timeconst_s, k, off=0.0)}


def unsupported_reason(task, spec) -> str | None:
    """Why the warp env cannot run ``task`` (None: it can)."""
    if task.terrain is not None:
        return "terrain (MuJoCo Warp keeps one heightfield for all worlds; per-env patches need the CPU backend)"
    if task.terms.source is not None or task.terms.reward_inputs:
        return "task-side reward inputs (a tool point, a scene object)"
    if any(type(m).__name__ != "VelocityTrackingMetric" for m in task.terms.metrics):
        return "episode metrics other than velocity tracking"
    if task.torque_limit_targets:
        return "the chain's torque limit on targets"
    if not spec.sim_model.floating_base:
        return "a fixed base"
    return None
