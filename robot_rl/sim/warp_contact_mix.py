"""The task's contact mix on the warp backend: two MuJoCo Warp envs side by side, one per friction cone.

MuJoCo Warp keeps the friction cone (and ``impratio``) once for all worlds, so one ``WarpVecEnv`` cannot run a
share of its envs on the gate's stiff elliptic cone and the rest on the training world's pyramidal contact, as the
CPU env does (``RandomizationCfg.stiff_contact_fraction``). A task that asks for a share gets two envs here — the
stiff share first, then the rest — stepped one after the other and seen by the learner as one batch of
``num_envs`` (their episode counters are views of one buffer): the same envs per contact as the CPU env, in another
order (rsl_rl's mini-batches are random draws over all of them, so the order does not matter). Each part draws from
its own seed.

For PPO (``robot-rl train --backend warp``); the off-policy loop keeps one env (one cone, said in its notes).
"""

from __future__ import annotations

import itertools

import torch

from robot_rl.robots.spec import RobotSpec
from robot_rl.sim.mujoco_vec_env import StepResult
from robot_rl.sim.randomization import stiff_contact_envs
from robot_rl.sim.warp_vec_env import WarpVecEnv
from robot_rl.tasks.task import TaskCfg

SEED_STRIDE = 1_000_003  # the second part's seed: seed + this, so the parts' draws differ


class ContactMixVecEnv:
    """``WarpVecEnv``'s training interface over parts that each run one contact, concatenated along the envs."""

    def __init__(self, parts: list[WarpVecEnv]):
        if len(parts) < 2 or len({(p.task.name, p.spec.name, p.device) for p in parts}) != 1:
            raise ValueError("a contact mix needs two or more envs of one task, robot and device")
        self.parts = parts
        first = parts[0]
        self.task, self.spec, self.device = first.task, first.spec, first.device
        self.dt, self.max_episode_length = first.dt, first.max_episode_length
        self.num_actions = first.num_actions
        self.num_actor_obs, self.num_critic_obs = first.num_actor_obs, first.num_critic_obs
        self.num_envs = sum(p.num_envs for p in parts)
        self._bounds = [0, *itertools.accumulate(p.num_envs for p in parts)]
        # One buffer, the parts' counters views of it: rsl_rl writes it in place (init_at_random_ep_len) and the
        # parts count in place, so both see every write.
        self.episode_length = torch.cat([p.episode_length for p in parts])
        for p, view in zip(parts, self._split(self.episode_length), strict=True):
            p.episode_length = view
        self.stiff_contact = torch.cat([torch.full((p.num_envs,), p.stiff_contact, dtype=torch.bool,
                                                   device=first._tdev) for p in parts])
        shares = ", ".join(f"{p.num_envs} {'elliptic' if p.stiff_contact else 'training'}" for p in parts)
        self.notes: tuple[str, ...] = (f"contact mix: {len(parts)} MuJoCo Warp envs, one per friction cone ({shares})",)

    def _split(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [x[a:b] for a, b in zip(self._bounds[:-1], self._bounds[1:], strict=True)]

    @property
    def actor_obs(self) -> torch.Tensor:
        return torch.cat([p.actor_obs for p in self.parts])

    @property
    def critic_obs(self) -> torch.Tensor:
        return torch.cat([p.critic_obs for p in self.parts])

    def reset(self) -> tuple[torch.Tensor, torch.Tensor]:
        for p in self.parts:
            p.reset()
        return self.actor_obs, self.critic_obs

    def continue_curriculum(self, policy_steps: int) -> None:
        for p in self.parts:
            p.continue_curriculum(policy_steps)

    def step(self, action: torch.Tensor) -> StepResult:
        action = torch.as_tensor(action, dtype=torch.float32, device=self.parts[0]._tdev)
        if action.shape != (self.num_envs, self.num_actions):
            raise ValueError(f"action shape {tuple(action.shape)}, expected ({self.num_envs}, {self.num_actions})")
        results = [p.step(a) for p, a in zip(self.parts, self._split(action), strict=True)]
        # Episode metrics: over every finished episode of every part, as one env's are over its finished envs.
        keys = {k for r in results for k in r.finished}
        finished = {k: torch.cat([r.finished[k] for r in results if k in r.finished]) for k in keys}
        return StepResult(torch.cat([r.actor_obs for r in results]), torch.cat([r.critic_obs for r in results]),
                          torch.cat([r.reward for r in results]), torch.cat([r.terminated for r in results]),
                          torch.cat([r.truncated for r in results]), {k: v.mean() for k, v in finished.items()},
                          finished)

    def close(self) -> None:
        for p in self.parts:
            p.close()


def make_warp_env(task: TaskCfg, num_envs: int, *, seed: int = 0, randomize: bool = True, device: str = "cpu",
                  spec: RobotSpec | None = None, mix_contacts: bool = True) -> WarpVecEnv | ContactMixVecEnv:
    """The warp backend's env for ``task``: a ``ContactMixVecEnv`` where the task trains a share of its envs on the
    stiff contact (as many envs per contact as the CPU env has), else one ``WarpVecEnv``."""
    fraction = task.randomization.stiff_contact_fraction if randomize else 0.0
    stiff = int(stiff_contact_envs(num_envs, fraction).sum())
    if not mix_contacts or not 0 < stiff < num_envs:
        return WarpVecEnv(task, num_envs, seed=seed, randomize=randomize, device=device, spec=spec)
    return ContactMixVecEnv([
        WarpVecEnv(task, stiff, seed=seed, randomize=randomize, device=device, spec=spec, stiff_contact=True),
        WarpVecEnv(task, num_envs - stiff, seed=seed + SEED_STRIDE, randomize=randomize, device=device, spec=spec,
                   stiff_contact=False),
    ])
