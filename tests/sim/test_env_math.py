"""Batched rotations of the env, checked against MuJoCo's own."""

import mujoco
import numpy as np

from robot_rl.sim.env_math import quat_mul_rot, quat_rotate_inverse, tilt_angle, yaw_quat


def _random_quats(n: int, rng: np.random.Generator) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def test_quat_rotate_inverse_matches_mujoco():
    rng = np.random.default_rng(0)
    quats, vecs = _random_quats(20, rng), rng.normal(size=(20, 3))
    got = quat_rotate_inverse(quats, vecs)
    for q, v, g in zip(quats, vecs, got, strict=True):
        neg = np.empty(4)
        mujoco.mju_negQuat(neg, q)
        expected = np.empty(3)
        mujoco.mju_rotVecQuat(expected, v, neg)
        assert np.allclose(g, expected)


def test_quat_mul_rot_matches_mujoco_including_a_half_turn():
    rng = np.random.default_rng(1)
    quats = _random_quats(5, rng)
    for mount in (_random_quats(1, rng)[0], np.array([0.0, 1.0, 0.0, 0.0])):
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, mount)
        got = quat_mul_rot(quats, rot.reshape(3, 3))
        for q, g in zip(quats, got, strict=True):
            expected = np.empty(4)
            mujoco.mju_mulQuat(expected, q, mount)
            assert np.allclose(g, expected) or np.allclose(g, -expected)


def test_tilt_and_yaw():
    assert np.allclose(tilt_angle(np.array([[0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])), [0.0, np.pi / 2])
    q = yaw_quat(np.array([np.pi / 2]))
    assert np.allclose(quat_rotate_inverse(q, np.array([[1.0, 0.0, 0.0]])), [[0.0, -1.0, 0.0]])
