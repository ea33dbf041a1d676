"""mjlab ONNX policies (mujocolab/mjlab): the exporter writes the policy's description into the ONNX file's
``metadata_props`` (``mjlab.rl.exporter_utils.get_base_metadata`` / ``attach_metadata_to_onnx``, mjlab 1.6):

- ``joint_names``: the robot entity's joints in its natural (MJCF document) order. mjlab's JointPositionAction
  (``actuator_names=(".*",)``, its velocity tasks) and joint observations use that order for the actuated joints,
  so it is the policy's joint order where every joint is actuated (a legged robot's) — the metadata does not
  record the action term's own joint list;
- ``joint_stiffness``, ``joint_damping``, ``default_joint_pos``: per joint, in that order;
- ``action_scale``: per action joint (or one number);
- ``observation_names`` (the actor group's terms in order), ``observation_terms_scale`` (a number, or the
  per-component values joined by ``;``), ``observation_terms_clip`` (``low;high``, ``-inf;inf`` for none),
  ``observation_terms_history_length``, ``observation_terms_flatten_history_dim`` (a bool, written as a number:
  ``1.000``); ``command_names``.

Lists are comma-separated and every number is written with **3 decimals**, so gains, default pose and scales
are known to ±5e-4 (compared with the spec within that). mjlab processes a term as Isaac Lab does
(compute → noise → clip → scale → history, term-major, oldest first). The metadata names terms, not their
functions: the names are read as mjlab's velocity task defines them. Not in the metadata: the policy period
(mjlab's velocity tasks run at 50 Hz; not checked), an action clip (none assumed) and observation delays.
"""

from __future__ import annotations

from pathlib import Path

from robot_rl.policy.importers.description import ForeignPolicy, PolicyImportError
from robot_rl.policy.importers.isaac_lab import UNCLIPPED, clip_then_scale

REQUIRED = ("joint_names", "joint_stiffness", "joint_damping", "default_joint_pos", "observation_names",
            "action_scale")
# mjlab velocity task term names (tasks/velocity/velocity_env_cfg.py, the actor group) → this project's terms.
TERMS = {
    "base_lin_vel": "base_lin_vel",
    "base_ang_vel": "base_ang_vel",
    "projected_gravity": "projected_gravity",
    "joint_pos": "joint_pos_rel",
    "joint_vel": "joint_vel",
    "actions": "last_action",
    "command": "command",
}
DECIMALS_TOLERANCE = 5e-4 + 1e-9  # mjlab's list_to_csv_str: decimals=3


def mjlab_metadata(path: Path) -> dict[str, str] | None:
    """The file's metadata when it is mjlab's (its joint and observation keys), else None."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:
        return None  # not readable: the ONNX reader says why, with the description given
    props = {p.key: p.value for p in model.metadata_props}
    return props if {"joint_names", "observation_names", "default_joint_pos"} <= props.keys() else None


def _numbers(text: str, key: str, where: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise PolicyImportError(f"{where}: metadata {key} is not a comma-separated list of numbers: "
                                f"{text[:80]!r}") from None


def read_mjlab(path: Path) -> ForeignPolicy:
    where = str(path)
    meta = mjlab_metadata(path)
    if meta is None:
        raise PolicyImportError(f"{where}: no mjlab metadata (joint_names, observation_names, default_joint_pos)")
    missing = [k for k in REQUIRED if k not in meta]
    if missing:
        raise PolicyImportError(f"{where}: mjlab metadata without {missing[0]!r}")
    names = tuple(meta["joint_names"].split(","))
    n = len(names)
    per_joint = {}
    for key in ("joint_stiffness", "joint_damping", "default_joint_pos", "action_scale"):
        values = _numbers(meta[key], key, where)
        if len(values) == 1 and key == "action_scale":
            values = values * n
        if len(values) != n:
            raise PolicyImportError(f"{where}: metadata {key} has {len(values)} values for {n} joint_names "
                                    "(an action over part of the joints is not described by mjlab's metadata)")
        per_joint[key] = tuple(values)

    observation = meta["observation_names"].split(",")
    if "observation_terms_scale" not in meta:
        raise PolicyImportError(f"{where}: mjlab metadata without observation_terms_scale (written by mjlab before "
                                "its exporter recorded observation scales, clips and history); re-export it with "
                                "a current mjlab")
    columns = {k: meta.get(f"observation_terms_{k}", "").split(",")
               for k in ("scale", "clip", "history_length", "flatten_history_dim")}
    for k, values in columns.items():
        if len(values) != len(observation):
            raise PolicyImportError(f"{where}: metadata observation_terms_{k} has {len(values)} entries for "
                                    f"{len(observation)} observation_names")
    terms, frames = [], set()
    for i, name in enumerate(observation):
        if name not in TERMS:
            raise PolicyImportError(f"{where}: observation term {name!r} is not one of mjlab's velocity-task terms "
                                    f"this project produces (known: {', '.join(TERMS)})")
        try:
            scale = tuple(float(v) for v in columns["scale"][i].split(";"))
            clip = [float(v) for v in columns["clip"][i].split(";")]
            history = int(float(columns["history_length"][i]))
        except ValueError:
            raise PolicyImportError(f"{where}: observation term {name!r}: unreadable scale/clip/history "
                                    f"{columns['scale'][i]!r}/{columns['clip'][i]!r}/"
                                    f"{columns['history_length'][i]!r}") from None
        # written through the number format (a bool is an int): "1.000" / "0.000"
        if history and columns["flatten_history_dim"][i] not in ("True", "1.000", "1"):
            raise PolicyImportError(f"{where}: observation term {name!r}: history without flatten_history_dim")
        frames.add(max(history, 1))
        terms.append(clip_then_scale(TERMS[name], name, scale, clip, f"{where}: observation term {name!r}"))
    if len(frames) > 1:
        raise PolicyImportError(f"{where}: observation terms keep different history lengths ({sorted(frames)})")
    h = frames.pop()
    return ForeignPolicy(
        trainer=f"mjlab ONNX (run {meta.get('run_path', 'unknown')}; commands {meta.get('command_names', '?')})",
        model_path=path,
        model_format="onnx",
        joint_names=names,
        default_positions=per_joint["default_joint_pos"],
        kp=per_joint["joint_stiffness"],
        kd=per_joint["joint_damping"],
        action_scale=per_joint["action_scale"],
        action_clip=((-UNCLIPPED, UNCLIPPED),) * n,
        terms=tuple(terms),
        history=tuple(range(h - 1, -1, -1)),
        history_layout="term_major",
        policy_period_s=None,
        sources={"model": path},
        value_tolerance=DECIMALS_TOLERANCE,
    )
