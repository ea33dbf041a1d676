"""Gymnasium's vector API over ``MujocoVecEnv`` or ``WarpVecEnv`` (thin: spaces, seeding, same-step autoreset).

Observations are the actor's (what the robot measures); the critic's privileged observation is in
``infos["critic_obs"]``. A finished env is reset within the same ``step`` (``AutoresetMode.SAME_STEP``):
its returned observation starts the next episode, and ``infos["final_obs"]`` holds the last observation of
the finished one (built from its final state, noise-free) with ``infos["_final_obs"]`` marking which rows.
Gymnasium's API is numpy: with ``backend="warp"`` every step copies the outputs from the device (the rsl_rl adapter,
which keeps them there, is the fast path for training on a GPU).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.observations import ObservationBuilder, ObsInputs
from robot_rl.tasks.registry import make_task


class MujocoGymVectorEnv(VectorEnv):
    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, task: str, num_envs: int, *, randomize: bool = True, seed: int = 0,
                 backend: Literal["cpu", "warp"] = "cpu", device: str = "cpu"):
        """``backend``, ``device``: as ``robot-rl train``'s (``warp`` needs the gpu extra)."""
        cfg = make_task(task)
        if any(t.history_length > 1 for t in cfg.actor_obs.terms):
            # final_obs is rebuilt from the final state alone, which a history cannot be.
            raise ValueError(f"task {task!r}: the Gymnasium adapter supports observation histories of length 1")
        if backend == "warp":
            from robot_rl.sim.warp_vec_env import WarpVecEnv

            self.env = WarpVecEnv(cfg, num_envs, seed=seed, randomize=randomize, device=device)
        else:
            self.env = MujocoVecEnv(cfg, num_envs, seed=seed, randomize=randomize)
        self.num_envs = num_envs
        clip = cfg.action.clip
        self.single_action_space = gym.spaces.Box(-clip, clip, shape=(self.env.num_actions,), dtype=np.float32)
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(self.env.num_actor_obs,),
                                                       dtype=np.float32)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._final_builder = ObservationBuilder(cfg.actor_obs, num_envs, self.env.num_joints,
                                                 self.env.num_commands, self.env.num_actions)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            if isinstance(self.env, MujocoVecEnv):
                self.env.rng = np.random.default_rng(seed)
                self.env.actor_obs_builder.rng = self.env.rng
            else:
                self.env.gen.manual_seed(seed)
            self._np_random_seed = seed
        actor, critic = self.env.reset()
        return _np(actor), {"critic_obs": _np(critic)}

    def step(self, actions: np.ndarray):
        env = self.env
        result = env.step(np.asarray(actions, dtype=np.float64))
        done = result.terminated | result.truncated
        done = _np(done)
        infos: dict[str, Any] = {"critic_obs": _np(result.critic_obs)}
        if done.any():
            self._final_builder.reset()
            inputs = ObsInputs(**{k: None if v is None else _np(v) for k, v in vars(env.final_obs_inputs).items()})
            final = self._final_builder.compute(inputs).copy()
            final[~done] = 0.0
            infos["final_obs"] = final
            infos["_final_obs"] = done
            infos["episode"] = {k: float(v) for k, v in result.log.items()}
        return (_np(result.actor_obs), _np(result.reward).astype(np.float64), _np(result.terminated),
                _np(result.truncated), infos)

    def close_extras(self, **kwargs: Any) -> None:
        self.env.close()


def _np(x: Any) -> np.ndarray:
    """A numpy copy of an env output (a numpy array, or a tensor on the warp env's device)."""
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.array(x)
