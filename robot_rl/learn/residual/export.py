"""Export base + residual as ONE ONNX policy with the base's contract.

Choice: compose in ONNX, not in torch. The base arrives as an ONNX file — possibly from a PPO run, a BC run,
or someone else's exporter, with its observation normalizer baked in — and its torch checkpoint may not
exist. Re-exporting it from torch would need that checkpoint and would make a *new* base graph that could
differ from the one that was validated (sim2sim gate) and deployed. Composition keeps the base graph
exactly as it was (its nodes and weights copied unchanged) and appends the residual, built node by node
from the same flat weight vector the control loop ran:

    obs ─► [base graph, unchanged] ─► base_actions ─┐
     └──────────────► Concat ◄───────────────────────┘
                        └─► (Gemm → Relu)* → Gemm (mean) → Tanh → Where(IsNaN → 0) → Clip(±1) → Mul α
    actions = base_actions + residual

It is exactly :class:`~robot_rl.learn.residual.actor.ResidualPolicy`'s deterministic ``act`` (tanh bound,
NaN → 0, α from the contract's clip), so the deployed file cannot exceed the bound either. The file keeps
the base's contract (observations, actions, robot, spec hash), with the residual recorded in its provenance
notes, and is verified through the runtime's own loader against the numpy actor before it is renamed into
place.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.learn.residual.actor import ResidualPolicy
from robot_rl.learn.residual.config import ResidualCfg
from robot_rl.learn.residual.networks import unflatten
from robot_rl.policy.contract import GRAPH_DIGEST_KEY, RESIDUAL_NOTE, PolicyContract
from robot_rl.policy.export import ExportError, stamp_contract
from robot_rl.policy.onnx_policy import PolicyLoadError, load_policy, read_contract

VERIFY_ATOL = 1e-5
_PREFIX = "residual/"


def _rename(graph, old: str, new: str) -> None:
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for i, name in enumerate(node.output):
            if name == old:
                node.output[i] = new


def _n(name: str) -> str:
    return _PREFIX + name


def residual_graph_nodes(flat: np.ndarray, policy: ResidualPolicy, state: str, base_now: str, out: str):
    """(nodes, initializers) of the residual head over the tensor ``state`` (the actor's input), added to
    ``base_now`` (this tick's base action) into ``out``."""
    from onnx import helper, numpy_helper

    p = unflatten(np.asarray(flat, dtype=np.float32), policy.actor.layout)
    inits = [numpy_helper.from_array(np.ascontiguousarray(v), _PREFIX + k) for k, v in p.items()]
    consts = {"zero": np.zeros(1, np.float32), "lo": np.array(-1.0, np.float32), "hi": np.array(1.0, np.float32),
              "alpha": np.array([policy.alpha], np.float32)}
    inits += [numpy_helper.from_array(v, _PREFIX + k) for k, v in consts.items()]
    n = _n
    nodes = []
    x = state
    for i in range(len(policy.cfg.hidden)):
        nodes.append(helper.make_node("Gemm", [x, n(f"hidden.{i}.weight"), n(f"hidden.{i}.bias")], [n(f"z{i}")],
                                      transB=1))
        nodes.append(helper.make_node("Relu", [n(f"z{i}")], [n(f"h{i}")]))
        x = n(f"h{i}")
    nodes += [
        helper.make_node("Gemm", [x, n("mean.weight"), n("mean.bias")], [n("mean")], transB=1),
        helper.make_node("Tanh", [n("mean")], [n("tanh")]),
        helper.make_node("IsNaN", [n("tanh")], [n("is_nan")]),
        helper.make_node("Where", [n("is_nan"), n("zero"), n("tanh")], [n("finite")]),
        helper.make_node("Clip", [n("finite"), n("lo"), n("hi")], [n("unit")]),
        helper.make_node("Mul", [n("unit"), n("alpha")], [n("residual")]),
        helper.make_node("Add", [base_now, n("residual")], [out]),
    ]
    return nodes, inits


def export_residual(base_path: str | Path, flat: np.ndarray, cfg: ResidualCfg, path: str | Path, *,
                    notes: dict[str, Any] | None = None, seed: int = 0) -> Path:
    """Write base + residual (weights ``flat``, the actor's flat vector) to ``path``; return ``path``."""
    import onnx
    from onnx import helper

    base_path, path = Path(base_path), Path(path)
    contract = read_contract(base_path)
    base = load_policy(base_path, contract)
    policy = ResidualPolicy(base, cfg)
    policy.load_weights(flat)
    model = onnx.load(str(base_path))
    graph = model.graph
    obs, out = contract.input.name, contract.output.name
    base_out = "base/" + out
    _rename(graph, out, base_out)
    state = _n("x0")
    head, head_inits = residual_graph_nodes(flat, policy, state, base_out, out)
    graph.node.extend([helper.make_node("Concat", [obs, base_out], [state], axis=1), *head])
    graph.initializer.extend(head_inits)

    base_notes = dict(contract.provenance.notes)
    base_notes[RESIDUAL_NOTE] = {
        "fraction": cfg.fraction, "alpha_raw": policy.alpha, "hidden": list(cfg.hidden),
        "base_file": base_path.name, "base_graph_sha256": dict((p.key, p.value) for p in model.metadata_props)
        .get(GRAPH_DIGEST_KEY, ""), **(notes or {}),
    }
    written: PolicyContract = dataclasses.replace(
        contract, provenance=dataclasses.replace(contract.provenance, notes=base_notes))
    stamp_contract(model, written, f"robot_rl residual policy: {base_path.name} + bounded residual "
                                   f"(α = {policy.alpha:g})")

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".onnx.tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(model.SerializeToString(deterministic=True))
        _verify(tmp, written, policy, seed)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _verify(path: Path, contract: PolicyContract, policy: ResidualPolicy, seed: int) -> None:
    """Load ``path`` through the runtime loader (against ``contract``, the one written) and compare it with the
    numpy actor on independent observations."""
    try:
        composed = load_policy(path, contract)
    except PolicyLoadError as exc:
        raise ExportError(f"the composed model does not load back: {exc.reason}") from None
    rng = np.random.default_rng(seed)
    obs = np.concatenate([np.zeros((1, contract.obs_dim)), rng.normal(0.0, 1.0, (63, contract.obs_dim))]
                         ).astype(np.float32)
    ref = policy.act_batch(obs)
    got = composed.act_batch(obs)
    err = float(np.max(np.abs(got - ref) / (1.0 + np.abs(ref))))
    if not err <= VERIFY_ATOL:
        raise ExportError(f"the composed model differs from the residual policy by {err:.3g} (tolerance {VERIFY_ATOL})")
