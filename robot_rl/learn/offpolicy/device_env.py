"""The vectorized env as FastTD3's loop sees it: torch tensors on the learner's device, whichever backend steps.

``--backend cpu`` (``MujocoVecEnv``, numpy inside): each step's outputs become CPU tensors (copies: the env reuses
its arrays), and the learner and replay stay on the CPU. ``--backend warp`` (``WarpVecEnv``, torch on its device):
the outputs already are tensors on the env's device and are passed on as they are, so the actor, the replay and
the updates run there with no host round trip (the recipe's layout: everything on the GPU).

A finished env has already been reset when the step returns; for a time-out's target to bootstrap from the
episode's last observation (Gymnasium's ``final_obs``), :meth:`DeviceEnv.patch_final_obs` rebuilds it from the
state both envs keep in ``final_obs_inputs``: numpy ``ObsInputs`` on the CPU env, tensors on the warp env's
device, built by the observation builder of the same backend (without training noise on either).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.sim.torch_terms import TorchObservationBuilder
from robot_rl.sim.warp_vec_env import WarpVecEnv
from robot_rl.tasks.observations import ObservationBuilder
from robot_rl.typed_yaml import ConfigError


@dataclass(frozen=True)
class Transition:
    """One step of every env, as tensors on the learner's device."""

    actor_obs: torch.Tensor  # (N, actor_dim): the next observations (a finished env's: its reset's first)
    critic_obs: torch.Tensor  # (N, critic_dim)
    reward: torch.Tensor  # (N,) float32
    terminated: torch.Tensor  # (N,) bool
    done: torch.Tensor  # (N,) bool: terminated or timed out
    log: dict[str, float | torch.Tensor]  # the finished episodes' means (warp: 0-d device tensors)


class DeviceEnv:
    """``MujocoVecEnv`` or ``WarpVecEnv`` stepped with, and answering in, tensors on ``self.device``."""

    def __init__(self, env: MujocoVecEnv | WarpVecEnv):
        task = env.task
        if any(t.history_length > 1 for t in (*task.actor_obs.terms, *task.critic_obs.terms)):
            raise ConfigError("--task", task.name, "has observation histories; fasttd3 rebuilds a finished "
                              "episode's last observation from its final state, which a history cannot be")
        self.env = env
        self.on_device = isinstance(env, WarpVecEnv)
        self.device = torch.device(env.device) if self.on_device else torch.device("cpu")
        n, dims = env.num_envs, (env.num_joints, env.num_commands, env.num_actions)
        if self.on_device:
            self._final_actor = TorchObservationBuilder(task.actor_obs, n, *dims, device=self.device)
            self._final_critic = TorchObservationBuilder(task.critic_obs, n, *dims, device=self.device)
        else:
            self._final_actor = ObservationBuilder(task.actor_obs, n, *dims)
            self._final_critic = ObservationBuilder(task.critic_obs, n, *dims)

    def _tensor(self, x: np.ndarray | torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        if isinstance(x, torch.Tensor):  # the warp env: fresh tensors every step (its builders concatenate anew)
            return x if dtype is None else x.to(dtype)
        return torch.tensor(x, dtype=dtype)  # a copy: the CPU env overwrites its arrays in the next step

    def observations(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._tensor(self.env.actor_obs), self._tensor(self.env.critic_obs)

    def step(self, action: torch.Tensor) -> Transition:
        """``action`` (N, num_actions) in the task's raw action units, on ``self.device``."""
        result = self.env.step(action if self.on_device else action.numpy())
        terminated = self._tensor(result.terminated, torch.bool)
        done = terminated | self._tensor(result.truncated, torch.bool)
        return Transition(self._tensor(result.actor_obs), self._tensor(result.critic_obs),
                          self._tensor(result.reward, torch.float32), terminated, done, dict(result.log))

    def patch_final_obs(self, done: torch.Tensor, actor_next: torch.Tensor, critic_next: torch.Tensor) -> None:
        """Write the finished envs' (``done``) last observations into rows of ``actor_next`` / ``critic_next``."""
        inputs = self.env.final_obs_inputs
        actor, critic = self._final_actor.compute(inputs), self._final_critic.compute(inputs)
        if not self.on_device:
            actor, critic = torch.from_numpy(actor), torch.from_numpy(critic)
        actor_next[done] = actor[done]
        critic_next[done] = critic[done]

    def continue_curriculum(self, policy_steps: int) -> None:
        self.env.continue_curriculum(policy_steps)

    def close(self) -> None:
        self.env.close()
