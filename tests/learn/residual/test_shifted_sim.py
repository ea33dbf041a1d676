"""Sim as "real": the shift reaches the simulated robot and the vectorized env identically."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.core.types import JointCommand
from robot_rl.learn.residual.shifted_sim import (
    RealityShift,
    ShiftedSimRobot,
    describe_training_ranges,
    payload_body,
    shifted_vec_env,
)
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task

SHIFT = RealityShift(kp_scale=0.5, kd_scale=0.8, payload_kg=2.0, latency_steps=2, friction_scale=0.4)


def test_shift_values_are_checked():
    with pytest.raises(ValueError, match="gain and friction scales"):
        RealityShift(kp_scale=0.0)
    with pytest.raises(ValueError, match="payload and latency"):
        RealityShift(latency_steps=-1)


def test_training_ranges_are_read_from_the_task_not_written_by_hand():
    """The results page sets the shift against these: they must be the task's own randomization."""
    a1 = describe_training_ranges(make_task("a1-flat").randomization)
    assert "kp ×0.9–1.1" in a1 and "base mass -1 to +3 kg added" in a1 and "friction ×0.4–1" in a1
    assert "0–1 policy steps latency" in a1
    push = describe_training_ranges(make_task("panda-push").randomization)
    assert push == "nominal kp, nominal kd, 0 policy steps latency, nominal friction"


def test_shifted_robot_carries_an_uncompensated_payload_weaker_gains_and_latency():
    spec = load_robot("panda")
    robot = ShiftedSimRobot(spec, SHIFT)
    nominal = ShiftedSimRobot(spec, RealityShift())
    robot.connect()
    nominal.connect()
    try:
        model, ref = robot._backend.robot.model, nominal._backend.robot.model
        hand = payload_body(model, spec)
        assert model.body(hand).name == "panda_hand"
        assert model.body_mass[hand] == pytest.approx(ref.body_mass[hand] + 2.0)
        # gravity compensated for the nominal mass only
        assert model.body_gravcomp[hand] * model.body_mass[hand] == pytest.approx(ref.body_mass[hand])
        assert np.allclose(model.geom_friction[:, 0], 0.4 * spec.sim_model.base_friction)

        hold = JointCommand.hold(spec.default_positions, spec.kp, spec.kd)
        data = robot._backend.data
        robot.write(hold)  # latency 2: the motors still run the power-up (passive) command
        assert np.all(data.ctrl == 0.0)
        robot.write(hold)
        assert np.all(data.ctrl == 0.0)
        robot.write(hold)  # the first command arrives, with the shifted gains
        kp = data.ctrl[robot._backend.robot.kp_ctrl]
        np.testing.assert_allclose(kp, 0.5 * spec.kp)
    finally:
        robot.close()
        nominal.close()


def test_shifted_vec_env_has_the_same_payload_gains_and_latency():
    task = make_task("panda-reach")
    env = shifted_vec_env(task, SHIFT, 2, seed=0, nthread=1)
    try:
        spec = env.spec
        hand = payload_body(env.models[0], spec)
        robot = ShiftedSimRobot(spec, SHIFT)
        robot.connect()
        try:
            shifted = robot._backend.robot.model
            for model in env.models:
                assert model.body_mass[hand] == pytest.approx(shifted.body_mass[hand])
                assert model.body_gravcomp[hand] == pytest.approx(shifted.body_gravcomp[hand])
        finally:
            robot.close()
        np.testing.assert_allclose(env.kp, np.tile(0.5 * spec.kp, (2, 1)))
        np.testing.assert_allclose(env.kd, np.tile(0.8 * spec.kd, (2, 1)))
        assert np.all(env.delay.latency == 2)
        env.step(np.zeros((2, env.num_actions)))
        env._reset_envs(np.arange(2))  # a reset re-applies the shifted nominal, payload included
        assert env.models[1].body_mass[hand] == pytest.approx(env.nominal.body_mass[hand])
        assert env.nominal.body_mass[hand] == pytest.approx(shifted.body_mass[hand])
    finally:
        env.close()


def test_reposition_sets_a_fallen_legged_robot_back_on_its_feet():
    spec = load_robot("a1")
    robot = ShiftedSimRobot(spec, RealityShift(payload_kg=3.0))
    robot.connect()
    try:
        backend = robot._backend
        adr = backend.robot.free_qpos_adr
        backend.data.qpos[adr + 3 : adr + 7] = [np.cos(0.8), np.sin(0.8), 0.0, 0.0]  # on its side
        backend.data.qpos[backend.robot.qpos_adr] += 0.4
        robot.reposition()
        state = robot.read()
        np.testing.assert_allclose(state.q, spec.default_positions, atol=1e-9)
        assert abs(state.base_quat[0]) == pytest.approx(1.0, abs=1e-6)
        assert robot._backend.robot.model.body_mass[payload_body(robot._backend.robot.model, spec)] > 3.0
    finally:
        robot.close()


def test_scene_objects_keep_their_own_friction_scaled_by_the_object_shift():
    from robot_rl.tasks import panda_push

    spec = load_robot("panda")
    shift = RealityShift(friction_scale=0.4, object_friction_scale=1.6)
    robot = ShiftedSimRobot(spec, shift, scene=panda_push.push_scene(np.array([0.45, 0.0])))
    robot.connect()
    try:
        model = robot._backend.robot.model
        for name in (panda_push.CUBE, panda_push.TABLE.name):
            assert model.geom_friction[model.geom(name).id, 0] == pytest.approx(1.6 * panda_push.CUBE_FRICTION)
        hand_geoms = np.flatnonzero(model.geom_bodyid == payload_body(model, spec))
        assert len(hand_geoms) and np.allclose(model.geom_friction[hand_geoms, 0], 0.4 * spec.sim_model.base_friction)
    finally:
        robot.close()
    assert "object friction ×1.6" in shift.describe()


def test_reset_scene_puts_the_cube_back_at_its_layout_at_rest():
    from robot_rl.tasks import panda_push

    spec = load_robot("panda")
    robot = ShiftedSimRobot(spec, RealityShift(kp_scale=0.5), scene=panda_push.push_scene(np.array([0.45, 0.0])))
    robot.connect()
    try:
        backend = robot._backend
        joint = backend.robot.model.body(panda_push.CUBE).jntadr[0]
        q, v = backend.robot.model.jnt_qposadr[joint], backend.robot.model.jnt_dofadr[joint]
        backend.data.qpos[q : q + 3] = [0.7, -0.3, 0.4]  # knocked off somewhere, flying and spinning
        backend.data.qvel[v : v + 6] = [1.0, 0.5, 0.0, 3.0, 0.0, 2.0]
        layout = np.array([0.48, 0.07])
        robot.reset_scene(panda_push.push_scene(layout))
        np.testing.assert_allclose(robot.object_position(), [0.48, 0.07, panda_push.CUBE_HALF_M], atol=1e-9)
        hold = JointCommand.hold(spec.default_positions, spec.kp, spec.kd)
        for _ in range(25):  # half a second: it rests on the table where it was put
            robot.write(hold)
        np.testing.assert_allclose(robot.object_position(), [0.48, 0.07, panda_push.CUBE_HALF_M], atol=2e-3)
        with pytest.raises(ValueError, match=r"built with objects \['cube'\]"):
            robot.reset_scene(panda_push.SimScene(boxes=(panda_push.TABLE,)))
    finally:
        robot.close()


def test_randomization_around_a_calibrated_robot_recentres_what_the_shift_names():
    from robot_rl.learn.residual.shifted_sim import randomization_around
    from robot_rl.tasks.registry import make_task

    training = make_task("a1-flat").randomization
    shift = RealityShift(kp_scale=0.7, kd_scale=1.2, payload_kg=4.0, latency_steps=2, friction_scale=0.3)
    rand = randomization_around(shift, training, spread=0.1, payload_spread_kg=0.5)
    assert rand.kp_scale == pytest.approx((0.63, 0.77))
    assert rand.kd_scale == pytest.approx((1.08, 1.32))
    assert rand.friction_scale == pytest.approx((0.27, 0.33))
    assert rand.base_mass_add_kg == (-0.5, 0.5)  # around the payload the shifted model already carries
    assert rand.action_latency_steps == (2, 2)
    # what the shift does not name stays as the task trained with
    assert (rand.link_mass_scale, rand.motor_strength, rand.push_interval_s, rand.observation_noise) == (
        training.link_mass_scale, training.motor_strength, training.push_interval_s, training.observation_noise)


@pytest.mark.parametrize("robot_name", ["a1", "panda"])
def test_connected_shifted_robot_starts_in_its_default_pose(robot_name):
    """Applying the shift recomputes the model's constants (mj_setConst), which used to leave the robot at the
    model's zero pose (an A1's legs straight) until reposition() was called."""
    spec = load_robot(robot_name)
    with ShiftedSimRobot(spec, RealityShift(payload_kg=1.0, friction_scale=0.8)) as robot:
        state = robot.read()
        assert np.allclose(state.q, spec.default_positions, atol=1e-9)
        assert np.allclose(state.dq, 0.0)
