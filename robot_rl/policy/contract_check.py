"""Comparing a model's policy contract with the one the runtime expects: every differing field, both values.

Floats are compared with ``math.isclose(rel_tol=1e-9, abs_tol=1e-12)``. Contract values travel as JSON
float64 ``repr`` strings, which round-trip exactly, so any real change (even one float32 ulp, ~1e-7
relative) is caught; the tolerance only absorbs the last-bit differences of a runtime deriving the same
value by other arithmetic (e.g. ``4 * 0.005`` vs ``0.02``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from robot_rl.policy.contract import (
    ContractMismatch,
    Mismatch,
    PolicyContract,
    check_schema_version,
    output_shape,
)

FLOAT_REL_TOL = 1e-9
FLOAT_ABS_TOL = 1e-12


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=FLOAT_REL_TOL, abs_tol=FLOAT_ABS_TOL)


class _Comparer:
    def __init__(self) -> None:
        self.found: list[Mismatch] = []

    def value(self, name: str, a: Any, b: Any, source: str) -> None:
        if isinstance(a, float) and isinstance(b, float):
            same = _close(a, b)
        else:
            same = a == b and type(a) is type(b)
        if not same:
            self.found.append(Mismatch(name, a, b, source))

    def sequence(self, name: str, a: tuple, b: tuple, source: str) -> None:
        """Per-item differences; a length difference is one mismatch showing both whole lists."""
        if len(a) != len(b):
            self.found.append(Mismatch(f"{name} (length {len(a)} vs {len(b)})", a, b, source))
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            self.value(f"{name}[{i}]", x, y, source)


def compare_contracts(found: PolicyContract, expected: PolicyContract, check_spec_hash: bool = True) -> list[Mismatch]:
    """Every difference between a model's contract and the runtime's; provenance is never compared."""
    c = _Comparer()
    c.value("schema_version", found.schema_version, expected.schema_version, "runtime")
    c.value("robot", found.robot, expected.robot, "spec")
    if check_spec_hash:
        c.value("spec_hash", found.spec_hash, expected.spec_hash, "spec")
    c.sequence("joint_names", found.joint_names, expected.joint_names, "spec")
    c.sequence("default_positions", found.default_positions, expected.default_positions, "spec")
    c.sequence("kp", found.kp, expected.kp, "spec")
    c.sequence("kd", found.kd, expected.kd, "spec")
    c.value("policy_period_s", found.policy_period_s, expected.policy_period_s, "spec")

    fa, ea = found.action, expected.action
    c.value("action.type", fa.type, ea.type, "task")
    c.value("action.scale", fa.scale, ea.scale, "task")
    c.value("action.clip", fa.clip, ea.clip, "task")
    c.sequence("action.offset", fa.offset, ea.offset, "spec")

    fo, eo = found.observation, expected.observation
    c.value("observation.history_layout", fo.history_layout, eo.history_layout, "task")
    c.value("observation.dim", fo.dim, eo.dim, "task")
    c.value("observation.gait_period_s", fo.gait_period_s, eo.gait_period_s, "task")
    if len(fo.terms) != len(eo.terms) or any(f.name != e.name for f, e in zip(fo.terms, eo.terms, strict=False)):
        # A missing, extra or reordered term: show both term lists rather than per-field noise.
        c.found.append(Mismatch("observation.terms", tuple(t.name for t in fo.terms),
                                tuple(t.name for t in eo.terms), "task"))
    else:
        for i, (ft, et) in enumerate(zip(fo.terms, eo.terms, strict=True)):
            at = f"observation.terms[{i}] ({ft.name})"
            c.value(f"{at}.size", ft.size, et.size, "task")
            c.value(f"{at}.scale", ft.scale, et.scale, "task")
            c.value(f"{at}.clip", ft.clip, et.clip, "task")
            c.value(f"{at}.history_length", ft.history_length, et.history_length, "task")

    c.sequence("commands.names", found.commands.names, expected.commands.names, "task")
    if len(found.commands.ranges) == len(expected.commands.ranges):
        for i, (fr, er) in enumerate(zip(found.commands.ranges, expected.commands.ranges, strict=True)):
            name = expected.commands.names[i] if i < len(expected.commands.names) else str(i)
            if not (_close(fr[0], er[0]) and _close(fr[1], er[1])):
                c.found.append(Mismatch(f"commands.ranges[{i}] ({name})", fr, er, "task"))
    else:
        c.found.append(Mismatch("commands.ranges", found.commands.ranges, expected.commands.ranges, "task"))

    # The chunk is the model's to choose; the output shape it implies is checked against the runtime's actions.
    expected_output = dataclasses.replace(expected.output, shape=output_shape(expected.num_actions, found.chunk))
    for label, ft, et in (("input", found.input, expected.input), ("output", found.output, expected_output)):
        c.value(f"{label}.name", ft.name, et.name, "runtime")
        c.value(f"{label}.shape", ft.shape, et.shape, "runtime")
        c.value(f"{label}.dtype", ft.dtype, et.dtype, "runtime")
    return c.found


def check_contract(found: PolicyContract, expected: PolicyContract, check_spec_hash: bool = True) -> None:
    """Raise ``ContractMismatch`` listing every difference (field and both values); return if none.

    ``check_spec_hash=False`` is for a spec edited in ways that cannot affect the policy (e.g. safety
    margins): every policy-relevant robot fact is still compared field by field.
    """
    check_schema_version(found.schema_version)
    mismatches = compare_contracts(found, expected, check_spec_hash)
    if mismatches:
        raise ContractMismatch(mismatches)
