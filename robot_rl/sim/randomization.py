"""Domain randomization applied: the task's ranges (``robot_rl.tasks.randomization``) sampled and applied per env.

Sampling is pure (ranges + generator → arrays), and the model-parameter functions compute the new arrays
from the nominal ones (captured once from the compiled model, which got its values from the robot spec).
The env writes the results into its per-env ``MjModel`` copies at reset; pushes and latency are applied
by the env at their interval / every step.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

# The settings live with the tasks (configuration); re-exported here for the env and its callers.
from robot_rl.tasks.randomization import (  # noqa: F401
    NO_RANDOMIZATION,
    RandomizationCfg,
    Range,
    UnknownRandomizationKey,
    known_keys,
    parse_override,
    with_overrides,
)

if TYPE_CHECKING:  # mujoco is imported where a model is touched
    import mujoco


# ---------------------------------------------------------------------------------------------------------
# Model parameters


@dataclass(frozen=True)
class NominalModel:
    """The values DR scales around, copied from the compiled model before any randomization."""

    geom_friction: np.ndarray  # (ngeom, 3)
    geom_solref: np.ndarray  # (ngeom, 2) contact (time constant, damping ratio)
    body_mass: np.ndarray  # (nbody,)
    body_inertia: np.ndarray  # (nbody, 3)
    body_ipos: np.ndarray  # (nbody, 3)
    jnt_actfrcrange: np.ndarray  # (njnt, 2) effort limits
    base_body: int
    robot_bodies: np.ndarray  # body ids whose mass is randomized (the robot's, not the world's)
    spec_joints: np.ndarray  # joint id of each spec joint, in spec order
    base_friction: float
    object_geoms: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # keep their own friction

    @classmethod
    def capture(
        cls, model: mujoco.MjModel, base_body: int, spec_joints: np.ndarray, base_friction: float,
        object_geoms: np.ndarray = (), object_bodies: np.ndarray = (),
    ) -> NominalModel:
        """``object_geoms`` / ``object_bodies``: a scene's boxes (a table, a cube): the friction term leaves their
        friction as built and the mass terms leave their bodies alone (they are not the robot)."""
        objects = set(np.asarray(object_bodies, dtype=int).tolist())
        robot = np.array([b for b in range(1, model.nbody) if model.body_mass[b] > 0 and b not in objects], dtype=int)
        return cls(
            geom_friction=model.geom_friction.copy(),
            geom_solref=model.geom_solref.copy(),
            body_mass=model.body_mass.copy(),
            body_inertia=model.body_inertia.copy(),
            body_ipos=model.body_ipos.copy(),
            jnt_actfrcrange=model.jnt_actfrcrange.copy(),
            base_body=base_body,
            robot_bodies=robot,
            spec_joints=np.asarray(spec_joints, dtype=int),
            base_friction=base_friction,
            object_geoms=np.asarray(object_geoms, dtype=int),
        )


@dataclass
class ModelSample:
    """One draw of the model parameters for ``n`` envs (1.0 / 0.0 where a term is off)."""

    friction_scale: np.ndarray  # (n,)
    base_mass_add: np.ndarray  # (n,)
    link_mass_scale: np.ndarray  # (n, len(robot_bodies))
    com_offset: np.ndarray  # (n, 3)
    kp_scale: np.ndarray  # (n, joints)
    kd_scale: np.ndarray  # (n, joints)
    motor_strength: np.ndarray  # (n, joints)
    contact_timeconst: np.ndarray  # (n,) contact solref time constant; 0: the model's own

    def row(self, i: int) -> ModelSample:
        return ModelSample(*(getattr(self, f.name)[i : i + 1] for f in dataclasses.fields(self)))


def _uniform(rng: np.random.Generator, rng_range: Range | None, shape: tuple[int, ...], corner_probability: float = 0.0,
             off: float = 1.0, all_corners: np.ndarray | None = None) -> np.ndarray:
    """Uniform over the range, except that with ``corner_probability`` a row (an env: all its joints or bodies
    together, as the robustness suite's corners) sits at one end, either equally likely; so does every row
    of an env where ``all_corners`` (one flag per env) is set. ``off``: the value of a switched-off term."""
    if rng_range is None:
        return np.full(shape, off)
    x = rng.uniform(rng_range[0], rng_range[1], size=shape)
    if corner_probability > 0 or all_corners is not None:
        at_end = rng.random(shape[0]) < corner_probability
        if all_corners is not None:  # per env; rows per env > 1 for the COM offset's flat per-axis draw
            at_end |= np.repeat(all_corners, shape[0] // len(all_corners))
        end = np.where(rng.random(shape[0]) < 0.5, rng_range[0], rng_range[1])
        x[at_end] = end[at_end].reshape((-1,) + (1,) * (len(shape) - 1))
    return x


def sample_model(cfg: RandomizationCfg, nominal: NominalModel, rng: np.random.Generator, n: int) -> ModelSample:
    nu = len(nominal.spec_joints)
    p = cfg.corner_probability
    c = cfg.com_offset_m
    every = rng.random(n) < cfg.all_corners_probability if cfg.all_corners_probability > 0 else None
    u = functools.partial(_uniform, rng, corner_probability=p, all_corners=every)
    com = u((-c, c), (n * 3,))
    return ModelSample(
        friction_scale=u(cfg.friction_scale, (n,)),
        base_mass_add=u(cfg.base_mass_add_kg, (n,), off=0.0),
        link_mass_scale=u(cfg.link_mass_scale, (n, len(nominal.robot_bodies))),
        com_offset=com.reshape(n, 3),  # per axis: a corner is ±c on that axis
        kp_scale=u(cfg.kp_scale, (n, nu)),
        kd_scale=u(cfg.kd_scale, (n, nu)),
        motor_strength=u(cfg.motor_strength, (n, nu)),
        contact_timeconst=u(cfg.contact_timeconst_s, (n,), off=0.0),
    )


def nominal_sample(nominal: NominalModel, n: int = 1) -> ModelSample:
    """The draw that reproduces the nominal model (used when DR is off)."""
    nu = len(nominal.spec_joints)
    return ModelSample(np.ones(n), np.zeros(n), np.ones((n, len(nominal.robot_bodies))), np.zeros((n, 3)),
                       np.ones((n, nu)), np.ones((n, nu)), np.ones((n, nu)), np.zeros(n))


def randomized_solref(nominal: NominalModel, timeconst: float) -> np.ndarray:
    """Every geom's contact time constant (MuJoCo mixes a pair's solref, so setting all alike makes the contact's
    exactly that); 0 keeps the model's; a scene's objects keep theirs."""
    solref = nominal.geom_solref.copy()
    if timeconst > 0:
        solref[:, 0] = timeconst
        solref[nominal.object_geoms] = nominal.geom_solref[nominal.object_geoms]
    return solref


def randomized_friction(nominal: NominalModel, scale: float) -> np.ndarray:
    """Every geom's sliding friction = base_friction × scale (MuJoCo takes the max of a contact's pair, so
    setting ground and robot alike makes the contact friction exactly that value); a scene's objects keep
    theirs."""
    friction = nominal.geom_friction.copy()
    friction[:, 0] = nominal.base_friction * scale
    friction[nominal.object_geoms] = nominal.geom_friction[nominal.object_geoms]
    return friction


def randomized_inertia(
    nominal: NominalModel, base_mass_add: float, link_scale: np.ndarray, com_offset: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(body_mass, body_inertia, body_ipos). Inertia scales with mass: the same shape, denser or lighter."""
    mass = nominal.body_mass.copy()
    inertia = nominal.body_inertia.copy()
    ipos = nominal.body_ipos.copy()
    bodies = nominal.robot_bodies
    mass[bodies] *= link_scale
    inertia[bodies] *= link_scale[:, None]
    b = nominal.base_body
    payload_scale = (mass[b] + base_mass_add) / mass[b]
    mass[b] *= payload_scale
    inertia[b] *= payload_scale
    ipos[b] += com_offset
    return mass, inertia, ipos


def randomized_effort_limits(nominal: NominalModel, strength: np.ndarray) -> np.ndarray:
    """jnt_actfrcrange: a stronger (weaker) motor also saturates later (earlier). The PD torque itself is
    scaled by the env through the per-env gains in ``ctrl``, so s·clip(PD, ±effort) = clip(s·PD, ±s·effort)."""
    limits = nominal.jnt_actfrcrange.copy()
    limits[nominal.spec_joints] *= strength[:, None]
    return limits


def apply_model_sample(model: mujoco.MjModel, data: mujoco.MjData, nominal: NominalModel, s: ModelSample) -> None:
    """Write one env's draw (a ``ModelSample`` of length 1) into its own model copy."""
    model.geom_friction[:] = randomized_friction(nominal, float(s.friction_scale[0]))
    model.geom_solref[:] = randomized_solref(nominal, float(s.contact_timeconst[0]))
    mass, inertia, ipos = randomized_inertia(nominal, float(s.base_mass_add[0]), s.link_mass_scale[0], s.com_offset[0])
    model.body_mass[:] = mass
    model.body_inertia[:] = inertia
    model.body_ipos[:] = ipos
    model.jnt_actfrcrange[:] = randomized_effort_limits(nominal, s.motor_strength[0])
    # Constraint scaling (invweight), subtree masses etc. are derived from the masses at compile time.
    # mj_setConst computes them at the model's qpos0 and leaves ``data`` there (a legged robot's legs straight):
    # the state the caller had (a standing robot, a scene's objects) is put back, with its derived quantities.
    import mujoco

    what = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(model, what))
    mujoco.mj_getState(model, data, state, what)
    mujoco.mj_setConst(model, data)
    mujoco.mj_setState(model, data, state, what)
    mujoco.mj_forward(model, data)


# ---------------------------------------------------------------------------------------------------------
# Per-step quantities


def sample_latency(cfg: RandomizationCfg, rng: np.random.Generator, n: int) -> np.ndarray:
    lo, hi = cfg.action_latency_steps
    return rng.integers(lo, hi + 1, size=n)


def push_velocity(cfg: RandomizationCfg, rng: np.random.Generator, n: int, scale: float = 1.0) -> np.ndarray:
    """(n, 2) horizontal velocity added to the base: a uniformly random direction, a speed uniform up to
    ``scale`` × ``push_max_vel_m_s`` (``scale``: :func:`push_scale`, below 1 while the curriculum ramps up, up to
    ``push_overshoot`` after)."""
    angle = rng.uniform(0.0, 2 * np.pi, size=n)
    speed = rng.uniform(0.0, cfg.push_max_vel_m_s * scale, size=n)
    return np.stack([speed * np.cos(angle), speed * np.sin(angle)], axis=1)


def push_probability(cfg: RandomizationCfg, dt: float) -> float:
    """Chance per env and policy step of a push (a Poisson process with the mean interval); 0 without pushes."""
    if not cfg.push_interval_s or cfg.push_max_vel_m_s <= 0:
        return 0.0
    return float(-np.expm1(-dt / cfg.push_interval_s))


def push_scale(cfg: RandomizationCfg, policy_time_s: float) -> float:
    """The push curriculum: the largest kick available after this much policy time, as a multiple of
    ``push_max_vel_m_s`` (ramping up to ``push_overshoot``)."""
    ramp = 1.0 if cfg.push_ramp_s <= 0 else min(1.0, policy_time_s / cfg.push_ramp_s)
    return cfg.push_overshoot * ramp


def stiff_contact_envs(n: int, fraction: float) -> np.ndarray:
    """(n,) bool: which envs run on the builder's stiff contact, spread evenly over the indices (the physics
    threads take contiguous blocks of envs, so clustering them would leave one thread with all the slow ones)."""
    i = np.arange(n)
    return np.floor((i + 1) * fraction) > np.floor(i * fraction)


def initial_joint_state(
    cfg: RandomizationCfg,
    rng: np.random.Generator,
    n: int,
    default_q: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    q = default_q + rng.uniform(-cfg.init_joint_pos_rad, cfg.init_joint_pos_rad, size=(n, len(default_q)))
    dq = rng.uniform(-cfg.init_joint_vel_rad_s, cfg.init_joint_vel_rad_s, size=(n, len(default_q)))
    return np.clip(q, lower, upper), dq


class ActionDelay:
    """Per-env latency of 0..k policy steps: what reaches the motors is the command (an action or its joint targets)
    from k steps ago."""

    def __init__(self, num_envs: int, num_actions: int, max_steps: int):
        self.buffer = np.zeros((num_envs, max_steps + 1, num_actions))
        self.latency = np.zeros(num_envs, dtype=int)
        self._rows = np.arange(num_envs)

    def reset(self, env_ids: np.ndarray, latency: np.ndarray, fill: np.ndarray | None = None) -> None:
        self.latency[env_ids] = latency
        self.buffer[env_ids] = 0.0 if fill is None else fill[:, None, :]

    def push(self, action: np.ndarray) -> np.ndarray:
        """Store this step's action and return the one to apply now."""
        if self.buffer.shape[1] > 1:
            self.buffer[:, 1:] = self.buffer[:, :-1]
        self.buffer[:, 0] = action
        return self.buffer[self._rows, self.latency]
