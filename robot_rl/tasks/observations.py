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
from functools import partial
from itertools import pairwise
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
    gait_phase: np.ndarray | None = None  # (N,) in [0, 1): the gait clock's phase (tasks with a gait period)


def gait_phase(elapsed_s, period_s: float):
    """The gait clock's phase in [0, 1) after ``elapsed_s`` seconds of an episode (numpy or torch alike): the
    trainer counts from the episode's first observation, the runtime from the policy's first tick."""
    return (elapsed_s % period_s) / period_s


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


def _gait_angle(inp: ObsInputs) -> np.ndarray:
    if inp.gait_phase is None:
        raise ValueError(
            "observation term 'gait_phase' needs the gait clock's phase, which the caller did not provide (the "
            "policy controller counts it from its first tick, with the contract's observation.gait_period_s)"
        )
    return 2.0 * np.pi * inp.gait_phase


def _gait_clock(inp: ObsInputs) -> np.ndarray:
    angle = _gait_angle(inp)
    return np.stack([np.sin(angle), np.cos(angle)], axis=1)


def _write_gait_clock(inputs: ObsInputs, out: np.ndarray) -> None:
    """:func:`_gait_clock` into the frame's columns, without the stacked temporary (the deploy tick)."""
    angle = _gait_angle(inputs)
    np.sin(angle, out=out[:, 0])
    np.cos(angle, out=out[:, 1])


def _copy_of(get: Callable[[ObsInputs], np.ndarray]) -> Callable[[ObsInputs, np.ndarray], None]:
    def write(inputs: ObsInputs, out: np.ndarray) -> None:
        np.copyto(out, get(inputs))
    return write


def _write_joint_pos_rel(inputs: ObsInputs, out: np.ndarray) -> None:
    np.subtract(inputs.q, inputs.default_q, out=out)


def _write_gravity_row(quat: np.ndarray, row: np.ndarray) -> None:
    """:func:`projected_gravity` of one robot's float64 quaternion into ``row``: the same IEEE double operations,
    in the same order, on Python floats cost a tenth of a dozen numpy calls on 1-element columns; the result is
    the same to the bit (the deploy tick)."""
    w, x, y, z = quat.tolist()
    row[0] = -2.0 * (x * z - w * y)
    row[1] = -2.0 * (y * z + w * x)
    row[2] = -(1.0 - 2.0 * (x * x + y * y))


def _write_projected_gravity(inputs: ObsInputs, out: np.ndarray) -> None:
    quat = inputs.base_quat
    if quat.shape[0] == 1 and quat.dtype == np.float64:
        _write_gravity_row(quat[0], out[0])
    else:
        np.copyto(out, projected_gravity(quat))


def _bind_joint_pos_rel(inputs: ObsInputs, out: np.ndarray) -> Callable[[], None]:
    # default_q as a (1, J) view: the operands then have one shape for N = 1 (numpy's fast loop, not a broadcast)
    return partial(np.subtract, inputs.q, inputs.default_q.reshape(1, -1), out=out)


def _bind_projected_gravity(inputs: ObsInputs, out: np.ndarray) -> Callable[[], None] | None:
    quat = inputs.base_quat
    if quat.shape[0] != 1 or quat.dtype != np.float64:
        return None
    return partial(_write_gravity_row, quat[0], out[0])  # _write_projected_gravity's one-robot branch, rows found once


@dataclass(frozen=True)
class ObsTermDef:
    """What a term computes and how wide it is, given the robot's joint/command/action counts.

    ``compute`` returns the term as a new array; ``write`` puts the same values into a preallocated
    (N, width) float64 array (what the builder calls on every tick: no allocation). For a builder bound to one
    ``ObsInputs`` (:meth:`ObservationBuilder.bind`), ``source`` names the field a term is a plain copy of, and
    ``bind`` makes a writer of the same values with that object's arrays looked up once (None: ``write``).
    """

    compute: Callable[[ObsInputs], np.ndarray]
    size: Callable[[int, int, int], int]  # (num_joints, num_commands, num_actions) → width
    description: str
    write: Callable[[ObsInputs, np.ndarray], None] | None = None  # None: ``compute``'s result, copied
    source: str | None = None
    bind: Callable[[ObsInputs, np.ndarray], Callable[[], None] | None] | None = None


def _term(compute: Callable[[ObsInputs], np.ndarray], size: Callable[[int, int, int], int], description: str,
          write: Callable[[ObsInputs, np.ndarray], None] | None = None, source: str | None = None,
          bind: Callable[[ObsInputs, np.ndarray], Callable[[], None] | None] | None = None) -> ObsTermDef:
    return ObsTermDef(compute, size, description, write if write is not None else _copy_of(compute), source, bind)


# The explicit registry of every observation term the project knows.
OBS_TERMS: dict[str, ObsTermDef] = {
    "base_lin_vel": _term(_base_lin_vel, lambda j, c, a: 3, "base linear velocity, body frame (m/s)",
                          source="base_lin_vel"),
    "base_ang_vel": _term(lambda i: i.base_ang_vel, lambda j, c, a: 3, "gyro, body frame (rad/s)",
                          source="base_ang_vel"),
    "projected_gravity": _term(
        lambda i: projected_gravity(i.base_quat), lambda j, c, a: 3, "gravity direction in the base frame",
        _write_projected_gravity, bind=_bind_projected_gravity,
    ),
    "command": _term(lambda i: i.command, lambda j, c, a: c, "task command (see the contract's commands)",
                     source="command"),
    "joint_pos_rel": _term(
        lambda i: i.q - i.default_q, lambda j, c, a: j, "joint positions minus the default pose (rad)",
        _write_joint_pos_rel, bind=_bind_joint_pos_rel,
    ),
    "joint_vel": _term(lambda i: i.dq, lambda j, c, a: j, "joint velocities (rad/s)", source="dq"),
    "last_action": _term(lambda i: i.last_action, lambda j, c, a: a, "previous raw policy action",
                         source="last_action"),
    "object_pos": _term(_object_pos, lambda j, c, a: 3, "task object position, base frame (m)", source="object_pos"),
    "gait_phase": _term(_gait_clock, lambda j, c, a: 2, "sin, cos of the gait clock's phase (period: the layout's)",
                        _write_gait_clock),
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
    # The gait clock's period (s per cycle) where a ``gait_phase`` term observes it: the clock runs from each
    # episode's first observation in training and from the policy's first tick deployed. None: no clock.
    gait_period_s: float | None = None

    def __post_init__(self) -> None:
        for term in self.terms:
            if term.name not in OBS_TERMS:
                raise ValueError(f"unknown observation term {term.name!r} (known: {', '.join(OBS_TERMS)})")
            if term.history_length < 1:
                raise ValueError(f"observation term {term.name!r}: history_length must be ≥ 1")
        clocked = any(t.name == "gait_phase" for t in self.terms)
        if clocked and self.gait_period_s is None:
            raise ValueError("observation term 'gait_phase' needs the layout's gait_period_s (the clock's period)")
        if self.gait_period_s is not None and not (clocked and self.gait_period_s > 0):
            raise ValueError(f"gait_period_s {self.gait_period_s}: a positive period, with a 'gait_phase' term")

    def with_gait_clock(self, period_s: float) -> ObservationLayout:
        """This layout with the gait clock's sine and cosine appended (a ``gait_phase`` term of that period)."""
        return replace(self, terms=(*self.terms, ObsTerm("gait_phase")), gait_period_s=period_s)

    def with_more_history(self, extra: int) -> ObservationLayout:
        """Every term keeps ``extra`` more past frames (see :func:`with_more_frames`)."""
        return replace(self, terms=with_more_frames(self.terms, extra))

    def extends_history_of(self, start: ObservationLayout) -> bool:
        """Whether this layout is ``start`` with some terms keeping more past frames and nothing else changed: a
        policy of ``start`` then becomes one of this layout that acts the same (``robot_rl.learn.history_widening``)."""
        if len(self.terms) != len(start.terms) or (self.history_layout, self.gait_period_s) != (
                start.history_layout, start.gait_period_s):
            return False
        return all(replace(t, history_length=s.history_length) == s and t.history_length >= s.history_length
                   for t, s in zip(self.terms, start.terms, strict=True))

    def term_sizes(self, num_joints: int, num_commands: int, num_actions: int) -> list[int]:
        """Width of one frame of each term."""
        return [OBS_TERMS[t.name].size(num_joints, num_commands, num_actions) for t in self.terms]

    def size(self, num_joints: int, num_commands: int, num_actions: int) -> int:
        sizes = self.term_sizes(num_joints, num_commands, num_actions)
        return sum(s * t.history_length for s, t in zip(sizes, self.terms, strict=True))


class ObservationBuilder:
    """Builds the flat policy input from ``ObsInputs`` and keeps each term's history.

    Everything is allocated and every constant derived here: the runtime calls ``compute`` on every policy
    tick. One tick: each term writes its frame into one float64 row (``ObsTermDef.write``), then one
    multiply scales it and one clip clips it (per-column scale and bounds; ±inf where a term has no clip,
    which leaves a value, NaN included, as it is), then the history moves by one gather (``np.take`` with a
    precomputed index: every column takes the one a frame later, the newest frame takes the new row), and
    one cast writes the float32 output. Without history terms the row is the output.
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
        terms = layout.terms
        frame_width = sum(self.sizes)
        frame_cols = np.cumsum([0, *self.sizes])
        self._has_history = any(t.history_length > 1 for t in terms)
        # History in output layout (term-major), then the new frame: one array, so one gather moves it all.
        self._work = np.zeros((num_envs, (self.dim if self._has_history else 0) + frame_width))
        self._frame = self._work[:, self._work.shape[1] - frame_width:]
        views = [self._frame[:, a:b] for a, b in pairwise(frame_cols)]
        self._views = tuple(views)
        self._writers = tuple((OBS_TERMS[t.name].write or _copy_of(OBS_TERMS[t.name].compute), v)
                              for t, v in zip(terms, views, strict=True))
        self._noisy = tuple((v, t.noise) for t, v in zip(terms, views, strict=True) if t.noise > 0.0)
        # Per-column constants as (1, width) rows: for N = 1 every operand then has the frame's shape.
        self._scale = np.repeat([float(t.scale) for t in terms], self.sizes)[None, :]
        self._scaled = bool(np.any(self._scale != 1.0))
        clip = np.repeat([np.inf if t.clip is None else float(t.clip) for t in terms], self.sizes)[None, :]
        self._clip_low, self._clip_high = -clip, clip
        self._bound: ObsInputs | None = None  # see bind()
        self._bound_copies: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
        self._bound_writes: tuple[Callable[[], None], ...] = ()
        self._clipped = any(t.clip is not None for t in terms)
        self._out = np.zeros((num_envs, self.dim), dtype=np.float32)
        self._fresh = np.ones(num_envs, dtype=bool)  # reset envs fill their history with the first frame
        self._any_fresh = True
        if self._has_history:
            shift, fresh = [], []
            col = 0
            for term, size, fc in zip(terms, self.sizes, frame_cols[:-1], strict=True):
                newest = self.dim + fc + np.arange(size)
                for f in range(term.history_length):
                    later = col + (f + 1) * size + np.arange(size)
                    shift.append(newest if f == term.history_length - 1 else later)
                    fresh.append(newest)
                col += term.history_length * size
            self._shift = np.concatenate(shift)
            self._fill = np.concatenate(fresh)
            self._hist = self._work[:, : self.dim]
            self._next = np.zeros((num_envs, self.dim))

    def reset(self, env_ids: np.ndarray | slice | None = None) -> None:
        """Forget history; the next ``compute`` fills every history slot of these envs."""
        self._fresh[slice(None) if env_ids is None else env_ids] = True
        self._any_fresh = bool(self._fresh.any())

    @property
    def output(self) -> np.ndarray:
        """(N, dim) float32: the array every ``compute`` writes and returns (made once)."""
        return self._out

    def bind(self, inputs: ObsInputs | None) -> None:
        """Make ``compute(inputs)``, for this very object, read the arrays its fields hold now, looked up once: the
        terms that copy a field as it is (``ObsTermDef.source``) are one assignment each, and the others write
        through a writer made for those arrays (``ObsTermDef.bind``). The same values as unbound, for a caller
        that owns ``inputs``, writes into its arrays in place, and binds again after assigning any of its
        fields (the policy controller). ``None`` unbinds."""
        self._bound = inputs
        if inputs is None:
            self._bound_copies, self._bound_writes = (), ()
            return
        copies, writes = [], []
        for term, view, (write, _) in zip(self.layout.terms, self._views, self._writers, strict=True):
            definition = OBS_TERMS[term.name]
            source = None if definition.source is None else getattr(inputs, definition.source)
            if isinstance(source, np.ndarray) and source.shape == view.shape and source.dtype == np.float64:
                copies.append((view, source))
                continue
            bound = None if definition.bind is None else definition.bind(inputs, view)
            writes.append(bound if bound is not None else partial(write, inputs, view))  # None: it raises why
        self._bound_copies, self._bound_writes = tuple(copies), tuple(writes)

    def compute(self, inputs: ObsInputs) -> np.ndarray:
        """(N, dim) float32 observation. The returned array is reused by the next call."""
        frame = self._frame
        if inputs is self._bound:
            for view, source in self._bound_copies:
                view[...] = source
            for write in self._bound_writes:
                write()
        else:
            for write, view in self._writers:
                write(inputs, view)
        if self.noise:
            for view, noise in self._noisy:
                view += self.rng.uniform(-noise, noise, size=view.shape)
        if self._scaled:
            np.multiply(frame, self._scale, out=frame)
        if self._clipped:  # np.clip, as two ufuncs (its Python wrapper costs more than they do)
            np.maximum(frame, self._clip_low, out=frame)
            np.minimum(frame, self._clip_high, out=frame)
        if not self._has_history:
            self._out[...] = frame  # the float32 rounding of np.copyto, without its Python-level dispatch
        else:
            nxt = self._next
            # mode="clip": with the default "raise" numpy buffers `out` (allocates); every index is in range.
            np.take(self._work, self._shift, axis=1, out=nxt, mode="clip")
            if self._any_fresh:
                fresh = self._fresh
                if fresh.all():
                    np.take(self._work, self._fill, axis=1, out=nxt, mode="clip")
                else:
                    nxt[fresh] = self._work[fresh][:, self._fill]
            np.copyto(self._hist, nxt)
            np.copyto(self._out, nxt, casting="same_kind")
        if self._any_fresh:
            self._fresh[:] = False
            self._any_fresh = False
        return self._out
