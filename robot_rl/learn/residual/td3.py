"""TD3 over the unit residual: the SAC learner's critics, buffer, CrossQ option and checkpoints, with a
deterministic actor (Fujimoto et al. 2018).

    y = R + discount · min_k Q̄_k(s', a'),    a' = tanh(μ̄(s') + clip(σ_t·ε, −c, c))   (target smoothing)
    actor: maximize mean_k Q_k(s, tanh(μ(s))), every ``actor_period`` (2) critic updates

Why offer it next to SAC: a bounded residual under SAC's entropy bonus is pushed to spread over its whole
range, and at a fixed temperature the bonus competes with small return differences; a deterministic actor
with fixed, small exploration noise puts every update into the return. The actor's gradient averages the
critics (TD3 takes the first of two; the mean is the same estimate with less variance over an ensemble);
their minimum stays in the targets.

Exploration stays where the loop already draws it: the actor's log σ head is frozen at log ``explore_std``
(weights 0), so :class:`~robot_rl.learn.residual.actor.ResidualPolicy` explores with r = tanh(μ + σ·ε) and
the weights it receives have the same layout as SAC's. With CrossQ critics there are no target networks, so
the target action comes from the current actor as well.
"""

from __future__ import annotations

import copy
import math

from robot_rl.learn.residual.config import SACCfg
from robot_rl.learn.residual.sac import SAC, soft_update


class TD3(SAC):
    def __init__(self, cfg: SACCfg, state_dim: int, action_dim: int, actor_hidden: tuple[int, ...], seed: int = 0):
        super().__init__(cfg, state_dim, action_dim, actor_hidden, seed)
        torch = self.torch
        self._set_exploration()
        self.actor.log_std.requires_grad_(False)
        self.actor_opt = torch.optim.Adam([p for p in self.actor.parameters() if p.requires_grad], lr=cfg.actor_lr)
        self.target_actor = None
        if not self.crossq:
            self.target_actor = copy.deepcopy(self.actor)
            self.target_actor.requires_grad_(False)

    def _set_exploration(self) -> None:
        """The log σ head: constant log ``explore_std`` (weights 0). Set from the settings, also after loading a
        checkpoint, so a resumed run explores with the σ it was asked for, not the one it was saved with."""
        with self.torch.no_grad():
            self.actor.log_std.weight.zero_()
            self.actor.log_std.bias.fill_(math.log(self.cfg.explore_std))

    @property
    def alpha(self) -> float:
        return 0.0  # no entropy term

    def _next_action(self, s2):
        torch = self.torch
        mean, _ = (self.target_actor if self.target_actor is not None else self.actor)(s2)
        noise = (torch.randn_like(mean) * self.cfg.target_noise).clamp(-self.cfg.target_noise_clip,
                                                                       self.cfg.target_noise_clip)
        return torch.tanh(mean + noise), 0.0

    def _actor_step(self, s) -> dict[str, float]:
        mean, _ = self.actor(s)
        action = self.torch.tanh(mean)
        q = self.critics(s, action).mean(dim=0)
        actor_loss = -q.mean() + self._residual_penalty(action, s, q)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        if self.target_actor is not None:
            soft_update(self.target_actor, self.actor, self.cfg.tau)
        return {"actor_loss": float(actor_loss.item()), "unit_residual_abs": float(action.abs().mean().item())}

    # -- checkpoints ---------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return super().state_dict() | {
            "target_actor": None if self.target_actor is None else self.target_actor.state_dict()}

    def load_weights(self, state: dict, source: str = "checkpoint") -> None:
        super().load_weights(state, source)
        self._set_exploration()
        if self.target_actor is not None:
            self.target_actor.load_state_dict(state.get("target_actor") or state["actor"])


def build_learner(cfg: SACCfg, state_dim: int, action_dim: int, actor_hidden: tuple[int, ...], seed: int = 0) -> SAC:
    """The learner ``cfg.algorithm`` names."""
    cls = TD3 if cfg.algorithm == "td3" else SAC
    return cls(cfg, state_dim, action_dim, actor_hidden, seed)
