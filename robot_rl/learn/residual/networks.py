"""The residual's networks: the SAC actor and critics (torch, in the learner) and the actor's forward pass in
numpy (in the control loop).

The control loop never runs torch: for a batch of one, torch's per-call overhead costs several times what
the same small MLP costs in numpy, and importing torch into the loop process would also bring its thread
pool. Learner and loop share one *flat float32 vector* per actor, laid out by :func:`actor_layout`; the
learner publishes it, the loop copies it into :class:`NumpyActor`, whose weights are views into it.

Actor: state (observation ‖ base action) → ReLU MLP → mean and log σ
of a tanh-squashed Gaussian over the unit residual r ∈ (−1, 1)ⁿ; the loop scales r by α (see
:mod:`robot_rl.learn.residual.config`). The mean head starts at ≈ 0, so a fresh residual leaves the base
policy's behaviour unchanged.

Critics: ReLU MLPs with LayerNorm after every hidden layer (RLPD), or
BatchNorm on the input and after every hidden layer (CrossQ, which drops the target networks), or neither
(FastTD3's distributional critics, ``robot_rl.learn.offpolicy``, which use this builder too).
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np

LOG_STD_MIN, LOG_STD_MAX = -5.0, 1.0

Layout = tuple[tuple[str, tuple[int, ...]], ...]


def actor_layout(state_dim: int, action_dim: int, hidden: tuple[int, ...]) -> Layout:
    """(name, shape) of every actor tensor, in flat-vector order. Weights are (out, in) as in torch."""
    dims = (state_dim, *hidden)
    out: list[tuple[str, tuple[int, ...]]] = []
    for i, (a, b) in enumerate(pairwise(dims)):
        out += [(f"hidden.{i}.weight", (b, a)), (f"hidden.{i}.bias", (b,))]
    h = dims[-1]
    out += [("mean.weight", (action_dim, h)), ("mean.bias", (action_dim,)),
            ("log_std.weight", (action_dim, h)), ("log_std.bias", (action_dim,))]
    return tuple(out)


def layout_size(layout: Layout) -> int:
    return sum(math.prod(shape) for _, shape in layout)


def unflatten(flat: np.ndarray, layout: Layout) -> dict[str, np.ndarray]:
    """Views (no copies) into ``flat``, one per tensor of ``layout``."""
    if flat.shape != (layout_size(layout),):
        raise ValueError(f"flat actor parameters have shape {flat.shape}, the layout needs ({layout_size(layout)},)")
    views, at = {}, 0
    for name, shape in layout:
        n = math.prod(shape)
        views[name] = flat[at : at + n].reshape(shape)
        at += n
    return views


class NumpyActor:
    """The actor's deterministic and stochastic outputs for one state, allocation-free after construction."""

    def __init__(self, state_dim: int, action_dim: int, hidden: tuple[int, ...]):
        self.state_dim, self.action_dim, self.hidden = state_dim, action_dim, tuple(hidden)
        self.layout = actor_layout(state_dim, action_dim, self.hidden)
        self.flat = np.zeros(layout_size(self.layout), dtype=np.float32)
        p = unflatten(self.flat, self.layout)
        self._layers = [(p[f"hidden.{i}.weight"], p[f"hidden.{i}.bias"], np.zeros(h, dtype=np.float32))
                        for i, h in enumerate(self.hidden)]
        self._mean_w, self._mean_b = p["mean.weight"], p["mean.bias"]
        self._std_w, self._std_b = p["log_std.weight"], p["log_std.bias"]
        self._x = np.zeros(state_dim, dtype=np.float32)
        self.mean = np.zeros(action_dim, dtype=np.float32)  # pre-tanh
        self.log_std = np.zeros(action_dim, dtype=np.float32)

    def load(self, flat: np.ndarray) -> None:
        np.copyto(self.flat, flat)

    def forward(self, state: np.ndarray) -> None:
        """Fill ``mean`` and ``log_std`` (pre-tanh) for ``state`` of shape (state_dim,)."""
        np.copyto(self._x, state, casting="same_kind")
        x = self._x
        with np.errstate(over="ignore", invalid="ignore"):  # bad weights give inf/NaN: the caller bounds them
            for w, b, out in self._layers:
                np.matmul(w, x, out=out)
                out += b
                np.maximum(out, 0.0, out=out)
                x = out
            np.matmul(self._mean_w, x, out=self.mean)
            self.mean += self._mean_b
            np.matmul(self._std_w, x, out=self.log_std)
            self.log_std += self._std_b
            np.clip(self.log_std, LOG_STD_MIN, LOG_STD_MAX, out=self.log_std)


# --------------------------------------------------------------------------------------------------------
# torch side (learner process only)


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("residual fine-tuning needs torch: pip install 'robot-rl[train]'") from None
    return torch


def build_actor(state_dim: int, action_dim: int, hidden: tuple[int, ...], init_log_std: float):
    torch = _torch()
    nn = torch.nn

    class Actor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            dims = (state_dim, *hidden)
            self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(dims))
            self.mean = nn.Linear(dims[-1], action_dim)
            self.log_std = nn.Linear(dims[-1], action_dim)
            with torch.no_grad():  # residual ≈ 0 and a set exploration noise at the start
                self.mean.weight.uniform_(-1e-3, 1e-3)
                self.mean.bias.zero_()
                self.log_std.weight.uniform_(-1e-3, 1e-3)
                self.log_std.bias.fill_(init_log_std)
            self.layout = actor_layout(state_dim, action_dim, tuple(hidden))

        def forward(self, state):
            x = state
            for layer in self.hidden:
                x = torch.relu(layer(x))
            return self.mean(x), self.log_std(x).clamp(LOG_STD_MIN, LOG_STD_MAX)

        def sample(self, state):
            """A reparameterized tanh-Gaussian sample and its log-probability (summed over dimensions)."""
            mean, log_std = self(state)
            std = log_std.exp()
            pre = mean + std * torch.randn_like(mean)
            action = torch.tanh(pre)
            log_prob = (-0.5 * ((pre - mean) / std) ** 2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
            # log|d tanh/dx| = 2 (log 2 − x − softplus(−2x)), the numerically stable form
            log_prob = log_prob - (2 * (math.log(2) - pre - torch.nn.functional.softplus(-2 * pre))).sum(-1)
            return action, log_prob

        def flat_params(self) -> np.ndarray:
            named = dict(self.named_parameters())
            return np.concatenate([named[name].detach().cpu().reshape(-1).numpy() for name, _ in self.layout]
                                  ).astype(np.float32)

        def load_flat(self, flat: np.ndarray) -> None:
            named = dict(self.named_parameters())
            with torch.no_grad():
                for name, view in unflatten(np.asarray(flat, dtype=np.float32), self.layout).items():
                    named[name].copy_(torch.from_numpy(np.array(view)))

    return Actor()


CRITIC_NORMS = ("layernorm", "batchnorm", "none")


def build_critics(state_dim: int, action_dim: int, hidden: tuple[int, ...], num: int, norm: str,
                  bn_momentum: float = 0.01, outputs: int = 1):
    """An ensemble of ``num`` Q networks; ``forward(state, action)`` returns (num, batch), or (num, batch,
    outputs) for ``outputs`` > 1 (a distributional critic's logits over its value atoms: FastTD3's). ``norm``
    "none": plain ReLU MLPs (the FastTD3 recipe's critics)."""
    if norm not in CRITIC_NORMS:
        raise ValueError(f"critic norm must be one of {', '.join(CRITIC_NORMS)}, got {norm!r}")
    torch = _torch()
    nn = torch.nn

    def one() -> nn.Module:
        layers: list[nn.Module] = []
        dims = (state_dim + action_dim, *hidden)
        if norm == "batchnorm":
            layers.append(nn.BatchNorm1d(dims[0], momentum=bn_momentum))
        for a, b in pairwise(dims):
            layers.append(nn.Linear(a, b))
            if norm != "none":
                layers.append(nn.LayerNorm(b) if norm == "layernorm" else nn.BatchNorm1d(b, momentum=bn_momentum))
            layers.append(nn.ReLU())
        layers.append(nn.Linear(dims[-1], outputs))
        return nn.Sequential(*layers)

    class Critics(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.members = nn.ModuleList(one() for _ in range(num))

        def forward(self, state, action):
            x = torch.cat([state, action], dim=-1)
            out = torch.stack([m(x) for m in self.members])
            return out.squeeze(-1) if outputs == 1 else out

    return Critics()
