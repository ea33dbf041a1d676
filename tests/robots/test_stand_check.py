"""Stand check: the shipped robots hold their spec default pose under the spec gains in both simulators,
the two simulators agree, and the check fails when a robot cannot hold its pose."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from robot_rl.robots.spec import load_robot
from robot_rl.robots.stand_check import (
    ARM_POSE_TOLERANCE_RAD,
    BASE_HEIGHT_TOLERANCE_M,
    StandResult,
    main,
    stand_check,
)

SIMULATORS = ("mujoco", "pybullet")


@functools.cache
def checked(name: str, simulator: str) -> StandResult:
    return stand_check(load_robot(name), simulator)


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_a1_stands_at_its_nominal_height(spec_or_skip, simulator):
    spec = spec_or_skip("a1")
    result = checked("a1", simulator)
    assert result.robot == "a1" and result.simulator == simulator and result.physics_steps == 400
    assert not result.joint_past_limit
    assert abs(result.base_height_final - spec.sim_model.base_height) <= BASE_HEIGHT_TOLERANCE_M, result.summary()
    assert result.passed


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_panda_holds_its_default_pose(spec_or_skip, simulator):
    spec_or_skip("panda")
    result = checked("panda", simulator)
    assert result.base_height_final is None
    assert result.peak_joint_error_rad <= ARM_POSE_TOLERANCE_RAD, result.summary()
    assert result.passed and not result.joint_past_limit


def test_both_simulators_agree_on_the_standing_a1(spec_or_skip):
    spec_or_skip("a1")
    mujoco_result, pybullet_result = checked("a1", "mujoco"), checked("a1", "pybullet")
    assert abs(mujoco_result.base_height_final - pybullet_result.base_height_final) < 0.01
    assert abs(mujoco_result.max_joint_error_rad - pybullet_result.max_joint_error_rad) < 0.02


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_a1_without_stiffness_collapses_and_fails(spec_or_skip, simulator):
    spec = spec_or_skip("a1")
    limp = dataclasses.replace(spec, joints=tuple(dataclasses.replace(j, kp=0.0) for j in spec.joints))
    result = stand_check(limp, simulator, duration_s=1.0)
    assert result.base_height_final < spec.sim_model.base_height - BASE_HEIGHT_TOLERANCE_M
    assert not result.passed


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_panda_gains_alone_do_not_hold_it_against_gravity(spec_or_skip, simulator):
    """Documents why the arm model compensates gravity: kp 600 leaves joint 4 about 0.03 rad low."""
    spec_or_skip("panda")
    result = stand_check(load_robot("panda"), simulator, duration_s=1.0, gravity_compensation=False)
    assert result.peak_joint_error_rad > ARM_POSE_TOLERANCE_RAD
    assert not result.passed


def test_command_line_prints_the_result_and_exits_with_its_verdict(spec_or_skip, capsys):
    spec_or_skip("panda")
    assert main(["panda", "mujoco", "--duration", "0.5"]) == 0
    assert "panda in mujoco, 0.5 s: PASS" in capsys.readouterr().out
