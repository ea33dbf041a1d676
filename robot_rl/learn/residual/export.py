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

A residual with ``history`` H > 1 looks at the last H ticks' observations and base actions. ONNX has no state,
so the file takes that past as observation history: its contract is the base's with every term H − 1 frames
longer (the runtime's observation builder keeps them, and fills them with the first frame after a restart,
as the actor does). In the graph, a Gather cuts the H base observations out of it, the base graph runs on all
H as one batch, and the residual reads them newest first:

    obs (N, D') ─► Gather ─► (N, H, D) ─► [base graph] ─► (N, H, A) ─► age 0: base_actions ─┐
                      └─────────── Concat ◄────────────────┘                               │
                                     └─► (N, H·(D + A)) ─► residual head ─► + ◄───────────┘

The runtime takes such a file with the task's layout lengthened the same way
(:func:`~robot_rl.policy.contract.layout_for_policy`, from the ``history`` this module writes in the notes).

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


def history_index(contract: PolicyContract, history: int) -> np.ndarray:
    """(history, obs_dim) positions: row k is the base's observation of k ticks ago inside the composed one
    (each term ``history − 1`` frames longer; term-major, oldest → newest, as the observation builder)."""
    index = np.empty((history, contract.obs_dim), np.int64)
    src = dst = 0  # where the term's block starts in the composed and in the base observation
    for term in contract.observation.terms:
        h, size = term.history_length, term.size
        longer = h + history - 1
        for age in range(history):
            first = longer - h - age  # the oldest of the h frames the base saw ``age`` ticks ago
            index[age, dst : dst + h * size] = src + first * size + np.arange(h * size)
        src, dst = src + longer * size, dst + h * size
    return index


def check_batch_dimension(graph, history: int) -> None:
    """A residual with history runs the base graph on ``history`` observations as one batch: its input's batch
    dimension must be dynamic (ours always is; a foreign file may fix it)."""
    batch = graph.input[0].type.tensor_type.shape.dim[0]
    if batch.HasField("dim_value") and batch.dim_value != history:
        raise ExportError(f"the base graph takes a fixed batch of {batch.dim_value}; a residual with history "
                          f"{history} runs it on {history} observations at once (export the base with a dynamic "
                          "batch dimension)")


def history_input_nodes(contract: PolicyContract, cfg: ResidualCfg, obs: str, base_in: str, base_out: str):
    """(nodes, initializers) around the base graph for a residual with ``cfg.history`` > 1: the composed ``obs``
    → ``base_in`` (the H base observations as one batch); the base's ``base_out`` → the residual's state
    and this tick's base action. Returns (nodes before the base graph, nodes after it, inits, state, base_now):
    ONNX wants its nodes in topological order."""
    from onnx import helper, numpy_helper

    o, a, history = contract.obs_dim, contract.num_actions, cfg.history
    inits = [numpy_helper.from_array(history_index(contract, history), _n("history_index")),
             numpy_helper.from_array(np.array([-1, o], np.int64), _n("base_in_shape")),
             numpy_helper.from_array(np.array([-1, history, a], np.int64), _n("base_out_shape")),
             numpy_helper.from_array(np.array([-1, cfg.state_dim(o, a)], np.int64), _n("state_shape")),
             numpy_helper.from_array(np.array(0, np.int64), _n("now"))]
    before = [
        helper.make_node("Gather", [obs, _n("history_index")], [_n("obs_history")], axis=1),  # (N, H, D)
        helper.make_node("Reshape", [_n("obs_history"), _n("base_in_shape")], [base_in]),  # (N·H, D)
    ]
    after = [
        helper.make_node("Reshape", [base_out, _n("base_out_shape")], [_n("base_history")]),  # (N, H, A)
        helper.make_node("Gather", [_n("base_history"), _n("now")], [_n("base_now")], axis=1),  # (N, A)
        helper.make_node("Concat", [_n("obs_history"), _n("base_history")], [_n("frames")], axis=2),
        helper.make_node("Reshape", [_n("frames"), _n("state_shape")], [_n("state")]),  # newest first
    ]
    return before, after, inits, _n("state"), _n("base_now")


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
    if cfg.history == 1:
        state, base_now = _n("x0"), base_out
        before, after, inits = [], [helper.make_node("Concat", [obs, base_out], [state], axis=1)], []
        written_obs = contract
    else:
        check_batch_dimension(graph, cfg.history)
        base_in = "base/" + obs
        _rename(graph, obs, base_in)  # the base's nodes now read the batch of H observations
        before, after, inits, state, base_now = history_input_nodes(contract, cfg, obs, base_in, base_out)
        written_obs = contract.with_more_history(cfg.history - 1)
        graph.input[0].type.tensor_type.shape.dim[1].dim_value = written_obs.obs_dim
    head, head_inits = residual_graph_nodes(flat, policy, state, base_now, out)
    base_nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(before + base_nodes + after + head)
    graph.initializer.extend(inits + head_inits)

    base_notes = dict(contract.provenance.notes)
    base_notes[RESIDUAL_NOTE] = {
        "fraction": cfg.fraction, "alpha_raw": policy.alpha, "hidden": list(cfg.hidden), "history": cfg.history,
        "base_file": base_path.name, "base_graph_sha256": dict((p.key, p.value) for p in model.metadata_props)
        .get(GRAPH_DIGEST_KEY, ""), **(notes or {}),
    }
    written: PolicyContract = dataclasses.replace(
        written_obs, provenance=dataclasses.replace(contract.provenance, notes=base_notes))
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


def sequence_observations(base: PolicyContract, composed: PolicyContract, ticks: int, rng: np.random.Generator
                          ) -> tuple[np.ndarray, np.ndarray]:
    """One random episode of ``ticks`` frames, as the base and the composed contract each see it: (ticks, D) and
    (ticks, D') float32. Written from the layout rules (term-major, oldest → newest, a restart repeats the
    first frame), not with the observation builder, so it checks the builder's conventions too."""
    frames = [rng.normal(0.0, 1.0, (ticks, t.size)) for t in base.observation.terms]

    def observe(contract: PolicyContract) -> np.ndarray:
        rows = []
        for now in range(ticks):
            parts = [f[np.maximum(np.arange(now - t.history_length + 1, now + 1), 0)].reshape(-1)
                     for f, t in zip(frames, contract.observation.terms, strict=True)]
            rows.append(np.concatenate(parts))
        return np.asarray(rows, np.float32)

    return observe(base), observe(composed)


def _verify(path: Path, contract: PolicyContract, policy: ResidualPolicy, seed: int) -> None:
    """Load ``path`` through the runtime loader (against ``contract``, the one written) and compare it with the
    numpy actor: on independent observations, or, with history, along an episode the actor runs tick by tick."""
    try:
        composed = load_policy(path, contract)
    except PolicyLoadError as exc:
        raise ExportError(f"the composed model does not load back: {exc.reason}") from None
    rng = np.random.default_rng(seed)
    if policy.cfg.history == 1:
        obs = np.concatenate([np.zeros((1, contract.obs_dim)), rng.normal(0.0, 1.0, (63, contract.obs_dim))]
                             ).astype(np.float32)
        ref = policy.act_batch(obs)
    else:
        base_obs, obs = sequence_observations(policy.contract, contract, 64, rng)
        policy.reset()
        ref = np.stack([policy.act(base_obs[t : t + 1]).copy() for t in range(len(base_obs))])
    got = composed.act_batch(obs)
    err = float(np.max(np.abs(got - ref) / (1.0 + np.abs(ref))))
    if not err <= VERIFY_ATOL:
        raise ExportError(f"the composed model differs from the residual policy by {err:.3g} (tolerance {VERIFY_ATOL})")
