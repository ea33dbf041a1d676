"""Observation terms: defined once, used by training (batched over envs) and by deployment (one robot).

A task lists its observation terms in order, each with a scale, clip, training noise and history length.
The same ``ObservationBuilder`` turns robot state into the policy input in the vectorized sim env and in
the deploy runtime, so the observation a policy sees on the robot is built by the very code it was trained
with. The policy contract records the term list, so a model and a runtime that disagree refuse to run.

History layout is *term-major*: for each term in order, its ``history_length`` frames oldest → newest,
then the next term. (Users of other stacks trip over term-major vs time-major; the contract names it.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

HistoryLayout = Literal["term_major"]


@dataclass
class ObsInputs:
    """Robot state batched over envs (leading dimension N). The runtime uses N = 1."""

    q: np.ndarray  # (N, J) joint positions
    dq: np.ndarray  # (N, J) joint velocities
    default_q: np.ndarray  # (J,) default pose from the spec
    base_quat: np.ndarray  # (N, 4) w, x, y, z, world frame
    base_ang_vel: np.ndarray  # (N, 3) body frame
    command: np.ndarray  # (N, C) task command (velocity, target, ...)
    last_action: np.ndarray  # (N, A) previous policy output (raw, before scaling)
    base_lin_vel: np.ndarray | None = None  # (N, 3) body frame: sim only, unless an estimator provides it
    object_pos: np.ndarray | None = None  # (N, 3) task object, base frame: sims, or a perception source


def projected_gravity(base_quat: np.ndarray) -> np.ndarray:
    """Unit gravity direction expressed in the base frame, (N, 4) wxyz → (N, 3)."""
    w, x, y, z = base_quat[:, 0], base_quat[:, 1], base_quat[:, 2], base_quat[:, 3]
    # Third row of R(q) (world z axis in body coordinates), negated: R^T · (0, 0, −1).
    gx = -2.0 * (x * z - w * y)
    gy = -2.0 * (y * z + w * x)
    gz = -(1.0 - 2.0 * (x * x + y * y))
    return np.stack([gx, gy, gz], axis=1)


def _base_lin_vel(inp: ObsInputs) -> np.ndarray:
    if inp.base_lin_vel is None:
        raise ValueError(
            "observation term 'base_lin_vel' needs the base linear velocity, which this robot interface "
            "does not measure; train the policy without it or add a state estimator"
        )
    return inp.base_lin_vel


def _object_pos(inp: ObsInputs) -> np.ndarray:
    if inp.object_pos is None:
        raise ValueError(
            "observation term 'object_pos' needs the task object's position (the task's observation source), "
            "which this robot interface does not provide; use a simulator with the task's scene or add a perception "
            "source (an ObjectSensor) that reports it"
        )
    return inp.object_pos


@dataclass(frozen=True)
class ObsTermDef:
    """What a term computes and how wide it is, given the robot's joint/command/action counts."""

    compute: Callable[[ObsInputs], np.ndarray]
    size: Callable[[int, int, int], int]  # (num_joints, num_commands, num_actions) → width
    description: str


# The explicit registry of every observation term the project knows.
OBS_TERMS: dict[str, ObsTermDef] = {
    "base_lin_vel": ObsTermDef(_base_lin_vel, lambda j, c, a: 3, "base linear velocity, body frame (m/s)"),
    "base_ang_vel": ObsTermDef(lambda i: i.base_ang_vel, lambda j, c, a: 3, "gyro, body frame (rad/s)"),
    "projected_gravity": ObsTermDef(
        lambda i: projected_gravity(i.base_quat), lambda j, c, a: 3, "gravity direction in the base frame"
    ),
    "command": ObsTermDef(lambda i: i.command, lambda j, c, a: c, "task command (see the contract's commands)"),
    "joint_pos_rel": ObsTermDef(
        lambda i: i.q - i.default_q, lambda j, c, a: j, "joint positions minus the default pose (rad)"
    ),
    "joint_vel": ObsTermDef(lambda i: i.dq, lambda j, c, a: j, "joint velocities (rad/s)"),
    "last_action": ObsTermDef(lambda i: i.last_action, lambda j, c, a: a, "previous raw policy action"),
    "object_pos": ObsTermDef(_object_pos, lambda j, c, a: 3, "task object position, base frame (m)"),
}


@dataclass(frozen=True)
class ObsTerm:
    name: str  # a key of OBS_TERMS
    scale: float = 1.0
    clip: float | None = None  # applied after scaling
    noise: float = 0.0  # uniform ±noise in the term's own units, training only
    history_length: int = 1


def with_more_frames(terms: tuple, extra: int) -> tuple:
    """``terms`` (the task's ``ObsTerm`` or the contract's term records: anything with a ``history_length``),
    each keeping ``extra`` more past frames. The one rule for the input of a residual composed with history:
    looking ``extra`` ticks back needs each of those ticks' whole observation, the terms' own history included.
    The task's layout and the exported contract both lengthen through here, so they cannot disagree."""
    if extra < 0:
        raise ValueError(f"extra history must be ≥ 0 frames, got {extra}")
    return tuple(replace(t, history_length=t.history_length + extra) for t in terms)


@dataclass(frozen=True)
class ObservationLayout:
    """The observation a policy takes, in order. Written into and checked from the policy contract."""

    terms: tuple[ObsTerm, ...]
    history_layout: HistoryLayout = "term_major"

    def __post_init__(self) -> None:
        for term in self.terms:
            if term.name not in OBS_TERMS:
                raise ValueError(f"unknown observation term {term.name!r} (known: {', '.join(OBS_TERMS)})")
            if term.history_length < 1:
                raise ValueError(f"observation term {term.name!r}: history_length must be ≥ 1")

    def with_more_history(self, extra: int) -> ObservationLayout:
        """Every term keeps ``extra`` more past frames (see :func:`with_more_frames`)."""
        return replace(self, terms=with_more_frames(self.terms, extra))

    def term_sizes(self, num_joints: int, num_commands: int, num_actions: int) -> list[int]:
        """Width of one frame of each term."""
        return [OBS_TERMS[t.name].size(num_joints, num_commands, num_actions) for t in self.terms]

    def size(self, num_joints: int, num_commands: int, num_actions: int) -> int:
        sizes = self.term_sizes(num_joints, num_commands, num_actions)
        return sum(s * t.history_length for s, t in zip(sizes, self.terms, strict=True))


class ObservationBuilder:
    """Builds the flat policy input from ``ObsInputs`` and keeps each term's history.

    Preallocates everything: the runtime calls this on every policy tick.
    """

    def __init__(
        self,
        layout: ObservationLayout,
        num_envs: int,
        num_joints: int,
        num_commands: int,
        num_actions: int,
        rng: np.random.Generator | None = None,
        noise: bool = False,
    ):
        self.layout = layout
        self.sizes = layout.term_sizes(num_joints, num_commands, num_actions)
        self.dim = layout.size(num_joints, num_commands, num_actions)
        self.noise = noise
        self.rng = rng if rng is not None else np.random.default_rng()
        self._hist = [np.zeros((num_envs, t.history_length, s)) for t, s in zip(layout.terms, self.sizes, strict=True)]
        self._out = np.zeros((num_envs, self.dim), dtype=np.float32)
        self._fresh = np.ones(num_envs, dtype=bool)  # reset envs fill their history with the first frame

    def reset(self, env_ids: np.ndarray | slice | None = None) -> None:
        """Forget history; the next ``compute`` fills every history slot of these envs."""
        self._fresh[slice(None) if env_ids is None else env_ids] = True

    def compute(self, inputs: ObsInputs) -> np.ndarray:
        """(N, dim) float32 observation. The returned array is reused by the next call."""
        col = 0
        fresh = self._fresh
        any_fresh = bool(fresh.any())
        for term, size, hist in zip(self.layout.terms, self.sizes, self._hist, strict=True):
            frame = np.asarray(OBS_TERMS[term.name].compute(inputs), dtype=np.float64)
            if self.noise and term.noise > 0.0:
                frame = frame + self.rng.uniform(-term.noise, term.noise, size=frame.shape)
            frame = frame * term.scale
            if term.clip is not None:
                frame = np.clip(frame, -term.clip, term.clip)
            h = term.history_length
            if h > 1:
                hist[:, :-1] = hist[:, 1:]
            hist[:, -1] = frame
            if any_fresh and h > 1:
                hist[fresh] = frame[fresh, None, :]
            width = h * size
            self._out[:, col : col + width] = hist.reshape(hist.shape[0], width)
            col += width
        fresh[:] = False
        return self._out
