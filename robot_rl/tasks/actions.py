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

    def decoder(self, default_q: np.ndarray) -> ActionDecoder:
        """:meth:`decode` into preallocated targets for one default pose (the deploy tick's)."""
        return ActionDecoder(self, default_q)

    def encode(self, q_target: np.ndarray, default_q: np.ndarray) -> np.ndarray:
        """The raw action that decodes to ``q_target`` (inside the clip range; beyond it, the clipped one's)."""
        return np.clip((np.asarray(q_target) - default_q) / self.scale, -self.clip, self.clip)

    def max_step(self, max_target_rate_rad_s: float, period_s: float) -> float:
        """The largest change of the raw action per policy step that moves targets no faster than
        ``max_target_rate_rad_s`` (the safety chain's rate limit, which acts on targets)."""
        return max_target_rate_rad_s * period_s / self.scale


class ActionDecoder:
    """:meth:`JointPositionAction.decode` for one default pose, without allocating: every constant is an array of
    the pose's shape, made once, so each of the four numpy calls runs numpy's fast loop (a Python float operand
    costs like a broadcast, ≈ twice as much); ``np.clip`` is its two ufuncs (NaN propagates the same way). The
    same operations on the same values, so the same targets to the bit."""

    def __init__(self, action: JointPositionAction, default_q: np.ndarray):
        default = np.array(default_q, dtype=np.float64)
        default.setflags(write=False)
        self.action, self.default_q = action, default
        self._low, self._high = np.full(default.shape, -action.clip), np.full(default.shape, action.clip)
        self._scale = np.full(default.shape, action.scale)

    def decode_into(self, action: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``default_q + scale · clip(action, −clip, clip)`` into ``out`` (float64, the pose's shape); for a float64
        ``action`` (the controller's copy of the raw one) the values of :meth:`JointPositionAction.decode`."""
        np.maximum(action, self._low, out=out)
        np.minimum(out, self._high, out=out)
        np.multiply(out, self._scale, out)
        return np.add(self.default_q, out, out)
