"""Soft actor-critic over the unit residual, with LayerNorm critics and target networks (RLPD-style) or
BatchNorm critics without target networks (CrossQ).

One :meth:`SAC.update` is one gradient step of the critics and (past ``actor_warmup_updates``) of the actor
and the temperature. Targets use the n-step reward and discount the replay buffer stored:

    y = R + discount · (min_k Q̄_k(s', a') − α log π(a'|s')),    a' ~ π(·|s')

CrossQ computes Q(s, a) and Q(s', a') in ONE forward pass through the batch-normalized critics (so both
see the same batch statistics) and stops the gradient through the second half instead of keeping a
target copy.
"""

from __future__ import annotations

import copy

import numpy as np

from robot_rl.learn.residual.config import SACCfg
from robot_rl.learn.residual.networks import build_actor, build_critics


def soft_update(trailing, source, rate: float) -> None:
    """Move ``trailing``'s parameters ``rate`` of the way to ``source``'s (Polyak averaging: target networks)."""
    import torch

    with torch.no_grad():
        for p, t in zip(source.parameters(), trailing.parameters(), strict=True):
            t.lerp_(p, rate)


class SAC:
    def __init__(self, cfg: SACCfg, state_dim: int, action_dim: int, actor_hidden: tuple[int, ...], seed: int = 0):
        import torch

        self.torch = torch
        torch.manual_seed(seed)
        self.cfg = cfg
        self.actor = build_actor(state_dim, action_dim, actor_hidden, cfg.init_log_std)
        self.critics = build_critics(state_dim, action_dim, cfg.critic_hidden, cfg.num_critics, cfg.critic_norm,
                                     cfg.batchnorm_momentum)
        self.crossq = cfg.critic_norm == "batchnorm"
        self.target = None
        if not self.crossq:
            self.target = copy.deepcopy(self.critics)
            self.target.requires_grad_(False)
        self.anchor = None  # a frozen copy of the actor a run started from (set_anchor), for anchor_penalty
        self.log_alpha = torch.tensor(float(np.log(cfg.init_alpha)), requires_grad=True)
        self.target_entropy = cfg.target_entropy_per_dim * action_dim
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.learning_rate)
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), lr=cfg.learning_rate)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.temperature_lr)
        self.updates = 0

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.exp().item())

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        torch = self.torch
        s = torch.from_numpy(batch["state"])
        a = torch.from_numpy(batch["action"])
        r = torch.from_numpy(batch["reward"]) * (self.cfg.reward_scale or 1.0)
        s2 = torch.from_numpy(batch["next_state"])
        discount = torch.from_numpy(batch["discount"])

        with torch.no_grad():
            a2, bonus2 = self._next_action(s2)
        if self.crossq:
            self.critics.train()
            q_both = self.critics(torch.cat([s, s2]), torch.cat([a, a2]))
            q, q_next = q_both[:, : len(s)], q_both[:, len(s) :].detach()
        else:
            q = self.critics(s, a)
            with torch.no_grad():
                q_next = self.target(s2, a2)
        y = r + discount * (q_next.min(dim=0).values + bonus2)
        critic_loss = ((q - y.detach()) ** 2).mean(dim=1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        self.updates += 1
        info = {"critic_loss": float(critic_loss.item()), "q_mean": float(q.mean().item())}

        if self.updates > self.cfg.actor_warmup_updates:
            if self.crossq:
                self.critics.eval()  # the actor's batches must not move the running statistics
            self.critics.requires_grad_(False)
            info |= self._actor_step(s)
            self.critics.requires_grad_(True)

        if self.target is not None:
            soft_update(self.target, self.critics, self.cfg.tau)
        return info

    def _next_action(self, s2):
        """The target's next action a' and the term added to min Q̄(s', a'): SAC's −α log π(a'|s')."""
        a2, logp2 = self.actor.sample(s2)
        return a2, -self.log_alpha.exp() * logp2

    def set_anchor(self) -> None:
        """Freeze a copy of the actor as it is now (a run's start, e.g. a residual trained in a calibrated sim):
        ``anchor_penalty`` keeps the residual near it wherever the critics' gradient does not say otherwise."""
        self.anchor = copy.deepcopy(self.actor)
        self.anchor.requires_grad_(False)

    def _residual_penalty(self, action, s=None, q=None):
        """The actor loss's pulls: towards 0 (``residual_penalty``, on ``action``) and towards the anchor's
        deterministic residual (``anchor_penalty``, on this actor's deterministic residual at states ``s``; with
        ``anchor_q_scaled``, × the mean |``q``|, the actor's Q values on the batch)."""
        torch = self.torch
        out = self.cfg.residual_penalty * action.pow(2).sum(-1).mean() if self.cfg.residual_penalty else 0.0
        if self.anchor is not None and self.cfg.anchor_penalty and s is not None:
            with torch.no_grad():
                ref = torch.tanh(self.anchor(s)[0])
            weight = self.cfg.anchor_penalty
            if self.cfg.anchor_q_scaled and q is not None:
                weight = weight * q.detach().abs().mean()
            out = out + weight * (torch.tanh(self.actor(s)[0]) - ref).pow(2).sum(-1).mean()
        return out

    def _actor_step(self, s) -> dict[str, float]:
        """One step of the actor (on critics that hold still) and of the temperature."""
        alpha = self.log_alpha.exp().detach()
        action, logp = self.actor.sample(s)
        q_pi = self.critics(s, action).min(dim=0).values
        actor_loss = (alpha * logp - q_pi).mean() + self._residual_penalty(action, s, q_pi)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_opt.step()
        return {"actor_loss": float(actor_loss.item()), "entropy": float(-logp.mean().item()), "alpha": self.alpha}

    # -- checkpoints ---------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "actor": self.actor.state_dict(), "critics": self.critics.state_dict(),
            "target": None if self.target is None else self.target.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(), "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(), "alpha_opt": self.alpha_opt.state_dict(),
            "updates": self.updates, "critic_norm": self.cfg.critic_norm,
            "anchor": None if self.anchor is None else self.anchor.state_dict(),
        }

    def load_weights(self, state: dict, source: str = "checkpoint") -> None:
        """The networks and the temperature of ``state`` (a :meth:`state_dict`), not the optimizers or counts:
        a warm start (e.g. from a run in sim) that then learns as a fresh run would."""
        if state.get("algorithm", "sac") != "sac":  # checkpoints of the TD3 learner (removed) carried this key
            raise ValueError(f"{source}: trained by {state['algorithm']!r}, this run uses SAC")
        if state.get("critic_norm") != self.cfg.critic_norm:
            raise ValueError(f"{source}: critics use {state.get('critic_norm')!r} normalization, this run "
                             f"{self.cfg.critic_norm!r}")
        try:
            self.actor.load_state_dict(state["actor"])
            self.critics.load_state_dict(state["critics"])
            if self.target is not None:  # a CrossQ checkpoint has none: its critics are the targets' start
                self.target.load_state_dict(state["target"] if state["target"] is not None else state["critics"])
        except RuntimeError as exc:
            raise ValueError(f"{source}: network shapes differ from this run's ({str(exc).splitlines()[0]})") from None
        with self.torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])

    def load_state_dict(self, state: dict, source: str = "checkpoint") -> None:
        self.load_weights(state, source)
        if state.get("anchor") is not None:  # a resumed run keeps the start it is anchored to
            self.set_anchor()
            self.anchor.load_state_dict(state["anchor"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        self.alpha_opt.load_state_dict(state["alpha_opt"])
        self.updates = int(state["updates"])
