"""The import pipeline: description → joints by name → adapter → network → contract → verified ONNX file."""

from __future__ import annotations

import math
from pathlib import Path

from robot_rl.policy.contract import IMPORTED_NOTE
from robot_rl.policy.export import collect_provenance
from robot_rl.policy.importers import read_description
from robot_rl.policy.importers.build import build_adapter, imported_contract, match_joints, state_names
from robot_rl.policy.importers.description import PolicyImportError
from robot_rl.policy.importers.write import adapted_module, write_policy
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.a1_velocity import COMMANDS as VELOCITY_COMMANDS
from robot_rl.tasks.registry import make_task


def _check_hidden_dims(foreign, net) -> None:
    import torch

    if not foreign.actor_hidden_dims or not hasattr(net, "actor"):
        return
    widths = tuple(m.out_features for m in net.actor.modules() if isinstance(m, torch.nn.Linear))[:-1]
    if widths != foreign.actor_hidden_dims:
        raise PolicyImportError(f"{foreign.model_path}: its actor's hidden layers are {list(widths)}, the run's "
                                f"agent config says {list(foreign.actor_hidden_dims)}: a model from another run?")


def convert(model: Path, description: Path | None, robot: str, task: str | None, out: Path,
            allow: tuple[str, ...] = (), overwrite: bool = False) -> str:
    """Import one policy; return a one-paragraph summary of what was mapped.

    ``task`` None (a robot without a task yet): the velocity commands of the A1 task, and a file that names no
    task, which converts and runs through ``load_policy`` but not the gate or ``deploy`` (they need a task)."""
    spec = load_robot(robot)
    foreign = read_description(model, description, spec.joint_names)
    if task is None:
        commands = VELOCITY_COMMANDS
    else:
        task_cfg = make_task(task)
        if task_cfg.robot != spec.name:
            raise PolicyImportError(f"task {task!r} is for robot {task_cfg.robot!r}, not {spec.name!r}")
        commands = task_cfg.commands
    period = spec.timing.policy_period_s
    if foreign.policy_period_s is not None and not math.isclose(foreign.policy_period_s, period, rel_tol=1e-6):
        raise PolicyImportError(f"policy period: the policy runs every {foreign.policy_period_s * 1e3:g} ms "
                                f"({foreign.trainer}), robot {spec.name!r} every {period * 1e3:g} ms")
    joints = match_joints(foreign, spec, allow)
    adapter = build_adapter(foreign, spec, joints, commands)
    if foreign.model_format != "torchscript":
        from robot_rl.policy.importers.onnx_source import onnx_network

        net, sizes, arch = onnx_network(foreign.model_path, len(adapter.index))
    else:
        from robot_rl.policy.importers.networks import rebuild

        frame = len(adapter.index) // len(foreign.history) + 2 * ("gait_phase" in foreign.extra_inputs)
        net, sizes, arch = rebuild(foreign.model_path, frame, len(foreign.history))
    _check_hidden_dims(foreign, net)
    note = {
        "trainer": foreign.trainer,
        "architecture": arch,
        "sources": foreign.source_hashes(),
        "policy_joint_order": list(foreign.joint_names),
        "history": {"frames": list(foreign.history), "layout": foreign.history_layout},
        "observation": list(adapter.term_notes),
        "action_scale": list(foreign.action_scale),
        "trained_gains": {"kp": list(foreign.kp), "kd": list(foreign.kd)},
        "trained_default_pose": list(foreign.default_positions),
        "allowed": dict(joints.overridden),
        "held_joints": list(joints.held),
        "extra_inputs": list(foreign.extra_inputs),
    }
    provenance = collect_provenance(task or "", notes={IMPORTED_NOTE: note})
    contract = imported_contract(foreign, spec, adapter, commands, sizes, provenance)
    module = adapted_module(net, adapter, foreign, len(sizes), period)
    err = write_policy(module, contract, out, overwrite)
    states = ", ".join(f"{n}[{s}]" for n, s in state_names(foreign, sizes, adapter)) or "none"
    return (f"wrote {out}: {foreign.trainer} ({arch}) for {spec.name}, {contract.obs_dim} observations "
            f"({', '.join(t.name for t in contract.observation.terms)}; history {len(foreign.history)}, "
            f"{foreign.history_layout} in the trainer), {len(foreign.joint_names)} joints matched by name"
            f"{f', {len(joints.held)} held' if joints.held else ''}; recurrent state: {states}; onnxruntime vs "
            f"torch over a sequence: {err:.2g}")
