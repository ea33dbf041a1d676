"""What a foreign policy assumes, read from its trainer's description, before it is mapped onto a robot spec.

Every importer (one module per source format) produces one :class:`ForeignPolicy`; :mod:`.build` turns it
into an ONNX file with this project's contract. All per-joint arrays are in the **policy's** joint order
(``joint_names``), which is matched to the spec's by name, never by index.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from robot_rl.core.errors import RobotRLError

SourceLayout = Literal["time_major", "term_major"]


class PolicyImportError(RobotRLError, ValueError):
    """A foreign policy or its description cannot be imported as given; the message names what and where."""


@dataclass(frozen=True)
class ForeignTerm:
    """One observation term as the trainer computed it: ``clip(scale · (value − offset), ±clip)``, where
    ``name`` is this project's term (robot_rl.tasks.observations.OBS_TERMS), ``scale`` one value or one
    per component and ``clip`` likewise (a trainer that clips before scaling, as Isaac Lab does, gives
    ``clip · |scale|``). ``offset`` is only the trainer's default pose for ``joint_pos_rel`` (handled in build)."""

    name: str
    source_name: str  # the trainer's name for it, for messages
    scale: tuple[float, ...]  # length 1 (uniform) or the term's width
    clip: float | tuple[float, ...] | None = None


@dataclass(frozen=True)
class ForeignPolicy:
    trainer: str  # e.g. "rl_sar (Isaac Lab / robot_lab)"
    model_path: Path  # the network file (TorchScript or ONNX)
    model_format: Literal["torchscript", "onnx"]
    joint_names: tuple[str, ...]  # the policy's joint order
    default_positions: tuple[float, ...]
    kp: tuple[float, ...]
    kd: tuple[float, ...]
    action_scale: tuple[float, ...]
    action_clip: tuple[tuple[float, float], ...]  # per joint (low, high), applied to the raw action
    terms: tuple[ForeignTerm, ...]
    history: tuple[int, ...] = (0,)  # frames in the order the trainer concatenates them, 0 = this tick
    history_layout: SourceLayout = "time_major"
    policy_period_s: float | None = None  # None: the description does not say
    extra_inputs: tuple[str, ...] = ()  # inputs the graph computes itself, e.g. ("gait_phase",)
    gait_period_s: float = 0.0  # for "gait_phase": the clock's period
    sources: dict[str, Path] = field(default_factory=dict)  # role → file, hashed into the provenance
    # How precisely the description states gains and default pose (mjlab rounds its metadata to 3 decimals):
    # a disagreement with the spec within it is no disagreement.
    value_tolerance: float = 0.0
    # The actor's hidden layer widths as the trainer's config states them (rsl_rl's actor_hidden_dims), checked
    # against the network: a model from another run is refused. () where the description does not say.
    actor_hidden_dims: tuple[int, ...] = ()

    def source_hashes(self) -> dict[str, dict[str, str]]:
        return {role: {"file": path.name, "sha256": sha256(path)} for role, path in sorted(self.sources.items())}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def per_joint(values, n: int, what: str, where: str) -> tuple[float, ...]:
    """A scalar broadcast to ``n`` joints, or a list of exactly ``n`` numbers."""
    if isinstance(values, int | float) and not isinstance(values, bool):
        return (float(values),) * n
    if not isinstance(values, list) or len(values) != n or not all(isinstance(v, int | float) for v in values):
        raise PolicyImportError(f"{where}: {what} must be a number or a list of {n} numbers (one per joint), "
                                f"got {values!r}")
    return tuple(float(v) for v in values)
