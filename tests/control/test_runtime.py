"""The deploy runtime end to end against real simulators (lockstep), with injected faults."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.control.deploy_loop import Push, run_loop
from robot_rl.control.runtime import DeployRuntime
from robot_rl.core.types import RobotState
from robot_rl.hardware.sim_robot import SimRobot
from robot_rl.robots.spec import load_robot


@pytest.fixture(scope="module")
def a1():
    return load_robot("a1")


class FrozenSensor:
    """Stands in for a sensor stream that stops updating (a hung driver): wraps a real SimRobot and, from
    ``freeze_at`` reads on, keeps returning the last state (same tick) while the physics goes on."""

    def __init__(self, robot: SimRobot, freeze_at: int):
        self.robot, self.freeze_at, self.reads, self.frozen = robot, freeze_at, 0, None

    def read(self) -> RobotState:
        self.reads += 1
        if self.reads <= self.freeze_at or self.frozen is None:
            state = self.robot.read()
            if self.reads >= self.freeze_at:
                self.frozen = state
            return state
        return self.frozen

    def __getattr__(self, name):
        return getattr(self.robot, name)


@pytest.mark.parametrize("simulator", ["mujoco", "pybullet"])
def test_passive_then_ramp_stands_the_a1_up_from_a_collapse(a1, simulator):
    runtime = DeployRuntime(a1)
    with SimRobot(a1, simulator) as robot:
        collapsed = run_loop(runtime, robot, 1.0, realtime=False, arm=False)
        assert set(collapsed.mode) == {"passive"}
        assert collapsed.base_pos[-1, 2] < 0.15  # passive motors: the robot sags to the floor
        first_q = robot.read().q
        rec = run_loop(runtime, robot, 4.0, realtime=False)
    assert rec.mode[0] == "ramp" and rec.mode[-1] == "running"
    # The ramp starts at the measured pose; the chain never sends a target beyond a hard limit.
    np.testing.assert_allclose(rec.q_target_proposed[0], first_q, atol=1e-12)
    assert np.all(rec.q_target_sent >= a1.position_lower - 1e-12) and np.all(rec.q_target_sent <= a1.position_upper)
    if simulator == "mujoco":
        # At rest after the collapse: joints pushed past their hard stops are held at the stop, all others
        # exactly where they are. (PyBullet's collapse leaves joints still moving, which the velocity-aware
        # limit rightly answers by pulling their targets inward.)
        np.testing.assert_allclose(rec.q_target_sent[0], np.clip(first_q, a1.position_lower, a1.position_upper))
    # Stood up (the feet end up wherever the collapse left them, so the height is near, not at, nominal).
    assert rec.base_pos[-1, 2] > 0.85 * a1.sim_model.base_height
    np.testing.assert_allclose(rec.q_target_sent[-1], a1.default_positions, atol=1e-12)


def test_estop_during_motion_damps_on_the_next_tick(a1):
    runtime = DeployRuntime(a1)
    with SimRobot(a1, "mujoco") as robot:
        run_loop(runtime, robot, 0.5, realtime=False)  # mid-ramp: joints moving
        runtime.estop()
        state = robot.read()
        result = runtime.step(state, robot.sim_time())
    assert result.mode.value == "damping"
    assert np.all(result.command.kp == 0) and np.all(result.command.kd == a1.safety.damping_kd)


def test_frozen_state_faults_into_damping_within_the_stale_timeout(a1):
    runtime = DeployRuntime(a1)
    with SimRobot(a1, "mujoco") as real:
        robot = FrozenSensor(real, freeze_at=60)
        rec = run_loop(runtime, robot, 3.0, realtime=False)
    first_damped = rec.mode.index("damping")
    # Frozen from read 61 (index 60) on; the watchdog allows stale_state_periods policy periods.
    assert 60 < first_damped <= 60 + a1.safety.stale_state_periods + 1
    assert all(m == "damping" for m in rec.mode[first_damped:])
    assert any("stale" in text for _, text in rec.events)
    assert runtime.diagnostics()["fault_latched"]


def test_arm_with_a_latched_fault_is_refused_without_raising_then_rearm_ramps(a1):
    runtime = DeployRuntime(a1)
    with SimRobot(a1, "mujoco") as robot:
        state = robot.read()
        state.q[3] = np.nan  # a NaN from a broken encoder
        runtime.arm()
        result = runtime.step(state, 0.0)
        assert result.mode.value == "damping" and runtime.chain.faulted
        runtime.arm()  # refused: the fault is latched
        result = runtime.step(robot.read(), 0.02)
        assert result.mode.value == "damping" and runtime.refused
        runtime.reset_fault()
        runtime.arm()
        fresh = robot.read()
        result = runtime.step(fresh, 0.04)
    assert result.mode.value == "ramp"
    np.testing.assert_allclose(result.proposed.q_target, fresh.q)  # re-arm starts the ramp at the measured pose


def test_push_moves_the_base_and_the_held_a1_recovers(a1):
    runtime = DeployRuntime(a1)
    with SimRobot(a1, "mujoco") as robot:
        rec = run_loop(runtime, robot, 4.0, realtime=False, pushes=[Push(3.0, (0.6, 0.0, 0.0))])
    k = round(3.0 / a1.timing.policy_period_s)
    assert rec.base_lin_vel[k + 1, 0] > 0.3  # the shove shows up in the measured base velocity
    assert rec.base_pos[-1, 2] > 0.2  # and the robot is still up


def test_realtime_loop_runs_and_reports_timing(a1):
    runtime = DeployRuntime(a1)
    with SimRobot(a1, "mujoco", realtime=True) as robot:
        rec = run_loop(runtime, robot, 0.5, realtime=True)
    assert rec.ticks == 25
    assert {"lateness_s", "missed_deadlines", "period_s"} <= set(rec.timing)
    assert rec.mode[-1] == "ramp"
