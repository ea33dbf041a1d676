"""Sim as "real": a simulated robot whose physics differ from the training sim, for fine-tuning benchmarks.

:class:`RealityShift` names the differences — motor gains, a payload, actuator latency, friction (the robot's
and, in a scene, the objects') — and two places apply the same shift from the domain-randomization code
(``robot_rl.sim.randomization``), not a copy:

- :class:`ShiftedSimRobot` — a MuJoCo :class:`~robot_rl.hardware.sim_robot.SimRobot` (the RobotInterface the
  runtime drives) with the shifted model: what the residual fine-tunes against, through the runtime.
- :func:`shifted_vec_env` — the vectorized training env with the same shift, fixed (no randomization):
  what continued PPO trains in, the baseline the residual is compared with.

A payload hangs on a body: the tool body's first massive ancestor for an arm (its hand), the base for a
legged robot. An arm's controller compensates gravity from its *nominal* model (as a Franka does), so the
payload's weight is not compensated: its body keeps gravity compensation only for its nominal mass.
The gains shift scales what the motors do with the commanded kp and kd (an actuator that is weaker than its
datasheet); latency holds each command back for whole policy periods, as a slow bus or driver would.
Scene objects (a table, a cube: ``SimScene``) keep their own friction — the DR friction term sets every geom
to the robot's nominal friction, which is not theirs — scaled by ``object_friction_scale`` (a slipperier or
stickier table and cube than the demos saw).
"""

from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass

import numpy as np

from robot_rl.core.types import JointCommand
from robot_rl.hardware.sim_robot import SimRobot, SimScene, scene_ids
from robot_rl.robots.spec import RobotSpec
from robot_rl.sim import randomization as dr


@dataclass(frozen=True)
class RealityShift:
    kp_scale: float = 1.0
    kd_scale: float = 1.0
    payload_kg: float = 0.0
    latency_steps: int = 0  # policy periods
    friction_scale: float = 1.0
    object_friction_scale: float = 1.0  # × each scene box's own friction (no effect without a scene)

    def __post_init__(self) -> None:
        if min(self.kp_scale, self.kd_scale, self.friction_scale, self.object_friction_scale) <= 0:
            raise ValueError(f"reality shift: gain and friction scales must be > 0, got {self}")
        if self.payload_kg < 0 or self.latency_steps < 0:
            raise ValueError(f"reality shift: payload and latency must be ≥ 0, got {self}")

    def randomization(self) -> dr.RandomizationCfg:
        """The shift as a degenerate randomization (every range a point; no noise, no init perturbation)."""
        return dr.RandomizationCfg(
            friction_scale=(self.friction_scale, self.friction_scale), kp_scale=(self.kp_scale, self.kp_scale),
            kd_scale=(self.kd_scale, self.kd_scale), action_latency_steps=(self.latency_steps, self.latency_steps),
            observation_noise=False,
        )

    def describe(self) -> str:
        text = (f"kp ×{self.kp_scale:g}, kd ×{self.kd_scale:g}, payload {self.payload_kg:g} kg, latency "
                f"{self.latency_steps} policy steps, friction ×{self.friction_scale:g}")
        if self.object_friction_scale != 1.0:
            text += f", object friction ×{self.object_friction_scale:g}"
        return text


def describe_training_ranges(rand: dr.RandomizationCfg) -> str:
    """The training randomization of the quantities a :class:`RealityShift` moves, as text next to the shift's
    :meth:`~RealityShift.describe` (so a results page shows how far beyond training the "real" robot is)."""

    def span(r, unit: str = "", times: bool = True) -> str:
        lo, hi = r
        if times:
            return f"×{lo:g}–{hi:g}" if lo != hi else f"×{lo:g}"
        return f"{lo:+g} to {hi:+g}{unit}" if lo != hi else f"{lo:+g}{unit}"

    parts = [f"kp {span(rand.kp_scale)}" if rand.kp_scale else "nominal kp",
             f"kd {span(rand.kd_scale)}" if rand.kd_scale else "nominal kd"]
    if rand.motor_strength:
        parts.append(f"motor strength {span(rand.motor_strength)}")
    if rand.base_mass_add_kg:
        parts.append(f"base mass {span(rand.base_mass_add_kg, ' kg', times=False)} added")
    if rand.link_mass_scale:
        parts.append(f"link masses {span(rand.link_mass_scale)}")
    lat = rand.action_latency_steps
    parts.append(f"{lat[0]}–{lat[1]} policy steps latency" if lat[0] != lat[1] else f"{lat[0]} policy steps latency")
    parts.append(f"friction {span(rand.friction_scale)}" if rand.friction_scale else "nominal friction")
    return ", ".join(parts)


def payload_body(model, spec: RobotSpec) -> int:
    """Where a payload goes: the tool body's first ancestor with mass (arms), else the base body."""
    name = spec.sim_model.end_effector_body or spec.sim_model.base_body
    body = model.body(name).id
    while model.body_mass[body] <= 0 and body > 0:
        body = model.body_parentid[body]
    if body == 0:
        raise ValueError(f"{spec.name}: no body with mass at or above {name!r} to carry a payload")
    return body


def with_payload(nominal: dr.NominalModel, body: int, payload_kg: float) -> dr.NominalModel:
    """``nominal`` whose ``body`` is heavier by ``payload_kg`` (inertia scaled alike), via the DR function."""
    scale = np.ones(len(nominal.robot_bodies))
    where = np.flatnonzero(nominal.robot_bodies == body)
    if len(where) != 1:
        raise ValueError(f"body {body} is not one of the robot's massive bodies {nominal.robot_bodies.tolist()}")
    scale[where[0]] = (nominal.body_mass[body] + payload_kg) / nominal.body_mass[body]
    mass, inertia, ipos = dr.randomized_inertia(nominal, 0.0, scale, np.zeros(3))
    return dataclasses.replace(nominal, body_mass=mass, body_inertia=inertia, body_ipos=ipos)


def apply_shift_to_model(model, data, spec: RobotSpec, base_body: int, joint_ids: np.ndarray,
                         shift: RealityShift, scene: SimScene | None = None) -> dr.NominalModel:
    """Write the payload and friction of ``shift`` into ``model`` (``scene``: the objects built into it, whose
    friction the object scale moves); returns the shifted nominal (for envs that re-apply it at every reset)."""
    geoms, bodies = scene_ids(model, scene)
    nominal = dr.NominalModel.capture(model, base_body, joint_ids, spec.sim_model.base_friction, geoms, bodies)
    friction = nominal.geom_friction.copy()
    friction[geoms, 0] *= shift.object_friction_scale
    nominal = dataclasses.replace(nominal, geom_friction=friction)
    body = payload_body(model, spec)
    nominal_mass = float(nominal.body_mass[body])
    nominal = with_payload(nominal, body, shift.payload_kg)
    sample = dr.nominal_sample(nominal)
    sample.friction_scale[:] = shift.friction_scale
    dr.apply_model_sample(model, data, nominal, sample)
    if model.body_gravcomp[body] > 0:  # compensated for the nominal mass only
        model.body_gravcomp[body] = nominal_mass / float(model.body_mass[body])
    return nominal


class ShiftedSimRobot(SimRobot):
    """A lockstep MuJoCo SimRobot whose model and actuators carry a :class:`RealityShift`."""

    def __init__(self, spec: RobotSpec, shift: RealityShift, *, scene: SimScene | None = None):
        super().__init__(spec, "mujoco", realtime=False, scene=scene)
        self.shift = shift
        self._queue: collections.deque[JointCommand] = collections.deque()

    def connect(self) -> None:
        super().connect()
        backend = self._backend
        robot = backend.robot
        apply_shift_to_model(robot.model, backend.data, self.spec, robot.base_body_id, robot.joint_ids, self.shift,
                             self.scene)
        self._queue.clear()
        for _ in range(self.shift.latency_steps):  # the motors start on the power-up (passive) command
            self._queue.append(JointCommand.passive(self.spec.num_joints))

    def reposition(self) -> None:
        """Put the robot back in its default pose, at rest (a fallen legged robot back on its feet). Stands in
        for the person who does that on hardware between episodes; the runtime then ramps from there."""
        backend = self._require()
        with self._lock:
            backend.robot.reset(backend.data)

    def reset_scene(self, scene: SimScene) -> None:
        """Put every free object of ``scene`` at its start pose, at rest (a push episode's layout). ``scene``
        must hold the objects the robot was built with (same names); stands in for the person who sets the
        object down between episodes on hardware."""
        import mujoco

        backend = self._require()
        built = {b.name for b in self.scene.boxes if b.mass_kg is not None} if self.scene is not None else set()
        wanted = {b.name for b in scene.boxes if b.mass_kg is not None}
        if wanted != built:
            raise ValueError(f"reset_scene: the robot was built with objects {sorted(built)}, got {sorted(wanted)}")
        model, data = backend.robot.model, backend.data
        with self._lock:
            for box in scene.boxes:
                if box.mass_kg is None:
                    continue  # fixed (a table): where it was built
                joint = model.body(box.name).jntadr[0]
                q, v = model.jnt_qposadr[joint], model.jnt_dofadr[joint]
                data.qpos[q : q + 7] = [*box.pos, 1.0, 0.0, 0.0, 0.0]
                data.qvel[v : v + 6] = 0.0
            mujoco.mj_forward(model, data)

    def write(self, command: JointCommand) -> JointCommand:
        actual = command.copy()
        actual.kp = command.kp * self.shift.kp_scale
        actual.kd = command.kd * self.shift.kd_scale
        self._queue.append(actual)
        return super().write(self._queue.popleft())


def with_measured_actuators(spec: RobotSpec, shift: RealityShift) -> RobotSpec:
    """``spec`` whose safety chain knows the motors deliver ``shift``'s kp and kd scales (its torque limit then
    estimates the torque the robot really applies): what ``robot-rl calibrate`` tells a user to write into the
    robot's file (``safety.actuator_kp_scale``, ``safety.actuator_kd_scale``)."""
    safety = dataclasses.replace(spec.safety, actuator_kp_scale=shift.kp_scale, actuator_kd_scale=shift.kd_scale)
    return dataclasses.replace(spec, safety=safety)


def randomization_around(shift: RealityShift, training: dr.RandomizationCfg, spread: float = 0.1,
                         payload_spread_kg: float = 0.5) -> dr.RandomizationCfg:
    """Domain randomization re-centred on ``shift`` (a calibrated robot): its gains and friction ±``spread``
    around the shift's, its payload ±``payload_spread_kg``, its latency as is; every other term (link masses,
    COM, motor strength, pushes, observation noise, the initial pose) as the task trained with (``training``).
    The payload spread is DR's base-mass term: on a legged robot the payload's own body; an arm's payload hangs
    on its hand, which that term does not reach (there it only moves the fixed base's mass: no effect)."""
    def around(value: float) -> tuple[float, float]:
        return (value * (1 - spread), value * (1 + spread))

    return dataclasses.replace(
        training, kp_scale=around(shift.kp_scale), kd_scale=around(shift.kd_scale),
        friction_scale=around(shift.friction_scale), base_mass_add_kg=(-payload_spread_kg, payload_spread_kg),
        action_latency_steps=(shift.latency_steps, shift.latency_steps))


def shifted_vec_env(task, shift: RealityShift, num_envs: int, *, seed: int = 0, nthread: int | None = None,
                    randomization: dr.RandomizationCfg | None = None, spec: RobotSpec | None = None):
    """A :class:`~robot_rl.sim.mujoco_vec_env.MujocoVecEnv` of ``task`` under ``shift``: fixed in every env, or
    drawn per env from ``randomization`` (e.g. :func:`randomization_around` the shift) on the shifted model."""
    import mujoco

    from robot_rl.sim.mujoco_vec_env import MujocoVecEnv

    task = dataclasses.replace(task, randomization=randomization or shift.randomization())
    env = MujocoVecEnv(task, num_envs, seed=seed, randomize=True, nthread=nthread, spec=spec)
    first = env.models[0]
    scratch = mujoco.MjData(first)
    env.nominal = apply_shift_to_model(first, scratch, env.spec, env.robot.base_body_id, env.robot.joint_ids, shift,
                                       env.world.scene)
    for model in env.models[1:]:
        model.body_gravcomp[:] = first.body_gravcomp
    env.reset()  # every env re-applies the (shifted) nominal model
    return env
