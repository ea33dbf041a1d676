"""Differential IK and the arm teleop controller, alone and inside the deploy runtime."""

import numpy as np
import pytest

from robot_rl.control.runtime import DeployRuntime
from robot_rl.control.state_machine import ControllerMode
from robot_rl.hardware.sim_robot import SimRobot
from robot_rl.policy.contract import contract_for_task
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task
from robot_rl.teleop.arm_ik import ArmIKConfig, ArmTeleopController, DifferentialIK
from robot_rl.teleop.command import TeleopCommand

PANDA = load_robot("panda")
TASK = make_task("panda-push")


def test_ik_tracks_a_small_end_effector_displacement():
    ik = DifferentialIK(PANDA)
    start, rot0 = ik.kin.tool_pose(ik.q)
    velocity = np.array([0.1, -0.05, 0.05])  # m/s, base frame
    ticks = 25  # 0.5 s
    for _ in range(ticks):
        q = ik.step(velocity, np.zeros(3))
    end, rot = ik.kin.tool_pose(q)
    expected = start + velocity * ticks * PANDA.timing.policy_period_s
    assert np.linalg.norm(end - expected) < 2e-3  # within 2 mm of a 5.7 cm move
    assert np.linalg.norm(rot - rot0) < 1e-2  # orientation held


def test_ik_respects_joint_position_and_speed_limits_when_driven_into_them():
    ik = DifferentialIK(PANDA)
    margin = PANDA.safety.soft_limit_margin_rad
    lo, hi = PANDA.position_lower + margin, PANDA.position_upper - margin
    dt = PANDA.timing.policy_period_s
    max_step = np.minimum(PANDA.velocity_limits, PANDA.safety.max_target_rate_rad_s) * dt
    q_prev = ik.q
    touched = np.zeros(PANDA.num_joints, dtype=bool)
    # Straight down through the table, then far out and up: both end against joint limits.
    for velocity in ([0.0, 0.0, -0.25], [0.25, 0.25, 0.25]):
        for _ in range(400):
            q = ik.step(np.array(velocity), np.zeros(3))
            assert np.all(q >= lo - 1e-6) and np.all(q <= hi + 1e-6), (q, lo, hi)
            assert np.all(np.abs(q - q_prev) <= max_step + 1e-9)
            touched |= (q - lo < 1e-3) | (hi - q < 1e-3)
            q_prev = q
    assert touched.any(), "the test never drove a joint to its soft limit"


def test_released_stick_stops_the_target_at_once_even_against_a_limit():
    ik = DifferentialIK(PANDA)
    for _ in range(400):
        ik.step(np.array([0.0, 0.0, -0.25]), np.zeros(3))  # pinned at a joint limit, stick still pushed
    q_pinned = ik.q
    for _ in range(20):
        q = ik.step(np.zeros(3), np.zeros(3))
    pos_pinned, _ = ik.kin.tool_pose(q_pinned)
    pos, _ = ik.kin.tool_pose(q)
    assert np.linalg.norm(pos - pos_pinned) <= ArmIKConfig().max_lead_m + 1e-3  # no long unwinding


def test_ik_config_rejects_nonpositive_speeds():
    with pytest.raises(ValueError, match="max_linear_speed_m_s"):
        ArmIKConfig(max_linear_speed_m_s=0.0)


def _state_at(q):
    from robot_rl.core.types import RobotState

    n = len(q)
    return RobotState(timestamp=0.0, tick=0, q=np.array(q, dtype=float), dq=np.zeros(n), tau=np.zeros(n))


def test_controller_holds_without_a_fresh_command_and_refuses_nan():
    ctrl = ArmTeleopController(PANDA, TASK, max_command_age_ticks=2)
    ctrl.reset()
    state = _state_at(PANDA.default_positions)
    hold = ctrl.step(state).q_target.copy()  # nothing received yet: hold
    np.testing.assert_allclose(hold, PANDA.default_positions, atol=1e-6)
    ctrl.set_teleop(TeleopCommand(ee_delta=np.array([1.0, 0, 0, 0, 0, 0])))
    moved = [ctrl.step(state).q_target.copy() for _ in range(3)]
    assert np.abs(moved[0] - hold).max() > 1e-3  # a fresh command moves the target
    assert np.abs(moved[2] - moved[1]).max() > 1e-3  # still fresh (age ≤ 2)
    ctrl.step(state)
    target = ctrl.ik.target_pos.copy()  # stale from here on: the Cartesian target stops
    frozen = [ctrl.step(state).q_target.copy() for _ in range(3)]
    np.testing.assert_array_equal(ctrl.ik.target_pos, target)
    np.testing.assert_allclose(frozen[0], frozen[2], atol=1e-5)
    ctrl.set_teleop(TeleopCommand(ee_delta=np.array([np.nan, 0, 0, 0, 0, 0])))
    after_nan = ctrl.step(state).q_target.copy()
    assert ctrl.rejected_commands == 1 and np.all(np.isfinite(after_nan))
    np.testing.assert_array_equal(ctrl.ik.target_pos, target)


def test_controller_action_is_the_inverse_of_the_task_action_decoding():
    ctrl = ArmTeleopController(PANDA, TASK)
    ctrl.reset()
    ctrl.set_teleop(TeleopCommand(ee_delta=np.array([0.5, 0.5, -0.5, 0.0, 0.0, 0.3])))
    cmd = ctrl.step(_state_at(PANDA.default_positions))
    decoded = TASK.action.decode(ctrl.last_raw_action, PANDA.default_positions)
    np.testing.assert_allclose(decoded, cmd.q_target, atol=1e-12)
    assert ctrl.contract == contract_for_task(TASK, PANDA, ctrl.contract.provenance)


def test_controller_clamps_the_task_command_like_a_policy_controller():
    ctrl = ArmTeleopController(PANDA, TASK)
    ctrl.set_command([5.0, 0.0])
    assert ctrl.command_clamped and ctrl.last_command[0] == TASK.commands.high[0]
    with pytest.raises(ValueError, match="goal_x"):
        ctrl.set_command([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="panda-push"):
        ArmTeleopController(load_robot("a1"), TASK)


def test_teleop_runs_through_the_deploy_runtime_and_moves_the_tool_in_mujoco():
    ctrl = ArmTeleopController(PANDA, TASK)
    runtime = DeployRuntime(PANDA, ctrl)
    assert runtime.contract is ctrl.contract  # the chain's action clip is the task's
    with SimRobot(PANDA, "mujoco") as robot:
        runtime.arm()
        running = 0
        tool_start = None
        while running < 100:
            state = robot.read()
            down = -1.0 if running < 50 else 0.0  # 1 s down at full speed, then 1 s released
            ctrl.set_teleop(TeleopCommand(ee_delta=np.array([0.0, 0.0, down, 0.0, 0.0, 0.0])))
            result = runtime.step(state, robot.sim_time())
            if result.mode is ControllerMode.RUNNING:
                if tool_start is None:
                    tool_start, _ = ctrl.ik.kin.tool_pose(state.q)
                running += 1
            robot.write(result.command)
        tool_end, _ = ctrl.ik.kin.tool_pose(robot.read().q)
    drop = tool_start[2] - tool_end[2]
    assert abs(drop - 0.25) < 0.01, drop  # 1 s at 0.25 m/s
    assert np.linalg.norm(tool_end[:2] - tool_start[:2]) < 0.005
    assert runtime.diagnostics()["safety"]["faults"] == {}
