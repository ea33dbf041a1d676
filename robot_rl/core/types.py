"""The robot interface contract: what every robot (sim, Unitree over DDS, ROS 2, Franka) provides.

State and commands are plain arrays in the spec's joint order. Every implementation maps its own motor
slots or topic fields to that order by joint name, never by position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass
class RobotState:
    """One measurement of the robot. ``tick`` advances with every new measurement, so a frozen
    sensor stream is detectable even when messages keep arriving."""

    timestamp: float  # s, time.monotonic() of the reader when the measurement arrived
    tick: int  # measurement counter from the robot (or the interface), strictly increasing when fresh
    q: np.ndarray  # (n,) joint positions, rad
    dq: np.ndarray  # (n,) joint velocities, rad/s
    tau: np.ndarray  # (n,) measured (or estimated) joint torques, N·m
    base_quat: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0, 0.0]))  # (4,) w, x, y, z
    base_ang_vel: np.ndarray = field(default_factory=lambda: np.zeros(3))  # (3,) gyro, body frame, rad/s
    base_lin_acc: np.ndarray = field(default_factory=lambda: np.zeros(3))  # (3,) accelerometer, body frame
    # Only simulators know these exactly; on hardware they are None unless an estimator provides them.
    base_lin_vel: np.ndarray | None = None  # (3,) body frame, m/s
    base_pos: np.ndarray | None = None  # (3,) world frame, m
    # Task-specific state (the cube a manipulation task pushes) is not the robot's: it comes from the task's
    # observation source (ObjectSensor), a simulator's scene or, on hardware, a perception source.


@dataclass
class JointCommand:
    """A low-level joint command: tau = kp·(q_target − q) + kd·(dq_target − dq) + tau_ff.

    This is what Unitree motors, ros2_control PD controllers and our sims all execute. Damping is
    kp = 0, kd = damping_kd; passive (zero torque) is kp = kd = 0.
    """

    q_target: np.ndarray  # (n,) rad
    dq_target: np.ndarray  # (n,) rad/s
    kp: np.ndarray  # (n,)
    kd: np.ndarray  # (n,)
    tau_ff: np.ndarray  # (n,) N·m

    @classmethod
    def hold(cls, q_target: np.ndarray, kp: np.ndarray, kd: np.ndarray) -> JointCommand:
        n = len(q_target)
        return cls(np.array(q_target, dtype=np.float64), np.zeros(n), np.array(kp, dtype=np.float64),
                   np.array(kd, dtype=np.float64), np.zeros(n))

    @classmethod
    def damping(cls, n: int, kd: float) -> JointCommand:
        return cls(np.zeros(n), np.zeros(n), np.zeros(n), np.full(n, float(kd)), np.zeros(n))

    @classmethod
    def passive(cls, n: int) -> JointCommand:
        return cls.damping(n, 0.0)

    def copy(self) -> JointCommand:
        return JointCommand(self.q_target.copy(), self.dq_target.copy(), self.kp.copy(), self.kd.copy(),
                            self.tau_ff.copy())


@runtime_checkable
class ObjectSensor(Protocol):
    """The task's observation source: where the task's object is (the cube a manipulation task pushes). A simulated
    robot's scene is one (SimRobot); on hardware a perception source (a camera tracker, mocap) would be."""

    def object_position(self) -> np.ndarray | None:  # (3,) robot base frame, m; None: no object seen
        ...


@runtime_checkable
class RobotInterface(Protocol):
    """connect → (read, write)* → close. ``write`` returns the command actually sent (after any
    clamping the interface itself applies), as lerobot's ``send_action`` does."""

    def connect(self) -> None: ...

    def read(self) -> RobotState: ...

    def write(self, command: JointCommand) -> JointCommand: ...

    def close(self) -> None: ...
