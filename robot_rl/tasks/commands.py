"""Task commands (what the operator asks for): names and sampling ranges, in the order the policy sees."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CommandSpec:
    names: tuple[str, ...]  # e.g. ("lin_vel_x", "lin_vel_y", "ang_vel_z")
    ranges: tuple[tuple[float, float], ...]  # (low, high) per name; training samples uniformly

    def __post_init__(self) -> None:
        if len(self.names) != len(self.ranges):
            raise ValueError(f"commands: {len(self.names)} names but {len(self.ranges)} ranges")
        for name, (lo, hi) in zip(self.names, self.ranges, strict=True):
            if lo > hi:
                raise ValueError(f"command {name!r}: range [{lo}, {hi}] out of order")

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def low(self) -> np.ndarray:
        return np.array([r[0] for r in self.ranges])

    @property
    def high(self) -> np.ndarray:
        return np.array([r[1] for r in self.ranges])

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, size=(n, self.size))

    def clip(self, command: np.ndarray) -> np.ndarray:
        """Operator commands outside the trained range are clamped into it (the policy never saw them)."""
        return np.clip(command, self.low, self.high)
