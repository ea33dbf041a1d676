"""N robots in MuJoCo on the CPU, stepped together at the policy period.

Physics runs in ``mujoco.rollout`` (C++, multi-threaded, persistent thread pool): one call advances every
env by ``spec.timing.decimation`` substeps with the policy's PD command held, the PD itself computed per
substep inside ``mj_step`` by the model's actuators. The env keeps each robot's full physics state as a
row of one array, so resets, pushes and observation inputs are numpy operations over all envs, and
Python never loops over envs on a normal step. (``benchmarks/bench_env_throughput.py`` measures this
against a Python loop of ``mj_step`` over N ``MjData``; rollout won on 2 cores.)

Each env has its own ``MjModel`` copy (rollout takes a list of models), so masses, friction, effort limits
and terrain are randomized per env by plain writes at reset. Gains and motor strength are per-env ``ctrl``.

numpy in, numpy out; ``robot_rl.learn.ppo`` adapts it to rsl_rl's VecEnv and ``robot_rl.sim.gym_vector`` to
Gymnasium's vector API. Autoreset is immediate: the observation returned for a finished env is the first
of its next episode.

The env runs any task through its terms (``robot_rl.tasks.terms``) without asking which task it is: commands
come from the task's command term, the task-side reward inputs from its reward-input terms, the episode metrics
from its metric terms. A task with an observation source (push: learned from demos, run here for residual training
in a calibrated sim) has its scene (table, cube) built into the world; each episode draws a layout from the
source's sampler (the object's start; the goal is the command), and the object's position is observed.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field

import mujoco
import numpy as np
from mujoco import rollout

from robot_rl.hardware.sim_robot import scene_ids
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.safety.filters import SafetyLimits, torque_limited_targets
from robot_rl.sim import randomization as dr
from robot_rl.sim.env_math import quat_mul_rot, quat_rotate_inverse, yaw_quat
from robot_rl.sim.env_terms import TaskTermsMixin
from robot_rl.sim.feet import FootAirTime
from robot_rl.sim.push_objects import PushObject
from robot_rl.sim.world import build_training_world, check_model_copies_fit, write_heightfield
from robot_rl.tasks import terrain as terrain_lib
from robot_rl.tasks.observations import ObservationBuilder, ObsInputs, gait_phase, projected_gravity
from robot_rl.tasks.rewards import soft_limits
from robot_rl.tasks.task import TaskCfg

FULLPHYSICS = mujoco.mjtState.mjSTATE_FULLPHYSICS


@dataclass
class StepResult:
    actor_obs: np.ndarray  # (N, actor dim) float32; for finished envs, the first obs of the next episode
    critic_obs: np.ndarray  # (N, critic dim) float32
    reward: np.ndarray  # (N,)
    terminated: np.ndarray  # (N,) bool, a failure (fall, instability)
    truncated: np.ndarray  # (N,) bool, the time limit
    log: dict[str, float] = field(default_factory=dict)  # means of the episode metrics of the finished envs
    finished: dict[str, np.ndarray] = field(default_factory=dict)  # the same metrics per finished env


class MujocoVecEnv(TaskTermsMixin):
    def __init__(
        self,
        task: TaskCfg,
        num_envs: int,
        *,
        seed: int = 0,
        randomize: bool = True,
        nthread: int | None = None,
        fixed_command: tuple[float, ...] | None = None,
        spec: RobotSpec | None = None,
    ):
        """``spec``: the robot's spec, if not the one the task names as loaded from its file (e.g. with measured
        actuator scales for the chain's torque limit)."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be ≥ 1, got {num_envs}")
        self.task = task
        self.spec = spec = load_robot(task.robot) if spec is None else spec
        if spec.name != task.robot:
            raise ValueError(f"task {task.name!r} runs on {task.robot!r}, not on the given spec {spec.name!r}")
        self.num_envs = n = num_envs
        self.rng = np.random.default_rng(seed)
        self.push = None if task.terms.source is None else PushObject(task.terms.source)
        if self.push is not None and fixed_command is not None:
            raise ValueError(f"task {task.name!r}: a push episode's command is its layout's goal, it cannot be fixed")
        self.fixed_command = None if fixed_command is None else self._checked_command(task, fixed_command)
        self.dr_cfg = task.randomization if randomize else dr.NO_RANDOMIZATION
        scene = None if self.push is None else self.push.scene
        self.world = build_training_world(spec, task.terrain, scene=scene)
        self.robot = robot = self.world.robot
        base_model = robot.model
        check_model_copies_fit(base_model, n, f"task {task.name!r} on the CPU backend")
        self.models = [copy.copy(base_model) for _ in range(n)]
        self._scratch = mujoco.MjData(base_model)
        self.dt = spec.timing.policy_period_s
        self.decimation = spec.timing.decimation
        self.max_episode_length = int(np.ceil(task.episode_length_s / self.dt))
        # The joints the policy sees and drives (spec policy_joints; all of them unless the spec lists a subset, as
        # the G1's legs): "joints" below means these. The others are held at their default pose with their own
        # gains, by their actuators, every step.
        idx = self._policy_idx = spec.policy_joint_indices
        self.num_joints = j = len(idx)
        self.num_actions = j
        self.num_commands = task.commands.size
        self.default_q = spec.default_positions[idx].copy()
        self.floating = robot.free_qpos_adr is not None

        # Physics: state rows, the held ctrl, rollout outputs.
        threads = (os.cpu_count() or 1) if nthread is None else nthread
        self._pool = rollout.Rollout(nthread=threads if threads > 1 else 0)
        self._datas = [mujoco.MjData(base_model) for _ in range(max(threads, 1))]
        nstate = mujoco.mj_stateSize(base_model, FULLPHYSICS)
        self._qpos_off, self._qvel_off = 1, 1 + base_model.nq  # FULLPHYSICS = [time, qpos, qvel, ...]
        robot.reset(self._scratch)
        self._template = np.empty(nstate)
        mujoco.mj_getState(base_model, self._scratch, self._template, FULLPHYSICS)
        self.state = np.tile(self._template, (n, 1))
        self._ctrl = np.zeros((n, self.decimation, base_model.nu))
        self._out = np.empty((n, self.decimation, nstate))
        self._sens = np.zeros((n, self.decimation, base_model.nsensordata))
        self._qpos_idx = self._qpos_off + robot.qpos_adr[idx]
        self._qvel_idx = self._qvel_off + robot.qvel_adr[idx]
        self._q_target = np.tile(spec.default_positions, (n, 1))  # every joint's; the held ones never change
        self._torque_adr = self.world.sensors.joint_torque[idx]
        # The IMU may sit rotated on the base body: the gyro and orientation are read in its frame.
        self._imu_rot = robot.imu_in_base(self._scratch)
        self._imu_aligned = bool(np.allclose(self._imu_rot, np.eye(3)))
        self._base_pos0 = self._scratch.xpos[robot.base_body_id].copy()
        self._base_rot0 = self._scratch.xmat[robot.base_body_id].reshape(3, 3).copy()
        if self.push is not None:
            self.push.locate(base_model, self._qpos_off, self._qvel_off)

        # Randomization and actuation state.
        self.nominal = dr.NominalModel.capture(base_model, robot.base_body_id, robot.joint_ids,
                                               spec.sim_model.base_friction, *scene_ids(base_model, scene))
        self.kp = np.tile(spec.kp, (n, 1))
        self.kd = np.tile(spec.kd, (n, 1))
        self.strength = np.ones((n, spec.num_joints))
        self.delay = dr.ActionDelay(n, j, self.dr_cfg.max_latency_steps)
        self._push_probability = dr.push_probability(self.dr_cfg, self.dt) if self.floating else 0.0
        self.stiff_contact = dr.stiff_contact_envs(n, self.dr_cfg.stiff_contact_fraction)
        for i in np.flatnonzero(self.stiff_contact):
            self.world.use_builder_contact(self.models[i])

        # Terrain patches, one per env.
        tcfg = task.terrain
        if tcfg is not None:
            self.terrain_levels = terrain_lib.initial_levels(tcfg, self.rng, n)
            self.terrain_kinds = terrain_lib.initial_kinds(tcfg, n)
            self.heights = np.zeros((n, tcfg.grid_points, tcfg.grid_points))

        # Episode bookkeeping.
        self.episode_length = np.zeros(n, dtype=np.int64)
        self.commands = np.zeros((n, self.num_commands))
        self.action = np.zeros((n, j))
        self.last_action = np.zeros((n, j))
        self.sent_action = np.zeros((n, j))  # after the rate limit (= action where the task has none)
        self.last_sent_action = np.zeros((n, j))
        self.last_dq = np.zeros((n, j))
        self.feet = FootAirTime(n, len(robot.foot_body_ids), self.dt)
        self._episode_sums: dict[str, np.ndarray] = {t.name: np.zeros(n) for t in task.rewards.terms}
        self._metrics = [term.make(n) for term in task.terms.metrics]
        self._steps_taken = np.zeros(n, dtype=np.int64)  # episode_length may start > 0 (rsl_rl spreads it)
        self._step_count = 0
        # The reward settings with the robot's facts filled in (the nominal base height from the spec).
        self.rewards_cfg = task.rewards.for_robot(spec.sim_model.base_height)
        self._reads_foot_height = bool(self.rewards_cfg.readers("foot_height"))  # the G1's swing height, not every task
        self.q_soft_lower, self.q_soft_upper = soft_limits(spec.position_lower[idx], spec.position_upper[idx],
                                                           task.rewards.soft_limit_fraction)
        self.max_action_step = task.action.max_step(spec.safety.max_target_rate_rad_s, self.dt)
        # The chain's limits as it derives them from the spec (its torque limit: effort limits and the gains it
        # believes the motors deliver, the commanded ones × the spec's measured scales).
        self.chain_limits = limits = SafetyLimits.from_spec(spec)
        self._chain_kp, self._chain_kd = spec.kp[idx] * limits.kp_scale, spec.kd[idx] * limits.kd_scale
        self._chain_torque_max = limits.torque_max[idx]
        self.chain_position_bounds = (limits.soft_lower[idx], limits.soft_upper[idx])  # the chain's, policy joints

        dims = (j, self.num_commands, self.num_actions)
        self.actor_obs_builder = ObservationBuilder(task.actor_obs, n, *dims, rng=self.rng,
                                                    noise=self.dr_cfg.observation_noise)
        self.critic_obs_builder = ObservationBuilder(task.critic_obs, n, *dims, noise=False)
        self.num_actor_obs = self.actor_obs_builder.dim
        self.num_critic_obs = self.critic_obs_builder.dim
        self.actor_obs = np.zeros((n, self.num_actor_obs), dtype=np.float32)
        self.critic_obs = np.zeros((n, self.num_critic_obs), dtype=np.float32)
        self._has_episode = np.zeros(n, dtype=bool)
        self.last_finished: dict[str, np.ndarray] = {}
        self.final_obs_inputs: ObsInputs | None = None
        self.reset()

    # ------------------------------------------------------------------------------------------------
    # Reading the state

    def _frame(self) -> dict[str, np.ndarray]:
        """Robot quantities of every env at the current state rows."""
        s = self.state
        out = {"q": s[:, self._qpos_idx], "dq": s[:, self._qvel_idx]}
        if self.floating:
            p, v = self._qpos_off + self.robot.free_qpos_adr, self._qvel_off + self.robot.free_qvel_adr
            quat = s[:, p + 3 : p + 7]
            out["base_pos"] = s[:, p : p + 3]
            out["base_quat"] = quat
            out["base_lin_vel"] = quat_rotate_inverse(quat, s[:, v : v + 3])
            out["base_ang_vel"] = s[:, v + 3 : v + 6]  # a free joint's angular velocity is in the body frame
            out["gravity"] = projected_gravity(quat)
        if self.push is not None:
            out["object_pos"] = self.push.position(s, self._base_pos0, self._base_rot0)
        return out

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """(q, dq) of every env's spec joints, (N, joints) each: copies."""
        return self.state[:, self._qpos_idx].copy(), self.state[:, self._qvel_idx].copy()

    def _obs_inputs(self, f: dict[str, np.ndarray]) -> ObsInputs:
        n = self.num_envs
        if self.floating:
            r = self._imu_rot  # base→IMU: vectors measured in the IMU frame
            quat = f["base_quat"] if self._imu_aligned else quat_mul_rot(f["base_quat"], r)
            ang, lin = f["base_ang_vel"] @ r, f["base_lin_vel"] @ r
        else:
            quat, ang, lin = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1)), np.zeros((n, 3)), np.zeros((n, 3))
        return ObsInputs(q=f["q"], dq=f["dq"], default_q=self.default_q, base_quat=quat, base_ang_vel=ang,
                         command=self.commands, last_action=self.action, base_lin_vel=lin,
                         object_pos=f.get("object_pos"), gait_phase=self.gait_phase())

    def gait_phase(self) -> np.ndarray | None:
        """Each env's gait clock (tasks with a gait period): counted from its episode's first observation."""
        period = self.task.gait_period_s
        return None if period is None else gait_phase(self._steps_taken * self.dt, period)

    def _compute_obs(self, frame: dict[str, np.ndarray] | None = None) -> None:
        """Observations at the current state rows (``frame``: already read from them, if no env was reset)."""
        inputs = self._obs_inputs(self._frame() if frame is None else frame)
        self.actor_obs = self.actor_obs_builder.compute(inputs)
        self.critic_obs = self.critic_obs_builder.compute(inputs)

    # ------------------------------------------------------------------------------------------------
    # Reset

    def reset(self) -> tuple[np.ndarray, np.ndarray]:
        """Reset every env; returns (actor_obs, critic_obs)."""
        self._reset_envs(np.arange(self.num_envs))
        self._compute_obs()
        return self.actor_obs, self.critic_obs

    def continue_curriculum(self, policy_steps: int) -> None:
        """Resume the push curriculum where a checkpoint left it: ``policy_steps`` steps already taken per env."""
        self._step_count = int(policy_steps)

    def _reset_envs(self, ids: np.ndarray) -> None:
        if len(ids) == 0:
            return
        cfg = self.dr_cfg
        k = len(ids)
        sample = dr.sample_model(cfg, self.nominal, self.rng, k)
        if self.task.terrain is not None:
            self._update_terrain(ids)
        for row, i in enumerate(ids):
            dr.apply_model_sample(self.models[i], self._scratch, self.nominal, sample.row(row))
            if self.task.terrain is not None:  # MuJoCo reads the heightfield from the model on every step
                write_heightfield(self.models[i], self.world.hfield_id, self.heights[i])
        self.kp[ids] = self.spec.kp * sample.kp_scale * sample.motor_strength
        self.kd[ids] = self.spec.kd * sample.kd_scale * sample.motor_strength
        self.strength[ids] = sample.motor_strength

        idx = self._policy_idx
        q, dq = dr.initial_joint_state(cfg, self.rng, k, self.default_q, self.spec.position_lower[idx],
                                       self.spec.position_upper[idx])
        rows = np.tile(self._template, (k, 1))
        rows[:, self._qpos_idx] = q
        rows[:, self._qvel_idx] = dq
        if self.floating:
            p = self._qpos_off + self.robot.free_qpos_adr
            if self.task.terrain is not None:
                rows[:, p + 2] += terrain_lib.height_at(self.task.terrain, self.heights[ids], np.zeros((k, 2)))
            rows[:, p + 3 : p + 7] = yaw_quat(self.rng.uniform(-np.pi, np.pi, size=k))
        if self.push is not None:  # a layout per env: the cube at its start, at rest; the goal is the command
            self.commands[ids] = self.push.reset(rows, self.rng)
        else:
            self.commands[ids] = self._sample_commands(k)
        self.state[ids] = rows

        self.episode_length[ids] = 0
        self.action[ids] = 0.0
        self.last_action[ids] = 0.0
        self.sent_action[ids] = 0.0  # deployed, the ramp ends on the default pose: the last target sent
        self.last_sent_action[ids] = 0.0
        self.last_dq[ids] = dq
        self.feet.reset(ids)
        self.delay.reset(ids, dr.sample_latency(cfg, self.rng, k), fill=np.tile(self.default_q, (k, 1)))
        self.actor_obs_builder.reset(ids)
        self.critic_obs_builder.reset(ids)
        for sums in self._episode_sums.values():
            sums[ids] = 0.0
        for metric in self._metrics:
            metric.reset(ids)
        self._steps_taken[ids] = 0
        self._has_episode[ids] = True

    def _update_terrain(self, ids: np.ndarray) -> None:
        tcfg = self.task.terrain
        before = self.terrain_levels[ids].copy()
        ran = self._has_episode[ids] & (self.episode_length[ids] > 0)
        if ran.any():
            done = ids[ran]
            p = self._qpos_off + self.robot.free_qpos_adr
            walked = np.linalg.norm(self.state[done, p : p + 2], axis=1)
            commanded = np.linalg.norm(self.commands[done, :2], axis=1) * self.task.episode_length_s
            self.terrain_levels[done] = terrain_lib.update_levels(tcfg, self.terrain_levels[done], walked,
                                                                  commanded, self.rng)
        # A new patch when the level changes (or at the first reset); otherwise the env keeps its patch.
        changed = ~self._has_episode[ids] | (self.terrain_levels[ids] != before)
        for i in ids[changed]:
            self.heights[i] = terrain_lib.generate(tcfg, self.terrain_kinds[i], int(self.terrain_levels[i]),
                                                   self.rng)

    @staticmethod
    def _checked_command(task: TaskCfg, command: tuple[float, ...]) -> np.ndarray:
        spec = task.commands
        if len(command) != spec.size:
            raise ValueError(f"task {task.name!r} takes {spec.size} command values ({', '.join(spec.names)}), "
                             f"got {len(command)}")
        return spec.clip(np.asarray(command, dtype=np.float64))  # outside the trained range: clamped

    def _sample_commands(self, k: int) -> np.ndarray:
        if self.fixed_command is not None:
            return np.tile(self.fixed_command, (k, 1))
        return self.task.terms.commands.sample(self.task.commands, self.rng, k)

    # ------------------------------------------------------------------------------------------------
    # Step

    def step(self, action: np.ndarray) -> StepResult:
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (self.num_envs, self.num_actions):
            raise ValueError(f"action shape {action.shape}, expected ({self.num_envs}, {self.num_actions})")
        if not np.all(np.isfinite(action)):
            raise ValueError("non-finite action given to the env")
        self.last_action[:] = self.action
        self.action[:] = action
        self.last_sent_action[:] = self.sent_action
        if self.task.rate_limit_targets:
            np.clip(action, self.sent_action - self.max_action_step, self.sent_action + self.max_action_step,
                    out=self.sent_action)
        else:
            self.sent_action[:] = action
        q_sent = self.task.action.decode(self.sent_action, self.default_q)
        if self.task.torque_limit_targets:  # as the chain does on the host: the measured state, the chain's gains
            q, dq = self.state[:, self._qpos_idx], self.state[:, self._qvel_idx]
            q_sent, moved = torque_limited_targets(q_sent, q, self._chain_kp, -self._chain_kd * dq,
                                                   self._chain_torque_max)
            if moved.any():
                self.sent_action[:] = (q_sent - self.default_q) / self.task.action.scale  # the chain's reference
        q_target = self.delay.push(q_sent)  # latency acts on what was sent, after the host's filters
        self._q_target[:, self._policy_idx] = q_target
        # kp, kd carry this env's gain randomization and motor strength (the PD runs in the actuators).
        self._ctrl[:] = self.robot.pd_ctrl(self._q_target, 0.0, self.kp, self.kd, 0.0)[:, None, :]

        self._step_count += 1
        if self._push_probability:
            pushed = self.rng.random(self.num_envs) < self._push_probability
            if pushed.any():
                v = self._qvel_off + self.robot.free_qvel_adr
                scale = dr.push_scale(self.dr_cfg, self._step_count * self.dt)
                self.state[pushed, v : v + 2] += dr.push_velocity(self.dr_cfg, self.rng, int(pushed.sum()), scale)

        expected_time = self.state[:, 0] + (self.decimation - 0.5) * self.models[0].opt.timestep
        self._pool.rollout(self.models, self._datas, self.state, self._ctrl, nstep=self.decimation,
                           state=self._out, sensordata=self._sens, skip_checks=True)
        self.state[:] = self._out[:, -1]
        # MuJoCo resets an env whose accelerations blew up (and its clock with it): treat it as a failure.
        unstable = (self.state[:, 0] < expected_time) | ~np.all(np.isfinite(self.state), axis=1)
        self.episode_length += 1
        self._steps_taken += 1

        f = self._frame()
        terminated = unstable | self._failures(f)
        truncated = (self.episode_length >= self.max_episode_length) & ~terminated
        reward, parts = self._rewards(f, terminated)
        if unstable.any():  # an env MuJoCo had to reset earns nothing this step (its values are meaningless)
            reward[unstable] = 0.0
            for value in parts.values():
                value[unstable] = 0.0
        self.last_dq[:] = f["dq"]
        for name, value in parts.items():
            self._episode_sums[name] += value
        signals = self._signals(f)
        for metric in self._metrics:
            metric.step(signals)

        done = terminated | truncated
        finished = self._episode_metrics(np.flatnonzero(done), terminated, signals) if done.any() else {}
        if done.any():  # what the finished envs' last observation is built from (Gymnasium's final_obs)
            self.final_obs_inputs = _copied(self._obs_inputs(f))
        log = {k: float(np.mean(v)) for k, v in finished.items()}
        if self.task.terrain is not None and done.any():
            log["Curriculum/terrain_level"] = float(np.mean(self.terrain_levels))
        self._resample_commands()
        self._reset_envs(np.flatnonzero(done))
        self._compute_obs(None if done.any() else f)
        self.last_finished = finished
        return StepResult(self.actor_obs, self.critic_obs, reward, terminated, truncated, log, finished)

    def _resample_commands(self) -> None:
        every = self.task.command_resample_s
        if every is None or self.push is not None:  # a push goal belongs to the episode's layout
            return
        steps = max(round(every / self.dt), 1)
        due = np.flatnonzero((self.episode_length % steps == 0) & (self.episode_length > 0))
        if len(due):
            self.commands[due] = self._sample_commands(len(due))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _copied(inputs: ObsInputs) -> ObsInputs:
    return ObsInputs(**{k: None if v is None else np.array(v) for k, v in vars(inputs).items()})
