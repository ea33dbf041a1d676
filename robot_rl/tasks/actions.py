"""Action decoding: raw policy output → joint position targets. Defined once; the contract records it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class JointPositionAction:
    """q_target = default_pose + scale · clip(action, −clip, clip).

    The offset is always the spec's default pose, so a policy's zero action means "stand/hold the
    default pose" on every robot and in every simulator.
    """

    scale: float
    clip: float

    def decode(self, action: np.ndarray, default_q: np.ndarray) -> np.ndarray:
        return default_q + self.scale * np.clip(action, -self.clip, self.clip)

    def decode_into(self, action: np.ndarray, default_q: np.ndarray, out: np.ndarray) -> np.ndarray:
        """:meth:`decode` into ``out`` (float64, shape of ``default_q``; not ``default_q``): the same operations,
        so the same values to the bit, without allocating (the deploy tick)."""
        # np.clip's Python wrapper costs more than the two ufuncs it amounts to (NaN propagates the same way).
        np.maximum(action, -self.clip, out=out)
        np.minimum(out, self.clip, out=out)
        np.multiply(out, self.scale, out=out)
        return np.add(default_q, out, out=out)

    def encode(self, q_target: np.ndarray, default_q: np.ndarray) -> np.ndarray:
        """The raw action that decodes to ``q_target`` (inside the clip range; beyond it, the clipped one's)."""
        return np.clip((np.asarray(q_target) - default_q) / self.scale, -self.clip, self.clip)

    def max_step(self, max_target_rate_rad_s: float, period_s: float) -> float:
        """The largest change of the raw action per policy step that moves targets no faster than
        ``max_target_rate_rad_s`` (the safety chain's rate limit, which acts on targets)."""
        return max_target_rate_rad_s * period_s / self.scale
