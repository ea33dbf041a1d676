"""A spec file that extends another: ``extends: g1`` plus only what differs.

A policy trained elsewhere may drive other joints than the shipped spec's ``policy_joints``, or want the gains
it was trained with. Its spec is the same robot with a few facts changed, so it names the spec it derives from
and states only those facts; copying the whole file would duplicate every robot fact and let the copies drift.

Merge rules (the extending file wins):

- ``extends``: a robot name (the shipped ``hardware/robots/<name>.yaml``) or a path relative to this file;
  the base may itself extend another.
- mappings (``timing``, ``safety``, ``sim_model``, …) merge key by key; lists and scalars are replaced —
  ``policy_joints: []`` lets the policy drive every joint.
- ``joints``: partial entries matched by ``name`` change those fields of that joint; joints cannot be added,
  removed or reordered (the motor order is the robot's), so an unknown name is an error.

The result is checked exactly as a complete spec file is; its ``source_file`` is the extending file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robot_rl.typed_yaml import ConfigError, read_yaml

EXTENDS = "extends"


def resolve_extends(data: Any, path: Path, specs_dir: Path, chain: tuple[Path, ...] = ()) -> Any:
    """``data`` read from ``path`` with its ``extends`` chain merged in (unchanged when it extends nothing)."""
    if not isinstance(data, dict) or EXTENDS not in data:
        return data
    ref = data[EXTENDS]
    if not isinstance(ref, str) or not ref:
        raise ConfigError(path, EXTENDS, f"must be a robot name or a spec file path, got {ref!r}")
    is_file = ref.endswith((".yaml", ".yml")) or "/" in ref
    base_path = (path.parent / ref if is_file else specs_dir / f"{ref}.yaml").resolve()
    if base_path in (*chain, path.resolve()):
        raise ConfigError(path, EXTENDS, f"{ref!r} extends itself (through {base_path})")
    if not base_path.is_file():
        raise ConfigError(path, EXTENDS, f"{ref!r}: no spec file at {base_path}")
    base = resolve_extends(read_yaml(base_path), base_path, specs_dir, (*chain, path.resolve()))
    if not isinstance(base, dict):
        raise ConfigError(base_path, "", "not a spec (a YAML mapping)")
    base = _anchor_model_path(base, base_path)
    own = {k: v for k, v in data.items() if k != EXTENDS}
    merged = _merge(base, {k: v for k, v in own.items() if k != "joints"})
    if "joints" in own:
        merged["joints"] = _merge_joints(base.get("joints"), own["joints"], path, base_path)
    return merged


def _anchor_model_path(base: dict, base_path: Path) -> dict:
    """A ``source: path`` model is relative to the spec file that names it, not to the one extending it."""
    sim = base.get("sim_model")
    if isinstance(sim, dict) and sim.get("source") == "path" and isinstance(sim.get("path"), str):
        return {**base, "sim_model": {**sim, "path": str((base_path.parent / sim["path"]).resolve())}}
    return base


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: _merge(base[k], v) if k in base else v for k, v in over.items()}}
    return over


def _merge_joints(base: Any, over: Any, path: Path, base_path: Path) -> list:
    if not isinstance(over, list) or not all(isinstance(j, dict) and isinstance(j.get("name"), str) for j in over):
        raise ConfigError(path, "joints", "in a spec that extends another: a list of {name: <joint>, <field>: "
                                          "<value>, …} entries, each changing fields of that joint")
    joints = [dict(j) for j in base] if isinstance(base, list) else []
    index = {j.get("name"): i for i, j in enumerate(joints)}
    for k, entry in enumerate(over):
        i = index.get(entry["name"])
        if i is None:
            raise ConfigError(path, f"joints[{k}].name", f"{entry['name']!r} is not a joint of the spec it extends "
                                                         f"({base_path}); joints cannot be added")
        joints[i].update(entry)
    return joints
