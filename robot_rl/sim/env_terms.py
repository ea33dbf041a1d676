"""The vectorized env's side of a task's terms: terminations, rewards (the robot's and the task's inputs), the
signals the task's terms read, and the episode metrics. A mixin of :class:`~robot_rl.sim.mujoco_vec_env.MujocoVecEnv`
(it reads the env's state rows and sensors), kept apart so the env's physics and bookkeeping stay readable.
"""

from __future__ import annotations

import numpy as np

from robot_rl.safety.filters import velocity_aware_bounds
from robot_rl.sim.env_math import tilt_angle
from robot_rl.tasks import terrain as terrain_lib
from robot_rl.tasks.rewards import RewardInputs, compute_rewards
from robot_rl.tasks.terms import TaskSignals


class TaskTermsMixin:
    """Needs the env's ``task``, ``state``, ``_sens``, ``world``, ``models``, ``commands``, actions and feet (and
    ``_reads_foot_height``)."""

    def _failures(self, f: dict[str, np.ndarray]) -> np.ndarray:
        t = self.task.terminations
        failed = np.zeros(self.num_envs, dtype=bool)
        if not self.floating:
            return failed
        if t.max_tilt_rad is not None:
            failed |= tilt_angle(f["gravity"]) > t.max_tilt_rad
        if t.min_base_height_m is not None:
            failed |= self.base_height(f) < t.min_base_height_m
        if t.base_contact and self.world.sensors.base_contact is not None:
            failed |= self._sens[:, :, self.world.sensors.base_contact].max(axis=1) > 0
        return failed

    def base_height(self, f: dict[str, np.ndarray]) -> np.ndarray:
        z = f["base_pos"][:, 2]
        if self.task.terrain is None:
            return z
        return z - terrain_lib.height_at(self.task.terrain, self.heights, f["base_pos"][:, :2])

    def foot_height(self) -> np.ndarray:
        """(N, feet) each foot body's origin above the terrain under it, at the last substep's sensors."""
        adr = self.world.sensors.foot_pos
        pos = self._sens[:, -1, adr[:, None] + np.arange(3)]  # (N, feet, 3)
        if self.task.terrain is None:
            return pos[:, :, 2].copy()
        return np.stack([pos[:, k, 2] - terrain_lib.height_at(self.task.terrain, self.heights, pos[:, k, :2])
                         for k in range(pos.shape[1])], axis=1)

    def _rewards(self, f: dict[str, np.ndarray], terminated: np.ndarray) -> tuple[np.ndarray, dict]:
        sens = self.world.sensors
        torque = self._sens[:, :, self._torque_adr].mean(axis=1)  # the policy joints' actuator torques
        inputs = RewardInputs(
            dt=self.dt, command=self.commands, q=f["q"], dq=f["dq"], last_dq=self.last_dq, default_q=self.default_q,
            q_soft_lower=self.q_soft_lower, q_soft_upper=self.q_soft_upper, torque=torque, action=self.action,
            last_action=self.last_action, terminated=terminated, max_action_step=self.max_action_step,
            sent_action=self.last_sent_action, action_scale=self.task.action.scale,
        )
        inputs.target_lower, inputs.target_upper = velocity_aware_bounds(
            f["q"], f["dq"], self.chain_limits, position=self.chain_position_bounds)
        if self.floating:
            inputs.base_lin_vel, inputs.base_ang_vel = f["base_lin_vel"], f["base_ang_vel"]
            inputs.projected_gravity = f["gravity"]
            inputs.base_height = self.base_height(f)
            adr = sens.foot_contact  # each foot's sensor: [found, fx, fy, fz]
            force = np.linalg.norm(self._sens[:, :, adr[:, None] + np.arange(1, 4)], axis=3)
            inputs.first_contact, inputs.air_time = self.feet.update(force)
            inputs.foot_contact = self.feet.contact
            if self._reads_foot_height:
                inputs.foot_height = self.foot_height()
        inputs.gait_phase = self.gait_phase()
        signals = self._signals(f)
        for term in self.task.terms.reward_inputs:  # the task's own fields (a tool-point error, its object)
            for name, value in term(signals).items():
                setattr(inputs, name, value)
        return compute_rewards(self.rewards_cfg, inputs)

    def _signals(self, f: dict[str, np.ndarray]) -> TaskSignals:
        """What the task's terms read: the command, the tool point (arms), the task object, the base velocity."""
        return TaskSignals(self.commands, self.end_effector_pos if self.task.terms.uses_tool else None,
                           f.get("object_pos"), f.get("base_lin_vel"))

    def end_effector_pos(self) -> np.ndarray:
        """(N, 3) tool point in the base frame at the end of the last step (read from its sensors)."""
        sens, last = self.world.sensors, self._sens[:, -1]
        # Sensors are read before the last substep's integration: advance by its velocity.
        pos, vel = last[:, sens.ee_pos : sens.ee_pos + 3], last[:, sens.ee_vel : sens.ee_vel + 3]
        world = pos + vel * self.models[0].opt.timestep
        return (world - self._base_pos0) @ self._base_rot0

    def _episode_metrics(self, ids: np.ndarray, terminated: np.ndarray, signals: TaskSignals) -> dict[str, np.ndarray]:
        steps = np.maximum(self._steps_taken[ids], 1)
        length_s = steps * self.dt
        out = {f"Episode_Reward/{k}": v[ids] / length_s for k, v in self._episode_sums.items()}
        out["Episode/length_s"] = length_s
        out["Episode/fell"] = terminated[ids].astype(float)
        for metric in self._metrics:
            out |= metric.finish(ids, signals)
        return out
