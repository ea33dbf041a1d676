"""In-process simulated robots (MuJoCo, PyBullet) behind the same RobotInterface as real hardware.

Two clocks:

- **lockstep** (default): ``write`` advances the simulation by exactly one policy period. Deterministic
  and as fast as the CPU allows: the sim2sim gate, tests and the demo use it. The runtime then takes
  ``now`` from :meth:`sim_time`, so the watchdogs see simulated time.
- **real time**: a background thread steps the physics at the spec's physics period on fixed deadlines,
  applying the latest command at every step, as a robot's motor drivers do; ``read`` returns the latest
  state. For trying the runtime's real loop timing without hardware.

The PD law runs at every physics substep in both simulators (MuJoCo: in its actuators; PyBullet: we
compute the torque before every ``stepSimulation``), so a position target held for one policy period acts
like a motor driver's PD, not like a torque held for 20 ms.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Literal, Protocol

import numpy as np

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.hardware.gantry import GantryHandle, add_gantry, needs_gantry
from robot_rl.robots.spec import RobotSpec

# "mujoco-alt": MuJoCo with its second integrator/contact configuration (robot_rl.robots.mujoco_physics), the gate's
# second physics for a robot without a URDF for PyBullet.
SimulatorName = Literal["mujoco", "pybullet", "mujoco-alt"]


@dataclass(frozen=True)
class SceneBox:
    """A box added to the simulated world: fixed (a table) when ``mass_kg`` is None, else free (a cube)."""

    name: str
    half_size: tuple[float, float, float]  # m
    pos: tuple[float, float, float]  # world frame, m (a free box's initial position)
    mass_kg: float | None = None
    friction: float = 0.8  # sliding friction of contacts between boxes, in both simulators (see below)
    rgba: tuple[float, float, float, float] = (0.6, 0.6, 0.6, 1.0)


@dataclass(frozen=True)
class SimScene:
    """Objects around the robot, built the same way in every simulator. ``tracked`` names the box whose
    position :meth:`SimRobot.object_position` reads (robot base frame), as a perception source would on hardware."""

    boxes: tuple[SceneBox, ...]
    tracked: str | None = None

    def __post_init__(self) -> None:
        names = [b.name for b in self.boxes]
        if self.tracked is not None and self.tracked not in names:
            raise ValueError(f"scene: tracked object {self.tracked!r} is not one of its boxes {names}")
        if len(set(names)) != len(names):
            raise ValueError(f"scene: box names must be unique, got {names}")


def base_frame(point_world: np.ndarray, base_pos: np.ndarray, base_rot: np.ndarray) -> np.ndarray:
    """World point(s) (…, 3) in the robot's base frame (``base_rot``: the base's rotation matrix, world ← base)."""
    return (np.asarray(point_world) - base_pos) @ base_rot


def add_scene(mjs, scene: SimScene) -> None:
    """Add ``scene``'s boxes to a MuJoCo ``MjSpec`` (``build_mujoco_model``'s world hook): fixed boxes as world
    geoms, free ones as bodies with a free joint. The robot's and the training env's worlds both build it here."""
    import mujoco

    for box in scene.boxes:
        # MuJoCo takes the larger friction of two touching geoms: box on box gets box.friction.
        geom = dict(type=mujoco.mjtGeom.mjGEOM_BOX, size=list(box.half_size), rgba=list(box.rgba),
                    friction=[box.friction, 0.005, 0.0001])
        if box.mass_kg is None:
            mjs.worldbody.add_geom(name=box.name, pos=list(box.pos), **geom)
        else:
            body = mjs.worldbody.add_body(name=box.name, pos=list(box.pos))
            body.add_freejoint()
            body.add_geom(name=box.name, mass=box.mass_kg, **geom)


def no_gravcomp_on_objects(model, scene: SimScene) -> None:
    """An arm's model compensates gravity on every body (as its controller does): not on the scene's objects."""
    for box in scene.boxes:
        if box.mass_kg is not None:
            model.body_gravcomp[model.body(box.name).id] = 0.0


def scene_ids(model, scene: SimScene | None) -> tuple[np.ndarray, np.ndarray]:
    """(geom ids, free body ids) of ``scene``'s boxes in ``model``: what domain randomization leaves alone
    (objects keep their own friction and mass)."""
    if scene is None:
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    geoms = [model.geom(box.name).id for box in scene.boxes]
    bodies = [model.body(box.name).id for box in scene.boxes if box.mass_kg is not None]
    return np.array(geoms, dtype=int), np.array(bodies, dtype=int)


class _SimBackend(Protocol):
    """What a simulator must offer the SimRobot: command, one physics step, state, a push."""

    def apply(self, command: JointCommand) -> JointCommand: ...  # called before every physics step
    def physics_step(self) -> None: ...
    def state(self, tick: int, timestamp: float) -> RobotState: ...
    def object_position(self) -> np.ndarray | None: ...
    def add_base_velocity(self, delta_world: np.ndarray) -> None: ...
    def release_gantry(self) -> None: ...  # no-op without one
    def gantry_engaged(self) -> bool: ...
    def close(self) -> None: ...


class _MujocoBackend(_SimBackend):
    def __init__(self, spec: RobotSpec, scene: SimScene | None = None, alternate: bool = False):
        import mujoco

        from robot_rl.robots.mujoco_model import build_mujoco_model
        from robot_rl.robots.mujoco_physics import ALTERNATE_PHYSICS, DEFAULT_PHYSICS

        self._mujoco = mujoco
        self.scene = scene
        physics = ALTERNATE_PHYSICS if alternate else DEFAULT_PHYSICS
        self._substeps = physics.substeps
        hang = needs_gantry(spec)

        def world(mjs) -> None:
            if scene is not None:
                add_scene(mjs, scene)
            if hang:
                add_gantry(mjs, spec)

        self.robot = build_mujoco_model(spec, terrain=world, physics=physics)
        if scene is not None:
            no_gravcomp_on_objects(self.robot.model, scene)
        self.data = self.robot.make_data()
        self._gantry = GantryHandle(self.robot.model) if hang else None
        self._tracked = None if scene is None or scene.tracked is None else self.robot.model.body(scene.tracked).id

    def apply(self, command: JointCommand) -> JointCommand:
        return self.robot.apply_command(self.data, command)

    def physics_step(self) -> None:
        self._mujoco.mj_step(self.robot.model, self.data, self._substeps)

    def state(self, tick: int, timestamp: float) -> RobotState:
        return self.robot.read_state(self.data, tick=tick, timestamp=timestamp)

    def object_position(self) -> np.ndarray | None:
        if self._tracked is None:
            return None
        b = self.robot.base_body_id
        return base_frame(self.data.xpos[self._tracked], self.data.xpos[b], self.data.xmat[b].reshape(3, 3))

    def add_base_velocity(self, delta_world: np.ndarray) -> None:
        if self.robot.free_qvel_adr is None:
            raise ValueError(f"{self.robot.spec.name} has a fixed base: it cannot be pushed")
        adr = self.robot.free_qvel_adr
        self.data.qvel[adr : adr + 3] += delta_world  # free joint: world-frame linear velocity first

    def release_gantry(self) -> None:
        if self._gantry is not None:
            self._gantry.release(self.data)

    def gantry_engaged(self) -> bool:
        return self._gantry is not None and self._gantry.engaged(self.data)

    def close(self) -> None:
        pass


class _PybulletBackend(_SimBackend):
    def __init__(self, spec: RobotSpec, scene: SimScene | None = None):
        import pybullet as pb

        from robot_rl.robots.pybullet_model import build_pybullet_robot

        if needs_gantry(spec):
            raise ValueError(f"{spec.name}: a {spec.kind} hangs from a gantry until its policy runs, and only the "
                             "MuJoCo simulators model one; use simulator 'mujoco' or 'mujoco-alt'")
        self._pb = pb
        self.client = pb.connect(pb.DIRECT)
        self.robot = build_pybullet_robot(spec, self.client)
        self.robot.reset()
        self._command: JointCommand | None = None
        self._bodies = {} if scene is None else {box.name: self._add_box(box) for box in scene.boxes}
        self._tracked = None if scene is None or scene.tracked is None else self._bodies[scene.tracked]

    def _add_box(self, box: SceneBox) -> int:
        pb, c = self._pb, {"physicsClientId": self.client}
        shape = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=list(box.half_size), **c)
        visual = pb.createVisualShape(pb.GEOM_BOX, halfExtents=list(box.half_size), rgbaColor=list(box.rgba), **c)
        body = pb.createMultiBody(baseMass=0.0 if box.mass_kg is None else box.mass_kg,
                                  baseCollisionShapeIndex=shape, baseVisualShapeIndex=visual,
                                  basePosition=list(box.pos), **c)
        # PyBullet multiplies the two bodies' coefficients (MuJoCo takes the larger): √friction on each box
        # gives box-on-box contact the same coefficient as in MuJoCo.
        pb.changeDynamics(body, -1, lateralFriction=float(np.sqrt(box.friction)), linearDamping=0.0,
                          angularDamping=0.0, **c)
        return body

    def apply(self, command: JointCommand) -> JointCommand:
        applied = command.copy()
        spec = self.robot.spec
        applied.q_target = np.clip(command.q_target, spec.position_lower, spec.position_upper)
        self._command = applied
        return applied

    def physics_step(self) -> None:
        if self._command is not None:
            self.robot.apply_pd(self._command)  # PyBullet forgets torques after every step
        self.robot.step()

    def state(self, tick: int, timestamp: float) -> RobotState:
        state = self.robot.read_state(timestamp=timestamp)
        state.tick = tick
        return state

    def object_position(self) -> np.ndarray | None:
        if self._tracked is None:
            return None
        pos, _ = self._pb.getBasePositionAndOrientation(self._tracked, physicsClientId=self.client)
        base_pos, base_orn = self.robot.base_pose()
        base_rot = np.array(self._pb.getMatrixFromQuaternion(base_orn)).reshape(3, 3)
        return base_frame(pos, base_pos, base_rot)

    def add_base_velocity(self, delta_world: np.ndarray) -> None:
        pb, r = self._pb, self.robot
        lin, ang = pb.getBaseVelocity(r.body_id, physicsClientId=self.client)
        pb.resetBaseVelocity(r.body_id, (np.array(lin) + delta_world).tolist(), ang, physicsClientId=self.client)

    def release_gantry(self) -> None:
        pass  # never has one (see __init__)

    def gantry_engaged(self) -> bool:
        return False

    def close(self) -> None:
        if self._pb.isConnected(self.client):
            self._pb.disconnect(self.client)


_BACKENDS = {"mujoco": _MujocoBackend, "pybullet": _PybulletBackend,
             "mujoco-alt": partial(_MujocoBackend, alternate=True)}


class SimRobot:
    """A simulated robot implementing RobotInterface (connect / read / write / close)."""

    def __init__(
        self, spec: RobotSpec, simulator: SimulatorName = "mujoco", *, realtime: bool = False,
        scene: SimScene | None = None, gantry_release_s: float | None = None,
    ):
        """``scene``: boxes to add around the robot (a table, a cube); its tracked box is the task's object, read by
        :meth:`object_position` (the task's observation source, as a perception source would be on hardware).

        A humanoid (``robot_rl.hardware.gantry.needs_gantry``) starts hanging from a gantry; :meth:`release_gantry`
        lowers it (``run_loop`` calls it when the policy takes over) and so does sim time ``gantry_release_s``,
        when given, whichever comes first."""
        if simulator not in _BACKENDS:
            raise ValueError(f"unknown simulator {simulator!r} (known: {', '.join(_BACKENDS)})")
        if gantry_release_s is not None and not gantry_release_s >= 0:
            raise ValueError(f"gantry_release_s must be a sim time >= 0 s, got {gantry_release_s!r}")
        self.gantry_release_s = gantry_release_s
        self.spec = spec
        self.simulator = simulator
        self.realtime = realtime
        self.scene = scene
        self._backend: _SimBackend | None = None
        self._steps = 0  # physics steps taken
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._running = False
        self._command: JointCommand | None = None
        self._t0 = 0.0

    # -- RobotInterface -------------------------------------------------------------------------------
    def connect(self) -> None:
        self._backend = _BACKENDS[self.simulator](self.spec, self.scene)
        # Motors start passive, as a robot powers up in zero-torque mode: the runtime must ramp it up.
        self._command = JointCommand.passive(self.spec.num_joints)
        self._backend.apply(self._command)
        self._t0 = time.monotonic()
        if self.realtime:
            self._running = True
            self._thread = threading.Thread(target=self._physics_thread, name=f"{self.simulator}-physics", daemon=True)
            self._thread.start()

    def read(self) -> RobotState:
        backend = self._require()
        with self._lock:
            # The tick counts policy periods in lockstep and physics steps in real time: fresh either way.
            tick = self._steps
            timestamp = time.monotonic() if self.realtime else self.sim_time()
            return backend.state(tick=tick, timestamp=timestamp)

    def object_position(self) -> np.ndarray | None:
        """ObjectSensor: the scene's tracked object, robot base frame (m), at the last physics step; None without
        one. What the task's observation source reads in sim (on hardware: a perception source)."""
        backend = self._require()
        with self._lock:
            return backend.object_position()

    def write(self, command: JointCommand) -> JointCommand:
        backend = self._require()
        with self._lock:
            applied = backend.apply(command)
            self._command = applied
        if not self.realtime:
            for _ in range(self.spec.timing.decimation):
                self._physics_step(backend)
        return applied

    def close(self) -> None:
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    # -- simulation extras ----------------------------------------------------------------------------
    def sim_time(self) -> float:
        return self._steps * self.spec.timing.physics_period_s

    def release_gantry(self) -> None:
        """Lower the gantry (a humanoid's, see the constructor): it exerts nothing from the next physics step on.
        No-op for a robot without one or once released."""
        with self._lock:
            self._require().release_gantry()

    @property
    def gantry_engaged(self) -> bool:
        with self._lock:
            return self._require().gantry_engaged()

    def push(self, delta_velocity_world: np.ndarray) -> None:
        """Add a velocity to the base (a shove), world frame, m/s."""
        with self._lock:
            self._require().add_base_velocity(np.asarray(delta_velocity_world, dtype=np.float64))

    def _require(self) -> _SimBackend:
        if self._backend is None:
            raise RuntimeError(f"{self.simulator} robot {self.spec.name!r} is not connected; call connect() first")
        return self._backend

    def _physics_thread(self) -> None:
        from robot_rl.core.loop_timing import RateLoop

        loop = RateLoop(self.spec.timing.physics_period_s, spin_s=0.0)  # no spinning: leave the CPU to the loop
        backend = self._require()
        while self._running:
            loop.wait_next()
            with self._lock:
                self._physics_step(backend)

    def _physics_step(self, backend: _SimBackend) -> None:
        """One physics step; the gantry lets go at its stated time. Called with the lock held (real time)."""
        if self.gantry_release_s is not None and self.sim_time() + 1e-9 >= self.gantry_release_s:
            backend.release_gantry()
        backend.physics_step()
        self._steps += 1

    def __enter__(self) -> SimRobot:
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
