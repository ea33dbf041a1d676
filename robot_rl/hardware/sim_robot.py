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
from typing import Literal, Protocol

import numpy as np

from robot_rl.hardware.interface import JointCommand, RobotState
from robot_rl.robots.spec import RobotSpec

SimulatorName = Literal["mujoco", "pybullet"]


class _SimBackend(Protocol):
    """What a simulator must offer the SimRobot: command, one physics step, state, a push."""

    def apply(self, command: JointCommand) -> JointCommand: ...  # called before every physics step
    def physics_step(self) -> None: ...
    def state(self, tick: int, timestamp: float) -> RobotState: ...
    def add_base_velocity(self, delta_world: np.ndarray) -> None: ...
    def close(self) -> None: ...


class _MujocoBackend(_SimBackend):
    def __init__(self, spec: RobotSpec):
        import mujoco

        from robot_rl.robots.mujoco_model import build_mujoco_model

        self._mujoco = mujoco
        self.robot = build_mujoco_model(spec)
        self.data = self.robot.make_data()

    def apply(self, command: JointCommand) -> JointCommand:
        return self.robot.apply_command(self.data, command)

    def physics_step(self) -> None:
        self._mujoco.mj_step(self.robot.model, self.data)

    def state(self, tick: int, timestamp: float) -> RobotState:
        return self.robot.read_state(self.data, tick=tick, timestamp=timestamp)

    def add_base_velocity(self, delta_world: np.ndarray) -> None:
        if self.robot.free_qvel_adr is None:
            raise ValueError(f"{self.robot.spec.name} has a fixed base: it cannot be pushed")
        adr = self.robot.free_qvel_adr
        self.data.qvel[adr : adr + 3] += delta_world  # free joint: world-frame linear velocity first

    def close(self) -> None:
        pass


class _PybulletBackend(_SimBackend):
    def __init__(self, spec: RobotSpec):
        import pybullet as pb

        from robot_rl.robots.pybullet_model import build_pybullet_robot

        self._pb = pb
        self.client = pb.connect(pb.DIRECT)
        self.robot = build_pybullet_robot(spec, self.client)
        self.robot.reset()
        self._command: JointCommand | None = None

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

    def add_base_velocity(self, delta_world: np.ndarray) -> None:
        pb, r = self._pb, self.robot
        lin, ang = pb.getBaseVelocity(r.body_id, physicsClientId=self.client)
        pb.resetBaseVelocity(r.body_id, (np.array(lin) + delta_world).tolist(), ang, physicsClientId=self.client)

    def close(self) -> None:
        if self._pb.isConnected(self.client):
            self._pb.disconnect(self.client)


_BACKENDS = {"mujoco": _MujocoBackend, "pybullet": _PybulletBackend}


class SimRobot:
    """A simulated robot implementing RobotInterface (connect / read / write / close)."""

    def __init__(self, spec: RobotSpec, simulator: SimulatorName = "mujoco", *, realtime: bool = False):
        if simulator not in _BACKENDS:
            raise ValueError(f"unknown simulator {simulator!r} (known: {', '.join(_BACKENDS)})")
        self.spec = spec
        self.simulator = simulator
        self.realtime = realtime
        self._backend: _SimBackend | None = None
        self._steps = 0  # physics steps taken
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._running = False
        self._command: JointCommand | None = None
        self._t0 = 0.0

    # -- RobotInterface -------------------------------------------------------------------------------
    def connect(self) -> None:
        self._backend = _BACKENDS[self.simulator](self.spec)
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

    def write(self, command: JointCommand) -> JointCommand:
        backend = self._require()
        with self._lock:
            applied = backend.apply(command)
            self._command = applied
        if not self.realtime:
            for _ in range(self.spec.timing.decimation):
                backend.physics_step()
                self._steps += 1
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

    def push(self, delta_velocity_world: np.ndarray) -> None:
        """Add a velocity to the base (a shove), world frame, m/s."""
        with self._lock:
            self._require().add_base_velocity(np.asarray(delta_velocity_world, dtype=np.float64))

    def _require(self) -> _SimBackend:
        if self._backend is None:
            raise RuntimeError(f"{self.simulator} robot {self.spec.name!r} is not connected; call connect() first")
        return self._backend

    def _physics_thread(self) -> None:
        from robot_rl.control.loop_timing import RateLoop

        loop = RateLoop(self.spec.timing.physics_period_s, spin_s=0.0)  # no spinning: leave the CPU to the loop
        backend = self._require()
        while self._running:
            loop.wait_next()
            with self._lock:
                backend.physics_step()
                self._steps += 1

    def __enter__(self) -> SimRobot:
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
