"""Batched rotation helpers for the vectorized env (quaternions are w, x, y, z, as MuJoCo's)."""

from __future__ import annotations

import mujoco
import numpy as np


def quat_rotate_inverse(quat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """Express world-frame vectors (N, 3) in the frames of the (N, 4) orientations: R(q)ᵀ·v."""
    w = quat[:, :1]
    u = quat[:, 1:]
    # v' = v·(2w² − 1) − 2w·(u × v) + 2u·(u·v), the conjugate rotation written out.
    return (
        vec * (2.0 * w * w - 1.0)
        - 2.0 * w * np.cross(u, vec)
        + 2.0 * u * np.sum(u * vec, axis=1, keepdims=True)
    )


def tilt_angle(gravity_in_base: np.ndarray) -> np.ndarray:
    """Angle (rad) between the base's −z axis and gravity, from the projected gravity (N, 3)."""
    return np.arccos(np.clip(-gravity_in_base[:, 2], -1.0, 1.0))


def yaw_quat(yaw: np.ndarray) -> np.ndarray:
    """(N, 4) rotations about the world z axis."""
    return np.stack([np.cos(yaw / 2), np.zeros_like(yaw), np.zeros_like(yaw), np.sin(yaw / 2)], axis=1)


def quat_mul_rot(quat: np.ndarray, rot: np.ndarray) -> np.ndarray:
    """Orientation (N, 4) of a frame fixed on a body at rotation ``rot`` (3×3), given the body's (N, 4)."""
    q = np.empty(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(rot, dtype=np.float64).ravel())
    w1, x1, y1, z1 = quat.T
    w2, x2, y2, z2 = q
    return np.stack([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2], axis=1)
