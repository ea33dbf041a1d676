"""Action chunks → one action per tick: temporal ensembling (ACT, Zhao et al. 2023) or the first action.

A chunking policy (``PolicyContract.chunk``) predicts ``L`` actions per observation, ``a_t … a_{t+L−1}``. It is
queried every tick, so at tick t up to L chunks hold a prediction for t: the one made now (its first
action), the one made a tick ago (its second), … Temporal ensembling executes their weighted mean with
ACT's weights ``w_i = exp(−m · i)``, i = 0 the oldest prediction; right after a reset fewer chunks exist
and only those are averaged. ``first_action`` executes the newest chunk's first action (receding horizon).

Hot path: the ring of the last L chunks, the weights and the gather indices are allocated up front.
"""

from __future__ import annotations

import numpy as np

from robot_rl.policy.contract import ChunkContract


class ChunkConsumer:
    """Turns the chunk a policy returns each tick into the tick's action, as ``chunk.consume`` says."""

    def __init__(self, chunk: ChunkContract, num_actions: int):
        self.chunk = chunk
        self.length = length = chunk.length
        self.ensemble = chunk.consume == "temporal_ensemble" and length > 1
        self._ring = np.zeros((length, length, num_actions))  # slot s: the chunk made at a tick ≡ s (mod L)
        self._out = np.zeros(num_actions)
        ages = np.arange(length)
        # At tick t the chunk made `age` ticks ago sits in slot (t − age) mod L; its prediction for t is its
        # element `age`. Rows: t mod L.
        self._slots = (np.arange(length)[:, None] - ages[None, :]) % length
        self._ages = ages
        # Weights by age for n available chunks: the oldest (age n − 1) has i = 0.
        self._weights = [np.exp(-chunk.ensemble_m * (n - 1 - ages[:n])) for n in range(1, length + 1)]
        self._weights = [w / w.sum() for w in self._weights]
        self._gather = np.zeros((length, num_actions))
        self.ticks = 0

    def reset(self) -> None:
        """Forget every chunk: the next tick's action is that tick's prediction alone."""
        self._ring.fill(0.0)
        self.ticks = 0

    def step(self, chunk: np.ndarray) -> np.ndarray:
        """This tick's (L, num_actions) chunk → this tick's action (a consumer-owned (num_actions,) array)."""
        if not self.ensemble:
            np.copyto(self._out, chunk[0])
            self.ticks += 1
            return self._out
        row = self.ticks % self.length
        self._ring[row] = chunk
        n = min(self.ticks + 1, self.length)
        gather = self._gather[:n]
        np.copyto(gather, self._ring[self._slots[row, :n], self._ages[:n]])
        np.matmul(self._weights[n - 1], gather, out=self._out)
        self.ticks += 1
        return self._out
