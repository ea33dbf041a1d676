"""MuJoCo's second integrator/contact configuration (``mujoco-alt``): the gate's second physics for robots whose
only model is an MJCF (Go2, G1), where PyBullet cannot load them."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robot_rl.core.types import JointCommand
from robot_rl.evaluation.sim2sim import default_simulators
from robot_rl.hardware.sim_robot import SimRobot
from robot_rl.robots.assets import model_source_missing
from robot_rl.robots.mujoco_model import build_mujoco_model
from robot_rl.robots.mujoco_physics import ALTERNATE_PHYSICS, DEFAULT_PHYSICS
from robot_rl.robots.spec import load_robot
from robot_rl.robots.stand_check import stand_check


def test_the_alternate_configuration_differs_in_integrator_step_cone_and_contacts():
    spec = load_robot("a1")
    default, alternate = (build_mujoco_model(spec, physics=p).model for p in (DEFAULT_PHYSICS, ALTERNATE_PHYSICS))
    assert default.opt.timestep == spec.timing.physics_period_s
    assert alternate.opt.timestep == pytest.approx(spec.timing.physics_period_s / 2)
    assert (default.opt.integrator, alternate.opt.integrator) == (mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
                                                                 mujoco.mjtIntegrator.mjINT_IMPLICIT)
    assert (default.opt.cone, alternate.opt.cone) == (mujoco.mjtCone.mjCONE_ELLIPTIC, mujoco.mjtCone.mjCONE_PYRAMIDAL)
    np.testing.assert_allclose(alternate.geom_solref, np.tile([0.01, 1.0], (alternate.ngeom, 1)))
    assert not np.allclose(default.geom_solref, alternate.geom_solref)


def test_a_lockstep_write_is_one_policy_period_in_both_configurations():
    spec = load_robot("a1")
    heights = {}
    for simulator in ("mujoco", "mujoco-alt"):
        with SimRobot(spec, simulator) as robot:
            hold = JointCommand.hold(spec.default_positions, spec.kp, spec.kd)
            for _ in range(100):  # 2 s
                robot.write(hold)
            assert robot.sim_time() == pytest.approx(2.0)
            heights[simulator] = robot.read().base_pos[2]
    # The same robot standing, by different numerics: close, not equal.
    assert abs(heights["mujoco"] - heights["mujoco-alt"]) < 0.02
    assert heights["mujoco"] != heights["mujoco-alt"]


@pytest.mark.parametrize(("name", "second"), [("a1", "pybullet"), ("panda", "pybullet"), ("go2", "mujoco-alt"),
                                              ("g1", "mujoco-alt")])
def test_the_gate_picks_pybullet_for_a_urdf_and_mujoco_alt_otherwise(name, second):
    assert default_simulators(load_robot(name)) == ("mujoco", second)


def test_go2_stays_up_in_the_second_configuration():
    spec = load_robot("go2")
    missing = model_source_missing(spec)
    if missing:
        pytest.skip(f"model source not on this machine: {missing}")
    result = stand_check(spec, "mujoco-alt", duration_s=2.0)
    assert not result.joint_past_limit and result.base_height_final > 0.6 * spec.sim_model.base_height, result.summary()
