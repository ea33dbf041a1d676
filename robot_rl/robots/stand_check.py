"""Stand check: does a robot's sim model hold its spec default pose under the spec's own PD gains?

It starts at the default pose (a floating base at ``sim_model.base_height``), commands that pose with the
spec kp/kd for ``duration_s`` and measures where it ends up. It catches a model that disagrees with its
spec (a nominal base height the robot cannot hold, gains too soft for gravity, a joint pushed past a
limit) before any policy is trained on it. ``python -m robot_rl.robots.stand_check a1 mujoco`` prints one.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np

from robot_rl.core.types import JointCommand
from robot_rl.robots.spec import RobotSpec, load_robot

BASE_HEIGHT_TOLERANCE_M = 0.03  # floating base: settled height within this of sim_model.base_height
ARM_POSE_TOLERANCE_RAD = 0.01  # fixed base: every joint within this of its default, for the whole run
LIMIT_TOLERANCE_RAD = 0.002  # past a limit by more than this counts (ros2_control's "past a limit")

Simulator = Literal["mujoco", "pybullet", "mujoco-alt"]  # mujoco-alt: robot_rl.robots.mujoco_physics


@dataclass(frozen=True)
class StandResult:
    robot: str
    simulator: str
    duration_s: float
    base_height_final: float | None  # m, base body origin; None for a fixed base
    base_height_nominal: float | None  # m, sim_model.base_height
    max_joint_error_rad: float  # largest |q − q_default| at the end
    peak_joint_error_rad: float  # largest |q − q_default| over the run
    max_limit_violation_rad: float  # largest distance past a position limit over the run (0 if none)
    joint_past_limit: bool
    passed: bool
    sim_wall_time_s: float  # wall time of the physics loop
    physics_steps: int

    def summary(self) -> str:
        height = (f"base height {self.base_height_final:.4f} m (nominal {self.base_height_nominal:.3f})"
                  if self.base_height_final is not None else "fixed base")
        return (f"{self.robot} in {self.simulator}, {self.duration_s:g} s: {'PASS' if self.passed else 'FAIL'}; "
                f"{height}; joint error final {self.max_joint_error_rad:.4f} rad, peak "
                f"{self.peak_joint_error_rad:.4f} rad; past limit by {self.max_limit_violation_rad:.4f} rad; "
                f"{self.physics_steps / self.sim_wall_time_s:,.0f} steps/s")


def stand_check(
    spec: RobotSpec, simulator: Simulator, duration_s: float = 2.0, *, gravity_compensation: bool | None = None
) -> StandResult:
    """Hold the default pose for ``duration_s`` in ``simulator``. ``gravity_compensation`` as in the builders
    (default: on for arms, whose own controllers compensate gravity)."""
    steps = round(duration_s / spec.timing.physics_period_s)
    hold = JointCommand.hold(spec.default_positions, spec.kp, spec.kd)
    if simulator in ("mujoco", "mujoco-alt"):
        q_log, height, wall = _run_mujoco(spec, hold, steps, gravity_compensation, simulator == "mujoco-alt")
    elif simulator == "pybullet":
        q_log, height, wall = _run_pybullet(spec, hold, steps, gravity_compensation)
    else:
        raise ValueError(f"simulator must be 'mujoco', 'pybullet' or 'mujoco-alt', got {simulator!r}")
    error = np.abs(q_log - spec.default_positions)
    past = np.maximum(spec.position_lower - q_log, q_log - spec.position_upper).max(initial=0.0)
    past = max(float(past), 0.0)
    past_limit = past > LIMIT_TOLERANCE_RAD
    nominal = spec.sim_model.base_height if spec.sim_model.floating_base else None
    if nominal is not None:
        passed = abs(height - nominal) <= BASE_HEIGHT_TOLERANCE_M and not past_limit
    else:
        passed = float(error.max()) <= ARM_POSE_TOLERANCE_RAD and not past_limit
    return StandResult(
        robot=spec.name, simulator=simulator, duration_s=duration_s,
        base_height_final=height if nominal is not None else None, base_height_nominal=nominal,
        max_joint_error_rad=float(error[-1].max()), peak_joint_error_rad=float(error.max()),
        max_limit_violation_rad=past, joint_past_limit=past_limit, passed=passed,
        sim_wall_time_s=wall, physics_steps=steps,
    )


def _run_mujoco(spec: RobotSpec, hold: JointCommand, steps: int, gravity_compensation: bool | None, alternate: bool):
    import mujoco

    from robot_rl.robots.mujoco_model import build_mujoco_model
    from robot_rl.robots.mujoco_physics import ALTERNATE_PHYSICS, DEFAULT_PHYSICS

    physics = ALTERNATE_PHYSICS if alternate else DEFAULT_PHYSICS
    robot = build_mujoco_model(spec, gravity_compensation=gravity_compensation, physics=physics)
    model, data = robot.model, robot.make_data()
    robot.apply_command(data, hold)  # ctrl is constant: the PD runs inside mj_step
    q_log = np.empty((steps, robot.n_joints))
    start = time.perf_counter()
    for i in range(steps):
        mujoco.mj_step(model, data, physics.substeps)
        q_log[i] = data.qpos[robot.qpos_adr]
    wall = time.perf_counter() - start
    mujoco.mj_forward(model, data)
    return q_log, float(data.xpos[robot.base_body_id][2]), wall


def _run_pybullet(spec: RobotSpec, hold: JointCommand, steps: int, gravity_compensation: bool | None):
    import pybullet as pb

    from robot_rl.robots.pybullet_model import build_pybullet_robot

    client = pb.connect(pb.DIRECT)
    try:
        robot = build_pybullet_robot(spec, client, gravity_compensation=gravity_compensation)
        q_log = np.empty((steps, len(spec.joints)))
        start = time.perf_counter()
        for i in range(steps):
            robot.apply_pd(hold)
            robot.step()
            q_log[i] = robot.joint_positions_velocities()[0]
        wall = time.perf_counter() - start
        return q_log, float(robot.base_pose()[0][2]), wall
    finally:
        pb.disconnect(client)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("robot", help="robot name (hardware/robots/<name>.yaml) or a spec file")
    parser.add_argument("simulator", choices=["mujoco", "pybullet", "mujoco-alt"], nargs="?", default="mujoco")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds of simulated time")
    args = parser.parse_args(argv)
    result = stand_check(load_robot(args.robot), args.simulator, args.duration)
    print(result.summary())
    return 0 if result.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
