"""How much of the gap a residual bounded to α could recover at all, estimated from a policy known to recover it:
continued PPO's full-policy fine-tune, its correction of the base clipped to α (``bench_residual.py --phase
ceiling``).

    a = a_base(o) + clip(a_other(o) − a_base(o), −α, α)     per joint, raw action units

Both policies read the same observation, so the clipped sum is a policy a bounded residual could represent
exactly (the residual sees o and a_base(o)). Its score at α is a lower bound on the best residual at that bound
(the best residual need not be PPO's correction clipped), and at α = ∞ it is the other policy itself. Where the
clipped policy scores far below the unclipped one, the bound, not the learner, caps what the residual can reach;
where it scores near it, the bound leaves room and the shortfall is the learner's.
"""

from __future__ import annotations

import numpy as np


class BoundedCorrection:
    """A ``Policy``: ``base`` plus ``other``'s correction of it clipped to ``alpha``; counts how often the clip acts."""

    def __init__(self, base, other, alpha: float):
        if base.contract.num_actions != other.contract.num_actions or base.contract.obs_dim != other.contract.obs_dim:
            raise ValueError("the two policies take different observations or give different actions: "
                             f"{base.contract.obs_dim}→{base.contract.num_actions} against "
                             f"{other.contract.obs_dim}→{other.contract.num_actions}")
        self.base, self.other, self.alpha, self.contract = base, other, float(alpha), base.contract
        self.clipped = 0  # joint-ticks where the other policy's correction exceeded the bound
        self.total = 0
        self.correction_abs = 0.0  # Σ |a_other − a_base| (raw units), for the mean size of the correction

    def _combine(self, a_base: np.ndarray, a_other: np.ndarray) -> np.ndarray:
        d = np.asarray(a_other, np.float32) - np.asarray(a_base, np.float32)
        self.clipped += int((np.abs(d) > self.alpha).sum())
        self.total += d.size
        self.correction_abs += float(np.abs(d).sum())
        return (a_base + np.clip(d, -self.alpha, self.alpha)).astype(np.float32)

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self._combine(self.base.act(obs), self.other.act(obs))

    def act_batch(self, obs: np.ndarray) -> np.ndarray:
        return self._combine(self.base.act_batch(obs), self.other.act_batch(obs))

    def clip_stats(self) -> dict[str, float]:
        n = max(self.total, 1)
        return {"clipped_share": self.clipped / n, "correction_mean_abs": self.correction_abs / n}


def bounded_ceiling(base, other, fractions: list[float], evaluate) -> dict[str, dict]:
    """``evaluate(policy) -> score dict`` of base + ``other``'s correction clipped to each fraction of the
    contract's action clip (the residual's bound, ``ResidualCfg.fraction``); ``inf``: unclipped."""
    out = {}
    for fraction in fractions:
        alpha = fraction * float(base.contract.action.clip)
        policy = BoundedCorrection(base, other, alpha)
        score = evaluate(policy)
        out[f"{fraction:g}"] = score | policy.clip_stats() | {"fraction": fraction, "alpha_raw": alpha}
        print(f"[ceiling] α = {fraction:g} × clip: return {score['return']:.3f}, clip acted on "
              f"{policy.clip_stats()['clipped_share']:.0%} of joint-ticks", flush=True)
    return out
