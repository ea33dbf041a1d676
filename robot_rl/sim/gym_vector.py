"""Gymnasium's vector API over ``MujocoVecEnv`` (thin: spaces, seeding, same-step autoreset).

Observations are the actor's (what the robot measures); the critic's privileged observation is in
``infos["critic_obs"]``. A finished env is reset within the same ``step`` (``AutoresetMode.SAME_STEP``):
its returned observation starts the next episode, and ``infos["final_obs"]`` holds the last observation of
the finished one (built from its final state, noise-free) with ``infos["_final_obs"]`` marking which rows.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.observations import ObservationBuilder
from robot_rl.tasks.registry import make_task


class MujocoGymVectorEnv(VectorEnv):
    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, task: str, num_envs: int, *, randomize: bool = True, seed: int = 0):
        cfg = make_task(task)
        if any(t.history_length > 1 for t in cfg.actor_obs.terms):
            # final_obs is rebuilt from the final state alone, which a history cannot be.
            raise ValueError(f"task {task!r}: the Gymnasium adapter supports observation histories of length 1")
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
            self.env.rng = np.random.default_rng(seed)
            self.env.actor_obs_builder.rng = self.env.rng
            self._np_random_seed = seed
        actor, critic = self.env.reset()
        return actor.copy(), {"critic_obs": critic.copy()}

    def step(self, actions: np.ndarray):
        env = self.env
        result = env.step(np.asarray(actions, dtype=np.float64))
        done = result.terminated | result.truncated
        infos: dict[str, Any] = {"critic_obs": result.critic_obs.copy()}
        if done.any():
            self._final_builder.reset()
            final = self._final_builder.compute(env.final_obs_inputs).copy()
            final[~done] = 0.0
            infos["final_obs"] = final
            infos["_final_obs"] = done
            infos["episode"] = {k: v for k, v in result.log.items()}
        return result.actor_obs.copy(), result.reward.copy(), result.terminated.copy(), result.truncated.copy(), infos

    def close_extras(self, **kwargs: Any) -> None:
        self.env.close()
