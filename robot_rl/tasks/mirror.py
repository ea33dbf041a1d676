"""A task's left ↔ right mirror: its observations and actions reflected through the base's sagittal plane.

Each observation term mirrors by what it means, never by a per-robot index list: a base-frame vector (linear
velocity, gravity direction, an object's position) is a polar vector and its y flips; the gyro is a pseudo-vector
(angular velocity), so its x and z flip; the command mirrors per named component (lateral velocity and yaw rate
flip); joint positions, velocities and the last action are permuted to the partner joint and signed by the
robot's :class:`~robot_rl.robots.joint_mirror.JointMirror`. A history stack mirrors frame by frame. Scales and
symmetric clips commute with a sign and a permutation, so the mirror acts on the built (scaled) observation.

A task that trains with ``PPOCfg.symmetry_augmentation`` is checked when it is built (``check_mirrorable``): a
term or command component without a rule here is an error naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robot_rl.robots.joint_mirror import AXIAL, REFLECT, JointMirror, MirrorError
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout

# Sign of each command component under the mirror: forward speed keeps it, lateral speed and yaw rate change side.
COMMAND_SIGNS: dict[str, float] = {"lin_vel_x": 1.0, "lin_vel_y": -1.0, "ang_vel_z": -1.0}

# One frame of a term: (permutation, sign) given the joint mirror and the command signs.
Frame = tuple[np.ndarray, np.ndarray]
_VECTOR = (np.arange(3), REFLECT)
_PSEUDO = (np.arange(3), AXIAL)


def _joints(joints: JointMirror, commands: np.ndarray) -> Frame:
    return joints.perm, joints.sign


def _command(joints: JointMirror, commands: np.ndarray) -> Frame:
    return np.arange(len(commands)), commands


TERM_MIRRORS: dict[str, Callable[[JointMirror, np.ndarray], Frame]] = {
    "base_lin_vel": lambda j, c: _VECTOR,
    "base_ang_vel": lambda j, c: _PSEUDO,
    "projected_gravity": lambda j, c: _VECTOR,
    "object_pos": lambda j, c: _VECTOR,
    "command": _command,
    "joint_pos_rel": _joints,  # relative to a default pose that is its own mirror (JointMirror checks it)
    "joint_vel": _joints,
    "last_action": _joints,  # raw action = (target − default) / scale: the joints' mirror too
    # The two feet of a left/right pair are half a period apart (rewards.leg_phase_offsets): the mirror swaps them,
    # which is half a period on, so its sine and cosine both change sign.
    "gait_phase": lambda j, c: (np.arange(2), np.array([-1.0, -1.0])),
}


def check_mirrorable(task_name: str, layouts: dict[str, ObservationLayout], commands: CommandSpec) -> None:
    """Every term of ``layouts`` (e.g. actor, critic) and every command component has a mirror rule."""
    for group, layout in layouts.items():
        for term in layout.terms:
            if term.name not in TERM_MIRRORS:
                raise MirrorError(f"task {task_name!r}: symmetry augmentation does not know how the {group} "
                                  f"observation term {term.name!r} mirrors (known: {', '.join(TERM_MIRRORS)})")
    unknown = [n for n in commands.names if n not in COMMAND_SIGNS]
    if unknown:
        raise MirrorError(f"task {task_name!r}: symmetry augmentation does not know how command component "
                          f"{unknown[0]!r} mirrors (known: {', '.join(COMMAND_SIGNS)})")


@dataclass(frozen=True, eq=False)
class VectorMirror:
    """``mirrored[..., k] = sign[k] · values[..., perm[k]]`` over a flat observation or action."""

    perm: np.ndarray
    sign: np.ndarray

    def apply(self, values: np.ndarray) -> np.ndarray:
        return values[..., self.perm] * self.sign.astype(values.dtype, copy=False)

    @classmethod
    def for_layout(cls, layout: ObservationLayout, joints: JointMirror, commands: CommandSpec) -> VectorMirror:
        """The mirror of a flat observation in ``layout`` (term-major history: each frame mirrored alone)."""
        command_signs = np.array([COMMAND_SIGNS[n] for n in commands.names])
        j = len(joints.perm)
        perm, sign, start = [], [], 0
        for term, size in zip(layout.terms, layout.term_sizes(j, commands.size, j), strict=True):
            frame_perm, frame_sign = TERM_MIRRORS[term.name](joints, command_signs)
            for _ in range(term.history_length):
                perm.append(start + frame_perm)
                sign.append(frame_sign)
                start += size
        return cls(np.concatenate(perm).astype(np.int64), np.concatenate(sign).astype(np.float64))


@dataclass(frozen=True, eq=False)
class TaskMirror:
    """The mirror of a task's actor and critic observations and of its actions, on one robot."""

    actor: VectorMirror
    critic: VectorMirror
    action: VectorMirror

    @classmethod
    def build(cls, task_name: str, actor_obs: ObservationLayout, critic_obs: ObservationLayout,
              commands: CommandSpec, joints: JointMirror) -> TaskMirror:
        """``joints``: the mirror of the joints the policy observes and drives, in their order."""
        check_mirrorable(task_name, {"actor": actor_obs, "critic": critic_obs}, commands)
        return cls(VectorMirror.for_layout(actor_obs, joints, commands),
                   VectorMirror.for_layout(critic_obs, joints, commands),
                   VectorMirror(joints.perm.astype(np.int64), joints.sign.astype(np.float64)))
