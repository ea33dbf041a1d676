"""Continued PPO on a behaviour-cloned policy: the BC network, read back from its ONNX, as rsl_rl's actor.

Why: fine-tuning benchmarks compare a residual against "continuing to train the full policy". For a PPO base
that is rsl_rl's own checkpoint; a BC policy ships only as ONNX (``robot_rl.learn.bc``: a fixed observation
normalizer, an ELU MLP with a linear skip path, an output de-normalization, optionally the current-joints
anchor). Its parameters are named initializers in that graph (``actor.mlp.mlp.0.weight`` …), so the exact
network is rebuilt from them (:func:`bc_modules_from_onnx`; checked against onnxruntime on the file's own
inputs) and wrapped as an ``MLPModel`` (:class:`BCActorModel`): the BC normalizer in place of rsl_rl's
empirical one (frozen: the network's weights were fitted to it), the de-normalizing head as its MLP, a
Gaussian with a learnable state-independent σ around it. Exported through ``export_rsl_rl_policy`` like any
rsl_rl actor, so a continued policy has the same contract and graph shape as the BC one.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch
from rsl_rl.models import MLPModel
from tensordict import TensorDict

from robot_rl.core.errors import RobotRLError
from robot_rl.learn.bc import Anchor, build_modules
from robot_rl.policy.onnx_policy import read_contract
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.task import TaskCfg

_LAYER = re.compile(r"^actor\.mlp\.mlp\.(\d+)\.weight$")


class NotABCPolicy(RobotRLError, ValueError):
    """The ONNX file is not a policy exported by ``robot_rl.learn.bc`` (its initializers do not name the BC net)."""


def _initializers(path: Path) -> dict[str, np.ndarray]:
    import onnx
    from onnx import numpy_helper

    try:
        model = onnx.load(str(path))
    except Exception as exc:  # onnx raises several types for a file that is not a model
        raise NotABCPolicy(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    return {t.name: numpy_helper.to_array(t).copy() for t in model.graph.initializer}


def bc_modules_from_onnx(path: str | Path, task: TaskCfg, spec: RobotSpec):
    """(obs normalizer, deploy head) of the BC policy at ``path`` as trainable torch modules, equal to the file
    (checked on random observations against onnxruntime). Raises :class:`NotABCPolicy` naming what is missing."""
    path = Path(path)
    weights = _initializers(path)
    needed = ("obs_normalizer.mean", "obs_normalizer.std", "actor.out_mean", "actor.out_std")
    layers = sorted(int(m.group(1)) for name in weights if (m := _LAYER.match(name)))
    missing = [n for n in needed if n not in weights] + ([] if layers else ["actor.mlp.mlp.<i>.weight"])
    if missing:
        raise NotABCPolicy(f"{path}: not a robot_rl BC policy (no initializers {', '.join(missing)}); continued PPO "
                           "reads the BC network's named weights — train it with robot_rl.learn.bc")
    contract = read_contract(path)
    num_actions, obs_mean = contract.num_actions, weights["obs_normalizer.mean"]
    out_width = weights[f"actor.mlp.mlp.{layers[-1]}.weight"].shape[0]
    if out_width % num_actions:
        raise NotABCPolicy(f"{path}: its network outputs {out_width} values, not a chunk of {num_actions} actions")
    hidden = tuple(int(weights[f"actor.mlp.mlp.{i}.weight"].shape[0]) for i in layers[:-1])
    anchor = Anchor.for_task(task, spec.num_joints) if "actor.anchor_mean" in weights else None
    out_mean = np.tile(weights["actor.out_mean"], out_width // num_actions)
    out_std = np.tile(weights["actor.out_std"], out_width // num_actions)
    normalizer, _, head = build_modules(obs_mean, weights["obs_normalizer.std"], out_mean, out_std, num_actions,
                                        out_width // num_actions, hidden, anchor,
                                        linear_skip="actor.mlp.skip.weight" in weights)
    def part(prefix: str) -> dict[str, torch.Tensor]:
        return {k.removeprefix(prefix): torch.as_tensor(v) for k, v in weights.items() if k.startswith(prefix)}

    normalizer.load_state_dict(part("obs_normalizer."))
    head.load_state_dict(part("actor."))  # strict: an initializer the BC net lacks, or the reverse, fails here
    _check_equal(path, normalizer, head, obs_mean, weights["obs_normalizer.std"])
    return normalizer, head


def _check_equal(path: Path, normalizer, head, obs_mean: np.ndarray, obs_std: np.ndarray) -> None:
    import onnxruntime as ort

    # Observations the network was fitted on (within 2 σ of the demos' mean): raw N(0, 1) inputs would put a feature
    # the demos barely varied (the cube's height, σ floored at 1e-3) thousands of σ out, where float32 alone errs.
    z = np.random.default_rng(0).uniform(-2.0, 2.0, size=(16, len(obs_mean)))
    obs = (obs_mean + z * obs_std).astype(np.float32)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = session.run(None, {session.get_inputs()[0].name: obs})[0]
    with torch.no_grad():
        got = head(normalizer(torch.from_numpy(obs))).numpy()
    err = float(np.max(np.abs(got - expected)) / (1.0 + np.max(np.abs(expected))))
    if err > 1e-4:
        raise NotABCPolicy(f"{path}: the network rebuilt from its weights differs from the file by {err:.2g} "
                           "(relative); its graph is not the BC architecture robot_rl.learn.bc exports")


class FrozenNormalizer(torch.nn.Module):
    """The BC normalizer, fixed: rsl_rl calls ``update`` on an actor's normalizer every rollout."""

    def __init__(self, normalizer) -> None:
        super().__init__()
        self.inner = normalizer

    def forward(self, x):
        return self.inner(x)


class BCActorModel(MLPModel):
    """rsl_rl's actor over a BC policy's network (``bc_onnx``); the MLP's output is the action mean."""

    def __init__(self, obs: TensorDict, obs_groups: dict[str, list[str]], obs_set: str, output_dim: int,
                 bc_onnx: str, task: TaskCfg, spec: RobotSpec, init_std: float = 0.1) -> None:
        # rsl_rl's own MLP is built (a small placeholder) and replaced by the BC network below.
        super().__init__(obs, obs_groups, obs_set, output_dim, hidden_dims=(8,), obs_normalization=False,
                         distribution_cfg={"class_name": "GaussianDistribution", "init_std": init_std,
                                           "std_type": "log"})
        normalizer, head = bc_modules_from_onnx(bc_onnx, task, spec)
        if head.mlp.mlp[0].in_features != self.obs_dim or head.out_mean.shape[0] != output_dim:
            raise NotABCPolicy(f"{bc_onnx}: the BC network maps {head.mlp.mlp[0].in_features} observations to "
                               f"{head.out_mean.shape[0]} actions; task {task.name!r} has {self.obs_dim} and "
                               f"{output_dim}")
        self.obs_normalizer = FrozenNormalizer(normalizer)
        self.obs_normalization = True  # so the export bakes the BC normalizer into the graph, as BC's does
        self.mlp = head

    def update_normalization(self, obs: TensorDict) -> None:
        pass  # the BC normalizer stays what the network was fitted with


def bc_actor_cfg(bc_onnx: str | Path, task: TaskCfg, spec: RobotSpec, init_std: float) -> dict:
    """The runner's ``actor`` entry (``TaskRunner(actor=...)``) for continued PPO on ``bc_onnx``."""
    if init_std <= 0:
        raise ValueError(f"continued PPO on a BC policy: init_std must be > 0, got {init_std}")
    return {"class_name": BCActorModel, "bc_onnx": str(bc_onnx), "task": task, "spec": spec, "init_std": init_std}
