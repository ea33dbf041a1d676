"""The robot_lab Go2 network (rl_sar's TorchScript, from ../shared/external) as another trainer would have
exported it for another joint order: the same weights with the joint blocks of its input and its output rows
permuted, written as a plain MLP ONNX (input ``obs``, output ``actions``, as rsl_rl's and mjlab's exporters
name them). A network trained on a robot whose joints are ordered that way computes exactly this."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

SDK_ORDER = ("FR_hip_joint", "FR_thigh_joint", "FR_calf_joint", "FL_hip_joint", "FL_thigh_joint", "FL_calf_joint",
             "RR_hip_joint", "RR_thigh_joint", "RR_calf_joint", "RL_hip_joint", "RL_thigh_joint", "RL_calf_joint")
# MuJoCo Menagerie go2.xml's joint order (what mjlab's natural order is for it).
LEGS, PARTS = ("FL", "FR", "RL", "RR"), ("hip", "thigh", "calf")
MENAGERIE_ORDER = tuple(f"{leg}_{part}_joint" for leg in LEGS for part in PARTS)
# Isaac Lab's breadth-first order of the Go2's articulation: every hip, then every thigh, then every calf.
BREADTH_FIRST_ORDER = tuple(f"{leg}_{part}_joint" for part in PARTS for leg in LEGS)
JOINT_BLOCKS = (9, 21, 33)  # robot_lab's observation: ang_vel, gravity, command (9), then q, dq, last action


def robot_lab_in_order(policy_pt: Path, order: tuple[str, ...], out: Path, metadata: dict[str, str] | None = None):
    import onnx
    import torch

    actor = torch.jit.load(str(policy_pt), map_location="cpu").actor
    weights = [(c.weight.detach().clone(), c.bias.detach().clone()) for c in actor.children()
               if c.original_name == "Linear"]
    perm = [SDK_ORDER.index(name) for name in order]  # new joint j is the network's joint perm[j]
    w0, b0 = weights[0]
    columns = list(range(w0.shape[1]))
    for start in JOINT_BLOCKS:
        columns[start:start + 12] = [start + p for p in perm]
    weights[0] = (w0[:, columns], b0)
    wl, bl = weights[-1]
    weights[-1] = (wl[perm], bl[perm])
    layers = []
    for i, (w, b) in enumerate(weights):
        linear = torch.nn.Linear(w.shape[1], w.shape[0])
        linear.weight.data.copy_(w)
        linear.bias.data.copy_(b)
        layers += [linear] + ([torch.nn.ELU()] if i < len(weights) - 1 else [])
    mlp = torch.nn.Sequential(*layers).eval()
    with warnings.catch_warnings():  # the TorchScript-based exporter, as rsl_rl's exporter uses it: deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(mlp, (torch.zeros(1, w0.shape[1]),), str(out), input_names=["obs"],
                          output_names=["actions"], dynamo=False, opset_version=17)
    model = onnx.load(str(out))
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(out))
    return out


def reference_actions(policy_pt: Path, obs_sdk: np.ndarray) -> np.ndarray:
    """The TorchScript network itself on observations in SDK joint order."""
    import torch

    with torch.no_grad():
        return torch.jit.load(str(policy_pt), map_location="cpu")(torch.from_numpy(obs_sdk)).numpy()


def mjlab_csv(values) -> str:
    """A list as mjlab 1.6's exporter writes it into the ONNX metadata (exporter_utils.list_to_csv_str: numbers
    with 3 decimals, bools through the same number format, per-term sequences joined by ';')."""
    def scalar(x) -> str:
        return f"{x:.3f}" if isinstance(x, int | float) else str(x)

    return ",".join(";".join(scalar(v) for v in x) if isinstance(x, list | tuple) else scalar(x) for x in values)


def robot_lab_mjlab_metadata(order: tuple[str, ...], **override) -> dict[str, str]:
    """The metadata mjlab would attach to robot_lab's Go2 policy trained with joints in ``order`` (its values:
    rl_sar's robot_lab config), in mjlab's keys and format."""
    default = {"hip": 0.0, "thigh": 0.8, "calf": -1.5}
    scale = {"hip": 0.125, "thigh": 0.25, "calf": 0.25}
    terms = ["base_ang_vel", "projected_gravity", "command", "joint_pos", "joint_vel", "actions"]
    meta = {
        "run_path": "local",
        "joint_names": list(order),
        "joint_stiffness": [20.0] * len(order),
        "joint_damping": [0.5] * len(order),
        "default_joint_pos": [default[n.split("_")[1]] for n in order],
        "command_names": ["twist"],
        "observation_names": terms,
        "observation_terms_scale": [0.25, 1.0, 1.0, 1.0, 0.05, 1.0],
        "observation_terms_flatten_history_dim": [True] * len(terms),
        "observation_terms_history_length": [0] * len(terms),
        "observation_terms_clip": [[-100.0, 100.0]] * len(terms),
        "action_scale": [scale[n.split("_")[1]] for n in order],
    }
    meta.update(override)
    return {k: mjlab_csv(v) if isinstance(v, list) else str(v) for k, v in meta.items()}
