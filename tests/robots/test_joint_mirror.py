"""Joint mirrors derived from the spec's names and the MuJoCo model's axes: partners and signs for the A1, the Go2 and
the G1 (upstream models where present), and the errors for robots or specs that have no mirror."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from robot_rl.robots.joint_mirror import MirrorError, joint_mirror, pair_joints, partner_name, side_of
from robot_rl.robots.spec import load_robot


def test_sides_by_name_and_a_partner_is_on_the_other_side():
    assert [side_of(n) for n in ("FR_foot", "RR_foot", "right_ankle_roll_link")] == ["right"] * 3
    assert [side_of(n) for n in ("FL_foot", "RL_foot", "left_ankle_roll_link")] == ["left"] * 3
    assert side_of("waist_yaw_joint") is None and side_of("trunk") is None
    assert all(side_of(partner_name(n)) != side_of(n) for n in ("FR_calf", "RL_hip_joint", "left_knee_joint"))


def test_partner_names():
    assert partner_name("FL_hip_joint") == "FR_hip_joint"
    assert partner_name("RR_calf_joint") == "RL_calf_joint"
    assert partner_name("left_ankle_roll_joint") == "right_ankle_roll_joint"
    assert partner_name("waist_yaw_joint") == "waist_yaw_joint"
    assert partner_name("panda_joint1") == "panda_joint1"


@pytest.mark.parametrize("robot", ["a1", "go2"])
def test_quadruped_legs_swap_sides_and_abduction_flips(spec_or_skip, robot):
    spec = spec_or_skip(robot)
    mirror = joint_mirror(spec)
    names = spec.joint_names
    for i, name in enumerate(names):
        partner = names[mirror.perm[i]]
        assert partner == partner_name(name) != name
        # The hip (abduction, about x) flips; thigh and calf (pitch, about y) keep their sign.
        assert mirror.sign[i] == (-1.0 if "_hip_" in name else 1.0), name
    x = np.random.default_rng(0).normal(size=(4, len(names)))
    np.testing.assert_array_equal(mirror.apply(mirror.apply(x)), x)
    np.testing.assert_array_equal(mirror.apply(spec.default_positions), spec.default_positions)


def test_g1_roll_and_yaw_flip_pitch_and_knee_keep(spec_or_skip):
    spec = spec_or_skip("g1")
    mirror = joint_mirror(spec)
    for i, name in enumerate(spec.joint_names):
        kind = name.replace("left_", "").replace("right_", "").replace("waist_", "")
        expected = -1.0 if kind.split("_")[-2] in ("roll", "yaw") else 1.0  # hip_pitch, knee, elbow: +1
        assert mirror.sign[i] == expected, name
        assert spec.joint_names[mirror.perm[i]] == partner_name(name)
    legs = mirror.restricted(spec.policy_joint_names)
    assert legs.perm.tolist() == [6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5]


def test_a_side_joint_without_partner_is_an_error():
    spec = load_robot("a1")
    joints = tuple(dataclasses.replace(j, name="FX_hip_joint") if j.name == "FR_hip_joint" else j for j in spec.joints)
    with pytest.raises(MirrorError, match="'FL_hip_joint' names a side but its mirror 'FR_hip_joint'"):
        pair_joints(dataclasses.replace(spec, joints=joints))


def test_an_asymmetric_default_pose_is_an_error():
    spec = load_robot("a1")
    joints = tuple(dataclasses.replace(j, default_position=0.2) if j.name == "FL_hip_joint" else j for j in spec.joints)
    with pytest.raises(MirrorError, match="default_position of 'FR_hip_joint'"):
        joint_mirror(dataclasses.replace(spec, joints=joints))


def test_the_panda_has_no_mirror_at_its_default_pose():
    """The Panda's zero pose lies in its sagittal plane (the axes mirror), but its default wrist angle does not."""
    with pytest.raises(MirrorError, match="panda_joint7"):
        joint_mirror(load_robot("panda"))


def test_driving_one_side_only_is_an_error():
    mirror = joint_mirror(load_robot("a1"))
    with pytest.raises(MirrorError, match="'FR_hip_joint' is driven but its mirror partner 'FL_hip_joint' is not"):
        mirror.restricted(("FR_hip_joint", "FR_upper_joint"))
