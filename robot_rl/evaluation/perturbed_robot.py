"""A simulated robot moved to a corner of its training randomization, for the sim2sim robustness suite.

:class:`Perturbation` names one point of the task's domain-randomization space (payload, COM offset, link
masses, friction, motor gains and strength, latency, observation noise) plus the MuJoCo contact setting.
:class:`PerturbedSimRobot` applies it to a lockstep :class:`~robot_rl.hardware.sim_robot.SimRobot` with the
training env's own functions (``robot_rl.sim.randomization``), so a corner here is the same physics the
policy was trained on at that corner:

- model terms (payload, COM, link masses, friction, the effort limits of motor strength) are written into
  the MuJoCo model by ``apply_model_sample``; PyBullet runs take no model terms (refused);
- gains: the motors apply ``kp × kp_scale × strength`` and ``kd × kd_scale × strength`` (strength scales the
  whole PD torque, as the env does through its per-env gains);
- latency: each command reaches the motors this many policy periods late (the power-up command first);
- observation noise: :class:`NoisyRuntime` adds the task's training noise (each actor term's ``noise``) to
  the state the runtime sees; the run's record keeps the true state, so scoring is not noisier.
"""

from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.hardware.sim_robot import SimRobot, SimScene, SimulatorName, scene_ids
from robot_rl.robots.spec import RobotSpec

Contact = Literal["gate", "training"]  # MuJoCo: the model builder's stiff contact, or the training env's


@dataclass(frozen=True)
class Perturbation:
    payload_kg: float = 0.0  # added to the base body
    com_offset_m: tuple[float, float, float] = (0.0, 0.0, 0.0)  # base body COM shift
    link_mass_scale: float = 1.0  # every robot body
    friction_scale: float = 1.0  # × the spec's base friction, every geom
    kp_scale: float = 1.0
    kd_scale: float = 1.0
    motor_strength: float = 1.0
    latency_steps: int = 0  # policy periods
    obs_noise: bool = False  # the task's training observation noise
    contact: Contact = "gate"

    def __post_init__(self) -> None:
        if min(self.link_mass_scale, self.friction_scale, self.kp_scale, self.kd_scale, self.motor_strength) <= 0:
            raise ValueError(f"perturbation: scales must be > 0, got {self}")
        if self.latency_steps < 0:
            raise ValueError(f"perturbation: latency must be ≥ 0, got {self.latency_steps}")

    @property
    def changes_model(self) -> bool:
        return (self.payload_kg != 0.0 or any(self.com_offset_m) or self.link_mass_scale != 1.0
                or self.friction_scale != 1.0 or self.motor_strength != 1.0)


class PerturbedSimRobot(SimRobot):
    """A lockstep SimRobot at ``perturbation`` (model terms and the training contact: MuJoCo only)."""

    def __init__(self, spec: RobotSpec, simulator: SimulatorName, perturbation: Perturbation, *,
                 scene: SimScene | None = None):
        if simulator != "mujoco" and (perturbation.changes_model or perturbation.contact != "gate"):
            raise ValueError(f"{simulator}: model terms and the training contact setting apply to MuJoCo only "
                             f"({perturbation})")
        super().__init__(spec, simulator, realtime=False, scene=scene)
        self.perturbation = perturbation
        self._queue: collections.deque[JointCommand] = collections.deque()

    def connect(self) -> None:
        super().connect()
        p = self.perturbation
        if self.simulator == "mujoco":
            from robot_rl.sim import randomization as dr
            from robot_rl.sim.world import use_training_contact

            backend = self._backend
            robot = backend.robot
            if p.contact == "training":
                use_training_contact(robot.model)
            if p.changes_model:
                geoms, bodies = scene_ids(robot.model, self.scene)
                nominal = dr.NominalModel.capture(robot.model, robot.base_body_id, robot.joint_ids,
                                                  self.spec.sim_model.base_friction, geoms, bodies)
                sample = dr.nominal_sample(nominal)
                sample.friction_scale[:] = p.friction_scale
                sample.base_mass_add[:] = p.payload_kg
                sample.link_mass_scale[:] = p.link_mass_scale
                sample.com_offset[:] = p.com_offset_m
                sample.motor_strength[:] = p.motor_strength  # effort limits; the PD torque is scaled in write
                dr.apply_model_sample(robot.model, backend.data, nominal, sample)
        self._queue.clear()
        for _ in range(p.latency_steps):  # the motors start on the power-up (passive) command
            self._queue.append(JointCommand.passive(self.spec.num_joints))

    def write(self, command: JointCommand) -> JointCommand:
        p = self.perturbation
        actual = command.copy()
        actual.kp = command.kp * (p.kp_scale * p.motor_strength)
        actual.kd = command.kd * (p.kd_scale * p.motor_strength)
        actual.tau_ff = command.tau_ff * p.motor_strength
        self._queue.append(actual)
        return super().write(self._queue.popleft())


# Actor observation term → the RobotState field its noise lands on (the term's own units).
_NOISY_FIELDS = {"joint_pos_rel": "q", "joint_vel": "dq", "base_ang_vel": "base_ang_vel"}


def _tilted(quat: np.ndarray, angle: float, axis_xy: np.ndarray) -> np.ndarray:
    """``quat`` (w, x, y, z) rotated by ``angle`` about a horizontal body axis: projected gravity then moves
    by about ``angle`` per component, as its training noise does."""
    half = 0.5 * angle
    q = np.array([np.cos(half), np.sin(half) * axis_xy[0], np.sin(half) * axis_xy[1], 0.0])
    w1, x1, y1, z1 = quat
    w2, x2, y2, z2 = q
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


class NoisyRuntime:
    """The runtime, seeing every state with the task's training observation noise (uniform ±noise per
    actor term); everything else passes through to it."""

    def __init__(self, runtime, noise: dict[str, float], seed: int):
        self._runtime = runtime
        self._noise = noise
        self._rng = np.random.default_rng(seed)

    @classmethod
    def for_task(cls, runtime, task, seed: int) -> NoisyRuntime:
        return cls(runtime, {t.name: t.noise for t in task.actor_obs.terms if t.noise > 0}, seed)

    def step(self, state: RobotState, now: float, missed_deadlines: int = 0):
        changes = {}
        for term, field_name in _NOISY_FIELDS.items():
            if term in self._noise:
                value = np.asarray(getattr(state, field_name), dtype=float)
                changes[field_name] = value + self._rng.uniform(-self._noise[term], self._noise[term], value.shape)
        if "projected_gravity" in self._noise:
            axis = self._rng.normal(size=2)
            axis /= np.linalg.norm(axis) + 1e-12
            angle = self._rng.uniform(-self._noise["projected_gravity"], self._noise["projected_gravity"])
            changes["base_quat"] = _tilted(np.asarray(state.base_quat, dtype=float), angle, axis)
        return self._runtime.step(dataclasses.replace(state, **changes), now, missed_deadlines)

    def __getattr__(self, name: str):
        return getattr(self._runtime, name)
