"""A :class:`ForeignPolicy` mapped onto a robot spec and written as an ONNX file with this project's contract.

The exported graph takes what this project's runtime feeds (the contract's observation, term-major history,
joints in the spec's order) and returns one raw action per spec joint; inside it, a fixed adapter makes the
foreign network's own input and output of them:

    obs ──gather──► the trainer's order (joints by name, its term order, its history layout)
        ──(+ offset) · scale, clip──► the trainer's scaling (where the contract's scalar scale cannot say it)
        ──► network [recurrent state in/out] ──► clip to the trainer's action bounds
        ──► · scale ratio + offset, scattered to the spec's joints (joints it does not drive: 0 = default pose)

Nothing is approximated: every step is a permutation or an exact affine map, so the file computes what the
trainer's deploy code computes on the same robot state. Where the contract's own fields can say it (a
uniform term scale, the observation clip), they do, and the runtime's observation builder applies them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from robot_rl.policy.contract import (
    PolicyContract,
    Provenance,
    RecurrentContract,
    RecurrentState,
)
from robot_rl.policy.importers.description import ForeignPolicy, PolicyImportError
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import OBS_TERMS, ObservationLayout, ObsTerm

ALLOWANCES = ("default-pose", "gains", "hold-missing")
JOINT_TERMS = ("joint_pos_rel", "joint_vel", "last_action")
MEASURED = ("base_ang_vel", "projected_gravity", "command", "joint_pos_rel", "joint_vel", "last_action")
NO_CLIP = 3.0e38  # a float32 bound that never binds, where a term has no clip
REL_TOL, ABS_TOL = 1e-6, 1e-9


@dataclass(frozen=True)
class JointMap:
    spec_index: tuple[int, ...]  # index into the spec's policy joints of each foreign policy joint
    held: tuple[str, ...]  # spec joints the policy does not drive (held at the default pose)
    overridden: dict  # what an allowance let through: {"gains": [...], "default_pose": [...]}


def _close(a: float, b: float, tolerance: float = 0.0) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=max(ABS_TOL, tolerance))


def match_joints(foreign: ForeignPolicy, spec: RobotSpec, allow: tuple[str, ...]) -> JointMap:
    """Policy joints to spec joints by name; refuse an unknown, duplicate or missing name and a gain or
    default-pose disagreement (one line naming the first, and how many more) unless ``allow`` covers it."""
    where = f"robot {spec.name!r} ({spec.source_file or 'spec'})"
    # A policy drives the spec's policy joints (all joints, or a subset such as the G1's legs): the contract's.
    index = {name: i for i, name in enumerate(spec.policy_joint_names)}
    seen: set[str] = set()
    for i, name in enumerate(foreign.joint_names):
        if name in spec.joint_names and name not in index:
            raise PolicyImportError(f"policy joint {i} {name!r} ({foreign.trainer}) is a joint of {where} that "
                                    "the spec holds (not in its policy_joints); give a spec whose policy_joints "
                                    "include it")
        if name not in index:
            raise PolicyImportError(f"policy joint {i} {name!r} ({foreign.trainer}) is not a joint of {where}")
        if name in seen:
            raise PolicyImportError(f"policy joint {name!r} appears twice in {foreign.trainer}'s joint order")
        seen.add(name)
    spec_index = tuple(index[n] for n in foreign.joint_names)
    held = tuple(n for n in spec.policy_joint_names if n not in seen)
    if held and "hold-missing" not in allow:
        raise PolicyImportError(f"{where} joint {held[0]!r} (and {len(held) - 1} more) is not driven by the policy; "
                                "pass --allow hold-missing to hold such joints at the spec's default pose")
    overridden: dict = {}
    idx = spec.policy_joint_indices
    checks = (
        ("gains", "kp", foreign.kp, np.asarray(spec.kp)[idx],
         "run with the spec's gains, or give a spec with the policy's (--robot path/to/spec.yaml)"),
        ("gains", "kd", foreign.kd, np.asarray(spec.kd)[idx], "run with the spec's gains"),
        ("default-pose", "default position", foreign.default_positions, np.asarray(spec.default_positions)[idx],
         "keep the spec's pose for ramp and hold (the graph still gives the policy its own)"),
    )
    for allowance, what, theirs, ours, remedy in checks:
        pairs = zip(theirs, spec_index, strict=True)
        bad = [(foreign.joint_names[i], t, float(ours[j])) for i, (t, j) in enumerate(pairs)
               if not _close(t, float(ours[j]), foreign.value_tolerance)]
        if not bad:
            continue
        if allowance not in allow:
            name, t, o = bad[0]
            more = f" (and {len(bad) - 1} more joints)" if len(bad) > 1 else ""
            raise PolicyImportError(f"{what} of {name}: the policy was trained with {t:g}, {where} has {o:g}{more}; "
                                    f"pass --allow {allowance} to {remedy}")
        overridden.setdefault(allowance, []).extend(f"{what} {n}: policy {t:g}, spec {o:g}" for n, t, o in bad)
    return JointMap(spec_index, held, overridden)


@dataclass(frozen=True)
class Adapter:
    """The fixed tables of the graph's adapter (see the module docstring); arrays are float32/int64."""

    index: np.ndarray  # (foreign width,) contract column of each input of the foreign network
    offset: np.ndarray
    scale: np.ndarray
    clip: np.ndarray
    action_low: np.ndarray  # (n,) the trainer's action bounds, policy order
    action_high: np.ndarray
    action_matrix: np.ndarray  # (n, J): policy action → spec raw action
    action_bias: np.ndarray  # (J,)
    contract_action: JointPositionAction
    layout: ObservationLayout
    term_notes: tuple[dict, ...]
    action_memory: bool  # the graph keeps the policy's previous action as recurrent state (see build_adapter)


def _uniform(values: np.ndarray) -> bool:
    return bool(np.all(np.isclose(values, values[0], rtol=REL_TOL, atol=ABS_TOL)))


def _clips(term, width: int) -> np.ndarray:
    """The term's clip per component (NO_CLIP where it has none)."""
    if term.clip is None:
        return np.full(width, NO_CLIP)
    clip = np.array(term.clip if isinstance(term.clip, tuple) else (term.clip,), dtype=np.float64)
    if len(clip) not in (1, width):
        raise PolicyImportError(f"observation term {term.source_name!r}: {len(clip)} clips for {width} values")
    return np.broadcast_to(np.minimum(clip, NO_CLIP), (width,)).copy()


def build_adapter(foreign: ForeignPolicy, spec: RobotSpec, joints: JointMap, commands: CommandSpec) -> Adapter:
    n, num_joints, h = len(foreign.joint_names), spec.num_policy_joints, len(foreign.history)
    perm = np.array(joints.spec_index)
    spec_default = np.asarray(spec.default_positions, dtype=np.float64)[spec.policy_joint_indices]
    policy_default = np.array(foreign.default_positions)
    action_scale = np.array(foreign.action_scale)
    # The contract's action scale: the trainer's where it is one number, else 1 (raw action = radians).
    contract_scale = float(action_scale[0]) if _uniform(action_scale) else 1.0
    ratio = action_scale / contract_scale
    action_offset = (policy_default - spec_default[perm]) / contract_scale  # 0 unless --allow default-pose

    # With a default-pose offset the runtime's raw action 0 is not the policy's action 0, so the runtime's
    # last_action after a reset (zeros) would not be the trainer's (zeros in the policy's space): the graph then
    # keeps the previous action itself, as recurrent state, reset to the trainer's zeros.
    action_memory = bool(np.any(action_offset)) and any(t.name == "last_action" for t in foreign.terms)
    terms, columns, notes = [], [], []
    per_term = []  # (term, foreign width, in-graph scale, offset, clip, from state) in the trainer's order
    for term in foreign.terms:
        if term.name not in MEASURED:
            raise PolicyImportError(f"observation term {term.source_name!r} ({foreign.trainer}) needs {term.name!r}, "
                                    f"which a real robot does not measure and this runtime does not produce")
        width = n if term.name in JOINT_TERMS else OBS_TERMS[term.name].size(num_joints, commands.size, num_joints)
        if term.name == "command" and width != len(commands.names):
            raise PolicyImportError(f"observation term {term.source_name!r} is {width} wide, the task's command has "
                                    f"{len(commands.names)} ({', '.join(commands.names)})")
        if len(term.scale) not in (1, width):
            raise PolicyImportError(f"observation term {term.source_name!r}: {len(term.scale)} scales for "
                                    f"{width} values")
        scale = np.broadcast_to(np.array(term.scale, dtype=np.float64), (width,)).copy()
        offset = np.zeros(width)
        if term.name == "joint_pos_rel":
            offset = spec_default[perm] - policy_default  # q − d_policy = (q − d_spec) + (d_spec − d_policy)
        elif term.name == "last_action" and action_memory:
            if h > 1:
                raise PolicyImportError(f"observation term {term.source_name!r}: a history of past actions with a "
                                        "default pose that differs from the spec's is not supported; import it "
                                        "without --allow default-pose, with a spec whose default pose is the policy's")
            per_term.append((term, width, scale, offset, _clips(term, width), True))
            notes.append({"term": term.name, "source": term.source_name, "scale": list(term.scale), "clip": term.clip,
                          "applied_in": "graph (its own previous action, recurrent state)"})
            continue
        elif term.name == "last_action":  # undo the output map: the policy sees its own previous action
            scale = scale / ratio
        clips = _clips(term, width)
        in_contract = _uniform(scale) and not np.any(offset) and _uniform(clips)
        contract_scale_k = float(scale[0]) if in_contract else 1.0
        contract_clip = None if not in_contract or term.clip is None else float(clips[0])
        terms.append(ObsTerm(term.name, contract_scale_k, contract_clip, 0.0, h))
        per_term.append((term, width, np.ones(width) if in_contract else scale, offset,
                         np.full(width, NO_CLIP) if in_contract else clips, False))
        notes.append({"term": term.name, "source": term.source_name, "scale": list(term.scale), "clip": term.clip,
                      "applied_in": "contract" if in_contract else "graph"})
    layout = ObservationLayout(tuple(terms))
    sizes = layout.term_sizes(num_joints, commands.size, num_joints)
    starts = iter(np.cumsum([0] + [s * h for s in sizes]))
    # Each foreign term's first contract column (the previous-action state comes after the observation).
    first = [layout.size(num_joints, commands.size, num_joints) if entry[5] else next(starts) for entry in per_term]

    def block(k: int, frame: int) -> list[tuple[int, float, float, float]]:
        term, width, scale, offset, clip, from_state = per_term[k]
        if from_state:
            return [(int(first[k] + c), offset[c], scale[c], clip[c]) for c in range(width)]
        f = h - 1 - frame  # contract frames run oldest → newest; the trainer's frame 0 is this tick
        size = width if term.name not in JOINT_TERMS else num_joints
        comp = perm if term.name in JOINT_TERMS else np.arange(width)
        return [(int(first[k] + f * size + comp[c]), offset[c], scale[c], clip[c]) for c in range(width)]

    if foreign.history_layout == "time_major":
        order = [(k, fr) for fr in foreign.history for k in range(len(per_term))]
    else:
        order = [(k, fr) for k in range(len(per_term)) for fr in foreign.history]
    for k, fr in order:
        columns += block(k, fr)
    table = np.array(columns, dtype=np.float64)

    low = np.array([lo for lo, _ in foreign.action_clip])
    high = np.array([hi for _, hi in foreign.action_clip])
    matrix = np.zeros((n, num_joints))
    matrix[np.arange(n), perm] = ratio
    bias = np.zeros(num_joints)
    bias[perm] = action_offset
    reach = np.maximum(np.abs(ratio * low + action_offset), np.abs(ratio * high + action_offset))
    return Adapter(
        index=table[:, 0].astype(np.int64), offset=table[:, 1].astype(np.float32),
        scale=table[:, 2].astype(np.float32), clip=table[:, 3].astype(np.float32),
        action_low=low.astype(np.float32), action_high=high.astype(np.float32),
        action_matrix=matrix.astype(np.float32), action_bias=bias.astype(np.float32),
        contract_action=JointPositionAction(contract_scale, float(reach.max())),  # never tighter than the trainer's
        layout=layout, term_notes=tuple(notes), action_memory=action_memory,
    )


def imported_contract(foreign: ForeignPolicy, spec: RobotSpec, adapter: Adapter, commands: CommandSpec,
                      state_sizes: tuple[int, ...], provenance: Provenance) -> PolicyContract:
    contract = PolicyContract.expected_from(spec, adapter.layout, commands, adapter.contract_action,
                                            normalizer_baked_in=True, provenance=provenance)
    names = state_names(foreign, state_sizes, adapter)
    if names:
        contract = dataclasses.replace(contract, recurrent=RecurrentContract(tuple(
            RecurrentState(name, f"{name}_next", size) for name, size in names)))
    return contract


def state_names(foreign: ForeignPolicy, state_sizes: tuple[int, ...], adapter: Adapter) -> list[tuple[str, int]]:
    names = [("lstm_h", state_sizes[0]), ("lstm_c", state_sizes[1])] if state_sizes else []
    if "gait_phase" in foreign.extra_inputs:
        names.append(("gait_clock", 1))  # seconds since the policy started driving
    if adapter.action_memory:
        names.append(("previous_action", len(foreign.joint_names)))
    return names


__all__ = ["ALLOWANCES", "Adapter", "JointMap", "build_adapter", "imported_contract", "match_joints"]
