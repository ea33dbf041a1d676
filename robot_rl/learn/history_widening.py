"""Give a trained policy a longer observation history without changing what it does.

A task whose actor keeps more past frames of its measurements (``ObservationLayout.extends_history_of``) can start
from a checkpoint of the task without them (``TaskCfg.starts_from``) instead of from scratch. The first layer's
columns of each term move to that term's newest frames, the older frames' columns start at zero weight, and each
new frame is normalized as its term was. The widened actor's action is the checkpoint's for every input, so
training goes on from the policy as it was and learns how much to use the past. Adam's moments move with the
columns (zero for the new ones). Only rsl_rl MLP actors with an empirical observation normalizer are widened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from robot_rl.learn.errors import CheckpointError
from robot_rl.tasks.observations import ObservationLayout

_FIRST_LAYER = "mlp.0.weight"
_NORMALIZER = "obs_normalizer."
_NORMALIZER_STATS = ("obs_normalizer._mean", "obs_normalizer._var", "obs_normalizer._std")


class HistoryWideningError(CheckpointError):
    """The checkpoint's actor cannot be widened to the new layout."""


@dataclass(frozen=True)
class TermColumns:
    """One term's frames: where they start in the old and the new input, one frame's width, frame counts."""

    old_start: int
    new_start: int
    size: int
    old_frames: int
    new_frames: int

    @property
    def kept_start(self) -> int:
        """Where the old frames go in the new input: the newest (history is term-major, oldest frame first)."""
        return self.new_start + (self.new_frames - self.old_frames) * self.size

    @property
    def old_end(self) -> int:
        return self.old_start + self.old_frames * self.size

    @property
    def new_end(self) -> int:
        return self.new_start + self.new_frames * self.size


def column_map(old: ObservationLayout, new: ObservationLayout, sizes: list[int]) -> list[TermColumns]:
    """Each term's columns in both layouts; ``sizes``: one frame's width per term (``term_sizes``)."""
    if not new.extends_history_of(old):
        raise HistoryWideningError("the new actor observation is not the old one with more past frames")
    out, o_old, o_new = [], 0, 0
    for t_old, t_new, size in zip(old.terms, new.terms, sizes, strict=True):
        out.append(TermColumns(o_old, o_new, size, t_old.history_length, t_new.history_length))
        o_old += t_old.history_length * size
        o_new += t_new.history_length * size
    return out


def _widen(old: torch.Tensor, columns: list[TermColumns], *, new_frames_like_oldest: bool) -> torch.Tensor:
    """``old`` (rows × old width) in the new layout: each term's old frames as its newest; the added frames zero,
    or (``new_frames_like_oldest``) copies of the term's oldest old frame."""
    out = torch.zeros((old.shape[0], columns[-1].new_end), dtype=old.dtype)
    for c in columns:
        out[:, c.kept_start:c.new_end] = old[:, c.old_start:c.old_end]
        if new_frames_like_oldest:
            oldest = old[:, c.old_start:c.old_start + c.size]
            for f in range(c.new_frames - c.old_frames):
                out[:, c.new_start + f * c.size:c.new_start + (f + 1) * c.size] = oldest
    return out


def widen_checkpoint(checkpoint: dict[str, Any], old: ObservationLayout, new: ObservationLayout,
                     sizes: list[int]) -> dict[str, Any]:
    """A copy of an rsl_rl checkpoint whose actor takes ``new`` instead of ``old`` and acts the same."""
    columns = column_map(old, new, sizes)
    actor = dict(checkpoint["actor_state_dict"])
    missing = [k for k in (_FIRST_LAYER, *_NORMALIZER_STATS) if k not in actor]
    if missing:
        raise HistoryWideningError(f"the checkpoint's actor has no {', '.join(missing)}: not an rsl_rl MLP actor "
                                   "with an observation normalizer")
    weight = actor[_FIRST_LAYER]
    if weight.shape[1] != columns[-1].old_end:
        raise HistoryWideningError(f"the checkpoint's actor takes {weight.shape[1]} inputs, its task's observation "
                                   f"has {columns[-1].old_end}")
    actor[_FIRST_LAYER] = _widen(weight, columns, new_frames_like_oldest=False)
    for key in _NORMALIZER_STATS:
        actor[key] = _widen(actor[key], columns, new_frames_like_oldest=True)
    widened = {**checkpoint, "actor_state_dict": actor}
    optimizer = checkpoint.get("optimizer_state_dict")
    if optimizer is not None:
        # rsl_rl's PPO optimizes the actor's parameters first, in their order (the buffers are the normalizer's).
        index = [k for k in checkpoint["actor_state_dict"] if not k.startswith(_NORMALIZER)].index(_FIRST_LAYER)
        state = dict(optimizer["state"])
        moments = dict(state.get(index, {}))
        for key in ("exp_avg", "exp_avg_sq"):
            if key in moments:
                if moments[key].shape != weight.shape:
                    raise HistoryWideningError(f"the optimizer's state {index} is not the actor's first layer")
                moments[key] = _widen(moments[key], columns, new_frames_like_oldest=False)
        state[index] = moments
        widened["optimizer_state_dict"] = {**optimizer, "state": state}
    return widened
