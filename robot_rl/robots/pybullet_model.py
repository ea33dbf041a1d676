"""The PyBullet model of a robot, built from its RobotSpec: the second simulator for sim2sim checks.

The spec's URDF is loaded into a caller-owned (DIRECT) client. Joints are found by name, the spec's
limits and default pose are applied, PyBullet's default velocity motors are switched off, and the PD law
of JointCommand runs here as explicit torque each physics step (``apply_pd`` then ``step``).

What PyBullet cannot take from the spec: armature (it has no rotor-inertia parameter), and an MJCF model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.robots.assets import ModelBuildError, ModelSourceError, pybullet_data_dir, resolve_model_path
from robot_rl.robots.spec import RobotSpec

try:
    import pybullet as pb
except ImportError as exc:  # pragma: no cover - the sim extra is part of every dev install
    raise ImportError("robot_rl.robots.pybullet_model needs PyBullet: pip install 'robot-rl[sim]'") from exc

GRAVITY = 9.81


@dataclass(eq=False)
class PybulletRobot:
    """A robot in a PyBullet client. Arrays are in spec joint order. Step with ``step()`` (not
    ``stepSimulation``) so the tick and the accelerometer estimate follow the physics."""

    spec: RobotSpec
    client_id: int
    body_id: int
    floor_id: int | None
    joint_indices: np.ndarray  # (n,) PyBullet joint index of each spec joint
    locked_joint_indices: tuple[int, ...]  # model joints not in the spec, held at 0 by position motors
    imu_link: int  # -1 for the base link
    end_effector_link: int | None
    foot_links: tuple[int, ...]
    gravity_compensation: bool
    movable_joints: list[int] = field(repr=False)  # every non-fixed joint, the DoFs of inverse dynamics
    base_inertial_pose: tuple = field(repr=False)  # base COM frame in the base link frame
    tick: int = 0
    last_tau: np.ndarray = field(default=None, repr=False)  # PD torque sent last (gravity excluded)
    _last_vel: tuple[int, np.ndarray] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.last_tau = np.zeros(len(self.joint_indices))

    def _call(self, fn, *args, **kwargs):
        return fn(*args, physicsClientId=self.client_id, **kwargs)

    def reset(self) -> None:
        """Default pose (base at base_height for a floating base), zero velocity."""
        spec = self.spec
        if spec.sim_model.floating_base:
            self.set_base_state([0.0, 0.0, spec.sim_model.base_height], [1.0, 0.0, 0.0, 0.0])
        for index, q in zip(self.joint_indices, spec.default_positions, strict=True):
            self._call(pb.resetJointState, self.body_id, int(index), float(q), 0.0)
        for index in self.locked_joint_indices:
            self._call(pb.resetJointState, self.body_id, index, 0.0, 0.0)
        self.last_tau = np.zeros(len(self.joint_indices))
        self._last_vel = None

    def set_base_state(self, pos, quat_wxyz, lin_vel=(0.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 0.0)) -> None:
        """Place the base link frame (PyBullet itself places the base COM frame); velocities in world frame,
        the linear one of the base link origin."""
        w, x, y, z = quat_wxyz
        com_pos, com_orn = pb.multiplyTransforms(pos, [x, y, z, w], *self.base_inertial_pose)
        v_com = np.asarray(lin_vel, dtype=float) + np.cross(ang_vel, np.array(com_pos) - np.asarray(pos))
        self._call(pb.resetBasePositionAndOrientation, self.body_id, com_pos, com_orn)
        self._call(pb.resetBaseVelocity, self.body_id, v_com.tolist(), list(ang_vel))
        self._last_vel = None

    def joint_positions_velocities(self) -> tuple[np.ndarray, np.ndarray]:
        states = self._call(pb.getJointStates, self.body_id, self.joint_indices.tolist())
        return np.array([s[0] for s in states]), np.array([s[1] for s in states])

    def apply_pd(self, command: JointCommand) -> np.ndarray:
        """Apply tau = kp(q*−q) + kd(dq*−dq) + tau_ff, clipped to ±effort_limit, for the next ``step()``
        (PyBullet clears applied torques after every step). Gravity compensation, when on, is added on top
        of the clipped torque, as the arm's own controller adds it. Returns the clipped PD torque."""
        q, dq = self.joint_positions_velocities()
        limit = self.spec.effort_limits
        tau = np.clip(command.kp * (command.q_target - q) + command.kd * (command.dq_target - dq) + command.tau_ff,
                      -limit, limit)
        sent = tau + self._gravity_torque() if self.gravity_compensation else tau
        self._call(pb.setJointMotorControlArray, self.body_id, self.joint_indices.tolist(), pb.TORQUE_CONTROL,
                   forces=sent.tolist())
        self.last_tau = tau
        return tau

    def _gravity_torque(self) -> np.ndarray:
        states = self._call(pb.getJointStates, self.body_id, self.movable_joints)
        zeros = [0.0] * len(self.movable_joints)
        tau = self._call(pb.calculateInverseDynamics, self.body_id, [s[0] for s in states], zeros, zeros)
        where = {joint: i for i, joint in enumerate(self.movable_joints)}
        return np.array([tau[where[int(j)]] for j in self.joint_indices])

    def step(self) -> None:
        self._call(pb.stepSimulation)
        self.tick += 1

    def base_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Base link frame (not PyBullet's base COM frame): position, quaternion x y z w."""
        com_pos, com_orn = self._call(pb.getBasePositionAndOrientation, self.body_id)
        pos, orn = pb.multiplyTransforms(com_pos, com_orn, *pb.invertTransform(*self.base_inertial_pose))
        return np.array(pos), np.array(orn)

    def read_state(self, *, timestamp: float | None = None) -> RobotState:
        """The robot as its hardware would report it. PyBullet has no accelerometer: base_lin_acc is
        estimated from the IMU's velocity change since the previous read (zero acceleration on the first)."""
        q, dq = self.joint_positions_velocities()
        base_pos, base_orn = self.base_pose()
        com_pos, _ = self._call(pb.getBasePositionAndOrientation, self.body_id)
        v_com, omega = (np.array(v) for v in self._call(pb.getBaseVelocity, self.body_id))
        v_base = v_com + np.cross(omega, base_pos - np.array(com_pos))
        if self.imu_link == -1:
            imu_orn, v_imu = base_orn, v_base
        else:
            link = self._call(pb.getLinkState, self.body_id, self.imu_link, computeLinkVelocity=1,
                              computeForwardKinematics=1)
            imu_orn, v_imu, omega = np.array(link[5]), np.array(link[6]), np.array(link[7])
        r_imu = _rotation(imu_orn)
        dt = self.spec.timing.physics_period_s
        acc = np.zeros(3)
        if self._last_vel is not None and self.tick > self._last_vel[0]:
            acc = (v_imu - self._last_vel[1]) / (dt * (self.tick - self._last_vel[0]))
        self._last_vel = (self.tick, v_imu)
        return RobotState(
            timestamp=self.tick * dt if timestamp is None else timestamp,
            tick=self.tick,
            q=q,
            dq=dq,
            tau=self.last_tau.copy(),
            base_quat=np.array([imu_orn[3], imu_orn[0], imu_orn[1], imu_orn[2]]),
            base_ang_vel=r_imu.T @ omega,
            base_lin_acc=r_imu.T @ (acc + np.array([0.0, 0.0, GRAVITY])),
            base_lin_vel=_rotation(base_orn).T @ v_base,
            base_pos=base_pos,
        )


def _rotation(quat_xyzw) -> np.ndarray:
    return np.array(pb.getMatrixFromQuaternion(list(quat_xyzw))).reshape(3, 3)


def build_pybullet_robot(
    spec: RobotSpec, client_id: int, *, floor: bool = True, gravity_compensation: bool | None = None
) -> PybulletRobot:
    """Load ``spec``'s URDF into ``client_id`` and apply the spec. Also sets the client's gravity and time
    step (the spec's physics period). ``gravity_compensation``: see build_mujoco_model (default: arms)."""
    path = resolve_model_path(spec)
    where = f"{spec.source_file or spec.name} (model {path})"
    if path.suffix.lower() != ".urdf":
        raise ModelSourceError(f"{where}: PyBullet loads URDF models only; this model is {path.suffix}")
    sim = spec.sim_model
    gravity_compensation = spec.kind == "arm" if gravity_compensation is None else gravity_compensation
    if gravity_compensation and sim.floating_base:
        raise ModelBuildError(f"{where}: gravity compensation is for fixed-base arms; this robot has a floating base")
    c = {"physicsClientId": client_id}
    pb.setGravity(0, 0, -GRAVITY, **c)
    pb.setTimeStep(spec.timing.physics_period_s, **c)
    floor_id = None
    if floor:
        floor_id = pb.loadURDF(str(pybullet_data_dir() / "plane.urdf"), useFixedBase=True, **c)
        # PyBullet multiplies the two bodies' friction coefficients; the floor at 1 leaves the robot's.
        pb.changeDynamics(floor_id, -1, lateralFriction=1.0, **c)
    start = [0.0, 0.0, sim.base_height if sim.floating_base else 0.0]
    # Inertia from the file (PyBullet recomputes it from the collision shapes by default): both sims
    # must see the same inertia tensors.
    body = pb.loadURDF(str(path), start, useFixedBase=not sim.floating_base,
                       flags=pb.URDF_USE_INERTIA_FROM_FILE, **c)
    joints = {}
    links = {pb.getBodyInfo(body, **c)[0].decode(): -1}
    movable = []
    for index in range(pb.getNumJoints(body, **c)):
        info = pb.getJointInfo(body, index, **c)
        joints[info[1].decode()] = (index, info[2], info[8], info[9])
        links[info[12].decode()] = index
        if info[2] != pb.JOINT_FIXED:
            movable.append(index)
    missing = [n for n in spec.joint_names if n not in joints]
    if missing:
        raise ModelBuildError(f"{where}: spec joints {missing} are not in the URDF (it has {list(joints)})")
    wanted = [sim.base_body, sim.imu_body, *sim.foot_bodies]
    wanted += [sim.end_effector_body] if sim.end_effector_body else []
    absent = [b for b in wanted if b not in links]
    if absent:
        raise ModelBuildError(f"{where}: sim_model bodies {absent} are not links of the URDF (it has {list(links)})")
    if links[sim.base_body] != -1:
        raise ModelBuildError(f"{where}: sim_model.base_body {sim.base_body!r} is not the URDF's root link")
    indices = np.array([joints[n][0] for n in spec.joint_names])
    for index, js in zip(indices, spec.joints, strict=True):
        pb.changeDynamics(body, int(index), jointLowerLimit=js.position_limit[0],
                          jointUpperLimit=js.position_limit[1], jointDamping=0.0, **c)
    for link in links.values():
        # PyBullet's default 0.04 linear/angular damping has no counterpart on a real robot or in MuJoCo.
        pb.changeDynamics(body, link, lateralFriction=sim.base_friction, linearDamping=0.0, angularDamping=0.0, **c)
    # Switch the default velocity motors off: with them, every joint would feel an extra motor holding it.
    pb.setJointMotorControlArray(body, indices.tolist(), pb.VELOCITY_CONTROL, forces=[0.0] * len(indices), **c)
    locked = []
    for name, (index, _, lo, hi) in joints.items():
        if name in spec.joint_names or index not in movable:
            continue
        # Same rule as MuJoCo (which welds them): held at 0, by a position motor with the URDF's effort.
        if lo < hi and not lo <= 0 <= hi:
            raise ModelBuildError(f"{where}: joint {name!r} is not in the spec and cannot be held at 0 ([{lo}, {hi}])")
        force = pb.getJointInfo(body, index, **c)[10]
        pb.setJointMotorControl2(body, index, pb.POSITION_CONTROL, targetPosition=0.0, force=force, **c)
        locked.append(index)
    robot = PybulletRobot(
        spec=spec, client_id=client_id, body_id=body, floor_id=floor_id, joint_indices=indices,
        locked_joint_indices=tuple(locked), imu_link=links[sim.imu_body],
        end_effector_link=links[sim.end_effector_body] if sim.end_effector_body else None,
        foot_links=tuple(links[b] for b in sim.foot_bodies), gravity_compensation=gravity_compensation,
        movable_joints=movable, base_inertial_pose=tuple(pb.getDynamicsInfo(body, -1, **c)[3:5]),
    )
    robot.reset()
    return robot


__all__ = ["PybulletRobot", "build_pybullet_robot"]
