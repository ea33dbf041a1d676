"""PyBullet models built from the robot specs: joints mapped by name, spec limits and default pose applied,
the PD law run as explicit torque with PyBullet's own velocity motors off, the base reported in its own
link frame."""

from __future__ import annotations

import dataclasses

import numpy as np
import pybullet as pb
import pytest

from robot_rl.core.types import JointCommand
from robot_rl.robots.assets import ModelSourceError, model_source_missing, resolve_model_path
from robot_rl.robots.pybullet_model import build_pybullet_robot
from robot_rl.robots.spec import RobotSpec, available_robots, load_robot

ROBOTS = available_robots()


def urdf_spec_or_skip(name: str) -> RobotSpec:
    spec = load_robot(name)
    missing = model_source_missing(spec)
    if missing:
        pytest.skip(f"model source not on this machine: {missing}")
    if resolve_model_path(spec).suffix != ".urdf":
        pytest.skip("PyBullet loads URDF models only")
    return spec


@pytest.mark.parametrize("name", ROBOTS)
def test_joints_are_mapped_by_name_and_start_at_the_default_pose(name, pybullet_client):
    spec = urdf_spec_or_skip(name)
    robot = build_pybullet_robot(spec, pybullet_client)
    names = [pb.getJointInfo(robot.body_id, int(i), physicsClientId=pybullet_client)[1].decode()
             for i in robot.joint_indices]
    assert tuple(names) == spec.joint_names
    state = robot.read_state()
    np.testing.assert_allclose(state.q, spec.default_positions, atol=1e-12)
    np.testing.assert_allclose(state.base_quat, [1, 0, 0, 0], atol=1e-9)
    # The base link frame, not PyBullet's base COM frame (the A1 trunk's COM is 13 mm ahead of it).
    height = spec.sim_model.base_height if spec.sim_model.floating_base else 0.0
    np.testing.assert_allclose(state.base_pos, [0, 0, height], atol=1e-7)
    assert pb.getPhysicsEngineParameters(physicsClientId=pybullet_client)["fixedTimeStep"] == pytest.approx(
        spec.timing.physics_period_s
    )


@pytest.mark.parametrize("name", ROBOTS)
def test_apply_pd_sends_the_joint_command_law_clamped_to_effort(name, pybullet_client):
    spec = urdf_spec_or_skip(name)
    robot = build_pybullet_robot(spec, pybullet_client)
    rng = np.random.default_rng(1)
    n = len(spec.joints)
    lo, hi = spec.position_lower, spec.position_upper
    for command in (
        JointCommand(rng.uniform(lo, hi), rng.normal(size=n), spec.kp, spec.kd, rng.normal(size=n)),
        JointCommand.damping(n, spec.safety.damping_kd),
        JointCommand(hi, np.zeros(n), 100 * spec.kp, spec.kd, np.zeros(n)),  # saturates
    ):
        for index, q in zip(robot.joint_indices, rng.uniform(lo, hi), strict=True):
            pb.resetJointState(robot.body_id, int(index), q, rng.normal(), physicsClientId=pybullet_client)
        state = robot.read_state()
        law = command.kp * (command.q_target - state.q) + command.kd * (command.dq_target - state.dq) + command.tau_ff
        expected = np.clip(law, -spec.effort_limits, spec.effort_limits)
        np.testing.assert_allclose(robot.apply_pd(command), expected, rtol=1e-12)
        np.testing.assert_allclose(robot.read_state().tau, expected, rtol=1e-12)


def run(robot, command: JointCommand, seconds: float) -> None:
    for _ in range(round(seconds / robot.spec.timing.physics_period_s)):
        robot.apply_pd(command)
        robot.step()


def test_velocity_motors_are_off_and_torque_moves_the_joint(pybullet_client):
    spec = urdf_spec_or_skip("panda")
    robot = build_pybullet_robot(spec, pybullet_client)  # gravity compensated, as a Franka is
    n = len(spec.joints)
    run(robot, JointCommand.passive(n), 0.2)
    np.testing.assert_allclose(robot.read_state().q, spec.default_positions, atol=1e-4)  # nothing drags or drives
    push = JointCommand.passive(n)
    push.tau_ff[0] = 5.0  # joint 1 turns about the vertical: no gravity torque on it
    run(robot, push, 0.1)
    state = robot.read_state()
    assert state.dq[0] > 0.1 and state.q[0] > spec.default_positions[0] + 0.005


def test_without_gravity_compensation_a_passive_arm_falls(pybullet_client):
    spec = urdf_spec_or_skip("panda")
    robot = build_pybullet_robot(spec, pybullet_client, gravity_compensation=False)
    run(robot, JointCommand.passive(len(spec.joints)), 0.2)
    assert np.abs(robot.read_state().q - spec.default_positions).max() > 0.05


def test_spec_position_limits_stop_the_joints(pybullet_client):
    spec = urdf_spec_or_skip("panda")
    robot = build_pybullet_robot(spec, pybullet_client)
    urdf_upper = np.array([pb.getJointInfo(robot.body_id, int(i), physicsClientId=pybullet_client)[9]
                           for i in robot.joint_indices])
    tighter = np.flatnonzero(spec.position_upper < urdf_upper - 0.02)
    assert tighter.size  # the Panda spec uses FCI limits, tighter than its URDF's on joints 4 and 6
    push = JointCommand.passive(len(spec.joints))
    push.tau_ff[tighter] = 0.5 * spec.effort_limits[tighter]
    for j in tighter:
        pb.resetJointState(robot.body_id, int(robot.joint_indices[j]), spec.position_upper[j] - 0.05,
                           physicsClientId=pybullet_client)
    run(robot, push, 0.5)
    q = robot.read_state().q[tighter]
    np.testing.assert_allclose(q, spec.position_upper[tighter], atol=0.01)  # at the spec's limit, not the URDF's


def test_base_motion_is_reported_in_the_base_frame(pybullet_client):
    spec = urdf_spec_or_skip("a1")
    robot = build_pybullet_robot(spec, pybullet_client)
    yaw = np.pi / 2  # facing world +y
    quat = [np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)]
    robot.set_base_state([0.5, -0.2, 1.0], quat, lin_vel=[1.0, 0, 0], ang_vel=[0.3, 0, 0])
    state = robot.read_state()
    np.testing.assert_allclose(state.base_pos, [0.5, -0.2, 1.0], atol=1e-7)
    np.testing.assert_allclose(state.base_quat, quat, atol=1e-7)
    np.testing.assert_allclose(state.base_lin_vel, [0, -1.0, 0], atol=1e-6)  # world +x is the base's right
    np.testing.assert_allclose(state.base_ang_vel, [0, -0.3, 0], atol=1e-6)


def test_accelerometer_estimate_reads_gravity_when_standing(pybullet_client):
    spec = urdf_spec_or_skip("a1")
    robot = build_pybullet_robot(spec, pybullet_client)
    run(robot, JointCommand.hold(spec.default_positions, spec.kp, spec.kd), 1.5)
    robot.read_state()
    robot.apply_pd(JointCommand.hold(spec.default_positions, spec.kp, spec.kd))
    robot.step()
    np.testing.assert_allclose(robot.read_state().base_lin_acc, [0, 0, 9.81], atol=0.5)


def test_models_pybullet_cannot_load_are_refused_clearly(pybullet_client, monkeypatch, tmp_path):
    spec = load_robot("a1")
    monkeypatch.setenv("ROBOT_RL_MENAGERIE_DIR", str(tmp_path / "absent"))
    menagerie = dataclasses.replace(spec, sim_model=dataclasses.replace(spec.sim_model, source="menagerie"))
    with pytest.raises(ModelSourceError, match="git clone"):
        build_pybullet_robot(menagerie, pybullet_client)
    (tmp_path / "a1.xml").write_text("<mujoco/>")
    mjcf = dataclasses.replace(spec, sim_model=dataclasses.replace(spec.sim_model, source="path", path="a1.xml"),
                               source_file=str(tmp_path / "a1.yaml"))
    with pytest.raises(ModelSourceError, match="URDF models only"):
        build_pybullet_robot(mjcf, pybullet_client)
