"""Rewards on the robot: the task's own reward terms, computed from what the robot interface reports.

The training env computes rewards from simulator quantities; on hardware only ``RobotState`` is there. This
module builds the task's :class:`~robot_rl.tasks.rewards.RewardInputs` for one robot from the state:
joint positions, velocities and torques; the IMU (orientation, gyro); the tool point by forward kinematics
of the measured joints (arms); the pushed object's position (push tasks: from the task's observation source, not
``RobotState`` — a simulator's scene, or a perception source on hardware — via :meth:`StateReward.observe_object`);
base velocity and position only when the interface provides them (a simulator, or an estimator on hardware).
Terms whose inputs the robot does not report (e.g. the feet's air time or their contact against a gait clock: no
contact sensors in ``RobotState``) are dropped, once, at the first state, and listed in :attr:`StateReward.dropped`
— the reward is then the task's reward restricted to what can be measured.

A person's sparse success signal (a key or button, ``RecorderButtons.success``) is added by the episode
loop as ``success_bonus`` and ends the episode as a success.
"""

from __future__ import annotations

import numpy as np

from robot_rl.core.types import RobotState
from robot_rl.robots.spec import RobotSpec
from robot_rl.safety.filters import SafetyLimits, velocity_aware_bounds
from robot_rl.tasks.observations import projected_gravity
from robot_rl.tasks.rewards import REWARD_TERMS, RewardInputs, compute_rewards, soft_limits
from robot_rl.tasks.task import TaskCfg
from robot_rl.tasks.terms import TaskSignals


class StateReward:
    """The task's reward for one robot, from ``RobotState``; ``success`` and ``failed`` likewise."""

    def __init__(self, task: TaskCfg, spec: RobotSpec):

        if spec.name != task.robot:
            raise ValueError(f"task {task.name!r} is for robot {task.robot!r}, got the spec of {spec.name!r}")
        self.task, self.spec = task, spec
        self.cfg = task.rewards.for_robot(spec.sim_model.base_height)
        self.dt = spec.timing.policy_period_s
        # The joints the policy drives (the G1's legs; every joint elsewhere): the training env computes every
        # joint term over these, and the action-side terms (chain_clips, rate) pair them with the action.
        self._idx = idx = spec.policy_joint_indices
        self.soft_lower, self.soft_upper = soft_limits(spec.position_lower[idx], spec.position_upper[idx],
                                                       task.rewards.soft_limit_fraction)
        self.floating = spec.sim_model.floating_base
        self._chain = SafetyLimits.from_spec(spec)
        self._chain_bounds = (self._chain.soft_lower[idx], self._chain.soft_upper[idx])
        self.kinematics = None
        if spec.sim_model.end_effector_body is not None and task.terms.uses_tool:
            from robot_rl.teleop.arm_ik import ArmKinematics

            self.kinematics = ArmKinematics(spec)
        self.used: tuple[str, ...] | None = None  # fixed at the first state
        self.dropped: tuple[str, ...] = ()
        self._last_dq: np.ndarray | None = None
        self._object_pos: np.ndarray | None = None  # the task object with the last state (observe_object)

    def observe_object(self, object_pos: np.ndarray | None) -> None:
        """The task's object where the state just read finds it (its observation source); None: not seen."""
        self._object_pos = None if object_pos is None else np.asarray(object_pos, dtype=np.float64)

    def reset(self) -> None:
        self._last_dq = None

    def tip_error(self, state: RobotState, command: np.ndarray) -> float:
        """Tool point to the commanded target (m), reach tasks: forward kinematics of the measured joints."""
        if self.kinematics is None or self.task.terms.tool_target_m is None:
            raise ValueError(f"task {self.task.name!r} has no tool-point target")
        pos, _ = self.kinematics.tool_pose(state.q)
        return float(np.linalg.norm(pos - np.asarray(command)[:3]))

    def object_error(self, state: RobotState, command: np.ndarray) -> float:
        """Push tasks: the object's distance to the goal (the command) in the table plane, m; inf when the
        robot reports no object position (no perception)."""
        if self.task.terms.source is None:
            raise ValueError(f"task {self.task.name!r} pushes no object")
        if self._object_pos is None or not np.all(np.isfinite(self._object_pos)):
            return float("inf")
        return float(np.linalg.norm(self._object_pos[:2] - np.asarray(command)[:2]))

    def success(self, state: RobotState, command: np.ndarray) -> bool | None:
        """The task's own success criterion on ``state`` (push: the object within the task's radius of the
        goal, still on the table); None for tasks whose success a state does not decide."""
        source = self.task.terms.source
        if source is None:
            return None
        return source.success(self._object_pos, np.asarray(command)[:2])

    def failed(self, state: RobotState) -> bool:
        """The task's own failure terminations that a state can show (tilt, base height on flat ground)."""
        t = self.task.terminations
        if not self.floating:
            return False
        gravity = projected_gravity(np.asarray(state.base_quat, dtype=np.float64)[None])
        if t.max_tilt_rad is not None and np.arccos(np.clip(-gravity[0, 2], -1.0, 1.0)) > t.max_tilt_rad:
            return True
        return bool(t.min_base_height_m is not None and state.base_pos is not None
                    and state.base_pos[2] < t.min_base_height_m)

    def _inputs(self, state: RobotState, command: np.ndarray, action: np.ndarray, last_action: np.ndarray,
                terminated: bool) -> RewardInputs:
        idx = self._idx
        q = np.asarray(state.q, dtype=np.float64)[idx][None]
        dq = np.asarray(state.dq, dtype=np.float64)[idx][None]
        last_dq = dq if self._last_dq is None else self._last_dq
        inputs = RewardInputs(
            dt=self.dt, command=np.asarray(command, dtype=np.float64)[None], q=q, dq=dq, last_dq=last_dq,
            default_q=self.spec.default_positions[idx], q_soft_lower=self.soft_lower, q_soft_upper=self.soft_upper,
            torque=np.asarray(state.tau, dtype=np.float64)[idx][None],
            action=np.asarray(action, dtype=np.float64)[None],
            last_action=np.asarray(last_action, dtype=np.float64)[None], terminated=np.array([terminated]),
            max_action_step=self.task.action.max_step(self.spec.safety.max_target_rate_rad_s, self.dt),
            action_scale=self.task.action.scale,
        )
        inputs.target_lower, inputs.target_upper = velocity_aware_bounds(q, dq, self._chain,
                                                                         position=self._chain_bounds)
        if self.floating:
            inputs.base_ang_vel = np.asarray(state.base_ang_vel, dtype=np.float64)[None]
            inputs.projected_gravity = projected_gravity(np.asarray(state.base_quat, dtype=np.float64)[None])
            if state.base_lin_vel is not None:
                inputs.base_lin_vel = np.asarray(state.base_lin_vel, dtype=np.float64)[None]
            if state.base_pos is not None and self.task.terrain is None:  # flat ground: height is z
                inputs.base_height = np.array([state.base_pos[2]])
        kin, obj = self.kinematics, self._object_pos

        def tool_pos() -> np.ndarray:  # forward kinematics of the measured joints (the env reads its sensors)
            return np.asarray(kin.tool_pose(state.q)[0], dtype=np.float64)[None]

        # The same task terms as the env's, for one robot.
        signals = TaskSignals(inputs.command, None if kin is None else tool_pos,
                              None if obj is None else obj[None], inputs.base_lin_vel)
        for term in self.task.terms.reward_inputs:
            for name, value in term(signals).items():
                setattr(inputs, name, value)
        return inputs

    def __call__(self, state: RobotState, command: np.ndarray, action: np.ndarray, last_action: np.ndarray,
                 terminated: bool = False) -> float:
        """The reward of the step that led to ``state`` (``action``: the raw action applied, the sum)."""
        inputs = self._inputs(state, command, action, last_action, terminated)
        if self.used is None:
            self._choose_terms(inputs)
        self._last_dq = inputs.dq
        total, _ = compute_rewards(self.cfg, inputs)
        return float(total[0])

    def _choose_terms(self, inputs: RewardInputs) -> None:
        import dataclasses

        keep, drop = [], []
        for term in self.cfg.terms:
            missing = [f for f in REWARD_TERMS[term.name].reads if getattr(inputs, f) is None]
            (drop if missing else keep).append(term)
        if not keep:
            raise ValueError(f"task {self.task.name!r}: none of its reward terms can be computed from this robot's "
                             f"state (dropped: {', '.join(t.name for t in drop)})")
        self.used = tuple(t.name for t in keep)
        self.dropped = tuple(t.name for t in drop)
        self.cfg = dataclasses.replace(self.cfg, terms=tuple(keep))
