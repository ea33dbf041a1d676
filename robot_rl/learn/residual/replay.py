"""Replay: n-step folding of the actor's 1-step stream, ring buffers, and prior + online symmetric sampling.

The actor sends 1-step transitions in episode order. :class:`NStepFolder` turns them into n-step ones,

    (s_t, a_t, R = Σ_{k<m} γᵏ r_{t+k}, s_{t+m}, discount = γᵐ · (1 − terminal))    with m ≤ n,

cutting the sum at the episode's end: a terminal (the task failed or succeeded for good) bootstraps
nothing; a truncation (time limit, safety stop, operator stop) bootstraps from the last state seen.

:class:`MixedSampler` draws each batch half from the online buffer and half from the prior buffer (RLPD's
symmetric sampling; the share is configurable). The prior holds offline data — a previous session's
buffer, sim rollouts, demonstrations — and, as in HIL-SERL, every transition in which a person intervened,
so the corrections a person made keep being replayed even when they are a small part of the online data.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FIELDS = ("state", "action", "reward", "next_state", "discount", "intervention")


@dataclass
class Step:
    """One control tick's transition as the actor reports it."""

    state: np.ndarray
    action: np.ndarray  # the unit residual actually applied (a person's correction, mapped, if intervened)
    reward: float
    next_state: np.ndarray
    terminal: bool  # the episode ended in an absorbing state: no bootstrap
    end: bool  # the episode ended (terminal, time limit, safety stop, operator stop)
    intervention: bool


class NStepFolder:
    def __init__(self, n: int, gamma: float):
        self.n, self.gamma = n, gamma
        self._pending: deque[Step] = deque()

    def add(self, step: Step) -> list[dict[str, np.ndarray | float]]:
        """Fold ``step`` in; returns the n-step transitions that became complete (0, 1, or all at an end)."""
        self._pending.append(step)
        out = []
        if len(self._pending) == self.n:
            out.append(self._fold())
            self._pending.popleft()
        if step.end:
            while self._pending:
                out.append(self._fold())
                self._pending.popleft()
        return out

    def _fold(self) -> dict[str, np.ndarray | float]:
        first, ret, discount = self._pending[0], 0.0, 1.0
        last = first
        for step in self._pending:
            ret += discount * step.reward
            discount *= self.gamma
            last = step
        return {"state": first.state, "action": first.action, "reward": ret, "next_state": last.next_state,
                "discount": 0.0 if last.terminal else discount, "intervention": float(first.intervention)}


class ReplayBuffer:
    """A ring of n-step transitions in float32 arrays."""

    def __init__(self, capacity: int, state_dim: int, action_dim: int):
        if capacity < 1:
            raise ValueError(f"replay capacity must be ≥ 1, got {capacity}")
        self.capacity, self.state_dim, self.action_dim = capacity, state_dim, action_dim
        self.data = {
            "state": np.zeros((capacity, state_dim), np.float32),
            "action": np.zeros((capacity, action_dim), np.float32),
            "reward": np.zeros(capacity, np.float32),
            "next_state": np.zeros((capacity, state_dim), np.float32),
            "discount": np.zeros(capacity, np.float32),
            "intervention": np.zeros(capacity, np.float32),
        }
        self.added = 0  # ever; the ring holds the newest min(added, capacity)

    def __len__(self) -> int:
        return min(self.added, self.capacity)

    def add(self, item: dict[str, np.ndarray | float]) -> None:
        i = self.added % self.capacity
        for name in FIELDS:
            self.data[name][i] = item[name]
        self.added += 1

    def sample(self, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        if len(self) == 0:
            raise ValueError("cannot sample an empty replay buffer")
        idx = rng.integers(0, len(self), size=n)
        return {name: arr[idx] for name, arr in self.data.items()}

    def save(self, path: str | Path, *, gamma: float, n_step: int) -> Path:
        """Write the held transitions (oldest first) with the γ and n they were folded with."""
        path = Path(path)
        n = len(self)
        order = np.arange(n) if self.added <= self.capacity else (np.arange(n) + self.added) % self.capacity
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, gamma=gamma, n_step=n_step, **{k: v[order] for k, v in self.data.items()})
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path, *, gamma: float, n_step: int, capacity: int | None = None) -> ReplayBuffer:
        """A buffer from :meth:`save`'s file; refuses one folded with another γ or n (its returns would lie)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"prior data {path} does not exist")
        try:
            with np.load(path) as z:
                data = {k: z[k] for k in (*FIELDS, "gamma", "n_step")}
        except (KeyError, ValueError, OSError) as exc:
            raise ValueError(f"prior data {path} is not a residual replay file ({exc})") from None
        if not (np.isclose(float(data["gamma"]), gamma) and int(data["n_step"]) == n_step):
            raise ValueError(f"prior data {path} was folded with gamma {float(data['gamma'])}, n_step "
                             f"{int(data['n_step'])}; this run uses gamma {gamma}, n_step {n_step}")
        n = len(data["reward"])
        buf = cls(max(capacity or n, n, 1), data["state"].shape[1], data["action"].shape[1])
        for name in FIELDS:
            buf.data[name][:n] = data[name]
        buf.added = n
        return buf


class MixedSampler:
    """Batches of ``prior_fraction`` prior and the rest online (all online while the prior is empty)."""

    def __init__(self, online: ReplayBuffer, prior: ReplayBuffer, prior_fraction: float):
        if (online.state_dim, online.action_dim) != (prior.state_dim, prior.action_dim):
            raise ValueError(f"prior data has state/action widths {(prior.state_dim, prior.action_dim)}, this "
                             f"policy's residual has {(online.state_dim, online.action_dim)}")
        self.online, self.prior, self.prior_fraction = online, prior, prior_fraction

    def sample(self, rng: np.random.Generator, batch: int) -> dict[str, np.ndarray]:
        n_prior = round(batch * self.prior_fraction) if len(self.prior) else 0
        if len(self.online) == 0:
            n_prior = batch
        online = self.online.sample(rng, batch - n_prior) if batch - n_prior else None
        prior = self.prior.sample(rng, n_prior) if n_prior else None
        if online is None:
            return prior
        if prior is None:
            return online
        return {k: np.concatenate([online[k], prior[k]]) for k in online}


class StepCodec:
    """A :class:`Step` as one float32 row of the loop → learner ring, and back.

    Row: state (D) | action (A) | reward | next_state (D) | terminal | end | intervention.
    """

    def __init__(self, state_dim: int, action_dim: int):
        self.state_dim, self.action_dim = state_dim, action_dim
        d, a = state_dim, action_dim
        self.width = 2 * d + a + 4
        self._action = slice(d, d + a)
        self._next = slice(d + a + 1, 2 * d + a + 1)
        self._row = np.zeros(self.width, np.float32)  # the loop packs into this, then the ring copies it

    def pack(self, state: np.ndarray, action: np.ndarray, reward: float, next_state: np.ndarray, terminal: bool,
             end: bool, intervention: bool) -> np.ndarray:
        """The codec-owned row (overwritten by the next call)."""
        row, d, a = self._row, self.state_dim, self.action_dim
        row[:d] = state
        row[self._action] = action
        row[d + a] = reward
        row[self._next] = next_state
        row[-3:] = (terminal, end, intervention)
        return row

    def unpack(self, row: np.ndarray) -> Step:
        d, a = self.state_dim, self.action_dim
        return Step(state=row[:d].copy(), action=row[self._action].copy(), reward=float(row[d + a]),
                    next_state=row[self._next].copy(), terminal=bool(row[-3]), end=bool(row[-2]),
                    intervention=bool(row[-1]))
