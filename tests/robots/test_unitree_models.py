"""The Go2 and the G1 on their upstream models (MuJoCo Menagerie's go2.xml, Unitree's unitree_mujoco
g1_29dof.xml), read from a user's checkout or, in CI, ../shared/external (tests/conftest.py points the
source variables there). Compile, spec order and limits, standing under PD, and domain randomization."""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

import mujoco
import numpy as np
import pytest

from robot_rl.robots.assets import UNITREE_MUJOCO, ModelSourceError, resolve_model_path
from robot_rl.robots.mujoco_model import MujocoRobot, build_mujoco_model, check_spec_against_model
from robot_rl.robots.spec import UnitreeDdsInterfaceSpec, load_robot
from robot_rl.robots.stand_check import stand_check
from robot_rl.sim import randomization as dr

UNITREE = ("go2", "g1")


@functools.cache
def built(name: str) -> MujocoRobot:
    return build_mujoco_model(load_robot(name))


def _dds_name(label: str) -> str:
    """Unitree's motor label (L_LEG_HIP_PITCH, WAIST_ROLL, R_WRIST_YAW) → the model's joint name."""
    side = {"L": "left", "R": "right"}
    parts = label.lower().split("_")
    if parts[0] in ("l", "r"):
        parts[0] = side[parts[0].upper()]
    return "_".join(p for p in parts if p != "leg") + "_joint"


def test_g1_joint_order_is_unitrees_dds_motor_index_order(spec_or_skip):
    spec = spec_or_skip("g1")
    table = Path(resolve_model_path(spec)).parent / "g1_joint_index_dds.md"
    text = table.read_text(encoding="utf-8")
    section = text[text.index("### 29DOF"): text.index("### 14DOF")]
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*\**([A-Z_]+)\**\s*\|", section, flags=re.MULTILINE)
    assert [int(i) for i, _ in rows] == list(range(29))
    assert tuple(_dds_name(label) for _, label in rows) == spec.joint_names
    iface = spec.interface
    assert isinstance(iface, UnitreeDdsInterfaceSpec) and len(iface.motor_slots) == 35
    assert iface.motor_slots[:29] == spec.joint_names and not any(iface.motor_slots[29:])


@pytest.mark.parametrize("name", UNITREE)
def test_every_spec_joint_is_in_the_upstream_model_with_its_range(spec_or_skip, name):
    spec = spec_or_skip(name)
    path, mismatches = check_spec_against_model(spec)
    assert path.is_file()
    assert mismatches == [], [str(m) for m in mismatches]


def test_g1_effort_limits_are_the_model_files_but_hip_roll(spec_or_skip):
    """g1_29dof.xml's actuatorfrcrange, except hip roll (139 N·m in unitree_rl_gym's g1_12dof and Unitree's
    URDF; 88 in g1_29dof.xml), as the spec's comment says."""
    spec = spec_or_skip("g1")
    upstream = mujoco.MjSpec.from_file(str(resolve_model_path(spec)))
    for joint in spec.joints:
        file_limit = float(upstream.joint(joint.name).actfrcrange[1])
        expected = 139.0 if "hip_roll" in joint.name else file_limit
        assert joint.effort_limit == expected, joint.name


@pytest.mark.parametrize("name", UNITREE)
def test_compiled_model_carries_the_spec_order_gains_and_limits(spec_or_skip, name):
    spec = spec_or_skip(name)
    robot = built(name)
    m, d = robot.model, robot.make_data()
    assert tuple(m.joint(int(i)).name for i in robot.joint_ids) == spec.joint_names
    assert robot.locked_joints == ()
    np.testing.assert_array_equal(m.jnt_range[robot.joint_ids], np.stack([spec.position_lower, spec.position_upper], 1))
    np.testing.assert_array_equal(m.jnt_actfrcrange[robot.joint_ids, 1], spec.effort_limits)
    np.testing.assert_allclose(m.dof_armature[robot.qvel_adr], [j.armature for j in spec.joints])
    np.testing.assert_array_equal(d.qpos[robot.qpos_adr], spec.default_positions)
    np.testing.assert_array_equal(d.ctrl[robot.kp_ctrl], spec.kp)
    np.testing.assert_array_equal(d.ctrl[robot.kd_ctrl], spec.kd)
    assert m.opt.timestep == spec.timing.physics_period_s
    # The nominal base height puts the feet on the ground: every foot's lowest point within 1.5 cm of it.
    mujoco.mj_forward(m, d)
    for geoms in robot.foot_geom_ids:
        lowest = min(d.geom_xpos[g][2] - m.geom_size[g][0] for g in geoms)
        assert abs(lowest) < 0.015, (name, lowest)


def test_go2_stands_for_2_s_under_its_spec_pd(spec_or_skip):
    """Kp 20 (unitree_rl_gym's Go2 gains) holds it up without a fall or a limit hit; the legs sag ~6 cm under
    the body weight (calf ~0.3 rad), more than the stand check's 3 cm, so the check's verdict is not asserted."""
    spec = spec_or_skip("go2")
    result = stand_check(spec, "mujoco", duration_s=2.0)
    assert result.physics_steps == 400 and not result.joint_past_limit, result.summary()
    assert result.base_height_final > 0.75 * spec.sim_model.base_height, result.summary()
    assert result.max_joint_error_rad < 0.4, result.summary()


def test_g1_tips_under_its_spec_pd_alone(spec_or_skip):
    """Documents the spec comment: ankles of 2 × 40 N·m/rad are softer than the G1's inverted pendulum, so
    it falls without a balance policy (as the real robot, which Unitree hangs from a gantry until then);
    twenty times stiffer gains hold it, so the model itself stands."""
    spec = spec_or_skip("g1")
    result = stand_check(spec, "mujoco", duration_s=2.0)
    assert result.base_height_final < 0.5 * spec.sim_model.base_height and not result.passed
    stiff = dataclasses.replace(spec, joints=tuple(dataclasses.replace(j, kp=20 * j.kp, kd=20 * j.kd)
                                                   for j in spec.joints))
    stiff_result = stand_check(stiff, "mujoco", duration_s=2.0)
    assert stiff_result.passed, stiff_result.summary()


@pytest.mark.parametrize("name", UNITREE)
def test_domain_randomization_applies(spec_or_skip, name):
    spec = spec_or_skip(name)
    robot = built(name)
    model = robot.model.__copy__()
    data = mujoco.MjData(model)
    robot.reset(data)
    nominal = dr.NominalModel.capture(model, robot.base_body_id, robot.joint_ids, spec.sim_model.base_friction)
    assert len(nominal.robot_bodies) > spec.num_joints  # every link of the robot, not the world
    cfg = dr.RandomizationCfg(friction_scale=(0.5, 0.5), base_mass_add_kg=(2.0, 2.0), link_mass_scale=(1.1, 1.1),
                              com_offset_m=0.0, motor_strength=(0.8, 0.8))
    s = dr.sample_model(cfg, nominal, np.random.default_rng(0), 1)
    dr.apply_model_sample(model, data, nominal, s)
    b = robot.base_body_id
    assert np.allclose(model.geom_friction[:, 0], 0.5 * spec.sim_model.base_friction)
    assert model.body_mass[b] == pytest.approx(robot.model.body_mass[b] * 1.1 + 2.0)
    np.testing.assert_allclose(model.jnt_actfrcrange[robot.joint_ids, 1], 0.8 * spec.effort_limits)
    assert model.body_subtreemass[0] == pytest.approx(model.body_mass.sum())
    for _ in range(100):  # the randomized model still steps
        mujoco.mj_step(model, data)
    assert np.isfinite(data.qpos).all()


def test_a_missing_unitree_mujoco_checkout_says_how_to_get_it(monkeypatch, tmp_path):
    absent = tmp_path / "no_checkout"
    monkeypatch.setenv(UNITREE_MUJOCO.env_var, str(absent))
    spec = load_robot("g1")
    with pytest.raises(ModelSourceError) as error:
        build_mujoco_model(spec)
    message = str(error.value)
    assert message.startswith(f"{spec.source_file}: sim_model: source 'unitree_mujoco' needs a local unitree_mujoco")
    assert f"git clone --depth 1 {UNITREE_MUJOCO.url} {absent}" in message and UNITREE_MUJOCO.env_var in message
    assert len(message.splitlines()) == 1
    absent.mkdir()  # a checkout without the G1: the error names the file it looked for
    with pytest.raises(ModelSourceError, match=re.escape("unitree_robots/g1/g1_29dof.xml")):
        build_mujoco_model(spec)
