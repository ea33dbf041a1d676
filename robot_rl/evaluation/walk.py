"""A straight walk through the deploy runtime (safety chain included): the quick check of an imported
velocity policy. Arm, ramp, then a constant forward command in lockstep; report distance, fall and tracking."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robot_rl.control.deploy_loop import CommandStep, run_loop
from robot_rl.control.runtime import DeployRuntime
from robot_rl.hardware.sim_robot import SimRobot

FALL_TILT_RAD = 1.0


@dataclass(frozen=True)
class WalkResult:
    duration_s: float  # of policy driving (after the ramp)
    distance_m: float  # world x,y displacement of the base while the policy drove
    fell_at_s: float | None  # first tick with the tilt past FALL_TILT_RAD or the base below half height
    mean_vx: float  # body-frame forward velocity, mean over the last half of the walk
    vx_error: float  # mean |command − body vx| over the last half (NaN: the policy was no longer driving)
    yaw_rate: float  # mean gyro z over the last half (rad/s)
    faulted: bool

    def __str__(self) -> str:
        fall = "no fall" if self.fell_at_s is None else f"FELL at {self.fell_at_s:.2f} s"
        return (f"{self.duration_s:g} s walking: {self.distance_m:.2f} m, {fall}, mean vx {self.mean_vx:.3f} m/s "
                f"(|error| {self.vx_error:.3f}), yaw rate {np.degrees(self.yaw_rate):.1f} °/s"
                f"{', safety fault' if self.faulted else ''}")


def walk(runtime: DeployRuntime, vx: float, walk_s: float, simulator: str = "mujoco") -> WalkResult:
    spec = runtime.spec
    ramp = spec.safety.ramp_duration_s + 0.1
    command = [vx] + [0.0] * (len(runtime.contract.commands.names) - 1)
    with SimRobot(spec, simulator) as robot:
        record = run_loop(runtime, robot, ramp + walk_s, realtime=False, commands=[CommandStep(0.0, tuple(command))])
    running = np.array([m == "running" for m in record.mode])
    first = int(np.argmax(running))
    q = record.base_quat
    tilt = np.arccos(np.clip(1 - 2 * (q[:, 1] ** 2 + q[:, 2] ** 2), -1, 1))
    low = record.base_pos[:, 2] < 0.5 * spec.sim_model.base_height
    fallen = np.flatnonzero(running & ((tilt > FALL_TILT_RAD) | low))
    t = record.t - record.t[first]
    half = running & (t >= walk_s / 2)
    # Yaw rate from the base orientation: heading change over the last half.
    heading = np.arctan2(2 * (q[:, 0] * q[:, 3] + q[:, 1] * q[:, 2]), 1 - 2 * (q[:, 2] ** 2 + q[:, 3] ** 2))
    idx = np.flatnonzero(half)
    if idx.size < 2:  # the policy stopped driving before the second half (a safety fault → damping)
        yaw_rate, mean_vx, vx_error = math.nan, math.nan, math.nan
    else:
        unwrapped = np.unwrap(heading[idx])
        yaw_rate = float(unwrapped[-1] - unwrapped[0]) / (t[idx[-1]] - t[idx[0]])
        mean_vx = float(record.base_lin_vel[half, 0].mean())
        vx_error = float(np.abs(vx - record.base_lin_vel[half, 0]).mean())
    return WalkResult(
        duration_s=walk_s,
        distance_m=float(np.linalg.norm(record.base_pos[-1, :2] - record.base_pos[first, :2])),
        fell_at_s=None if fallen.size == 0 else float(t[fallen[0]]),
        mean_vx=mean_vx,
        vx_error=vx_error,
        yaw_rate=yaw_rate,
        faulted=bool(runtime.diagnostics()["fault_latched"]),
    )
