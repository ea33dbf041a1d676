"""Isaac Lab / rsl_rl runs: the run's ``params/env.yaml`` and ``params/agent.yaml`` (what Isaac Lab's train.py
writes with ``dump_yaml``: the env and agent configclasses as nested dicts, tuples tagged ``!!python/tuple``),
the policy play.py exports (``<run>/exported/policy.pt``, TorchScript, or ``policy.onnx``), and, where the
user exported them, Isaac Lab's IO descriptors (``*_IO_descriptors.yaml``).

What env.yaml determines (Isaac Lab's semantics, names matched with ``re.fullmatch``):

- the action: ``actions.<term>`` (a JointPositionAction) ``joint_names`` patterns, ``preserve_order``,
  ``scale`` (one value or {pattern: value}), ``use_default_offset``, ``clip`` ({pattern: [low, high]} on
  the joint target); agent.yaml's ``clip_actions`` clips the raw action before the env sees it;
- the default pose (``scene.robot.init_state.joint_pos``, {pattern: value}) and the gains
  (``scene.robot.actuators.<group>``: ``joint_names_expr``, ``stiffness``/``damping`` one value or
  {pattern: value});
- the observation: the actor's groups (agent.yaml ``obs_groups``, else ``policy``), each term's ``func``,
  ``scale``, ``clip`` (applied **before** the scale), ``history_length`` (term-major, oldest first),
  ``modifiers``; ``noise`` is training-only corruption and is recorded, not applied;
- the policy period: ``sim.dt · decimation``.

What it does **not** determine: the articulation's own joint order (Isaac Lab's, breadth-first over the
USD's kinematic tree). A term whose joints are ``[".*"]`` without ``preserve_order`` uses that order, so the
policy's joint order is then known only from the IO descriptors (``articulations.robot.joint_names``, and each
term's ``joint_names``), and the import is refused without them. Where every pattern names one joint and
``preserve_order`` is set (robot_lab's configs), env.yaml alone fixes the order. Patterns are resolved
against the IO descriptors' joints, else the robot spec's.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from robot_rl.policy.importers.description import ForeignPolicy, ForeignTerm, PolicyImportError

# Isaac Lab observation functions (``module:function``, by function) → this project's terms.
FUNCS = {
    "base_ang_vel": "base_ang_vel",
    "projected_gravity": "projected_gravity",
    "generated_commands": "command",
    "joint_pos_rel": "joint_pos_rel",
    "joint_vel_rel": "joint_vel",
    "last_action": "last_action",
    "base_lin_vel": "base_lin_vel",
}
JOINT_FUNCS = ("joint_pos_rel", "joint_vel_rel")
UNCLIPPED = 1e6


class _EnvYamlLoader(yaml.SafeLoader):
    """dump_yaml's output without running anything: tuples read as lists; every other Python tag (the slice
    of a SceneEntityCfg's ``joint_ids``, class names) reads as None: data the importer does not use."""


_EnvYamlLoader.add_constructor("tag:yaml.org,2002:python/tuple", lambda loader, node: loader.construct_sequence(node))
_EnvYamlLoader.add_multi_constructor("", lambda loader, suffix, node: None)


def read_run_yaml(path: Path) -> dict:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_EnvYamlLoader)
    except OSError as exc:
        raise PolicyImportError(f"{path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise PolicyImportError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise PolicyImportError(f"{path}: not a mapping")
    return data


def is_isaac_lab_env(data: object) -> bool:
    return isinstance(data, dict) and {"scene", "observations", "actions", "decimation", "sim"} <= data.keys()


def find_run_files(description: Path) -> tuple[Path, Path, Path | None]:
    """(env.yaml, agent.yaml, IO descriptors or None) from a run directory, its params/ or its env.yaml."""
    env = description / "params" / "env.yaml" if description.is_dir() else description
    if description.is_dir() and not env.is_file():
        env = description / "env.yaml"
    if not env.is_file():
        raise PolicyImportError(f"{description}: no params/env.yaml (an Isaac Lab run directory holds "
                                "params/env.yaml and params/agent.yaml)")
    agent = env.parent / "agent.yaml"
    if not agent.is_file():
        raise PolicyImportError(f"{env}: no agent.yaml beside it (the rsl_rl agent config: clip_actions, actor, "
                                "observation groups)")
    run = env.parent.parent if env.parent.name == "params" else env.parent
    found = sorted({p for d in (run, env.parent, run / "exported") for p in d.glob("*IO_descriptors.yaml")})
    if len(found) > 1:
        raise PolicyImportError(f"{run}: {len(found)} IO descriptor files ({', '.join(p.name for p in found)}); "
                                "keep the one of this policy")
    return env, agent, (found[0] if found else None)


def find_exported_model(env: Path) -> Path:
    run = env.parent.parent if env.parent.name == "params" else env.parent
    for name in ("policy.pt", "policy.onnx"):
        if (run / "exported" / name).is_file():
            return run / "exported" / name
    raise PolicyImportError(f"{run}: no exported/policy.pt or exported/policy.onnx (Isaac Lab's play.py exports "
                            "them); give the policy file as MODEL and the run as --description")


def _is_literal(pattern: str) -> bool:
    return re.fullmatch(r"[A-Za-z0-9_\-/]+", pattern) is not None


def _patterns(value, where: str) -> list[str]:
    patterns = [value] if isinstance(value, str) else value
    if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) for p in patterns):
        raise PolicyImportError(f"{where}: expected a joint name pattern or a list of them, got {value!r}")
    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise PolicyImportError(f"{where}: {p!r} is not a regular expression ({exc})") from None
    return patterns


def _matches(pattern: str, universe: tuple[str, ...], where: str, joints: str) -> list[str]:
    found = [n for n in universe if re.fullmatch(pattern, n)]
    if not found:
        raise PolicyImportError(f"{where}: pattern {pattern!r} matches no joint of {joints}")
    return found


def resolve_names(value, preserve_order: bool, universe: tuple[str, ...], where: str, joints: str) -> list[str]:
    """Isaac Lab's resolve_matching_names: the matched joints in the universe's order, or pattern by pattern
    with ``preserve_order``; a pattern that matches nothing or a joint two patterns match is an error."""
    patterns = _patterns(value, where)
    per_pattern = [_matches(p, universe, where, joints) for p in patterns]
    owner: dict[str, str] = {}
    for p, names in zip(patterns, per_pattern, strict=True):
        for n in names:
            if n in owner:
                raise PolicyImportError(f"{where}: joint {n!r} matches both {owner[n]!r} and {p!r}")
            owner[n] = p
    if preserve_order:
        return [n for names in per_pattern for n in names]
    return [n for n in universe if n in owner]


def resolve_values(value, names: list[str], universe: tuple[str, ...], where: str, joints: str,
                   what: str) -> dict[str, float | None]:
    """One number for every joint, or {pattern: value}: each joint of ``names`` → its value (None: no pattern
    names it). Every pattern must match a joint of the universe; two patterns that give one joint different
    values conflict."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return {n: None if value is None else float(value) for n in names}
    if not isinstance(value, dict):
        raise PolicyImportError(f"{where}: {what} must be a number or {{joint pattern: value}}, got {value!r}")
    out: dict[str, float | None] = {n: None for n in names}
    source: dict[str, str] = {}
    for pattern, v in value.items():
        for n in _matches(str(_patterns(pattern, where)[0]), universe, where, joints):
            if n not in out:
                continue
            if not isinstance(v, int | float) or isinstance(v, bool):
                raise PolicyImportError(f"{where}.{pattern}: {what} must be a number, got {v!r}")
            if out[n] is not None and float(v) != out[n]:
                raise PolicyImportError(f"{where}: conflicting {what} for {n}: {source[n]!r} gives {out[n]:g}, "
                                        f"{pattern!r} gives {float(v):g}")
            out[n], source[n] = float(v), str(pattern)
    return out


def _get(data: dict, dotted: str, where: str):
    node = data
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            raise PolicyImportError(f"{where}: no {dotted}")
        node = node[key]
    return node


def _action_term(env: dict, where: str) -> tuple[str, dict]:
    terms = {k: v for k, v in (env.get("actions") or {}).items() if isinstance(v, dict)}
    if len(terms) != 1:
        raise PolicyImportError(f"{where}: actions has {len(terms)} terms ({', '.join(terms) or 'none'}); the "
                                "importer reads policies whose action is one JointPositionAction")
    name, term = next(iter(terms.items()))
    if not str(term.get("class_type", "")).endswith(":JointPositionAction"):
        raise PolicyImportError(f"{where}: actions.{name} is a {term.get('class_type')!r}, not a "
                                "JointPositionAction")
    return name, term


def _gains(env: dict, names: list[str], universe: tuple[str, ...], where: str, joints: str):
    actuators = _get(env, "scene.robot.actuators", where)
    kp: dict[str, tuple[float, str]] = {}
    kd: dict[str, tuple[float, str]] = {}
    for group, cfg in actuators.items():
        if not isinstance(cfg, dict):
            continue
        at = f"{where} scene.robot.actuators.{group}"
        members = resolve_names(cfg.get("joint_names_expr"), False, universe, f"{at}.joint_names_expr", joints)
        for table, key in ((kp, "stiffness"), (kd, "damping")):
            values = resolve_values(cfg.get(key), [n for n in names if n in members], universe, f"{at}.{key}",
                                    joints, key)
            for n, v in values.items():
                if v is None:
                    raise PolicyImportError(f"{at}.{key}: no value for {n} (null: the USD's own drive, which "
                                            "env.yaml does not record)")
                if n in table and table[n][0] != v:
                    raise PolicyImportError(f"{where}: conflicting gains for {n}: actuator group "
                                            f"{table[n][1]!r} gives {key} {table[n][0]:g}, {group!r} gives {v:g}")
                table[n] = (v, group)
    missing = [n for n in names if n not in kp]
    if missing:
        raise PolicyImportError(f"{where} scene.robot.actuators: no actuator group drives {missing[0]!r}")
    return tuple(kp[n][0] for n in names), tuple(kd[n][0] for n in names)


def _term(name: str, cfg: dict, ours: str, where: str) -> ForeignTerm:
    """Isaac Lab computes ``scale · clip(value, low, high)``; as this project's ``clip(scale · value, ±c)``."""
    if cfg.get("modifiers"):
        raise PolicyImportError(f"{where}.{name}: modifiers {cfg['modifiers']!r} are not reproduced by the importer")
    scale = cfg.get("scale")
    scale = (1.0,) if scale is None else tuple(float(s) for s in (scale if isinstance(scale, list) else [scale]))
    return clip_then_scale(ours, name, scale, cfg.get("clip"), f"{where}.{name}")


def clip_then_scale(ours: str, source: str, scale: tuple[float, ...], clip, where: str) -> ForeignTerm:
    if any(s <= 0 for s in scale):
        raise PolicyImportError(f"{where}: scale {list(scale)} is not positive")
    if clip is None:
        return ForeignTerm(ours, source, scale, None)
    if not isinstance(clip, list) or len(clip) != 2 or not float(clip[0]) == -float(clip[1]):
        raise PolicyImportError(f"{where}: clip {clip!r} is not a symmetric (low, high) range; the importer "
                                "reproduces symmetric clips")
    bound = abs(float(clip[1]))
    if bound == float("inf"):
        return ForeignTerm(ours, source, scale, None)
    return ForeignTerm(ours, source, scale, tuple(bound * s for s in scale) if len(scale) > 1 else bound * scale[0])


def _io_descriptors(path: Path | None, asset: str) -> tuple[tuple[str, ...] | None, dict]:
    if path is None:
        return None, {}
    data = read_run_yaml(path)
    names = ((data.get("articulations") or {}).get(asset) or {}).get("joint_names")
    if not isinstance(names, list) or not names:
        raise PolicyImportError(f"{path}: no articulations.{asset}.joint_names")
    return tuple(str(n) for n in names), data


def _joint_order(term_name: str, patterns, preserve: bool, universe: tuple[str, ...], where: str, joints: str,
                 io_names: list | None, articulation_known: bool) -> list[str]:
    """The joints a term covers, in its order; refused where the order is the articulation's and nothing gives
    it (no IO descriptors)."""
    names = resolve_names(patterns, preserve, universe, where, joints)
    if io_names is not None:
        if list(io_names) != names:
            raise PolicyImportError(f"{where}: env.yaml resolves to {names}, the IO descriptors' {term_name} "
                                    f"lists {list(io_names)}")
        return names
    if not articulation_known and not (preserve and all(len(_matches(p, universe, where, joints)) == 1
                                                                    for p in _patterns(patterns, where))):
        raise PolicyImportError(
            f"{where}: joints {patterns!r}{'' if preserve else ' without preserve_order'} are in the articulation's "
            "own order (Isaac Lab's breadth-first order of the USD), which env.yaml does not record; give the "
            "run's IO descriptors (*_IO_descriptors.yaml in the run directory, from Isaac Lab's export_IO_descriptors)"
            ", which list the articulation's joint_names")
    return names


def read_isaac_lab(description: Path, model: Path | None, robot_joints: tuple[str, ...] = ()) -> ForeignPolicy:
    env_path, agent_path, io_path = find_run_files(description)
    env, agent = read_run_yaml(env_path), read_run_yaml(agent_path)
    where = str(env_path)
    if not is_isaac_lab_env(env):
        raise PolicyImportError(f"{where}: not an Isaac Lab env.yaml (scene, observations, actions, sim, decimation)")
    action_name, action = _action_term(env, where)
    asset = str(action.get("asset_name", "robot"))
    io_universe, io = _io_descriptors(io_path, asset)
    if io_universe is not None:
        universe, joints = io_universe, f"the IO descriptors' {asset} ({io_path.name})"
    elif robot_joints:
        universe, joints = tuple(robot_joints), "the robot spec (env.yaml does not list the articulation's joints)"
    else:
        raise PolicyImportError(f"{where}: the articulation's joints are not known (no IO descriptors, no spec)")

    io_action = next((a for a in io.get("actions") or [] if str(a.get("full_path", "")).endswith(
        "JointPositionAction")), None)
    at = f"{where} actions.{action_name}"
    names = _joint_order("action", action.get("joint_names"), bool(action.get("preserve_order", False)), universe,
                         f"{at}.joint_names", joints, io_action.get("joint_names") if io_action else None,
                         io_universe is not None)
    default = resolve_values(_get(env, "scene.robot.init_state.joint_pos", where), names, universe,
                             f"{where} scene.robot.init_state.joint_pos", joints, "default position")
    default = {k: 0.0 if v is None else v for k, v in default.items()}  # Isaac Lab: unmatched joints start at 0
    scale = resolve_values(action.get("scale", 1.0), names, universe, f"{at}.scale", joints, "action scale")
    if any(v is None for v in scale.values()):
        raise PolicyImportError(f"{at}.scale: no scale for {next(k for k, v in scale.items() if v is None)!r}")
    if not action.get("use_default_offset", True):
        offset = resolve_values(action.get("offset", 0.0), names, universe, f"{at}.offset", joints, "offset")
        if any(abs((offset[k] or 0.0) - default[k]) > 1e-9 for k in names):
            raise PolicyImportError(f"{at}: use_default_offset is false (targets = offset + scale · action, not the "
                                    "default pose + scale · action); the importer reads default-offset actions")
    # Raw-action bounds: agent.yaml's clip_actions (on the raw action) and the term's clip (on the target).
    raw = agent.get("clip_actions")
    low = {k: -UNCLIPPED if raw is None else -float(raw) for k in names}
    high = {k: UNCLIPPED if raw is None else float(raw) for k in names}
    for pattern, bounds in (action.get("clip") or {}).items():
        for k in _matches(str(pattern), universe, f"{at}.clip", joints):
            if k in low:
                lo, hi = ((float(b) - default[k]) / scale[k] for b in bounds)
                low[k], high[k] = max(low[k], lo), min(high[k], hi)
    kp, kd = _gains(env, names, universe, where, joints)

    policy_key = "policy" if "policy" in (agent.get("obs_groups") or {}) else "actor"
    groups = (agent.get("obs_groups") or {}).get(policy_key) or ["policy"]
    terms, frames = [], set()
    io_terms = {t.get("name"): t for g in groups for t in (io.get("observations") or {}).get(g) or []}
    for group in groups:
        cfg = (env.get("observations") or {}).get(group)
        if not isinstance(cfg, dict):
            raise PolicyImportError(f"{where}: observations.{group} (the actor's group in {agent_path.name}) is "
                                    "not there")
        gat = f"{where} observations.{group}"
        for term_name, term in cfg.items():
            if not isinstance(term, dict) or "func" not in term:
                continue
            func = str(term["func"]).rsplit(":", 1)[-1]
            if func not in FUNCS:
                raise PolicyImportError(f"{gat}.{term_name}: {term['func']} has no counterpart in this project's "
                                        f"observations (known: {', '.join(FUNCS)})")
            history = cfg.get("history_length") if cfg.get("history_length") is not None else term.get(
                "history_length") or 0
            flatten = cfg.get("flatten_history_dim", True) if cfg.get("history_length") is not None else term.get(
                "flatten_history_dim", True)
            if history and not flatten:
                raise PolicyImportError(f"{gat}.{term_name}: history without flatten_history_dim is not a flat "
                                        "observation vector")
            frames.add(max(int(history), 1))
            params = term.get("params") or {}
            if func in JOINT_FUNCS:
                asset_cfg = params.get("asset_cfg") or {}
                term_joints = _joint_order(term_name, asset_cfg.get("joint_names") or [".*"],
                                           bool(asset_cfg.get("preserve_order", False)), universe,
                                           f"{gat}.{term_name}.params.asset_cfg.joint_names", joints,
                                           io_terms.get(term_name, {}).get("joint_names"), io_universe is not None)
                if term_joints != names:
                    raise PolicyImportError(f"{gat}.{term_name}: its joints {term_joints} are not the action's "
                                            f"order {names}; the importer reads one joint order per policy")
            if func == "generated_commands":
                command = (env.get("commands") or {}).get(params.get("command_name"))
                if not isinstance(command, dict) or "VelocityCommand" not in str(command.get("class_type")):
                    raise PolicyImportError(f"{gat}.{term_name}: command {params.get('command_name')!r} is not a "
                                            "velocity command (vx, vy, yaw rate) of commands")
            terms.append(_term(term_name, term, FUNCS[func], gat))
    if len(frames) > 1:
        raise PolicyImportError(f"{where}: the actor's terms keep different history lengths ({sorted(frames)}); "
                                "the importer reads one history length for all terms")
    h = frames.pop() if frames else 1
    model = model if model is not None else find_exported_model(env_path)
    if not model.is_file():
        raise PolicyImportError(f"{model}: no such file")
    actor = agent.get("policy") or agent.get("actor") or {}
    sources = {"model": model, "env_yaml": env_path, "agent_yaml": agent_path}
    if io_path is not None:
        sources["io_descriptors"] = io_path
    return ForeignPolicy(
        trainer=f"Isaac Lab / rsl_rl run {agent.get('experiment_name', env_path.parent.parent.name)} "
                f"({actor.get('class_name', 'policy')})",
        model_path=model,
        model_format="onnx" if model.suffix == ".onnx" else "torchscript",
        joint_names=tuple(names),
        default_positions=tuple(default[k] for k in names),
        kp=kp,
        kd=kd,
        action_scale=tuple(scale[k] for k in names),
        action_clip=tuple((low[k], high[k]) for k in names),
        terms=tuple(terms),
        history=tuple(range(h - 1, -1, -1)),  # Isaac Lab's CircularBuffer, flattened: oldest first, term by term
        history_layout="term_major",
        policy_period_s=float(_get(env, "sim.dt", where)) * int(env["decimation"]),
        sources=sources,
        actor_hidden_dims=tuple(int(d) for d in actor.get("actor_hidden_dims") or ()),
    )
