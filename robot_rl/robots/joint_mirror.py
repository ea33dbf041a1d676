"""A robot's left ↔ right mirror of its joints (reflection through the sagittal x–z plane of the base).

Joints pair by name: the spec's side markers (``left``/``right`` as the G1 names its joints, Unitree's leg codes
``FL``/``FR`` and ``RL``/``RR``) swap, and a joint with no marker (a waist joint) is its own partner. The sign a
joint angle takes under the mirror follows from the MuJoCo model's joint axes, not from a table: reflecting the
body through the x–z plane (M = diag(1, −1, 1)) turns a rotation by θ about axis a into a rotation by θ about
−M·a = (−a_x, a_y, −a_z) (a rotation axis is a pseudo-vector), so joint i's mirrored angle is θ_p · (a_i · −M a_p)
for its partner p. Abduction/roll (x) and yaw (z) axes flip sign, pitch and knee (y) keep it, whatever the model's
own axis conventions. The model must actually be symmetric: the partner's axis and anchor must be the reflection
of the joint's, and the spec's default pose and limits must map onto themselves; otherwise ``MirrorError``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.robots.spec import RobotSpec

# Name tokens (split on "_") that name a side, and their mirror: the G1's left_/right_ joints, Unitree's
# quadruped legs (front/rear × left/right: FL ↔ FR, RL ↔ RR).
SIDE_TOKENS: dict[str, str] = {"left": "right", "right": "left", "FL": "FR", "FR": "FL", "RL": "RR", "RR": "RL"}
RIGHT_TOKENS = frozenset({"right", "FR", "RR"})  # the rest of SIDE_TOKENS name the left side
REFLECT = np.array([1.0, -1.0, 1.0])  # M: the sagittal-plane reflection of a base-frame (polar) vector
AXIAL = np.array([-1.0, 1.0, -1.0])  # −M: how an axis / angular velocity (pseudo-vector) reflects
AXIS_TOLERANCE = 1e-3  # |a_i · −M a_p| must be this close to 1
ANCHOR_TOLERANCE_M = 2e-3  # a joint's anchor and its partner's mirrored anchor, base frame (model asymmetries
# such as a mesh offset are sub-millimetre in the Menagerie and Unitree files)
POSE_TOLERANCE_RAD = 1e-6


class MirrorError(RobotRLError, ValueError):
    """A robot or task that has no left ↔ right mirror (an unpaired side joint, an asymmetric model, a term the
    mirror does not know). The message names the joint or term."""


@dataclass(frozen=True, eq=False)
class JointMirror:
    """Mirrored joint values: ``mirrored[..., i] = sign[i] · values[..., perm[i]]`` (an involution)."""

    names: tuple[str, ...]
    perm: np.ndarray  # (n,) int: index of each joint's partner (itself where it has none)
    sign: np.ndarray  # (n,) ±1.0

    def apply(self, values: np.ndarray) -> np.ndarray:
        return values[..., self.perm] * self.sign

    def restricted(self, names: tuple[str, ...]) -> JointMirror:
        """The mirror of a subset of the joints (the policy's), which must be closed under pairing."""
        where = {n: i for i, n in enumerate(self.names)}
        local = {n: k for k, n in enumerate(names)}
        perm, sign = [], []
        for name in names:
            partner = self.names[self.perm[where[name]]]
            if partner not in local:
                raise MirrorError(f"joint {name!r} is driven but its mirror partner {partner!r} is not")
            perm.append(local[partner])
            sign.append(self.sign[where[name]])
        return JointMirror(names, np.array(perm), np.array(sign))


def partner_name(name: str) -> str:
    """``name`` with its side token swapped (``FL_hip_joint`` → ``FR_hip_joint``); itself if it names no side."""
    tokens = name.split("_")
    return "_".join(SIDE_TOKENS.get(t, t) for t in tokens)


def side_of(name: str) -> str | None:
    """"left" or "right" by ``name``'s side token; None if it names no side."""
    tokens = [t for t in name.split("_") if t in SIDE_TOKENS]
    if not tokens:
        return None
    return "right" if tokens[0] in RIGHT_TOKENS else "left"


def pair_joints(spec: RobotSpec) -> np.ndarray:
    """(n,) index of each spec joint's partner by name."""
    where = {n: i for i, n in enumerate(spec.joint_names)}
    perm = []
    for name in spec.joint_names:
        partner = partner_name(name)
        if partner not in where:
            raise MirrorError(f"{spec.name}: joint {name!r} names a side but its mirror {partner!r} is not a joint")
        perm.append(where[partner])
    return np.array(perm)


def joint_mirror(spec: RobotSpec) -> JointMirror:
    """The mirror of every spec joint, signs from the MuJoCo model's axes (builds the model: ~0.1–1 s)."""
    import mujoco

    from robot_rl.robots.mujoco_model import build_mujoco_model

    perm = pair_joints(spec)
    robot = build_mujoco_model(spec, floor=False)
    model = robot.model
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)  # qpos0: every joint at 0, so the axes are the model's reference ones
    base_rot = data.xmat[robot.base_body_id].reshape(3, 3)
    base_pos = data.xpos[robot.base_body_id]
    axes = data.xaxis[robot.joint_ids] @ base_rot  # base-frame axes (rows)
    anchors = (data.xanchor[robot.joint_ids] - base_pos) @ base_rot
    where = f"{spec.source_file or spec.name}"
    sign = np.empty(len(perm))
    for i, p in enumerate(perm):
        name, partner = spec.joint_names[i], spec.joint_names[p]
        dot = float(axes[i] @ (AXIAL * axes[p]))
        if abs(abs(dot) - 1.0) > AXIS_TOLERANCE:
            raise MirrorError(f"{where}: joint {name!r}'s axis {np.round(axes[i], 3).tolist()} is not the mirror of "
                              f"{partner!r}'s {np.round(axes[p], 3).tolist()}: the robot has no left-right mirror")
        gap = float(np.linalg.norm(anchors[i] - REFLECT * anchors[p]))
        if gap > ANCHOR_TOLERANCE_M:
            raise MirrorError(f"{where}: joint {name!r} sits {gap * 1000:.1f} mm from the mirror of {partner!r}")
        sign[i] = np.sign(dot)
    mirror = JointMirror(spec.joint_names, perm, sign)
    _check_pose_and_limits(spec, mirror, where)
    return mirror


def _check_pose_and_limits(spec: RobotSpec, mirror: JointMirror, where: str) -> None:
    """The default pose and the position limits must be their own mirror, or a mirrored state is another robot's."""
    default = spec.default_positions
    bad = np.flatnonzero(np.abs(mirror.apply(default) - default) > POSE_TOLERANCE_RAD)
    if bad.size:
        name = spec.joint_names[bad[0]]
        raise MirrorError(f"{where}: default_position of {name!r} is not the mirror of its partner's")
    lower, upper = mirror.apply(spec.position_lower), mirror.apply(spec.position_upper)
    mirrored_lower, mirrored_upper = np.minimum(lower, upper), np.maximum(lower, upper)
    bad = np.flatnonzero((np.abs(mirrored_lower - spec.position_lower) > 1e-3)
                         | (np.abs(mirrored_upper - spec.position_upper) > 1e-3))
    if bad.size:
        name = spec.joint_names[bad[0]]
        raise MirrorError(f"{where}: position_limit of {name!r} is not the mirror of its partner's")
