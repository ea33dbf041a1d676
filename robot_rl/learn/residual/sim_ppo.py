"""The residual trained by PPO in a (calibrated) vectorized sim: free transitions, the same bounded form.

    obs ──► base (ONNX, batched) ──► a_b ──┐
     └──────────────┬──────────────────────┴──► PPO actor (MLP) ──► r = α · tanh(μ [+ σ·ε])
                    └─────────────────────────────────────────────► a = a_b + r ──► MujocoVecEnv

The off-policy learner on the robot is sample-efficient per *transition it is given*, but the robot gives few.
A simulator calibrated to the robot (:mod:`robot_rl.learn.residual.calibration`) gives as many as wanted, and
there an on-policy learner over hundreds of parallel envs is fast and stable. This module trains the residual
there with rsl_rl's PPO, through the same frozen base and the same bound, and hands the result to the
robot-side learner as its starting actor (``calibrated.write_init_checkpoint``): the residual a run on the robot
starts from is then already the correction the calibrated sim asks for, and the robot's own transitions fine-tune
what the calibration missed.

The PPO actor is the residual actor's shape (ReLU MLP, ``ResidualCfg.hidden``) so that its weights *are* a
residual actor: rsl_rl's input normalizer is folded into the first layer, the mean head is copied, and the
log σ head is set to a constant (the robot-side learner's exploration).

Where PPO starts (``SimResidualCfg.start``): ``"zero"`` — the last layer at zero, the base alone; or
``"actuators"`` — the actuators' inverse, fitted by regression: the residual that makes the calibrated motors
(kp, kd scaled) apply the torque the base's target asks of the nominal ones, τ = kp (q* − q) − kd q̇, and hold the
fitted payload (:func:`actuator_compensation`), on states the calibrated sim visits, DAgger-style (the fitted
actor's own states labelled too: :func:`fit_actuator_start`). It is what the calibration already says about the
motors, given as the start rather than left for PPO to find: on panda-push, a contact task where PPO's exploration
noise alone undoes the base's pushes, PPO from zero had not moved the return in 300 iterations.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from robot_rl.learn.residual.actor import residual_bound
from robot_rl.learn.residual.config import ResidualCfg
from robot_rl.learn.residual.networks import actor_layout, layout_size, unflatten
from robot_rl.policy.onnx_policy import Policy
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.task import PPOCfg


@dataclass(frozen=True)
class SimResidualCfg:
    """PPO over the residual in the vectorized sim. Sized for 2 CPU cores: 6,144 transitions per iteration."""

    iterations: int = 400  # ≈ 2.5 M sim transitions, 7 min on 2 cores
    num_envs: int = 256
    steps_per_env: int = 24
    learning_rate: float = 1e-3
    entropy_coef: float = 0.0  # the bound, not an entropy bonus, keeps the residual small
    init_noise_std: float = 0.5  # pre-tanh: ≈ half the bound at r = 0
    gamma: float = 0.99
    # Train under the task's domain randomization re-centred on the calibrated robot (shifted_sim.
    # randomization_around): the calibrated sim is an estimate, and the robot is not a member of its family.
    randomize: bool = True
    critic_hidden: tuple[int, ...] = (256, 128, 64)
    start: Literal["zero", "actuators"] = "zero"  # where PPO starts: the base alone, or the actuators' inverse
    start_steps: int | None = None  # policy steps of every env the "actuators" start is fitted on (None: an episode)
    # PPO iterations that train the critic alone before the actor moves: from a fitted start, PPO's first updates
    # on an untrained critic's advantages undid it (panda-push: the return fell from +1.7 to −7 within 30).
    critic_warmup: int = 0
    seed: int = 0
    nthread: int | None = None  # MuJoCo rollout threads (None: every core)

    def __post_init__(self) -> None:
        counts = (self.num_envs, self.steps_per_env, 1 if self.start_steps is None else self.start_steps)
        if self.iterations < 0 or self.critic_warmup < 0 or min(counts) < 1:
            raise ValueError(f"sim residual: iterations must be ≥ 0, num_envs, steps_per_env and start_steps ≥ 1, "
                             f"got {self}")
        if self.start not in ("zero", "actuators"):
            raise ValueError(f"sim residual: start must be 'zero' or 'actuators', got {self.start!r}")
        if self.init_noise_std <= 0 or self.learning_rate <= 0:
            raise ValueError(f"sim residual: init_noise_std and learning_rate must be > 0, got {self}")

    @property
    def transitions_per_iteration(self) -> int:
        return self.num_envs * self.steps_per_env

    def ppo(self, residual: ResidualCfg) -> PPOCfg:
        return PPOCfg(num_envs=self.num_envs, num_steps_per_env=self.steps_per_env, max_iterations=self.iterations,
                      learning_rate=self.learning_rate, entropy_coef=self.entropy_coef, gamma=self.gamma,
                      actor_hidden_dims=tuple(residual.hidden), critic_hidden_dims=self.critic_hidden,
                      activation="relu", init_noise_std=self.init_noise_std, save_interval=10**9)


def _rsl_env_class():
    """rsl_rl's VecEnv over the residual (imported lazily: torch and rsl_rl are the train extra)."""
    import torch
    from tensordict import TensorDict

    from robot_rl.learn.ppo import ACTOR_GROUP, CRITIC_GROUP, RslRlVecEnv

    class ResidualRslEnv(RslRlVecEnv):
        """The env's action is the residual's pre-tanh output; the base's action is part of every observation
        (the residual actor's input is observation ‖ base action, as on the robot)."""

        def __init__(self, env, base: Policy, alpha: float):
            super().__init__(env)
            self.base, self.alpha = base, alpha
            self.base_action = self._base(env.actor_obs)

        def _base(self, actor_obs: np.ndarray) -> np.ndarray:
            return np.asarray(self.base.act_batch(np.ascontiguousarray(actor_obs, dtype=np.float32)),
                              dtype=np.float32)

        def _obs(self, actor: np.ndarray, critic: np.ndarray) -> TensorDict:
            b = self.base_action
            return TensorDict({ACTOR_GROUP: torch.from_numpy(np.concatenate([actor, b], axis=1)),
                               CRITIC_GROUP: torch.from_numpy(np.concatenate([critic, b], axis=1).astype(np.float32))},
                              batch_size=[self.num_envs])

        def _env_action(self, actions) -> np.ndarray:
            return self.base_action + self.alpha * np.tanh(actions.detach().cpu().numpy())

        def _package(self, result):
            self.base_action = self._base(result.actor_obs)  # the next observation's base action first
            return super()._package(result)

        def restart(self):
            """Every env at the start of a fresh episode; returns the observations."""
            self.env.reset()
            self.base_action = self._base(self.env.actor_obs)
            return self.get_observations()

    return ResidualRslEnv


@dataclass
class SimResidualResult:
    flat: np.ndarray  # the residual actor's flat weights (networks.actor_layout), ready for ResidualPolicy / SAC
    transitions: int
    wall_s: float
    history: list[dict]  # per iteration: mean reward, episode length, steps/s
    start_fit: dict | None = None  # the "actuators" start: samples and regression errors


def actor_flat_from_rsl(actor, state_dim: int, action_dim: int, hidden: tuple[int, ...],
                        log_std: float) -> np.ndarray:
    """rsl_rl's ``MLPModel`` (normalizer → ReLU MLP → mean) as the residual actor's flat weights: the normalizer
    folded into the first layer (W' = W / (σ + ε), b' = b − W' μ), the log σ head a constant ``log_std``."""
    import torch

    linears = [m for m in actor.mlp if isinstance(m, torch.nn.Linear)]
    if len(linears) != len(hidden) + 1 or any(lin.out_features != h for lin, h in zip(linears, hidden, strict=False)):
        raise ValueError(f"the PPO actor's layers {[lin.out_features for lin in linears]} are not the residual "
                         f"actor's {[*hidden, action_dim]}")
    layout = actor_layout(state_dim, action_dim, tuple(hidden))
    flat = np.zeros(layout_size(layout), np.float32)
    p = unflatten(flat, layout)
    with torch.no_grad():
        weights = [(lin.weight.double().numpy().copy(), lin.bias.double().numpy().copy()) for lin in linears]
        if actor.obs_normalization:
            norm = actor.obs_normalizer
            mean = norm._mean.squeeze(0).double().numpy()
            scale = 1.0 / (norm._std.squeeze(0).double().numpy() + norm.eps)
            w0, b0 = weights[0]
            weights[0] = (w0 * scale, b0 - (w0 * scale) @ mean)
    for i, (w, b) in enumerate(weights[:-1]):
        p[f"hidden.{i}.weight"][:] = w
        p[f"hidden.{i}.bias"][:] = b
    p["mean.weight"][:], p["mean.bias"][:] = weights[-1]
    p["log_std.bias"][:] = log_std
    return flat


def actuator_compensation(task, spec, shift, base_action: np.ndarray, q: np.ndarray, dq: np.ndarray,
                          payload_torque: np.ndarray | None = None) -> np.ndarray:
    """The residual (action units) under which motors with ``shift``'s gain scales apply the torque the base's
    target asks of the nominal ones, and hold the payload's weight besides: kp·s_p·(q* + δ − q) − kd·s_d·q̇ + τ_w =
    kp·(q* − q) − kd·q̇, so δ = (q* − q)(1/s_p − 1) + (kd·(s_d − 1)·q̇ − τ_w) / (kp·s_p), with τ_w the joint torque
    of the payload's weight (``payload_torque``; None: not modelled). Joint-position actions: q* = default + scale·a."""
    q_target = task.action.decode(base_action, spec.default_positions)
    extra = spec.kd * (shift.kd_scale - 1.0) * dq - (0.0 if payload_torque is None else payload_torque)
    delta = (q_target - q) * (1.0 / shift.kp_scale - 1.0) + extra / (spec.kp * shift.kp_scale)
    return delta / task.action.scale


def payload_weight_torque(env, shift) -> np.ndarray | None:
    """(N, joints) joint torques of ``shift``'s payload weight at every env's state (an arm's controller compensates
    its nominal model's gravity, not the payload's: :mod:`~robot_rl.learn.residual.shifted_sim`); None for a
    floating base (there the feet's contacts carry it, which a joint-space term does not model) or no payload."""
    import mujoco

    from robot_rl.learn.residual.shifted_sim import payload_body

    if env.floating or shift.payload_kg == 0:
        return None
    model = env.models[0]
    body = payload_body(model, env.spec)
    data = mujoco.MjData(model)
    jac = np.zeros((3, model.nv))
    force = np.array([0.0, 0.0, -shift.payload_kg * float(np.linalg.norm(model.opt.gravity))])
    dofs = env.robot.qvel_adr
    out = np.zeros((env.num_envs, env.num_joints))
    for i in range(env.num_envs):
        mujoco.mj_setState(model, data, env.state[i], mujoco.mjtState.mjSTATE_FULLPHYSICS)
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_jacBodyCom(model, data, jac, None, body)
        out[i] = jac[:, dofs].T @ force
    return out


def fit_actuator_start(actor, rsl_env, task, shift, alpha: float, steps: int, *, rounds: int = 2, epochs: int = 30,
                       batch: int = 4096, lr: float = 1e-3) -> dict:
    """Fit the PPO actor's mean to :func:`actuator_compensation` (pre-tanh, inside ±0.95 of the bound) on the
    states of ``steps`` policy steps of every env of ``rsl_env``; returns the fit's errors and sample count.

    DAgger-style: the first round's states are the compensation's own, each later round's are the fitted actor's
    (whose small errors lead the arm elsewhere), all labelled by the compensation and fitted together."""
    import torch

    from robot_rl.learn.ppo import ACTOR_GROUP

    env = rsl_env.env
    inputs, targets = [], []
    optimizer = torch.optim.Adam(actor.mlp.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(0)

    def mean(x):
        return actor.mlp(actor.obs_normalizer(x))

    errors = []
    for round_ in range(rounds):
        obs = rsl_env.restart()
        for _ in range(steps):
            q, dq = env.joint_state()
            r = actuator_compensation(task, env.spec, shift, rsl_env.base_action.astype(np.float64), q, dq,
                                      payload_weight_torque(env, shift))
            label = torch.from_numpy(np.arctanh(np.clip(r / alpha, -0.95, 0.95)).astype(np.float32))
            inputs.append(obs[ACTOR_GROUP])
            targets.append(label)
            if round_ == 0:
                act = label
            else:
                with torch.no_grad():
                    act = mean(obs[ACTOR_GROUP])
            obs, _, _, _ = rsl_env.step(act)
        x, y = torch.cat(inputs), torch.cat(targets)
        if round_ == 0 and actor.obs_normalization:
            actor.obs_normalizer.update(x)
        with torch.no_grad():
            errors.append(float(torch.mean((mean(x) - y) ** 2)))
        for _ in range(epochs):
            for idx in torch.randperm(len(x), generator=generator).split(batch):
                loss = torch.mean((mean(x[idx]) - y[idx]) ** 2)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    with torch.no_grad():
        after = float(torch.mean((mean(x) - y) ** 2))
    return {"samples": len(x), "rounds": rounds, "mse_zero": float(torch.mean(y**2)), "mse_before": errors,
            "mse_after": after}


def train_sim_residual(task, base: Policy, shift, residual: ResidualCfg, cfg: SimResidualCfg,
                       on_iteration: Callable[[dict], None] | None = None, log_std: float = -1.0,
                       log_dir: Path | None = None, spec: RobotSpec | None = None) -> SimResidualResult:
    """PPO over the bounded residual of ``base`` in ``task``'s vectorized env under ``shift`` (a ``RealityShift``:
    the calibrated robot). ``log_std``: the log σ the robot-side learner starts exploring with. ``log_dir``: a
    TensorBoard log of the training (also what fills the iterations' mean episode reward). ``spec``: the robot's,
    if not as loaded from its file (a chain that knows the calibrated motors)."""
    import torch

    from robot_rl.learn.ppo import TaskRunner
    from robot_rl.learn.residual.shifted_sim import randomization_around, shifted_vec_env

    torch.manual_seed(cfg.seed)
    rand = randomization_around(shift, task.randomization) if cfg.randomize else None
    env = shifted_vec_env(task, shift, cfg.num_envs, seed=cfg.seed, nthread=cfg.nthread, randomization=rand, spec=spec)
    alpha = residual_bound(base.contract, residual.fraction)
    rsl_env = _rsl_env_class()(env, base, alpha)
    history: list[dict] = []
    stdout = sys.stdout  # rsl_rl's runner silences stdout while it learns: the progress goes to the caller's

    def record(info: dict) -> None:
        history.append(info)
        if on_iteration is not None:
            with contextlib.redirect_stdout(stdout):
                on_iteration(info)

    runner = TaskRunner(rsl_env, task, log_dir=log_dir, on_iteration=record, ppo=cfg.ppo(residual))
    actor = runner.alg.actor
    last = [m for m in actor.mlp if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():  # start from the base alone
        last.weight.zero_()
        last.bias.zero_()
    started = time.monotonic()
    start_fit = None
    try:
        if cfg.start == "actuators":
            steps = cfg.start_steps or env.max_episode_length
            start_fit = fit_actuator_start(actor, rsl_env, task, shift, alpha, steps)
        if cfg.critic_warmup:
            runner.learn_critic_only(cfg.critic_warmup, cfg.learning_rate, init_at_random_ep_len=True)
        if cfg.iterations:
            runner.learn(cfg.iterations, init_at_random_ep_len=not cfg.critic_warmup)
    finally:
        env.close()
    state_dim = residual.state_dim(base.contract.obs_dim, base.contract.num_actions)
    flat = actor_flat_from_rsl(actor, state_dim, base.contract.num_actions, residual.hidden, log_std)
    steps = (cfg.critic_warmup + cfg.iterations) * cfg.transitions_per_iteration
    steps += start_fit["samples"] if start_fit else 0
    return SimResidualResult(flat=flat, transitions=steps, wall_s=time.monotonic() - started, history=history,
                             start_fit=start_fit)
