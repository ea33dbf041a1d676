"""Domain randomization: sampling, overrides, and the model arrays it computes."""

import copy
import dataclasses

import mujoco
import numpy as np
import pytest

from robot_rl.robots.spec import load_robot
from robot_rl.sim import randomization as dr
from robot_rl.sim.world import build_training_world
from robot_rl.typed_yaml import ConfigError


@pytest.fixture(scope="module")
def a1():
    spec = load_robot("a1")
    robot = build_training_world(spec, None).robot
    nominal = dr.NominalModel.capture(robot.model, robot.base_body_id, robot.joint_ids, spec.sim_model.base_friction)
    return spec, robot, nominal


def test_unknown_override_key_is_a_clear_error():
    with pytest.raises(dr.UnknownRandomizationKey, match=r"frictoin: unknown domain randomization key.*friction_scale"):
        dr.with_overrides(dr.RandomizationCfg(), {"frictoin": (0.1, 0.2)})
    with pytest.raises(ConfigError, match="--dr: mass: unknown"):
        dr.parse_override("mass=1,2")


def test_overrides_parse_and_validate():
    cfg = dr.with_overrides(dr.RandomizationCfg(), dict(dr.parse_override(t) for t in (
        "friction_scale=0.3,1.2", "action_latency_steps=0,2", "push_interval_s=none", "observation_noise=off")))
    assert cfg.friction_scale == (0.3, 1.2)
    assert cfg.action_latency_steps == (0, 2) and isinstance(cfg.action_latency_steps[0], int)
    assert cfg.push_interval_s is None and cfg.observation_noise is False
    with pytest.raises(ConfigError, match="out of order"):
        dr.with_overrides(dr.RandomizationCfg(), {"kp_scale": (1.2, 0.8)})
    with pytest.raises(ConfigError, match="LOW,HIGH"):
        dr.parse_override("kp_scale=1.0")


def test_samples_stay_in_their_ranges(a1):
    _, _, nominal = a1
    cfg = dr.RandomizationCfg(friction_scale=(0.4, 1.0), base_mass_add_kg=(-1, 3), link_mass_scale=(0.9, 1.1),
                              com_offset_m=0.05, kp_scale=(0.8, 1.2), motor_strength=(0.9, 1.1))
    s = dr.sample_model(cfg, nominal, np.random.default_rng(0), 500)
    assert s.friction_scale.min() >= 0.4 and s.friction_scale.max() <= 1.0
    assert s.base_mass_add.min() >= -1 and s.base_mass_add.max() <= 3
    assert np.abs(s.com_offset).max() <= 0.05
    assert s.kp_scale.shape == (500, 12) and np.ptp(s.kp_scale) > 0.3
    assert np.all(s.kd_scale == 1.0)  # off: nominal


def test_applied_sample_changes_the_model(a1):
    spec, robot, nominal = a1
    model = copy.copy(robot.model)
    data = mujoco.MjData(model)
    s = dr.nominal_sample(nominal)
    s.friction_scale[:] = 0.5
    s.base_mass_add[:] = 2.0
    s.link_mass_scale[:] = 1.1
    s.com_offset[:] = [0.03, -0.02, 0.01]
    s.motor_strength[:] = 0.8
    dr.apply_model_sample(model, data, nominal, s)
    b = robot.base_body_id
    assert np.allclose(model.geom_friction[:, 0], 0.5 * spec.sim_model.base_friction)
    assert model.body_mass[b] == pytest.approx(robot.model.body_mass[b] * 1.1 + 2.0)
    other = nominal.robot_bodies[nominal.robot_bodies != b][0]
    assert model.body_mass[other] == pytest.approx(robot.model.body_mass[other] * 1.1)
    assert np.allclose(model.body_ipos[b] - robot.model.body_ipos[b], [0.03, -0.02, 0.01])
    limits = model.jnt_actfrcrange[robot.joint_ids]
    assert np.allclose(limits[:, 1], 0.8 * spec.effort_limits)
    # Derived quantities follow the new masses (mj_setConst).
    assert model.body_subtreemass[0] == pytest.approx(model.body_mass.sum())


def test_action_delay_shifts_by_exactly_the_latency():
    delay = dr.ActionDelay(num_envs=3, num_actions=1, max_steps=3)
    delay.reset(np.arange(3), np.array([0, 1, 3]))
    applied = [delay.push(np.full((3, 1), float(t + 1)))[:, 0].tolist() for t in range(6)]
    assert [a[0] for a in applied] == [1, 2, 3, 4, 5, 6]
    assert [a[1] for a in applied] == [0, 1, 2, 3, 4, 5]
    assert [a[2] for a in applied] == [0, 0, 0, 1, 2, 3]


def test_initial_joint_state_is_around_the_default_and_inside_the_limits(a1):
    spec, _, _ = a1
    cfg = dr.RandomizationCfg(init_joint_pos_rad=0.5, init_joint_vel_rad_s=0.2)
    q, dq = dr.initial_joint_state(cfg, np.random.default_rng(0), 200, spec.default_positions,
                                   spec.position_lower, spec.position_upper)
    assert np.all(q >= spec.position_lower) and np.all(q <= spec.position_upper)
    assert 0.3 < np.abs(q - spec.default_positions).max() <= 0.5
    assert 0.1 < np.abs(dq).max() <= 0.2


def test_applied_sample_keeps_the_state_of_the_data(a1):
    """mj_setConst moves the data to the model's qpos0 (an A1's legs straight); applying a sample must not: a
    standing robot stays in its pose, with its velocities, time and derived positions."""
    _, robot, nominal = a1
    model = copy.copy(robot.model)
    data = robot.make_data()  # the default (standing) pose
    data.qvel[:] = np.linspace(-0.2, 0.2, model.nv)
    data.time = 1.25
    mujoco.mj_forward(model, data)
    qpos, qvel, foot = data.qpos.copy(), data.qvel.copy(), data.xpos.copy()
    assert not np.allclose(qpos, model.qpos0)  # the test means something: the pose is not the zero pose
    s = dr.nominal_sample(nominal)
    s.base_mass_add[:] = 1.0
    dr.apply_model_sample(model, data, nominal, s)
    assert np.array_equal(data.qpos, qpos) and np.array_equal(data.qvel, qvel) and data.time == 1.25
    assert np.allclose(data.xpos, foot)  # kinematics recomputed at the kept pose


def test_corner_probability_puts_whole_rows_at_the_ends_of_their_ranges(a1):
    _, _, nominal = a1
    cfg = dr.RandomizationCfg(friction_scale=(0.4, 1.0), base_mass_add_kg=(-1, 3), com_offset_m=0.05,
                              kp_scale=(0.9, 1.1), contact_timeconst_s=(0.01, 0.03), corner_probability=0.3)
    s = dr.sample_model(cfg, nominal, np.random.default_rng(0), 4000)
    for values, ends in ((s.friction_scale, (0.4, 1.0)), (s.base_mass_add, (-1, 3)),
                         (s.contact_timeconst, (0.01, 0.03)), (s.com_offset.ravel(), (-0.05, 0.05))):
        at_end = np.isin(values, ends)
        assert 0.26 < at_end.mean() < 0.34
        assert 0.4 < np.mean(values[at_end] == ends[0]) < 0.6  # both ends alike
        assert values.min() >= ends[0] and values.max() <= ends[1]
    kp_at_end = np.isin(s.kp_scale, (0.9, 1.1))
    rows = kp_at_end.any(axis=1)
    assert np.all(kp_at_end[rows])  # a corner moves every joint of the env to the same end, as the suite's corner
    assert np.all(np.ptp(s.kp_scale[rows], axis=1) == 0)
    plain = dr.sample_model(dataclasses.replace(cfg, corner_probability=0.0), nominal, np.random.default_rng(0), 4000)
    assert not np.isin(plain.friction_scale, (0.4, 1.0)).any()


def test_all_corners_probability_puts_every_quantity_of_an_env_at_a_corner_together(a1):
    _, _, nominal = a1
    cfg = dr.RandomizationCfg(friction_scale=(0.4, 1.0), base_mass_add_kg=(-1, 3), com_offset_m=0.05,
                              kp_scale=(0.9, 1.1), motor_strength=(0.9, 1.1), link_mass_scale=(0.9, 1.1),
                              contact_timeconst_s=(0.01, 0.03), all_corners_probability=0.25)
    s = dr.sample_model(cfg, nominal, np.random.default_rng(0), 4000)
    at_end = np.stack([np.isin(s.friction_scale, (0.4, 1.0)), np.isin(s.base_mass_add, (-1, 3)),
                       np.isin(s.contact_timeconst, (0.01, 0.03)), np.isin(s.com_offset, (-0.05, 0.05)).all(axis=1),
                       np.isin(s.kp_scale, (0.9, 1.1)).all(axis=1), np.isin(s.motor_strength, (0.9, 1.1)).all(axis=1),
                       np.isin(s.link_mass_scale, (0.9, 1.1)).all(axis=1)])
    assert np.array_equal(at_end.all(axis=0), at_end.any(axis=0))  # all together or none (corner_probability 0)
    assert 0.22 < at_end[0].mean() < 0.28
    both = at_end[0]
    assert 0.4 < np.mean(s.base_mass_add[both] == 3) < 0.6  # each quantity's end drawn on its own
    assert 0.15 < np.mean((s.base_mass_add[both] == 3) & (s.motor_strength[both, 0] == 0.9)) < 0.35
    with pytest.raises(ConfigError, match="all_corners_probability"):
        dr.with_overrides(cfg, {"all_corners_probability": 2.0})


def test_new_randomization_fields_are_validated():
    for bad in ({"corner_probability": 1.5}, {"stiff_contact_fraction": -0.1}, {"push_interval_s": 0.0},
                {"push_ramp_s": -1.0}, {"contact_timeconst_s": (0.0, 0.02)}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            dr.with_overrides(dr.RandomizationCfg(), bad)
    assert dr.parse_override("corner_probability=0.2") == ("corner_probability", 0.2)
    assert dr.parse_override("contact_timeconst_s=0.01,0.03") == ("contact_timeconst_s", (0.01, 0.03))


def test_contact_timeconst_is_written_to_every_geom_and_zero_keeps_the_model(a1):
    _, robot, nominal = a1
    model = copy.copy(robot.model)
    data = mujoco.MjData(model)
    s = dr.nominal_sample(nominal)
    dr.apply_model_sample(model, data, nominal, s)
    assert np.array_equal(model.geom_solref, nominal.geom_solref)
    s.contact_timeconst[:] = 0.012
    dr.apply_model_sample(model, data, nominal, s)
    assert np.all(model.geom_solref[:, 0] == 0.012)
    assert np.array_equal(model.geom_solref[:, 1], nominal.geom_solref[:, 1])  # damping ratio untouched


def test_pushes_come_from_every_direction_up_to_the_ramped_maximum():
    cfg = dr.RandomizationCfg(push_interval_s=4.0, push_max_vel_m_s=1.0, push_ramp_s=100.0)
    rng = np.random.default_rng(0)
    v = dr.push_velocity(cfg, rng, 4000)
    speed, angle = np.linalg.norm(v, axis=1), np.arctan2(v[:, 1], v[:, 0])
    assert speed.max() <= 1.0 and speed.max() > 0.99
    counts = np.histogram(angle, bins=8, range=(-np.pi, np.pi))[0]
    assert counts.min() > 0.8 * 4000 / 8  # uniform over the 8 sectors the suite shoves from
    assert np.linalg.norm(dr.push_velocity(cfg, rng, 1000, scale=0.25), axis=1).max() <= 0.25
    assert dr.push_scale(cfg, 0.0) == 0.0 and dr.push_scale(cfg, 50.0) == 0.5 and dr.push_scale(cfg, 1e4) == 1.0
    assert dr.push_scale(dataclasses.replace(cfg, push_ramp_s=0.0), 0.0) == 1.0
    assert dr.push_probability(cfg, 0.02) == pytest.approx(0.02 / 4.0, rel=0.01)
    assert dr.push_probability(dataclasses.replace(cfg, push_interval_s=None), 0.02) == 0.0
    assert dr.push_probability(dataclasses.replace(cfg, push_max_vel_m_s=0.0), 0.02) == 0.0


def test_training_kicks_overshoot_the_claimed_range_and_the_suite_shoves_at_the_claim():
    from robot_rl.evaluation.robustness import suite_conditions
    from robot_rl.robots.spec import load_robot
    from robot_rl.tasks.registry import make_task

    cfg = dr.RandomizationCfg(push_interval_s=4.0, push_max_vel_m_s=1.0, push_ramp_s=100.0, push_overshoot=1.3)
    assert dr.push_scale(cfg, 50.0) == pytest.approx(0.65) and dr.push_scale(cfg, 1e4) == pytest.approx(1.3)
    speed = np.linalg.norm(dr.push_velocity(cfg, np.random.default_rng(1), 4000, dr.push_scale(cfg, 1e4)), axis=1)
    assert 1.29 < speed.max() <= 1.3 and np.mean(speed > 0.9) > 0.25  # uniform to 1.0 would give 0.1
    task = make_task("a1-flat")
    task = dataclasses.replace(task, randomization=dataclasses.replace(task.randomization, push_overshoot=1.3))
    shoves = {c.shove_m_s for c in suite_conditions(task, load_robot("a1")) if c.group == "shove"}
    assert shoves == {0.5, 1.0}
    with pytest.raises(ValueError, match="push_overshoot"):
        dr.RandomizationCfg(push_overshoot=0.9)


@pytest.mark.parametrize(("n", "fraction", "expected"), [(8, 0.25, [3, 7]), (4, 0.0, []), (3, 1.0, [0, 1, 2]),
                                                          (256, 0.25, None)])
def test_stiff_contact_envs_are_spread_over_the_indices(n, fraction, expected):
    stiff = dr.stiff_contact_envs(n, fraction)
    assert stiff.sum() == int(n * fraction)
    if expected is not None:
        assert np.flatnonzero(stiff).tolist() == expected
    else:  # each contiguous half (one physics thread's block) gets its share
        assert stiff[: n // 2].sum() == stiff[n // 2 :].sum()
