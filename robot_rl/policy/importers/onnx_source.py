"""A foreign ONNX policy (an rsl_rl / Isaac Lab ``policy.onnx``) rebuilt as a torch module, so the import adapter
and the network export as one graph.

Only a feed-forward chain is rebuilt — Gemm (or MatMul + Add) layers and elementwise activations, what
rsl_rl's ONNX exporter writes for an MLP actor. The result is compared with onnxruntime running the file
itself; anything else is refused naming the operator.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robot_rl.policy.contract import METADATA_KEY
from robot_rl.policy.importers.description import PolicyImportError

MATCH_ATOL = 1e-4
_ACTIVATIONS = {"Elu": ("ELU", "alpha"), "Relu": ("ReLU", None), "Tanh": ("Tanh", None), "Sigmoid": ("Sigmoid", None),
                "LeakyRelu": ("LeakyReLU", "negative_slope"), "Selu": ("SELU", None)}


def onnx_network(path: Path, width: int):
    """(module, state sizes (), "onnx-mlp"): ``module(obs) → (action,)``."""
    import onnx
    import torch

    try:
        model = onnx.load(str(path))
    except Exception as exc:
        raise PolicyImportError(f"{path}: not a readable ONNX model ({str(exc).splitlines()[0][:200]})") from None
    if any(p.key == METADATA_KEY for p in model.metadata_props):
        raise PolicyImportError(f"{path}: already a robot_rl policy (it has a contract); nothing to import")
    graph = model.graph
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in weights]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise PolicyImportError(f"{path}: {len(inputs)} inputs and {len(graph.output)} outputs; the importer rebuilds "
                                "one-input, one-output feed-forward policies")
    layers, current, pending = [], inputs[0].name, None
    for node in graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        continues = node.input and (node.input[0] == current or (node.op_type == "Add" and current in node.input))
        if not continues:
            raise PolicyImportError(f"{path}: node {node.name or node.op_type} does not continue the chain: not a "
                                    "feed-forward MLP the importer rebuilds")
        if node.op_type == "Gemm":
            if attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0 or attrs.get("transA", 0):
                raise PolicyImportError(f"{path}: Gemm {node.name} with alpha, beta or transA: not rebuilt")
            w = weights[node.input[1]]
            w = w if attrs.get("transB", 0) else w.T
            layer = torch.nn.Linear(w.shape[1], w.shape[0])
            layer.weight.data.copy_(torch.from_numpy(np.array(w, dtype=np.float32)))
            bias = weights[node.input[2]] if len(node.input) > 2 else np.zeros(w.shape[0])
            layer.bias.data.copy_(torch.from_numpy(np.array(bias, dtype=np.float32)))
            layers.append(layer)
        elif node.op_type == "MatMul":
            w = weights[node.input[1]].T
            pending = torch.nn.Linear(w.shape[1], w.shape[0])
            pending.weight.data.copy_(torch.from_numpy(np.array(w, dtype=np.float32)))
            pending.bias.data.zero_()
            layers.append(pending)
        elif node.op_type == "Add" and pending is not None:
            other = next(i for i in node.input if i != current)
            pending.bias.data.copy_(torch.from_numpy(np.array(weights[other], dtype=np.float32)))
            pending = None
        elif node.op_type in _ACTIVATIONS:
            cls_name, attr = _ACTIVATIONS[node.op_type]
            kwargs = {attr: float(attrs[attr])} if attr and attr in attrs else {}
            layers.append(getattr(torch.nn, cls_name)(**kwargs))
        else:
            raise PolicyImportError(f"{path}: operator {node.op_type} ({node.name}); the importer rebuilds "
                                    f"Gemm/MatMul+Add layers and the activations {', '.join(_ACTIVATIONS)}")
        current = node.output[0]
    if current != graph.output[0].name:
        raise PolicyImportError(f"{path}: the chain does not end at the output {graph.output[0].name!r}")
    mlp = torch.nn.Sequential(*layers)

    class OnnxMlp(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mlp = mlp

        def forward(self, obs):
            return (self.mlp(obs),)

    module = OnnxMlp().eval()
    for p in module.parameters():
        p.requires_grad_(False)
    _check_against_file(path, module, inputs[0].name, width)
    return module, (), "onnx-mlp"


def _check_against_file(path: Path, module, input_name: str, width: int) -> None:
    import torch

    from robot_rl.policy.onnx_policy import make_session

    session = make_session(str(path))
    obs = np.random.default_rng(0).normal(0.0, 1.0, (1, width)).astype(np.float32)
    try:
        ref = session.run(None, {input_name: obs})[0]
    except Exception as exc:
        raise PolicyImportError(f"{path}: onnxruntime cannot run it on ({width},) observations (the description's "
                                f"width): {str(exc).splitlines()[0][:200]}") from None
    with torch.no_grad():
        got = module(torch.from_numpy(obs))[0].numpy()
    err = float(np.max(np.abs(got - ref) / (1.0 + np.abs(ref))))
    if not err <= MATCH_ATOL:
        raise PolicyImportError(f"{path}: the rebuilt network differs from the file by {err:.3g}")
