"""FastTD3's replay: one ring per env of 1-step transitions in torch tensors, n-step returns folded at sampling.

Every iteration writes one row (all envs' transitions of that step). A sample draws (env, step) pairs and
folds up to n consecutive steps of that env:

    R = Σ_{k<m} γᵏ r_{t+k},   next = the obs after step t+m−1,   discount = γᵐ · (1 − terminated_{t+m−1})

with m ≤ n cut at the episode's end (a time-out still bootstraps: its next obs is the finished episode's last,
which the loop stores in place of the next episode's first) and at the newest row written (a shorter fold is
still an unbiased-horizon target, so no sample has to wait for its tail).

Folding at sampling time instead of at insertion (the residual learner's ``NStepFolder``) is what lets
thousands of envs write one row per step with no Python loop over envs; it keeps the tensors on the learner's
device, as the recipe does.
"""

from __future__ import annotations

import torch

OBS_FIELDS = ("actor_obs", "critic_obs", "next_actor_obs", "next_critic_obs")


class NStepReplay:
    def __init__(self, num_envs: int, capacity: int, actor_dim: int, critic_dim: int, action_dim: int, *,
                 n_step: int, gamma: float, device: str = "cpu"):
        if capacity < 1 or n_step < 1:
            raise ValueError(f"replay capacity and n_step must be ≥ 1, got {capacity}, {n_step}")
        self.num_envs, self.capacity, self.n_step, self.gamma = num_envs, capacity, n_step, gamma
        shape = (capacity, num_envs)
        dims = {"actor_obs": actor_dim, "critic_obs": critic_dim, "next_actor_obs": actor_dim,
                "next_critic_obs": critic_dim, "action": action_dim}
        self.data = {name: torch.zeros((*shape, d), device=device) for name, d in dims.items()}
        self.data["reward"] = torch.zeros(shape, device=device)
        self.data["terminated"] = torch.zeros(shape, dtype=torch.bool, device=device)
        self.data["done"] = torch.zeros(shape, dtype=torch.bool, device=device)  # terminated or timed out
        self._powers = gamma ** torch.arange(n_step + 1, device=device, dtype=torch.float32)
        self.pos = 0  # the row the next add writes
        self.size = 0  # rows held
        self.added = 0  # rows ever written

    def __len__(self) -> int:
        return self.size * self.num_envs

    def add(self, **row: torch.Tensor) -> None:
        """One step of every env: each field (num_envs, …) as in ``data``."""
        for name, dest in self.data.items():
            dest[self.pos] = row[name]
        self.pos = (self.pos + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        self.added += 1

    def sample(self, batch: int, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """``batch`` n-step transitions: the observations and action of the first step, ``reward`` (the folded
        return), the next observations and ``discount`` (γᵐ, 0 after a terminal)."""
        if self.size == 0:
            raise ValueError("cannot sample an empty replay buffer")
        device = self.data["reward"].device
        env = torch.randint(self.num_envs, (batch,), generator=generator, device=device)
        first = torch.randint(self.size, (batch,), generator=generator, device=device)  # from the oldest row
        oldest = (self.pos - self.size) % self.capacity
        offsets = torch.arange(self.n_step, device=device)
        logical = first[:, None] + offsets  # (batch, n)
        rows = (oldest + logical.clamp(max=self.size - 1)) % self.capacity
        cols = env[:, None].expand_as(rows)
        done = self.data["done"][rows, cols]
        # step k counts while it was written and no earlier step of the fold ended the episode
        ended_before = (done.cumsum(1) - done.to(torch.long)) > 0
        counts = (logical < self.size) & ~ended_before
        reward = (self.data["reward"][rows, cols] * self._powers[: self.n_step] * counts).sum(1)
        m = counts.sum(1)  # ≥ 1: the first step always counts
        last = rows.gather(1, (m - 1)[:, None]).squeeze(1)
        start = rows[:, 0]
        out = {name: self.data[name][start, env] for name in ("actor_obs", "critic_obs", "action")}
        out["next_actor_obs"] = self.data["next_actor_obs"][last, env]
        out["next_critic_obs"] = self.data["next_critic_obs"][last, env]
        out["reward"] = reward
        out["discount"] = self._powers[m] * (~self.data["terminated"][last, env]).to(torch.float32)
        return out
