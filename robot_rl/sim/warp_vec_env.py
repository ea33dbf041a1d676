"""N robots in MuJoCo Warp, stepped together at the policy period: the vectorized env's warp backend.

The same task, robot spec and training world as :class:`~robot_rl.sim.mujoco_vec_env.MujocoVecEnv` (the model
is built by ``build_training_world``, so the actuators, sensors and contact settings are the CPU env's), put on a
warp device (a GPU, or warp's CPU device where there is none) as one batched ``mujoco_warp`` model and data with
one world per env. Per-env DR is written as batched model fields (``robot_rl.sim.warp_model`` lists which).
Everything else — the PD command in ``ctrl``, decimation substeps, observations, rewards, terminations, resets,
pushes, commands — is torch on the device's tensors, which are views of the warp arrays (zero-copy): a step moves
no state between host and device. (Two small host synchronisations remain: the non-finite-action check and
whether any env finished, as the reset of a variable set of envs needs its count.)

Tensors in, tensors out (on the env's device), in the shapes ``MujocoVecEnv.step`` returns; the rsl_rl adapter
(``robot_rl.learn.ppo.RslRlVecEnv``) takes either env. Physics is float32 in MuJoCo Warp (float64 on the CPU env),
which is what ``tests/sim/test_warp_vec_env.py`` bounds when it compares the two backends.

Supported: floating-base tasks on flat ground whose rewards and metrics are the robot's (``a1-flat``, the
Unitree velocity tasks); ``warp_model.unsupported_reason`` says why another task is not.
"""

from __future__ import annotations

import numpy as np
import torch

from robot_rl.core.errors import RobotRLError
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.safety.filters import SafetyLimits
from robot_rl.sim import randomization as dr
from robot_rl.sim import torch_terms as tt
from robot_rl.sim.mujoco_vec_env import StepResult
from robot_rl.sim.warp_model import BatchedModel, import_warp, sample_model, unsupported_reason, warp_device
from robot_rl.sim.world import build_training_world
from robot_rl.tasks.observations import ObsInputs, gait_phase
from robot_rl.tasks.rewards import RewardInputs, soft_limits
from robot_rl.tasks.task import TaskCfg


class WarpVecEnv:
    def __init__(self, task: TaskCfg, num_envs: int, *, seed: int = 0, randomize: bool = True,
                 device: str = "cpu", fixed_command: tuple[float, ...] | None = None,
                 spec: RobotSpec | None = None, stiff_contact: bool | None = None):
        """``stiff_contact``: every world on the builder's elliptic cone (True) or the training world's contact
        (False); None: the elliptic cone where the task trains any share of its envs on it (one cone for all
        worlds; ``warp_contact_mix.make_warp_env`` splits the share into two envs instead)."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be ≥ 1, got {num_envs}")
        self.task = task
        self.spec = spec = load_robot(task.robot) if spec is None else spec
        reason = unsupported_reason(task, spec)
        if reason is not None:
            raise RobotRLError(f"task {task.name!r}: the warp backend does not support {reason}; use --backend cpu")
        wp, mjw = self._wp, self._mjw = import_warp()
        self.device = warp_device(device)
        self._tdev = dev = torch.device(self.device)
        self.num_envs = n = num_envs
        self.gen = torch.Generator(device=dev)
        self.gen.manual_seed(seed)
        self.dr_cfg = cfg = task.randomization if randomize else dr.NO_RANDOMIZATION
        self.world = build_training_world(spec, None)
        self.robot = robot = self.world.robot
        mjm = robot.model
        # MuJoCo Warp has one friction cone for all worlds: a task that trains a share of its envs on the builder's
        # elliptic cone (the gate's) runs them all on it here — the stricter contact, cheap on a GPU.
        self.notes: tuple[str, ...] = ()
        self.stiff_contact = cfg.stiff_contact_fraction > 0 if stiff_contact is None else stiff_contact
        if self.stiff_contact:
            self.world.use_builder_contact(mjm)
            if stiff_contact is None and cfg.stiff_contact_fraction < 1:
                self.notes = (f"stiff_contact_fraction {cfg.stiff_contact_fraction:g}: MuJoCo Warp has one friction "
                              "cone for all worlds, so every world runs the builder's elliptic cone",)
        self.dt = spec.timing.policy_period_s
        self.decimation = spec.timing.decimation
        self.max_episode_length = int(np.ceil(task.episode_length_s / self.dt))
        idx = spec.policy_joint_indices
        self.num_joints = self.num_actions = j = len(idx)
        self.num_commands = task.commands.size
        self.floating = True

        def t(a, dtype=torch.float32) -> torch.Tensor:
            return torch.tensor(np.array(a), dtype=dtype, device=dev)  # a copy: spec arrays are read-only

        import mujoco

        scratch = mujoco.MjData(mjm)
        robot.reset(scratch)
        self.nominal = dr.NominalModel.capture(mjm, robot.base_body_id, robot.joint_ids,
                                               spec.sim_model.base_friction)
        with wp.ScopedDevice(self.device):
            self.batched = BatchedModel.put(mjw, wp, mjm, self.nominal, cfg, n)
            # Constraint rows per world: 128 = 32 pyramidal contacts (4 rows each); a world that overflows them (or
            # the contact buffers) is ended as an unstable one is (``d.overflow``), not stepped with dropped contacts.
            self.data = mjw.put_data(mjm, scratch, nworld=n, njmax=128)
        self.model = self.batched.model
        d = self.data
        self.qpos, self.qvel = wp.to_torch(d.qpos), wp.to_torch(d.qvel)
        self.ctrl, self.sensordata = wp.to_torch(d.ctrl), wp.to_torch(d.sensordata)
        self._warmstart = wp.to_torch(d.qacc_warmstart)
        self._overflow = wp.to_torch(d.overflow)
        self._qpos0, self._qvel0 = t(scratch.qpos), t(scratch.qvel)
        self._warmstart0 = t(scratch.qacc_warmstart)
        self._q_idx, self._dq_idx = t(robot.qpos_adr[idx], torch.long), t(robot.qvel_adr[idx], torch.long)
        self._p, self._v = robot.free_qpos_adr, robot.free_qvel_adr
        sens = self.world.sensors
        self._torque_adr = t(sens.joint_torque[idx], torch.long)
        self._foot_adr = t(sens.foot_contact[:, None] + np.arange(1, 4), torch.long)  # (feet, 3): fx, fy, fz
        self._base_contact = sens.base_contact
        self._foot_z = t(sens.foot_pos + 2, torch.long)  # each foot body's world z (flat ground: its height)
        imu = robot.imu_in_base(scratch)
        self._imu_rot = None if np.allclose(imu, np.eye(3)) else t(imu)
        if self._imu_rot is not None:
            q = np.empty(4)
            mujoco.mju_mat2Quat(q, np.ascontiguousarray(imu, dtype=np.float64).ravel())
            self._imu_quat = t(q)
        self._graph = None
        self._capture_step()

        # Actuation and randomization.
        self.default_q = t(spec.default_positions[idx])
        self._spec_kp, self._spec_kd = t(spec.kp), t(spec.kd)
        self._lower, self._upper = t(spec.position_lower), t(spec.position_upper)
        self._policy_idx = t(idx, torch.long)
        self._q_target = t(spec.default_positions).repeat(n, 1)
        self.kp, self.kd = self._spec_kp.repeat(n, 1), self._spec_kd.repeat(n, 1)
        self.delay = tt.ActionDelay(n, j, cfg.max_latency_steps, dev)
        self._push_probability = dr.push_probability(cfg, self.dt)

        # Episode bookkeeping.
        z = lambda *shape, dtype=torch.float32: torch.zeros(shape, dtype=dtype, device=dev)  # noqa: E731
        self.episode_length = z(n, dtype=torch.long)
        self._steps_taken = z(n, dtype=torch.long)
        self._step_count = 0
        self.commands = z(n, self.num_commands)
        self.action, self.last_action = z(n, j), z(n, j)
        self.sent_action, self.last_sent_action = z(n, j), z(n, j)
        self.last_dq = z(n, j)
        self.feet = tt.FootAirTime(n, len(robot.foot_body_ids), self.dt, dev)
        self.rewards_cfg = task.rewards.for_robot(spec.sim_model.base_height)
        tt.check_reward_terms(self.rewards_cfg)
        self._reads_foot_height = bool(self.rewards_cfg.readers("foot_height"))  # the G1's swing height, not every task
        self._episode_sums = {term.name: z(n) for term in task.rewards.terms}
        self._vel_errors = tt.VelocityErrors(n, dev) if task.terms.metrics else None
        lower, upper = soft_limits(spec.position_lower[idx], spec.position_upper[idx], task.rewards.soft_limit_fraction)
        self.q_soft_lower, self.q_soft_upper = t(lower), t(upper)
        self.max_action_step = task.action.max_step(spec.safety.max_target_rate_rad_s, self.dt)
        chain = SafetyLimits.from_spec(spec)
        self._chain_lower, self._chain_upper = t(chain.soft_lower[idx]), t(chain.soft_upper[idx])
        self.fixed_command = None
        if fixed_command is not None:
            from robot_rl.sim.mujoco_vec_env import MujocoVecEnv

            self.fixed_command = t(MujocoVecEnv._checked_command(task, fixed_command))
        dims = (j, self.num_commands, self.num_actions)
        self.actor_obs_builder = tt.TorchObservationBuilder(task.actor_obs, n, *dims, device=dev, generator=self.gen,
                                                            noise=cfg.observation_noise)
        self.critic_obs_builder = tt.TorchObservationBuilder(task.critic_obs, n, *dims, device=dev)
        self.num_actor_obs, self.num_critic_obs = self.actor_obs_builder.dim, self.critic_obs_builder.dim
        self.last_finished: dict[str, torch.Tensor] = {}
        self.final_obs_inputs: ObsInputs | None = None
        self.reset()

    # ------------------------------------------------------------------------------------------------
    # Physics

    def _capture_step(self) -> None:
        """One physics step; on a GPU (with warp's memory pool, which capture needs) captured once as a CUDA graph
        and replayed per substep, as MuJoCo Warp's own tools and mjlab do. Warp's streams are blocking streams, so its
        work is ordered with torch's on the CUDA default stream (torch's unless a caller picks another) without a host
        synchronisation. The first step compiles the kernels (or loads them from the cache); it runs on the initial
        state, which ``reset`` then overwrites."""
        wp, mjw = self._wp, self._mjw
        with wp.ScopedDevice(self.device):
            mjw.step(self.model, self.data)
            wp.synchronize_device(self.device)
            device = wp.get_device(self.device)
            if device.is_cuda and wp.is_mempool_enabled(device):
                with wp.ScopedCapture() as capture:
                    mjw.step(self.model, self.data)
                self._graph = capture.graph

    def _physics_step(self) -> None:
        with self._wp.ScopedDevice(self.device):
            if self._graph is not None:
                self._wp.capture_launch(self._graph)
            else:
                self._mjw.step(self.model, self.data)

    def _set_const(self) -> None:
        """Constants derived from the masses (invweight, subtree masses), per world, as ``mj_setConst``."""
        with self._wp.ScopedDevice(self.device):
            self._mjw.set_const(self.model, self.data)

    def set_physics_state(self, qpos: np.ndarray | torch.Tensor, qvel: np.ndarray | torch.Tensor) -> None:
        """Put every env in the given state, (N, nq) and (N, nv) (e.g. the CPU env's, to compare the backends)."""
        self.qpos[:] = torch.as_tensor(qpos, dtype=torch.float32, device=self._tdev)
        self.qvel[:] = torch.as_tensor(qvel, dtype=torch.float32, device=self._tdev)
        self._compute_obs()

    # ------------------------------------------------------------------------------------------------
    # Reading the state

    def _frame(self) -> dict[str, torch.Tensor]:
        p, v = self._p, self._v
        quat = self.qpos[:, p + 3 : p + 7]
        return {"q": self.qpos[:, self._q_idx], "dq": self.qvel[:, self._dq_idx], "base_pos": self.qpos[:, p : p + 3],
                "base_quat": quat, "base_lin_vel": tt.quat_rotate_inverse(quat, self.qvel[:, v : v + 3]),
                "base_ang_vel": self.qvel[:, v + 3 : v + 6], "gravity": tt.projected_gravity(quat)}

    def joint_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.qpos[:, self._q_idx].clone(), self.qvel[:, self._dq_idx].clone()

    def _obs_inputs(self, f: dict[str, torch.Tensor]) -> ObsInputs:
        quat, ang, lin = f["base_quat"], f["base_ang_vel"], f["base_lin_vel"]
        if self._imu_rot is not None:  # vectors measured in the IMU's frame, as the CPU env reads them
            quat, ang, lin = tt.quat_mul(quat, self._imu_quat), ang @ self._imu_rot, lin @ self._imu_rot
        return ObsInputs(q=f["q"], dq=f["dq"], default_q=self.default_q, base_quat=quat, base_ang_vel=ang,
                         command=self.commands, last_action=self.action, base_lin_vel=lin,
                         gait_phase=self.gait_phase())

    def foot_height(self) -> torch.Tensor:
        """(N, feet) each foot body's origin above the floor, at the last substep's sensors (as the CPU env's)."""
        return self.sensordata[:, self._foot_z]

    def gait_phase(self) -> torch.Tensor | None:
        """Each env's gait clock (tasks with a gait period): counted from its episode's first observation."""
        period = self.task.gait_period_s
        return None if period is None else gait_phase(self._steps_taken * self.dt, period)

    def _compute_obs(self, frame: dict[str, torch.Tensor] | None = None) -> None:
        inputs = self._obs_inputs(self._frame() if frame is None else frame)
        self.actor_obs = self.actor_obs_builder.compute(inputs)
        self.critic_obs = self.critic_obs_builder.compute(inputs)

    # ------------------------------------------------------------------------------------------------
    # Reset

    def reset(self) -> tuple[torch.Tensor, torch.Tensor]:
        self._reset_envs(torch.arange(self.num_envs, device=self._tdev))
        self._compute_obs()
        return self.actor_obs, self.critic_obs

    def _uniform(self, half: float, *shape: int) -> torch.Tensor:
        return (torch.rand(shape, device=self._tdev, generator=self.gen) * 2 - 1) * half

    def continue_curriculum(self, policy_steps: int) -> None:
        """Resume the push curriculum where a checkpoint left it: ``policy_steps`` steps already taken per env."""
        self._step_count = int(policy_steps)

    def _reset_envs(self, ids: torch.Tensor) -> None:
        cfg, k, gen = self.dr_cfg, len(ids), self.gen
        self.apply_model_sample(ids, sample_model(cfg, self.nominal, k, self._tdev, gen))

        idx = self._policy_idx
        q = self.default_q + self._uniform(cfg.init_joint_pos_rad, k, self.num_joints)
        q = torch.clamp(q, self._lower[idx], self._upper[idx])
        dq = self._uniform(cfg.init_joint_vel_rad_s, k, self.num_joints)
        qpos, qvel = self._qpos0.repeat(k, 1), self._qvel0.repeat(k, 1)
        qpos[:, self._q_idx], qvel[:, self._dq_idx] = q, dq
        qpos[:, self._p + 3 : self._p + 7] = tt.yaw_quat(self._uniform(np.pi, k))
        self.qpos[ids], self.qvel[ids], self._warmstart[ids] = qpos, qvel, self._warmstart0
        self._overflow[ids] = 0
        self.commands[ids] = self._sample_commands(k)

        self.episode_length[ids] = 0
        for buf in (self.action, self.last_action, self.sent_action, self.last_sent_action):
            buf[ids] = 0.0
        self.last_dq[ids] = dq
        self.feet.reset(ids)
        lo, hi = cfg.action_latency_steps
        latency = torch.randint(lo, hi + 1, (k,), device=self._tdev, generator=gen)
        self.delay.reset(ids, latency, fill=self.default_q.expand(k, -1))
        self.actor_obs_builder.reset(ids)
        self.critic_obs_builder.reset(ids)
        for sums in self._episode_sums.values():
            sums[ids] = 0.0
        if self._vel_errors is not None:
            self._vel_errors.reset(ids)
        self._steps_taken[ids] = 0

    def apply_model_sample(self, ids: torch.Tensor, sample: dict[str, torch.Tensor]) -> None:
        """Envs ``ids`` get the draw ``sample`` (``warp_model.sample_model``'s fields, rows for ``ids``): the batched
        model fields, the constants derived from the masses, the PD gains."""
        self.batched.apply(ids, sample)
        if self.batched.randomizes_masses:
            self._set_const()
        self.kp[ids] = self._spec_kp * sample["kp_scale"] * sample["motor_strength"]
        self.kd[ids] = self._spec_kd * sample["kd_scale"] * sample["motor_strength"]

    def _sample_commands(self, k: int) -> torch.Tensor:
        """The task's command term on the device (uniform over the ranges; velocity commands' standing rules)."""
        if self.fixed_command is not None:
            return self.fixed_command.expand(k, -1).clone()
        spec, term = self.task.commands, self.task.terms.commands
        low = torch.tensor(spec.low, dtype=torch.float32, device=self._tdev)
        high = torch.tensor(spec.high, dtype=torch.float32, device=self._tdev)
        cmd = low + (high - low) * torch.rand((k, spec.size), device=self._tdev, generator=self.gen)
        if hasattr(term, "min_speed_m_s"):  # VelocityCommands: too slow to walk is standing; a share stands
            small = torch.linalg.norm(cmd[:, :2], dim=1) < term.min_speed_m_s
            cmd[:, :2] *= ~small[:, None]
            standing, turning = term.shares(torch.rand(k, device=self._tdev, generator=self.gen))
            cmd *= ~standing[:, None]
            cmd[:, :2] *= ~turning[:, None]
        return cmd

    # ------------------------------------------------------------------------------------------------
    # Step

    def step(self, action: torch.Tensor | np.ndarray) -> StepResult:
        action = torch.as_tensor(action, dtype=torch.float32, device=self._tdev)
        if action.shape != (self.num_envs, self.num_actions):
            raise ValueError(f"action shape {tuple(action.shape)}, expected ({self.num_envs}, {self.num_actions})")
        if not bool(torch.isfinite(action).all()):
            raise ValueError("non-finite action given to the env")
        self.last_action.copy_(self.action)
        self.action.copy_(action)
        self.last_sent_action.copy_(self.sent_action)
        if self.task.rate_limit_targets:
            step = self.max_action_step
            self.sent_action.copy_(torch.clamp(action, self.sent_action - step, self.sent_action + step))
        else:
            self.sent_action.copy_(action)
        a = self.task.action
        q_sent = self.default_q + a.scale * torch.clamp(self.sent_action, -a.clip, a.clip)
        self._q_target[:, self._policy_idx] = self.delay.push(q_sent)
        q = torch.clamp(self._q_target, self._lower, self._upper)  # as the robot's pd_ctrl
        self.ctrl.copy_(torch.cat([self.kp, self.kd, self.kp * q], dim=1))

        self._step_count += 1
        if self._push_probability:  # as the CPU env: random times, any direction, speed up to the ramped maximum
            n, gen, dev = self.num_envs, self.gen, self._tdev
            pushed = torch.rand(n, device=dev, generator=gen) < self._push_probability
            top = self.dr_cfg.push_max_vel_m_s * dr.push_scale(self.dr_cfg, self._step_count * self.dt)
            angle = 2 * np.pi * torch.rand(n, device=dev, generator=gen)
            speed = top * torch.rand(n, device=dev, generator=gen) * pushed
            v = self._v
            self.qvel[:, v : v + 2] += torch.stack([speed * torch.cos(angle), speed * torch.sin(angle)], dim=1)

        torque = torch.zeros(self.num_envs, self.num_joints, device=self._tdev)
        foot_force = torch.zeros(self.num_envs, self._foot_adr.shape[0], device=self._tdev)
        base_contact = torch.zeros(self.num_envs, dtype=torch.bool, device=self._tdev)
        for _ in range(self.decimation):  # each substep's sensors, as rollout returns them
            self._physics_step()
            s = self.sensordata
            torque += s[:, self._torque_adr]
            foot_force = torch.maximum(foot_force, torch.linalg.norm(s[:, self._foot_adr], dim=2))
            if self._base_contact is not None:
                base_contact |= s[:, self._base_contact] > 0
        torque /= self.decimation
        unstable = ~(torch.isfinite(self.qpos).all(1) & torch.isfinite(self.qvel).all(1)) | (self._overflow != 0)
        self.episode_length += 1
        self._steps_taken += 1

        f = self._frame()
        t = self.task.terminations
        failed = unstable | base_contact if t.base_contact else unstable.clone()
        if t.max_tilt_rad is not None:
            failed |= tt.tilt_angle(f["gravity"]) > t.max_tilt_rad
        if t.min_base_height_m is not None:
            failed |= f["base_pos"][:, 2] < t.min_base_height_m
        terminated = failed
        truncated = (self.episode_length >= self.max_episode_length) & ~terminated
        first, air = self.feet.update(foot_force)
        inputs = RewardInputs(
            dt=self.dt, command=self.commands, q=f["q"], dq=f["dq"], last_dq=self.last_dq, default_q=self.default_q,
            q_soft_lower=self.q_soft_lower, q_soft_upper=self.q_soft_upper, torque=torque, action=self.action,
            last_action=self.last_action, terminated=terminated, max_action_step=self.max_action_step,
            sent_action=self.last_sent_action, action_scale=self.task.action.scale, base_lin_vel=f["base_lin_vel"],
            base_ang_vel=f["base_ang_vel"],
            projected_gravity=f["gravity"], base_height=f["base_pos"][:, 2], first_contact=first, air_time=air,
            foot_contact=self.feet.contact, gait_phase=self.gait_phase())
        if self._reads_foot_height:
            inputs.foot_height = self.foot_height()
        inputs.target_lower, inputs.target_upper = tt.velocity_aware_bounds(f["dq"], self._chain_lower,
                                                                            self._chain_upper, self.dt)
        reward, parts = tt.compute_rewards(self.rewards_cfg, inputs)
        reward = torch.where(unstable, 0.0, reward)  # an env that blew up earns nothing (its values are meaningless)
        for name, value in parts.items():
            self._episode_sums[name] += torch.where(unstable, 0.0, value)
        self.last_dq.copy_(f["dq"])
        if self._vel_errors is not None:
            self._vel_errors.step(f["base_lin_vel"], self.commands)

        done = terminated | truncated
        finished: dict[str, torch.Tensor] = {}
        log: dict[str, torch.Tensor] = {}
        any_done = bool(done.any())
        if any_done:
            ids = torch.nonzero(done).squeeze(1)
            finished = self._episode_metrics(ids, terminated)
            log = {k: v.mean() for k, v in finished.items()}
            # What the finished envs' last observation is built from (Gymnasium's final_obs), as the CPU env keeps.
            self.final_obs_inputs = ObsInputs(**{k: None if v is None else v.clone()
                                                 for k, v in vars(self._obs_inputs(f)).items()})
        self._resample_commands()
        if any_done:
            self._reset_envs(ids)
        self._compute_obs(None if any_done else f)
        self.last_finished = finished
        return StepResult(self.actor_obs, self.critic_obs, reward, terminated, truncated, log, finished)

    def _episode_metrics(self, ids: torch.Tensor, terminated: torch.Tensor) -> dict[str, torch.Tensor]:
        length_s = torch.clamp(self._steps_taken[ids], min=1) * self.dt
        out = {f"Episode_Reward/{k}": v[ids] / length_s for k, v in self._episode_sums.items()}
        out["Episode/length_s"] = length_s
        out["Episode/fell"] = terminated[ids].float()
        if self._vel_errors is not None:
            out |= self._vel_errors.finish(ids)
        return out

    def _resample_commands(self) -> None:
        every = self.task.command_resample_s
        if every is None:
            return
        steps = max(round(every / self.dt), 1)
        due = (self.episode_length % steps == 0) & (self.episode_length > 0)
        self.commands.copy_(torch.where(due[:, None], self._sample_commands(self.num_envs), self.commands))

    def close(self) -> None:
        self._graph = None
