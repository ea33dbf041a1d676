"""MuJoCo models built from the robot specs: every model whose source is on this machine compiles and
carries its spec's facts (joint order, limits, armature, gains, default pose), and its actuators execute
the JointCommand PD law exactly."""

from __future__ import annotations

import dataclasses
import functools
import re

import mujoco
import numpy as np
import pytest

from robot_rl.core.types import JointCommand
from robot_rl.robots.assets import MENAGERIE_ENV_VAR, ModelSourceError, resolve_model_path
from robot_rl.robots.mujoco_model import KEYFRAME, MujocoRobot, build_mujoco_model
from robot_rl.robots.spec import available_robots, load_robot

ROBOTS = available_robots()


@functools.cache
def built(name: str) -> MujocoRobot:
    return build_mujoco_model(load_robot(name))


@pytest.mark.parametrize("name", ROBOTS)
def test_model_has_the_spec_joints_and_actuators_in_spec_order(spec_or_skip, name):
    spec = spec_or_skip(name)
    robot = built(name)
    m = robot.model
    assert tuple(m.joint(int(i)).name for i in robot.joint_ids) == spec.joint_names
    actuated = [m.joint(int(m.actuator_trnid[a, 0])).name for a in range(m.nu)]
    assert actuated == list(spec.joint_names) * 3  # kp block, kd block, torque block
    hinges_and_slides = {m.joint(j).name for j in range(m.njnt) if m.jnt_type[j] in (2, 3)}
    assert hinges_and_slides == set(spec.joint_names)
    assert (m.jnt_type == mujoco.mjtJoint.mjJNT_FREE).sum() == (1 if spec.sim_model.floating_base else 0)


@pytest.mark.parametrize("name", ROBOTS)
def test_limits_armature_damping_effort_and_timestep_equal_the_spec(spec_or_skip, name):
    spec = spec_or_skip(name)
    robot = built(name)
    m = robot.model
    np.testing.assert_array_equal(m.jnt_range[robot.joint_ids, 0], spec.position_lower)
    np.testing.assert_array_equal(m.jnt_range[robot.joint_ids, 1], spec.position_upper)
    assert m.jnt_limited[robot.joint_ids].all()
    np.testing.assert_allclose(m.dof_armature[robot.qvel_adr], [j.armature for j in spec.joints])
    assert not m.dof_damping[robot.qvel_adr].any() and not m.dof_frictionloss[robot.qvel_adr].any()
    assert m.jnt_actfrclimited[robot.joint_ids].all()
    np.testing.assert_array_equal(m.jnt_actfrcrange[robot.joint_ids, 1], spec.effort_limits)
    np.testing.assert_array_equal(m.jnt_actfrcrange[robot.joint_ids, 0], -spec.effort_limits)
    assert m.opt.timestep == spec.timing.physics_period_s


@pytest.mark.parametrize("name", ROBOTS)
def test_default_keyframe_holds_the_spec_pose_and_gains(spec_or_skip, name):
    spec = spec_or_skip(name)
    robot = built(name)
    m = robot.model
    key = m.key(KEYFRAME)
    np.testing.assert_array_equal(key.qpos[robot.qpos_adr], spec.default_positions)
    np.testing.assert_array_equal(key.ctrl[robot.kp_ctrl], spec.kp)
    np.testing.assert_array_equal(key.ctrl[robot.kd_ctrl], spec.kd)
    if spec.sim_model.floating_base:
        np.testing.assert_array_equal(key.qpos[robot.free_qpos_adr : robot.free_qpos_adr + 7][2:],
                                      [spec.sim_model.base_height, 1, 0, 0, 0])
    state = robot.read_state(robot.make_data())
    np.testing.assert_array_equal(state.q, spec.default_positions)
    assert state.tick == 0


@pytest.mark.parametrize("name", ROBOTS)
def test_actuators_execute_the_joint_command_law_clamped_to_effort(spec_or_skip, name):
    spec = spec_or_skip(name)
    robot = built(name)
    m, d = robot.model, robot.make_data()
    rng = np.random.default_rng(0)
    n = robot.n_joints
    lo, hi = spec.position_lower, spec.position_upper
    commands = [
        JointCommand(rng.uniform(lo, hi), rng.normal(size=n), rng.uniform(0, 2) * spec.kp, rng.uniform(0, 2) * spec.kd,
                     rng.normal(size=n)),
        JointCommand.damping(n, spec.safety.damping_kd),
        JointCommand(hi, np.zeros(n), spec.kp * 100, spec.kd, 10 * spec.effort_limits),  # saturates
    ]
    for command in commands:
        d.qpos[robot.qpos_adr] = rng.uniform(lo, hi)
        d.qvel[robot.qvel_adr] = rng.normal(size=n)
        robot.apply_command(d, command)
        mujoco.mj_forward(m, d)
        q, dq = d.qpos[robot.qpos_adr], d.qvel[robot.qvel_adr]
        law = command.kp * (command.q_target - q) + command.kd * (command.dq_target - dq) + command.tau_ff
        expected = np.clip(law, -spec.effort_limits, spec.effort_limits)
        np.testing.assert_allclose(d.qfrc_actuator[robot.qvel_adr], expected, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(robot.read_state(d, refresh=False).tau, expected, rtol=1e-9, atol=1e-9)


def test_pd_ctrl_is_batched_and_clips_targets_to_the_position_limits(spec_or_skip):
    spec = spec_or_skip("a1")
    robot = built("a1")
    n = robot.n_joints
    q_target = np.stack([spec.default_positions, spec.position_upper + 1.0])
    ctrl = robot.pd_ctrl(q_target, np.zeros(n), spec.kp, spec.kd, np.zeros(n))
    assert ctrl.shape == (2, 3 * n)
    np.testing.assert_allclose(ctrl[1, robot.torque_ctrl], spec.kp * spec.position_upper)
    np.testing.assert_allclose(ctrl[:, robot.kd_ctrl], np.broadcast_to(spec.kd, (2, n)))


def test_robot_geoms_touch_the_world_but_not_each_other(spec_or_skip):
    spec = spec_or_skip("a1")
    robot = built("a1")
    m = robot.model
    robot_geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] != 0 and (m.geom_contype[g] or m.geom_conaffinity[g])]
    assert robot_geoms
    for g in robot_geoms:  # contact needs contype of one & conaffinity of the other
        assert m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 1
    assert m.geom_contype[robot.floor_geom_id] == 1
    np.testing.assert_array_equal(m.geom_friction[robot_geoms, 0], spec.sim_model.base_friction)
    d = robot.make_data()
    for _ in range(100):
        mujoco.mj_step(m, d)
    assert robot.foot_contacts(d).all()  # standing on four feet
    assert all(0 in (m.geom_bodyid[c.geom[0]], m.geom_bodyid[c.geom[1]]) for c in d.contact[: d.ncon])


def test_feet_imu_and_end_effector_are_where_the_spec_says(spec_or_skip):
    a1_spec, a1 = spec_or_skip("a1"), built("a1")
    m = a1.model
    assert [m.body(int(b)).name for b in a1.foot_body_ids] == list(a1_spec.sim_model.foot_bodies)
    for body, geoms in zip(a1.foot_body_ids, a1.foot_geom_ids, strict=True):
        assert geoms and all(m.geom_bodyid[g] == body for g in geoms)
    assert m.body(int(m.site_bodyid[a1.imu_site_id])).name == a1_spec.sim_model.imu_body
    assert a1.end_effector_site_id is None
    panda_spec, panda = spec_or_skip("panda"), built("panda")
    site_body = panda.model.site_bodyid[panda.end_effector_site_id]
    assert panda.model.body(int(site_body)).name == panda_spec.sim_model.end_effector_body
    assert panda.free_qpos_adr is None and panda.foot_geom_ids == ()


def test_joints_outside_the_spec_are_welded_and_their_bodies_kept(spec_or_skip):
    spec_or_skip("panda")
    panda = built("panda")
    m = panda.model
    assert panda.locked_joints == ("panda_finger_joint1", "panda_finger_joint2")
    assert m.nq == 7 and m.neq == 0  # the URDF mimic equality went with its joints
    for body in ("panda_leftfinger", "panda_rightfinger", "panda_hand"):
        assert m.body(body).id > 0


def test_read_state_reports_the_base_in_its_own_frame(spec_or_skip):
    spec_or_skip("a1")
    robot = built("a1")
    d = robot.make_data()
    adr, vadr = robot.free_qpos_adr, robot.free_qvel_adr
    yaw = np.pi / 2  # base turned to face world +y
    d.qpos[adr : adr + 3] = [0.5, -0.2, 1.0]
    d.qpos[adr + 3 : adr + 7] = [np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)]
    d.qvel[vadr : vadr + 3] = [1.0, 0.0, 0.0]  # world frame: moving along world +x = the base's right (-y)
    d.qvel[vadr + 3 : vadr + 6] = [0.3, 0.0, 0.0]  # MuJoCo's free joint angular velocity is in the body frame
    state = robot.read_state(d)
    np.testing.assert_allclose(state.base_pos, [0.5, -0.2, 1.0])
    np.testing.assert_allclose(state.base_quat, d.qpos[adr + 3 : adr + 7], atol=1e-12)
    np.testing.assert_allclose(state.base_lin_vel, [0.0, -1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(state.base_ang_vel, [0.3, 0.0, 0.0], atol=1e-12)


def test_accelerometer_reads_gravity_when_standing(spec_or_skip):
    spec_or_skip("a1")
    robot = built("a1")
    d = robot.make_data()
    for _ in range(300):
        mujoco.mj_step(robot.model, d)
    acc = robot.read_state(d).base_lin_acc
    np.testing.assert_allclose(acc, [0, 0, 9.81], atol=0.5)


def test_terrain_hook_and_visual_geoms(spec_or_skip):
    spec = spec_or_skip("a1")

    def add_step(mjs: mujoco.MjSpec) -> None:
        mjs.worldbody.add_geom(name="step", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.2, 0.2, 0.05], pos=[1, 0, 0.05])

    robot = build_mujoco_model(spec, terrain=add_step, keep_visual=True)
    m = robot.model
    assert m.geom_contype[m.geom("step").id] == 1
    visual = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH]
    assert visual and not any(m.geom_contype[g] or m.geom_conaffinity[g] for g in visual)
    no_floor = build_mujoco_model(spec, floor=False)
    assert no_floor.floor_geom_id is None


def test_an_mjcf_model_builds_the_same_robot(spec_or_skip, tmp_path):
    """The MJCF path (Menagerie's format) on a real robot: the A1 URDF converted to MJCF by MuJoCo."""
    spec = spec_or_skip("a1")
    converted = mujoco.MjSpec.from_file(str(resolve_model_path(spec)))
    converted.compiler.fusestatic = False
    (tmp_path / "a1.xml").write_text(converted.to_xml())
    mjcf_spec = dataclasses.replace(
        spec, sim_model=dataclasses.replace(spec.sim_model, source="path", path="a1.xml"),
        source_file=str(tmp_path / "a1.yaml"),
    )
    robot = build_mujoco_model(mjcf_spec)
    m, d = robot.model, robot.make_data()
    assert tuple(m.joint(int(i)).name for i in robot.joint_ids) == spec.joint_names
    for _ in range(200):
        mujoco.mj_step(m, d)
    reference = built("a1")
    d_ref = reference.make_data()
    for _ in range(200):
        mujoco.mj_step(reference.model, d_ref)
    assert abs(d.qpos[2] - d_ref.qpos[2]) < 1e-3


def test_missing_menagerie_checkout_says_how_to_get_it(monkeypatch, tmp_path):
    spec = load_robot("a1")
    menagerie_spec = dataclasses.replace(
        spec, sim_model=dataclasses.replace(spec.sim_model, source="menagerie", path="unitree_go2/go2.xml")
    )
    absent = tmp_path / "no_checkout"
    monkeypatch.setenv(MENAGERIE_ENV_VAR, str(absent))
    with pytest.raises(ModelSourceError) as error:
        build_mujoco_model(menagerie_spec)
    message = str(error.value)
    assert "git clone" in message and "mujoco_menagerie" in message and str(absent) in message
    assert MENAGERIE_ENV_VAR in message and spec.source_file in message
    absent.mkdir()  # a checkout without that model: the error names the file it looked for
    with pytest.raises(ModelSourceError, match=re.escape("unitree_go2/go2.xml")):
        build_mujoco_model(menagerie_spec)
