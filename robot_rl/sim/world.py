"""What the training env adds to a robot's MuJoCo model: terrain and the sensors rewards read.

Added through ``build_mujoco_model``'s ``terrain`` hook (it receives the ``MjSpec`` before compiling), with a
push task's scene (a table, a cube) built by the same function the simulated robot uses (``add_scene``).
Sensors, not Python-side kinematics, because ``mujoco.rollout`` returns sensor data for every substep of
every env in one array: contact per foot and on the base, joint actuator torque, end-effector position
and velocity. The heightfield is a placeholder of the right size; each env writes its own patch into its
own model copy (``write_heightfield``).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.hardware.sim_robot import SimScene, add_scene, no_gravcomp_on_objects
from robot_rl.robots.mujoco_model import MujocoRobot, build_mujoco_model
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.terrain import TerrainCfg

HFIELD = "robot_rl_terrain"
FOOT_CONTACT = "robot_rl_foot_contact_{}"
FOOT_POS = "robot_rl_foot_pos_{}"
BASE_CONTACT = "robot_rl_base_contact"
JOINT_TORQUE = "robot_rl_torque_{}"
EE_POS, EE_VEL = "robot_rl_ee_pos", "robot_rl_ee_vel"
_CONTACT_FOUND_FORCE = 1 | 2  # mjtConDataField bits: found, force
_REDUCE_NETFORCE = 3


@dataclass(frozen=True)
class SensorLayout:
    """Where each quantity sits in ``sensordata`` (start addresses; None where the robot has none)."""

    foot_contact: np.ndarray  # (feet,) address of [found, fx, fy, fz]
    foot_pos: np.ndarray  # (feet,) address of the foot body origin's [x, y, z], world frame
    base_contact: int | None
    joint_torque: np.ndarray  # (n,) address of each spec joint's actuator torque
    ee_pos: int | None
    ee_vel: int | None


@dataclass(frozen=True)
class TrainingWorld:
    robot: MujocoRobot
    sensors: SensorLayout
    hfield_id: int | None
    terrain: TerrainCfg | None
    scene: SimScene | None = None
    builder_contact: tuple[int, float] | None = None  # (friction cone, impratio) the model builder chose

    def use_builder_contact(self, model: mujoco.MjModel) -> None:
        """Put a copy of the training model back on the builder's contact (what the gate's MuJoCo runs)."""
        if self.builder_contact is not None:
            model.opt.cone, model.opt.impratio = self.builder_contact


class ModelCopiesDoNotFit(RobotRLError, MemoryError):
    """The env's per-env model copies would not fit in this machine's available memory."""


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (what can be allocated without swapping); None where there is none."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_model_copies_fit(model: mujoco.MjModel, copies: int, what: str, available: int | None = None) -> None:
    """Refuse, in one line, ``copies`` copies of ``model`` that would not fit in ``available`` bytes (default: this
    machine's available memory), rather than have the kernel kill the process part-way through allocating them. A
    model with collision meshes is large (Unitree's G1: about 41 MB, most of it the meshes' bounding-volume trees),
    and the CPU env holds one copy per env."""
    available = available_memory_bytes() if available is None else available
    if available is None:
        return
    usable = available * 9 // 10  # integers: the verdict does not depend on float rounding
    need = copies * model.nbuffer
    if need > usable:
        fits = usable // model.nbuffer
        raise ModelCopiesDoNotFit(
            f"{what}: {copies} envs need {need / 2**30:.1f} GiB for their MuJoCo model copies "
            f"({model.nbuffer / 2**20:.0f} MiB each) and {available / 2**30:.1f} GiB is available; "
            f"use --num-envs {fits} or fewer, or --backend warp (one batched model)")


def _add_contact_sensor(mjs: mujoco.MjSpec, name: str, body: str) -> None:
    s = mjs.add_sensor(name=name, type=mujoco.mjtSensor.mjSENS_CONTACT, objtype=mujoco.mjtObj.mjOBJ_BODY,
                       objname=body)
    s.intprm = [_CONTACT_FOUND_FORCE, _REDUCE_NETFORCE, 1]


def use_training_contact(model: mujoco.MjModel) -> None:
    """The training env's contact settings on a compiled model: MuJoCo's pyramidal friction cone, impratio 1
    (see :func:`build_training_world`). The sim2sim robustness suite runs a policy in them too."""
    model.opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    model.opt.impratio = 1.0


def build_training_world(spec: RobotSpec, terrain: TerrainCfg | None, keep_visual: bool = False,
                         scene: SimScene | None = None) -> TrainingWorld:
    """``scene``: objects around the robot (a push task's table and cube)."""
    sim = spec.sim_model

    def extras(mjs: mujoco.MjSpec) -> None:
        if keep_visual:  # a model for rendering: light the scene (the headlight alone leaves it dim)
            light = mjs.worldbody.add_light(pos=[0, 0, 5], dir=[0.3, 0.3, -1], diffuse=[0.8, 0.8, 0.8])
            light.type = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
        if terrain is not None:
            half = terrain.size_m / 2
            n = terrain.grid_points
            mjs.add_hfield(name=HFIELD, size=[half, half, terrain.max_height_m, 0.1], nrow=n, ncol=n,
                           userdata=[0.0] * (n * n))
            # 1 mm under the floor: where the patch is flat the floor alone carries the feet (one contact,
            # not two coplanar ones), and it does not z-fight with the floor in renders.
            mjs.worldbody.add_geom(name=HFIELD, type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=HFIELD, pos=[0, 0, -1e-3],
                                   friction=[sim.base_friction, 0.005, 0.0001], rgba=[0.45, 0.4, 0.35, 1])
        if scene is not None:
            add_scene(mjs, scene)
        for i, foot in enumerate(sim.foot_bodies):
            _add_contact_sensor(mjs, FOOT_CONTACT.format(i), foot)
            mjs.add_sensor(name=FOOT_POS.format(i), type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                           objtype=mujoco.mjtObj.mjOBJ_BODY, objname=foot)
        if sim.floating_base:
            _add_contact_sensor(mjs, BASE_CONTACT, sim.base_body)
        for joint in spec.joint_names:
            mjs.add_sensor(name=JOINT_TORQUE.format(joint), type=mujoco.mjtSensor.mjSENS_JOINTACTFRC,
                           objtype=mujoco.mjtObj.mjOBJ_JOINT, objname=joint)
        if sim.end_effector_body is not None:
            frame_sensors = ((EE_POS, mujoco.mjtSensor.mjSENS_FRAMEPOS), (EE_VEL, mujoco.mjtSensor.mjSENS_FRAMELINVEL))
            for name, kind in frame_sensors:
                mjs.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_BODY, objname=sim.end_effector_body)

    robot = build_mujoco_model(spec, floor=True, terrain=extras, keep_visual=keep_visual)
    m = robot.model
    builder_contact = (int(m.opt.cone), float(m.opt.impratio))
    if scene is not None:
        no_gravcomp_on_objects(m, scene)
    else:
        # Training physics: MuJoCo's default pyramidal friction cone, markedly cheaper than the elliptic cone with
        # impratio 100 the model builder uses for faithful standing (no foot creep). Feet slipping a little
        # more is harmless under friction randomization, and the sim2sim gate then checks the policy against
        # the stiffer-friction MuJoCo model and PyBullet: a second, different contact model for free. A scene
        # keeps the builder's cone: how a pushed object slides and sticks is the task itself there.
        use_training_contact(m)

    def adr(name: str) -> int:
        return int(m.sensor(name).adr[0])

    sensors = SensorLayout(
        foot_contact=np.array([adr(FOOT_CONTACT.format(i)) for i in range(len(sim.foot_bodies))], dtype=int),
        foot_pos=np.array([adr(FOOT_POS.format(i)) for i in range(len(sim.foot_bodies))], dtype=int),
        base_contact=adr(BASE_CONTACT) if sim.floating_base else None,
        joint_torque=np.array([adr(JOINT_TORQUE.format(j)) for j in spec.joint_names], dtype=int),
        ee_pos=adr(EE_POS) if sim.end_effector_body else None,
        ee_vel=adr(EE_VEL) if sim.end_effector_body else None,
    )
    hfield_id = m.hfield(HFIELD).id if terrain is not None else None
    return TrainingWorld(robot=robot, sensors=sensors, hfield_id=hfield_id, terrain=terrain, scene=scene,
                         builder_contact=builder_contact)


def write_heightfield(model: mujoco.MjModel, hfield_id: int, heights: np.ndarray) -> None:
    """Heights in metres (≥ 0) into the model's heightfield (MuJoCo stores them divided by the elevation)."""
    start = model.hfield_adr[hfield_id]
    n = model.hfield_nrow[hfield_id] * model.hfield_ncol[hfield_id]
    model.hfield_data[start : start + n] = (heights / model.hfield_size[hfield_id, 2]).ravel()
