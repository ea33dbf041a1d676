"""The MuJoCo model of a robot, built from its RobotSpec.

The URDF or MJCF named by ``spec.sim_model`` is loaded into an ``mujoco.MjSpec`` and edited so the
compiled model carries the spec's facts, not the file's: joint ranges, armature, zero joint damping and
friction, effort limits, default pose (keyframe ``default``; reset with ``MujocoRobot.reset``), physics period.

Actuation: three ``general`` actuators per spec joint, laid out in blocks of ``ctrl``:
``[kp (n) | kd (n) | kp·q* + kd·dq* + tau_ff (n)]``. The first has gain ``-q`` (so its force is ``-kp·q``),
the second gain ``-dq`` (force ``-kd·dq``, the same law as MuJoCo's ``damper``), the third is a plain
motor. Their sum is exactly the JointCommand law ``kp(q*−q) + kd(dq*−dq) + tau_ff``, clamped to
±effort_limit on the joint (``actuatorfrcrange``, which clamps the total). Why not a ``position``
actuator with the gains in ``gainprm``/``biasprm``: gains would then live in the model, so damping mode
(kp = 0), ramps, per-env gain randomization and tau_ff would all need model edits per step. Here every
command is plain ``data.ctrl``, batched envs set gains per env with one array write, one model can be
shared by all threads of ``mujoco.rollout``, and the PD still runs inside ``mj_step`` (no Python per
physics step) with its ``-kd`` velocity derivative integrated implicitly by ``implicitfast``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.robots.assets import ModelBuildError, resolve_model_path
from robot_rl.robots.mujoco_physics import DEFAULT_PHYSICS, MujocoPhysics, apply_physics
from robot_rl.robots.spec import RobotSpec

try:
    import mujoco
except ImportError as exc:  # pragma: no cover - the sim extra is part of every dev install
    raise ImportError("robot_rl.robots.mujoco_model needs MuJoCo: pip install 'robot-rl[sim]'") from exc

KEYFRAME = "default"
FLOOR_GEOM = "floor"
END_EFFECTOR_SITE = "end_effector"
IMU_SITE = "robot_rl_imu"  # added only when the imu body has no site of its own with "imu" in its name
GYRO, ACCELEROMETER, IMU_QUAT = "robot_rl_gyro", "robot_rl_accelerometer", "robot_rl_imu_quat"
# Contact filter: robot geoms (contype 0, conaffinity 1) touch world geoms (1, 1) but never each other.
# Self-collision of a quadruped at these poses is rare and, when it happens, is a failure the policy is
# terminated for anyway; dropping the pairs keeps the step fast and free of spurious leg-leg contacts.
ROBOT_CONTYPE, ROBOT_CONAFFINITY, WORLD_CONTYPE, WORLD_CONAFFINITY = 0, 1, 1, 1

Terrain = Callable[["mujoco.MjSpec"], None]


@dataclass(frozen=True, eq=False)
class MujocoRobot:
    """A compiled model plus every index the env and runtime need, each array in spec joint order."""

    spec: RobotSpec
    model: mujoco.MjModel
    joint_ids: np.ndarray  # (n,)
    qpos_adr: np.ndarray  # (n,) into data.qpos
    qvel_adr: np.ndarray  # (n,) into data.qvel / qfrc_*
    kp_ctrl: slice  # ctrl blocks, see the module docstring
    kd_ctrl: slice
    torque_ctrl: slice
    base_body_id: int
    free_qpos_adr: int | None  # 7 values (x y z, qw qx qy qz) for a floating base
    free_qvel_adr: int | None  # 6 values (world linear, body-frame angular)
    imu_site_id: int
    gyro_adr: int  # into data.sensordata, 3 values, IMU frame
    accelerometer_adr: int  # 3 values, IMU frame (specific force: reads +g at rest)
    imu_quat_adr: int  # 4 values, w x y z, IMU frame in world
    foot_body_ids: np.ndarray  # (feet,)
    foot_geom_ids: tuple[tuple[int, ...], ...]  # contact geoms of each foot
    foot_of_geom: np.ndarray  # (ngeom,) foot index of each geom, -1 for the rest
    end_effector_site_id: int | None
    floor_geom_id: int | None
    keyframe_id: int
    locked_joints: tuple[str, ...]  # model joints not in the spec, welded at 0
    gravity_compensation: bool

    @property
    def n_joints(self) -> int:
        return len(self.joint_ids)

    def make_data(self) -> mujoco.MjData:
        data = mujoco.MjData(self.model)
        self.reset(data)
        return data

    def reset(self, data: mujoco.MjData) -> None:
        """Default pose, zero velocity, ctrl holding the default pose with the spec gains."""
        mujoco.mj_resetDataKeyframe(self.model, data, self.keyframe_id)
        mujoco.mj_forward(self.model, data)

    def imu_in_base(self, data: mujoco.MjData) -> np.ndarray:
        """The IMU's fixed rotation on the base body (3×3, IMU axes in base coordinates): a base-frame vector v
        reads ``v @ R`` in the IMU frame; the IMU's orientation is the base's composed with R."""
        return data.xmat[self.base_body_id].reshape(3, 3).T @ data.site_xmat[self.imu_site_id].reshape(3, 3)

    def pd_ctrl(self, q_target, dq_target, kp, kd, tau_ff) -> np.ndarray:
        """ctrl for the PD law; every argument is (..., n) or broadcastable, the result (..., 3n).

        q_target is clipped to the spec position limits, as a position servo's ctrlrange would.
        """
        q = np.clip(q_target, self.spec.position_lower, self.spec.position_upper)
        kp, kd = np.asarray(kp, dtype=np.float64), np.asarray(kd, dtype=np.float64)
        offset = kp * q + kd * np.asarray(dq_target) + np.asarray(tau_ff)
        shape = np.broadcast_shapes(offset.shape, kp.shape, kd.shape)
        return np.concatenate(
            [np.broadcast_to(kp, shape), np.broadcast_to(kd, shape), np.broadcast_to(offset, shape)], axis=-1
        )

    def apply_command(self, data: mujoco.MjData, command: JointCommand) -> JointCommand:
        """Write ``command`` into ``data.ctrl``; returns the command as applied (q_target clipped)."""
        data.ctrl[:] = self.pd_ctrl(command.q_target, command.dq_target, command.kp, command.kd, command.tau_ff)
        applied = command.copy()
        applied.q_target = np.clip(command.q_target, self.spec.position_lower, self.spec.position_upper)
        return applied

    def read_state(
        self, data: mujoco.MjData, *, tick: int | None = None, timestamp: float | None = None, refresh: bool = True
    ) -> RobotState:
        """The robot as its hardware would report it. ``refresh`` reruns ``mj_forward`` so sensors and body
        velocities belong to the current qpos (after ``mj_step`` they are one step old); tick and timestamp
        default to the physics step count and sim time."""
        if refresh:
            mujoco.mj_forward(self.model, data)
        body_vel = np.zeros(6)
        # XBODY: the body frame itself (mjOBJ_BODY would give the COM in the principal-inertia frame).
        mujoco.mj_objectVelocity(self.model, data, mujoco.mjtObj.mjOBJ_XBODY, self.base_body_id, body_vel, 1)
        s = data.sensordata
        return RobotState(
            timestamp=float(data.time) if timestamp is None else timestamp,
            tick=round(data.time / self.model.opt.timestep) if tick is None else tick,
            q=data.qpos[self.qpos_adr].copy(),
            dq=data.qvel[self.qvel_adr].copy(),
            tau=data.qfrc_actuator[self.qvel_adr].copy(),
            base_quat=s[self.imu_quat_adr : self.imu_quat_adr + 4].copy(),
            base_ang_vel=s[self.gyro_adr : self.gyro_adr + 3].copy(),
            base_lin_acc=s[self.accelerometer_adr : self.accelerometer_adr + 3].copy(),
            base_lin_vel=body_vel[3:].copy(),
            base_pos=data.xpos[self.base_body_id].copy(),
        )

    def foot_contacts(self, data: mujoco.MjData) -> np.ndarray:
        """(feet,) bool: which feet touch anything (robot self-contacts are filtered out, so: the world)."""
        touching = np.zeros(len(self.foot_body_ids), dtype=bool)
        if data.ncon:
            feet = self.foot_of_geom[data.contact.geom[: data.ncon]].ravel()
            touching[feet[feet >= 0]] = True
        return touching


def build_mujoco_model(
    spec: RobotSpec,
    *,
    floor: bool = True,
    terrain: Terrain | None = None,
    gravity_compensation: bool | None = None,
    keep_visual: bool = False,
    physics: MujocoPhysics = DEFAULT_PHYSICS,
) -> MujocoRobot:
    """Compile ``spec``'s model with the spec applied.

    terrain: called with the MjSpec after the floor is added, to add world geoms (an hfield, boxes); geoms
        left at MuJoCo's default contype/conaffinity (1/1) collide with the robot.
    gravity_compensation: cancel gravity on the robot's bodies, as a Franka's (or UR's) own controller
        does, so a commanded torque excludes gravity as on the real arm. Default: on for arms, off
        otherwise (the spec has no field for it yet). It is a passive force, outside the effort clamp.
    keep_visual: keep visual meshes (for rendering); off for training, where they only cost time.
    physics: integrator and contact settings (robot_rl.robots.mujoco_physics); its ``substeps`` MuJoCo steps
        make one spec physics period.
    """
    path = resolve_model_path(spec)
    where = f"{spec.source_file or spec.name} (model {path})"
    mjs = _load(path, keep_visual)
    _check_names(mjs, spec, where)
    locked = _lock_unlisted_joints(mjs, spec, where)
    for element in list(mjs.actuators) + list(mjs.keys):
        mjs.delete(element)  # the file's own actuators and keyframes do not fit the edited model
    sim = spec.sim_model
    base = mjs.body(sim.base_body)
    if sim.floating_base:
        if not any(j.type == mujoco.mjtJoint.mjJNT_FREE for j in base.joints):
            if base.parent.name != "world":
                raise ModelBuildError(f"{where}: floating base body {sim.base_body!r} is not a child of the world")
            base.add_freejoint()
        base.pos = [base.pos[0], base.pos[1], sim.base_height]
    _configure_joints(mjs, spec)
    _add_pd_actuators(mjs, spec)
    _configure_contacts(mjs, spec, floor)
    if terrain is not None:
        terrain(mjs)
    imu_site_name = _add_sensors(mjs, spec)
    if sim.end_effector_body is not None:
        mjs.body(sim.end_effector_body).add_site(name=END_EFFECTOR_SITE)
    gravity_compensation = spec.kind == "arm" if gravity_compensation is None else gravity_compensation
    if gravity_compensation:
        for body in mjs.bodies:
            if body.name != "world":
                body.gravcomp = 1.0
    apply_physics(mjs, physics, spec.timing.physics_period_s)  # integrator, step, friction cone, contacts
    mjs.add_key(name=KEYFRAME)
    try:
        model = mjs.compile()
    except ValueError as exc:
        raise ModelBuildError(f"{where}: MuJoCo cannot compile the model: {exc}") from None
    return _index(model, spec, imu_site_name, locked, gravity_compensation)


def _load(path, keep_visual: bool) -> mujoco.MjSpec:
    is_urdf = path.suffix.lower() == ".urdf"
    if is_urdf and keep_visual:
        # MuJoCo's URDF reader drops <visual> while parsing unless the file itself says otherwise.
        text = re.sub(r"(<robot\b[^>]*>)", r'\1<mujoco><compiler discardvisual="false"/></mujoco>',
                      path.read_text(), count=1)
        mjs = mujoco.MjSpec.from_string(text)
    else:
        try:
            mjs = mujoco.MjSpec.from_file(str(path))
        except ValueError as exc:
            raise ModelBuildError(f"{path}: MuJoCo cannot read this model file: {exc}") from None
    # Keep fixed links as bodies: fusing would drop the spec's imu/toe/end-effector bodies by name.
    mjs.compiler.fusestatic = False
    mjs.compiler.discardvisual = not keep_visual
    if is_urdf:
        # Mesh paths relative to the URDF; a ROS package:// root is taken to be the URDF's directory too
        # (as PyBullet does).
        for mesh in mjs.meshes:
            file = mesh.file.removeprefix("package://")
            if not Path(file).is_absolute():
                mesh.file = str(path.parent / file)
    return mjs


def _check_names(mjs: mujoco.MjSpec, spec: RobotSpec, where: str) -> None:
    joints = [j.name for j in mjs.joints]
    missing = [n for n in spec.joint_names if n not in joints]
    if missing:
        raise ModelBuildError(f"{where}: spec joints {missing} are not in the model (it has {joints})")
    sim = spec.sim_model
    wanted = {"base_body": sim.base_body, "imu_body": sim.imu_body, "end_effector_body": sim.end_effector_body}
    wanted |= {f"foot_bodies[{i}]": b for i, b in enumerate(sim.foot_bodies)}
    bodies = [b.name for b in mjs.bodies]
    for key, name in wanted.items():
        if name is not None and name not in bodies:
            raise ModelBuildError(f"{where}: sim_model.{key} {name!r} is not a body of the model (it has {bodies})")


@dataclass(frozen=True)
class LimitMismatch:
    joint: str
    spec: tuple[float, float]  # the spec's position_limit, rad (m for a slide joint)
    model: tuple[float, float]  # the model file's range, same units

    @property
    def wider(self) -> bool:
        """The spec allows positions the model file does not (usually a typo, or the wrong model)."""
        return self.spec[0] < self.model[0] - LIMIT_TOLERANCE or self.spec[1] > self.model[1] + LIMIT_TOLERANCE


LIMIT_TOLERANCE = 1e-3  # rad: specs copy limits from datasheets and URDFs with 6 digits or fewer


def check_spec_against_model(spec: RobotSpec) -> tuple[Path, list[LimitMismatch]]:
    """Read ``spec``'s model file (no compile) and check the spec against it: every spec joint must be a
    joint of the model (:class:`ModelBuildError`, one line naming the spec file, the joint and the closest
    names), and every sim_model body a body of it. Returns the model path and each joint whose position
    limits differ from the model file's range. Raises ModelSourceError when the model is not on this machine.
    """
    import difflib
    import math

    path = resolve_model_path(spec)
    mjs = _load(path, keep_visual=False)
    source = spec.source_file or spec.name
    names = [j.name for j in mjs.joints if j.type != mujoco.mjtJoint.mjJNT_FREE]
    unused = [n for n in names if n not in set(spec.joint_names)]  # where a renamed joint would be
    for i, joint in enumerate(spec.joints):
        if joint.name not in names:
            close = difflib.get_close_matches(joint.name, unused, n=3, cutoff=0.3) or unused[:3]
            raise ModelBuildError(f"{source}: joints[{i}].name {joint.name!r} is not a joint of the model {path}"
                                  + (f" (model joints no spec joint uses: {', '.join(close)})" if close else ""))
    _check_names(mjs, spec, f"{source} (model {path})")
    scale = math.pi / 180 if mjs.compiler.degree and path.suffix.lower() != ".urdf" else 1.0
    mismatches = []
    for joint in spec.joints:
        model_joint = mjs.joint(joint.name)
        lo, hi = (float(v) * (scale if model_joint.type == mujoco.mjtJoint.mjJNT_HINGE else 1.0)
                  for v in model_joint.range)
        if model_joint.limited == mujoco.mjtLimited.mjLIMITED_FALSE or lo >= hi:
            continue  # the file gives no range to compare with
        if abs(joint.position_limit[0] - lo) > LIMIT_TOLERANCE or abs(joint.position_limit[1] - hi) > LIMIT_TOLERANCE:
            mismatches.append(LimitMismatch(joint.name, tuple(joint.position_limit), (lo, hi)))
    return path, mismatches


def _lock_unlisted_joints(mjs: mujoco.MjSpec, spec: RobotSpec, where: str) -> tuple[str, ...]:
    """Delete model joints the spec does not list (the Panda's fingers), welding their bodies at joint
    position 0. Deleting beats holding them with extra actuators: no extra DoFs to integrate, and nothing a
    policy could move. Equalities that tie them (URDF mimic) go too."""
    listed = set(spec.joint_names)
    locked = []
    for joint in list(mjs.joints):
        if joint.name in listed or joint.type == mujoco.mjtJoint.mjJNT_FREE:
            continue
        lo, hi = joint.range
        lockable = joint.type in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
        if not lockable or (lo < hi and not lo <= 0 <= hi):
            raise ModelBuildError(
                f"{where}: joint {joint.name!r} is not in the spec and cannot be welded at 0 "
                f"(type {joint.type.name}, range [{lo}, {hi}]); add it to the spec's joints"
            )
        locked.append(joint.name)
        mjs.delete(joint)
    for eq in list(mjs.equalities):
        if eq.type == mujoco.mjtEq.mjEQ_JOINT and (eq.name1 in locked or eq.name2 in locked):
            mjs.delete(eq)
    return tuple(locked)


def _configure_joints(mjs: mujoco.MjSpec, spec: RobotSpec) -> None:
    for js in spec.joints:
        joint = mjs.joint(js.name)
        joint.range = list(js.position_limit)
        joint.limited = mujoco.mjtLimited.mjLIMITED_TRUE
        joint.armature = js.armature
        joint.damping = [0.0, 0.0, 0.0]  # all damping comes from the commanded kd
        joint.frictionloss = 0.0
        joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_TRUE
        joint.actfrcrange = [-js.effort_limit, js.effort_limit]


def _add_pd_actuators(mjs: mujoco.MjSpec, spec: RobotSpec) -> None:
    affine, fixed = mujoco.mjtGain.mjGAIN_AFFINE, mujoco.mjtGain.mjGAIN_FIXED
    # gainprm = [constant, ·length (q), ·velocity (dq)]; force = gain · ctrl.
    blocks = (("stiffness", affine, [0.0, -1.0, 0.0]), ("damping", affine, [0.0, 0.0, -1.0]),
              ("torque", fixed, [1.0, 0.0, 0.0]))
    for suffix, gaintype, gain in blocks:
        for js in spec.joints:
            act = mjs.add_actuator(name=f"{js.name}_{suffix}", target=js.name)
            act.trntype = mujoco.mjtTrn.mjTRN_JOINT
            act.gaintype = gaintype
            act.gainprm = gain + [0.0] * 7
            act.biastype = mujoco.mjtBias.mjBIAS_NONE
            act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE


def _configure_contacts(mjs: mujoco.MjSpec, spec: RobotSpec, floor: bool) -> None:
    friction = spec.sim_model.base_friction
    for geom in mjs.geoms:
        if geom.contype == 0 and geom.conaffinity == 0:
            continue  # visual-only geom
        in_world = geom.parent.name == "world"
        geom.contype = WORLD_CONTYPE if in_world else ROBOT_CONTYPE
        geom.conaffinity = WORLD_CONAFFINITY if in_world else ROBOT_CONAFFINITY
        geom.friction[0] = friction
    if floor:
        mjs.add_texture(name="floor_checker", type=mujoco.mjtTexture.mjTEXTURE_2D,
                        builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER, width=64, height=64,
                        rgb1=[0.25, 0.3, 0.35], rgb2=[0.15, 0.2, 0.25])
        material = mjs.add_material(name="floor", texrepeat=[8, 8], texuniform=True)
        material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "floor_checker"
        mjs.worldbody.add_geom(name=FLOOR_GEOM, type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05],
                               material="floor", contype=WORLD_CONTYPE, conaffinity=WORLD_CONAFFINITY,
                               friction=[friction, 0.005, 0.0001])


def _add_sensors(mjs: mujoco.MjSpec, spec: RobotSpec) -> str:
    body = mjs.body(spec.sim_model.imu_body)
    own = [s.name for s in body.sites if "imu" in s.name.lower()]
    name = own[0] if len(own) == 1 else body.add_site(name=IMU_SITE).name
    for sensor_name, kind in ((GYRO, mujoco.mjtSensor.mjSENS_GYRO),
                              (ACCELEROMETER, mujoco.mjtSensor.mjSENS_ACCELEROMETER),
                              (IMU_QUAT, mujoco.mjtSensor.mjSENS_FRAMEQUAT)):
        mjs.add_sensor(name=sensor_name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=name)
    return name


def _index(model: mujoco.MjModel, spec: RobotSpec, imu_site: str, locked: tuple[str, ...], gravcomp: bool):
    n = len(spec.joints)
    joint_ids = np.array([model.joint(name).id for name in spec.joint_names])
    sim = spec.sim_model
    base_id = model.body(sim.base_body).id
    free = [j for j in range(model.njnt) if model.jnt_bodyid[j] == base_id and model.jnt_type[j] == 0]
    foot_ids = np.array([model.body(b).id for b in sim.foot_bodies], dtype=int)
    foot_geoms = tuple(_foot_geoms(model, body_id) for body_id in foot_ids)
    foot_of_geom = np.full(model.ngeom, -1, dtype=int)
    for i, geoms in enumerate(foot_geoms):
        foot_of_geom[list(geoms)] = i
    robot = MujocoRobot(
        spec=spec, model=model, joint_ids=joint_ids,
        qpos_adr=model.jnt_qposadr[joint_ids].copy(), qvel_adr=model.jnt_dofadr[joint_ids].copy(),
        kp_ctrl=slice(0, n), kd_ctrl=slice(n, 2 * n), torque_ctrl=slice(2 * n, 3 * n),
        base_body_id=base_id,
        free_qpos_adr=int(model.jnt_qposadr[free[0]]) if free else None,
        free_qvel_adr=int(model.jnt_dofadr[free[0]]) if free else None,
        imu_site_id=model.site(imu_site).id,
        gyro_adr=int(model.sensor(GYRO).adr[0]),
        accelerometer_adr=int(model.sensor(ACCELEROMETER).adr[0]),
        imu_quat_adr=int(model.sensor(IMU_QUAT).adr[0]),
        foot_body_ids=foot_ids, foot_geom_ids=foot_geoms, foot_of_geom=foot_of_geom,
        end_effector_site_id=model.site(END_EFFECTOR_SITE).id if sim.end_effector_body else None,
        floor_geom_id=model.geom(FLOOR_GEOM).id if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, FLOOR_GEOM) >= 0
        else None,
        keyframe_id=model.key(KEYFRAME).id, locked_joints=locked, gravity_compensation=gravcomp,
    )
    # The default pose lives in the keyframe, not in model.qpos0: MuJoCo measures hinge and slide angles
    # from qpos0 (it is the joint's `ref`), so editing it would move the joints' zeros. The free joint
    # already sits at (x, y, base_height) from the edited base body position.
    key = robot.keyframe_id
    model.key_qpos[key] = model.qpos0
    model.key_qpos[key, robot.qpos_adr] = spec.default_positions
    model.key_qvel[key] = 0.0
    model.key_ctrl[key] = robot.pd_ctrl(spec.default_positions, np.zeros(n), spec.kp, spec.kd, np.zeros(n))
    return robot


def _foot_geoms(model: mujoco.MjModel, body_id: int) -> tuple[int, ...]:
    """A foot's contact geoms: its colliding spheres (point feet, as on the A1 and Go2), else all its
    colliding geoms (a flat sole)."""
    colliding = [g for g in range(model.ngeom)
                 if model.geom_bodyid[g] == body_id and (model.geom_contype[g] or model.geom_conaffinity[g])]
    spheres = [g for g in colliding if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE]
    if not colliding:
        raise ModelBuildError(f"foot body {model.body(body_id).name!r} has no collision geom")
    return tuple(spheres or colliding)


__all__ = ["KEYFRAME", "LimitMismatch", "ModelBuildError", "MujocoRobot", "Terrain", "build_mujoco_model",
           "check_spec_against_model"]
