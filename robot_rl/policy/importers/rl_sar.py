"""rl_sar deployment configs (fan-ziqi/rl_sar): ``policy/<robot>/<name>/config.yaml`` beside its model, and
``policy/<robot>/base.yaml`` with the robot's joint names in the robot's (SDK) order.

What the format means (rl_sar's deploy code): ``joint_mapping[i]`` is the robot joint that policy joint ``i``
drives, so the policy's joint names are ``base.joint_names[joint_mapping[i]]``; every other per-joint list of
the policy config (``rl_kp``, ``rl_kd``, ``default_dof_pos``, ``action_scale``, action clips) is in the
policy's order. ``observations`` lists the terms in order with the scales beside them; ``clip_obs`` applies
to the whole scaled observation; ``observations_history`` lists the frames (0 = this tick) in the order
they are concatenated, ``observations_history_priority`` "time" (frame by frame) or "term" (term by term).
The action is ``default_dof_pos + action_scale · clip(a, lower, upper)``. ``rl_kp``/``rl_kd`` are the gains
the policy was trained with (``fixed_kp`` are rl_sar's stand-up gains, not the policy's).
"""

from __future__ import annotations

from pathlib import Path

from robot_rl.policy.importers.description import ForeignPolicy, ForeignTerm, PolicyImportError, per_joint
from robot_rl.typed_yaml import ConfigError, read_yaml

# rl_sar term → (this project's term, the config key of its scale; None: unscaled).
TERMS = {
    "ang_vel": ("base_ang_vel", "ang_vel_scale"),
    "gravity_vec": ("projected_gravity", None),
    "commands": ("command", "commands_scale"),
    "dof_pos": ("joint_pos_rel", "dof_pos_scale"),
    "dof_vel": ("joint_vel", "dof_vel_scale"),
    "actions": ("last_action", None),
    "lin_vel": ("base_lin_vel", "lin_vel_scale"),
}


def is_rl_sar(data: object) -> bool:
    return (isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), dict)
            and "observations" in next(iter(data.values())))


def _read(path: Path) -> dict:
    try:
        return read_yaml(path)
    except ConfigError as exc:
        raise PolicyImportError(str(exc)) from None


def _base_config(config_path: Path, robot_key: str) -> tuple[Path, dict]:
    """rl_sar's ``policy/<robot>/base.yaml``, searched upwards from the config (at most three levels)."""
    for parent in list(config_path.resolve().parents)[:3]:
        candidate = parent / "base.yaml"
        if candidate.is_file():
            data = _read(candidate)
            if isinstance(data, dict) and isinstance(data.get(robot_key), dict):
                return candidate, data[robot_key]
    raise PolicyImportError(f"{config_path}: no rl_sar base.yaml with a {robot_key!r} section (the robot's joint "
                            "names) in the three folders above it; rl_sar keeps it at policy/<robot>/base.yaml")


def read_rl_sar(config_path: Path, model_path: Path | None) -> ForeignPolicy:
    data = _read(config_path)
    if not is_rl_sar(data):
        raise PolicyImportError(f"{config_path}: not an rl_sar policy config (one '<robot>/<policy>' section with "
                                "an 'observations' list)")
    key, cfg = next(iter(data.items()))
    where = f"{config_path} ({key})"
    robot_key = key.split("/")[0]
    base_path, base = _base_config(config_path, robot_key)

    def need(name: str, source: dict = cfg, at: str = where):
        if name not in source:
            raise PolicyImportError(f"{at}: no {name!r}")
        return source[name]

    robot_joints = need("joint_names", base, f"{base_path} ({robot_key})")
    n = int(need("num_of_dofs"))
    mapping = cfg.get("joint_mapping", base.get("joint_mapping"))
    if not isinstance(mapping, list) or len(mapping) != n or len(set(map(str, mapping))) != n:
        raise PolicyImportError(f"{where}: joint_mapping must list {n} distinct robot joint indices, got {mapping!r}")
    bad = [m for m in mapping if not isinstance(m, int) or not 0 <= m < len(robot_joints)]
    if bad:
        raise PolicyImportError(f"{where}: joint_mapping index {bad[0]!r} is not a joint of {base_path} "
                                f"({len(robot_joints)} joints)")
    joint_names = tuple(str(robot_joints[m]) for m in mapping)

    terms = []
    clip_obs = cfg.get("clip_obs")
    for name in need("observations"):
        if name not in TERMS:
            raise PolicyImportError(f"{where}: observation term {name!r} has no counterpart in this project's "
                                    f"observations (known: {', '.join(TERMS)})")
        ours, scale_key = TERMS[name]
        scale = cfg.get(scale_key, 1.0) if scale_key else 1.0
        scale = tuple(float(v) for v in scale) if isinstance(scale, list) else (float(scale),)
        terms.append(ForeignTerm(ours, name, scale, None if clip_obs is None else float(clip_obs)))

    history = tuple(int(h) for h in cfg.get("observations_history") or [0])
    priority = cfg.get("observations_history_priority", "time")
    if priority not in ("time", "term"):
        raise PolicyImportError(f"{where}: observations_history_priority must be 'time' or 'term', got {priority!r}")
    lower = per_joint(need("clip_actions_lower"), n, "clip_actions_lower", where)
    upper = per_joint(need("clip_actions_upper"), n, "clip_actions_upper", where)
    model = model_path if model_path is not None else config_path.parent / str(need("model_name"))
    if not model.is_file():
        raise PolicyImportError(f"{where}: model {model} not found")
    dt, decimation = base.get("dt", cfg.get("dt")), base.get("decimation", cfg.get("decimation"))
    return ForeignPolicy(
        trainer=f"rl_sar config {key}",
        model_path=model,
        model_format="onnx" if model.suffix == ".onnx" else "torchscript",
        joint_names=joint_names,
        default_positions=per_joint(need("default_dof_pos"), n, "default_dof_pos", where),
        kp=per_joint(need("rl_kp"), n, "rl_kp", where),
        kd=per_joint(need("rl_kd"), n, "rl_kd", where),
        action_scale=per_joint(need("action_scale"), n, "action_scale", where),
        action_clip=tuple(zip(lower, upper, strict=True)),
        terms=tuple(terms),
        history=history,
        history_layout="time_major" if priority == "time" else "term_major",
        policy_period_s=None if dt is None or decimation is None else float(dt) * int(decimation),
        sources={"model": model, "config": config_path, "base": base_path},
    )
