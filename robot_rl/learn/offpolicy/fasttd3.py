"""FastTD3's learner: a deterministic tanh actor, two distributional critics (C51: a categorical over value
atoms), clipped double-Q, target-policy smoothing, delayed actor updates, per-env exploration noise.

    critic:  y = Φ( R + discount · z ),  z ~ Z̄_i(s', a'),  a' = clip(π(s') + clip(ε, ±c), ±1),
             i = argmin_i E[Z̄_i(s', a')]  (clipped double-Q: the pessimistic target critic's distribution)
             loss = Σ_i CE(y, Z_i(s, a))        Φ: the projection of the shifted atoms back onto the support
    actor:   every ``policy_frequency`` critic updates, maximize min_i E[Z_i(s, π(s))]
    explore: π(s) + σ_e · ε with σ_e drawn per env in [std_min, std_max] at each of its episodes' start

Actions live in the unit box [−1, 1]ⁿ in here (noise, replay); :class:`ScaledActor` multiplies by the action
bound for the env and the exported policy. The actor sees the actor observation (what the robot measures),
the critics the privileged critic observation, each through its own running normalizer (rsl_rl's, as PPO's
networks use). The critics are the residual learner's builder (``build_critics``), plain (the recipe) or
LayerNorm, and targets move by its ``soft_update``.
"""

from __future__ import annotations

import copy
import dataclasses
from itertools import pairwise

import torch
from rsl_rl.modules.normalization import EmpiricalNormalization
from torch import nn

from robot_rl.learn.offpolicy.config import FastTD3Cfg
from robot_rl.learn.residual.networks import build_critics
from robot_rl.learn.residual.sac import soft_update


class Actor(nn.Module):
    """ReLU MLP → tanh: a unit action in [−1, 1]ⁿ."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...], init_scale: float):
        super().__init__()
        dims = (obs_dim, *hidden)
        layers: list[nn.Module] = []
        for a, b in pairwise(dims):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(dims[-1], action_dim)
        nn.init.normal_(self.head.weight, 0.0, init_scale)  # a near-zero first action: the default pose
        nn.init.zeros_(self.head.bias)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.head(self.body(obs)))


class ScaledActor(nn.Module):
    """The actor in the task's raw action units (what the env steps with and the ONNX policy outputs)."""

    def __init__(self, actor: Actor, bound: float):
        super().__init__()
        self.actor, self.bound = actor, float(bound)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor(obs) * self.bound


def project(probs: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor, support: torch.Tensor
            ) -> torch.Tensor:
    """C51's projection: the distributions ``probs`` (…, batch, atoms) over ``support``, shifted to
    reward + discount · z, clamped to the support's range and split between each shifted atom's two neighbours.
    Mass is conserved (a shifted atom landing exactly on an atom goes to it whole)."""
    v_min, v_max, atoms = float(support[0]), float(support[-1]), support.numel()
    delta = (v_max - v_min) / (atoms - 1)
    target = (reward[:, None] + discount[:, None] * support).clamp(v_min, v_max)  # (batch, atoms)
    b = (target - v_min) / delta
    lower, upper = b.floor().long(), b.ceil().long()
    exact = lower == upper  # both weights below would be 0: move one neighbour out so the mass lands whole
    lower = torch.where(exact & (upper > 0), lower - 1, lower)
    upper = torch.where(exact & (lower == upper), upper + 1, upper)
    out = torch.zeros_like(probs)
    shape = probs.shape
    out.scatter_add_(-1, lower.expand(shape), probs * (upper - b))
    out.scatter_add_(-1, upper.expand(shape), probs * (b - lower))
    return out


def pessimistic(logits: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """Clipped double-Q for distributions: per sample, the distribution (batch, atoms) of whichever critic of
    ``logits`` (critics, batch, atoms) has the lower expected value."""
    probs = torch.softmax(logits, -1)
    lower = (probs * support).sum(-1).argmin(0)  # (batch,)
    return probs.gather(0, lower[None, :, None].expand(1, *probs.shape[1:]))[0]


class FastTD3:
    def __init__(self, cfg: FastTD3Cfg, actor_dim: int, critic_dim: int, action_dim: int, num_envs: int,
                 seed: int = 0, device: str = "cpu"):
        self.cfg, self.device = cfg, device
        self.generator = torch.Generator(device=device).manual_seed(seed)
        torch.manual_seed(seed)  # the networks' initial weights
        self.actor = Actor(actor_dim, action_dim, cfg.actor_hidden, cfg.init_scale).to(device)
        self.critics = build_critics(critic_dim, action_dim, cfg.critic_hidden, num=2, norm=cfg.critic_norm,
                                     outputs=cfg.num_atoms).to(device)
        self.target = copy.deepcopy(self.critics).requires_grad_(False)
        self.actor_norm = EmpiricalNormalization(actor_dim).to(device)
        self.critic_norm = EmpiricalNormalization(critic_dim).to(device)
        self.support = torch.linspace(cfg.v_min, cfg.v_max, cfg.num_atoms, device=device)
        self.actor_opt = torch.optim.AdamW(self.actor.parameters(), lr=cfg.actor_lr, weight_decay=cfg.weight_decay)
        self.critic_opt = torch.optim.AdamW(self.critics.parameters(), lr=cfg.critic_lr,
                                            weight_decay=cfg.weight_decay)
        self.noise_std = self._draw_std(num_envs)
        self.updates = 0

    def _draw_std(self, n: int) -> torch.Tensor:
        cfg = self.cfg
        u = torch.rand((n, 1), generator=self.generator, device=self.device)
        return cfg.std_min + (cfg.std_max - cfg.std_min) * u

    # -- acting --------------------------------------------------------------------------------------------
    @torch.no_grad()
    def explore(self, actor_obs: torch.Tensor, new_episode: torch.Tensor | None = None) -> torch.Tensor:
        """Unit actions with exploration noise for raw observations (num_envs, actor_dim); ``new_episode``
        (num_envs,) bool: the envs whose noise std is drawn afresh."""
        if new_episode is not None and bool(new_episode.any()):
            self.noise_std = torch.where(new_episode[:, None], self._draw_std(len(new_episode)), self.noise_std)
        action = self.actor(self.actor_norm(actor_obs))
        noise = torch.randn(action.shape, generator=self.generator, device=self.device) * self.noise_std
        return (action + noise).clamp(-1.0, 1.0)

    def observe(self, actor_obs: torch.Tensor, critic_obs: torch.Tensor) -> None:
        """Move the running normalizers with one step's observations (every env's)."""
        self.actor_norm.update(actor_obs)
        self.critic_norm.update(critic_obs)

    # -- learning ------------------------------------------------------------------------------------------
    def value(self, logits: torch.Tensor) -> torch.Tensor:
        return (torch.softmax(logits, -1) * self.support).sum(-1)

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """One critic step (and, every ``policy_frequency``-th, one actor step) on a sampled batch of raw
        observations; the target critics follow by ``tau``."""
        cfg = self.cfg
        with torch.no_grad():
            s, s_c = self.actor_norm(batch["actor_obs"]), self.critic_norm(batch["critic_obs"])
            s2, s2_c = self.actor_norm(batch["next_actor_obs"]), self.critic_norm(batch["next_critic_obs"])
            smoothing = (torch.randn(batch["action"].shape, generator=self.generator, device=self.device)
                         * cfg.policy_noise).clamp(-cfg.noise_clip, cfg.noise_clip)
            a2 = (self.actor(s2) + smoothing).clamp(-1.0, 1.0)
            chosen = pessimistic(self.target(s2_c, a2), self.support)
            target = project(chosen, batch["reward"], batch["discount"], self.support)
        logits = self.critics(s_c, batch["action"])
        critic_loss = -(target * torch.log_softmax(logits, -1)).sum(-1).mean(-1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        self.updates += 1
        info = {"critic_loss": float(critic_loss.detach()), "q_mean": float(self.value(logits.detach()).mean())}
        if self.updates % cfg.policy_frequency == 0:
            self.critics.requires_grad_(False)
            q = self.value(self.critics(s_c, self.actor(s))).min(0).values
            actor_loss = -q.mean()
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_opt.step()
            self.critics.requires_grad_(True)
            info["actor_loss"] = float(actor_loss.detach())
        soft_update(self.target, self.critics, cfg.tau)
        return info

    # -- checkpoints ---------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "actor_state_dict": self.actor.state_dict(), "critic_state_dict": self.critics.state_dict(),
            "target_state_dict": self.target.state_dict(), "actor_normalizer": self.actor_norm.state_dict(),
            "critic_normalizer": self.critic_norm.state_dict(), "actor_optimizer": self.actor_opt.state_dict(),
            "critic_optimizer": self.critic_opt.state_dict(), "noise_std": self.noise_std.clone(),
            "updates": self.updates, "fasttd3_cfg": dataclasses.asdict(self.cfg),
        }

    def load_state_dict(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor_state_dict"])
        self.critics.load_state_dict(state["critic_state_dict"])
        self.target.load_state_dict(state["target_state_dict"])
        self.actor_norm.load_state_dict(state["actor_normalizer"])
        self.critic_norm.load_state_dict(state["critic_normalizer"])
        self.actor_opt.load_state_dict(state["actor_optimizer"])
        self.critic_opt.load_state_dict(state["critic_optimizer"])
        if state["noise_std"].shape == self.noise_std.shape:  # another --num-envs: keep the fresh draws
            self.noise_std = state["noise_std"].to(self.device)
        self.updates = int(state["updates"])


def checkpoint_cfg(data: dict) -> FastTD3Cfg:
    """The settings a checkpoint was trained with (tuples restored from the lists torch.save keeps)."""
    raw = dict(data["fasttd3_cfg"])
    for name in ("actor_hidden", "critic_hidden"):
        raw[name] = tuple(raw[name])
    return FastTD3Cfg(**raw)


def policy_parts(data: dict) -> tuple[EmpiricalNormalization, ScaledActor]:
    """A checkpoint's observation normalizer and actor in raw action units (what ``robot-rl export`` bakes into
    the ONNX graph), frozen."""
    cfg = checkpoint_cfg(data)
    norm_state = data["actor_normalizer"]
    obs_dim = norm_state["_mean"].shape[-1]
    action_dim = data["actor_state_dict"]["head.bias"].shape[0]
    actor = Actor(obs_dim, action_dim, cfg.actor_hidden, cfg.init_scale)
    actor.load_state_dict(data["actor_state_dict"])
    normalizer = EmpiricalNormalization(obs_dim)
    normalizer.load_state_dict(norm_state)
    scaled = ScaledActor(actor, cfg.action_bound)
    for module in (normalizer, scaled):
        module.eval().requires_grad_(False)
    return normalizer, scaled


def inference_policy(data: dict) -> nn.Module:
    """The checkpoint's deterministic policy: raw actor observation → raw action."""
    return nn.Sequential(*policy_parts(data))
