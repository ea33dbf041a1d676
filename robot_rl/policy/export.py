"""Export a trained actor to ONNX with the policy contract in its metadata.

The exported graph maps RAW observations to RAW actions: the observation normalizer is baked in, so the
runtime never needs training statistics. Action scale, clip and offset are NOT in the graph; the runtime
applies them from the contract (``JointPositionAction.decode``), the same code the training env uses.

Choices:
- opset 18, the torch.export-based exporter (``dynamo=True``; needs ``onnxscript``). The output is
  byte-for-byte reproducible for the same weights and contract.
- A dynamic batch dimension named ``batch``: the runtime feeds (1, obs_dim); sim2sim evaluation can run many
  envs at once. Measured: no per-call cost against a fixed batch of 1 on onnxruntime 1.31.
- The file is written only after the model, loaded back through ``load_policy`` (onnxruntime, contract
  checks and all), reproduces the torch outputs on random observations; then it is renamed into place,
  so a failed or interrupted export never leaves a half-written policy behind.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import os
import subprocess
import tempfile
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.policy.contract import (
    BATCH_DIM,
    GRAPH_DIGEST_KEY,
    METADATA_KEY,
    PolicyContract,
    Provenance,
    output_shape,
)
from robot_rl.policy.onnx_policy import PolicyLoadError, graph_digest, load_policy
from robot_rl.robots.spec import checkout_root

OPSET = 18
VERIFY_BATCH = 256
VERIFY_ATOL = 1e-4  # on |onnx − torch| / (1 + |torch|): float32 reassociation reached 1.2e-5 on a BC net; a bug is ≫
# … unless the network itself is that ill-conditioned in float32 on the test inputs (a BC normalizer divides a
# feature that never varied by 1e-3, so a 5-σ test input reaches 10⁴ inside): then the bar is this many times the
# network's own float32 error (torch float32 against float64), measured on the same inputs.
VERIFY_FLOAT32_FACTOR = 10.0


class ExportError(RobotRLError, RuntimeError):
    """The actor could not be exported, or the exported model does not reproduce it."""


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("exporting a policy needs torch: pip install 'robot-rl[train]'") from None
    return torch


def collect_provenance(
    task: str,
    seed: int | None = None,
    iterations: int | None = None,
    env_steps: int | None = None,
    metrics: dict[str, float] | None = None,
    notes: dict[str, Any] | None = None,
    repo: Path | None = None,
) -> Provenance:
    """Provenance with the current git commit (``-dirty`` if the tree has changes) and UTC time.

    ``repo`` defaults to the checkout this package runs from; an installed wheel has none: commit "unknown".
    """
    repo = repo if repo is not None else checkout_root()
    return Provenance(
        task=task,
        seed=seed,
        iterations=iterations,
        env_steps=env_steps,
        git_commit=_git_commit(repo) if repo is not None else "unknown",
        created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        metrics={k: float(v) for k, v in (metrics or {}).items()},
        notes=dict(notes or {}),
    )


def _git_commit(repo: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    try:
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        dirty = False
    return commit + ("-dirty" if dirty else "")


def _raw_obs_module(actor, obs_normalizer):
    torch = _torch()

    class RawObsPolicy(torch.nn.Module):
        """normalizer (if any) then actor: raw observation → raw action."""

        def __init__(self) -> None:
            super().__init__()
            self.obs_normalizer = obs_normalizer if obs_normalizer is not None else torch.nn.Identity()
            self.actor = actor

        def forward(self, obs):
            return self.actor(self.obs_normalizer(obs))

    module = copy.deepcopy(RawObsPolicy()).to("cpu", torch.float32)
    module.eval()
    for param in module.parameters():
        param.requires_grad_(False)
    return module


def _check_dimensions(module, contract: PolicyContract) -> None:
    torch = _torch()
    out_shape = output_shape(contract.num_actions, contract.chunk)
    for t, shape in ((contract.input, (BATCH_DIM, contract.obs_dim)), (contract.output, out_shape)):
        if tuple(t.shape) != shape:
            raise ExportError(f"contract {t.name!r} shape {list(t.shape)} is not {list(shape)}")
    probe = torch.zeros(2, contract.obs_dim)
    try:
        with torch.no_grad():
            out = module(probe)
    except RuntimeError as exc:
        raise ExportError(
            f"the actor does not accept observations of width {contract.obs_dim} (the contract's obs_dim): "
            f"{str(exc).splitlines()[0]}"
        ) from None
    if tuple(out.shape) != (2, *out_shape[1:]):
        raise ExportError(
            f"the actor maps (2, {contract.obs_dim}) observations to {tuple(out.shape)}; the contract expects "
            f"{(2, *out_shape[1:])} (one action per joint of {contract.robot!r}"
            f"{f', {contract.chunk.length} per chunk' if contract.chunk is not None else ''})"
        )


@contextlib.contextmanager
def _quiet_exporter():
    """The exporter logs optional-dependency warnings (torchvision) and FutureWarnings on every call."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _to_onnx_bytes(module, contract: PolicyContract) -> bytes:
    torch = _torch()

    with _quiet_exporter():
        try:
            program = torch.onnx.export(
                module,
                (torch.zeros(2, contract.obs_dim),),  # batch 2: torch.export specializes a size-1 dimension
                None,
                input_names=[contract.input.name],
                output_names=[contract.output.name],
                opset_version=OPSET,
                dynamo=True,
                dynamic_shapes=({0: torch.export.Dim(BATCH_DIM)},),
                verbose=False,
            )
        except Exception as exc:
            raise ExportError(f"torch.onnx.export failed: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    model = program.model_proto
    task = contract.provenance.task or "unknown task"
    stamp_contract(model, contract, f"robot_rl policy for {contract.robot} ({task})")
    return model.SerializeToString(deterministic=True)


def stamp_contract(model, contract: PolicyContract, doc: str) -> None:
    """Write the contract and the graph's digest into ``model``'s metadata (replacing any there), set its doc
    string, and run the ONNX checker. The digest covers the graph as it is now: stamp after the last edit."""
    import onnx

    ours = {
        METADATA_KEY: contract.to_json(),
        GRAPH_DIGEST_KEY: graph_digest(model.graph.SerializeToString(deterministic=True)),
    }
    for i in reversed(range(len(model.metadata_props))):
        if model.metadata_props[i].key in ours:
            del model.metadata_props[i]
    for key, value in ours.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    model.doc_string = doc
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:
        raise ExportError(f"the model fails the ONNX checker: {str(exc).splitlines()[0]}") from None


def _verify(module, path: Path, contract: PolicyContract, seed: int) -> float:
    """Load the written file through the runtime loader and compare it to torch; return the max error."""
    torch = _torch()
    try:
        policy = load_policy(path, contract)
    except PolicyLoadError as exc:
        raise ExportError(f"the exported model does not load back: {exc.reason}") from None
    rng = np.random.default_rng(seed)
    obs = np.concatenate([
        np.zeros((1, contract.obs_dim)),
        rng.normal(0.0, 1.0, (VERIFY_BATCH // 2, contract.obs_dim)),
        rng.normal(0.0, 5.0, (VERIFY_BATCH // 2, contract.obs_dim)),
    ]).astype(np.float32)
    with torch.no_grad():
        ref = module(torch.from_numpy(obs)).numpy()
        ref64 = copy.deepcopy(module).double()(torch.from_numpy(obs).double()).numpy()
    float32_err = float(np.max(np.abs(ref - ref64) / (1.0 + np.abs(ref64))))
    batched = policy.act_batch(obs)
    single = np.stack([policy.act(obs[i : i + 1]).copy() for i in range(8)])  # the runtime's (1, obs_dim) path
    err = max(
        float(np.max(np.abs(batched - ref) / (1.0 + np.abs(ref)))),
        float(np.max(np.abs(single - ref[:8]) / (1.0 + np.abs(ref[:8])))),
    )
    check_verification_error(err, float32_err)
    return err


def check_verification_error(err: float, float32_err: float) -> None:
    """Refuse an export whose onnxruntime/torch difference ``err`` is above the bar: ``VERIFY_ATOL``, or a
    multiple of the network's own float32 error (torch float32 vs float64 on the same inputs) where that is
    larger — an ill-conditioned network rounds differently under any summation order, which is no export bug."""
    tolerance = max(VERIFY_ATOL, VERIFY_FLOAT32_FACTOR * float32_err)
    if not err <= tolerance:
        raise ExportError(f"onnxruntime output differs from torch by {err:.3g} (tolerance {tolerance:.3g}; the "
                          f"network's own float32 error there {float32_err:.3g})")


def export_onnx(actor, obs_normalizer, contract: PolicyContract, path: str | Path, seed: int = 0) -> PolicyContract:
    """Export normalizer + actor (raw obs → raw action) with ``contract`` in the metadata; return the contract
    as written (``normalizer_baked_in`` set from ``obs_normalizer``). The modules are copied, not modified."""
    path = Path(path)
    contract = dataclasses.replace(contract, normalizer_baked_in=obs_normalizer is not None)
    module = _raw_obs_module(actor, obs_normalizer)
    _check_dimensions(module, contract)
    blob = _to_onnx_bytes(module, contract)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".onnx.tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        _verify(module, tmp, contract, seed)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return contract


def export_rsl_rl_policy(policy_model, contract: PolicyContract, path: str | Path, seed: int = 0) -> PolicyContract:
    """Export an rsl_rl ``MLPModel`` actor (as PPO holds it) with its observation normalizer baked in.

    Uses the model's own ONNX view (normalizer, MLP, deterministic head: the distribution mean).
    """
    if getattr(policy_model, "is_recurrent", False):
        raise ExportError("recurrent policies are not supported: the contract has no hidden-state inputs")
    if not hasattr(policy_model, "as_onnx"):
        raise ExportError(f"expected an rsl_rl MLPModel, got {type(policy_model).__name__}")
    model_obs_dim = getattr(policy_model, "obs_dim", contract.obs_dim)
    if model_obs_dim != contract.obs_dim:
        raise ExportError(
            f"the rsl_rl model takes {model_obs_dim} observations, the contract's layout has {contract.obs_dim}"
        )
    torch = _torch()
    view = policy_model.as_onnx(verbose=False)
    normalizer = view.obs_normalizer if getattr(policy_model, "obs_normalization", False) else None
    actor = torch.nn.Sequential(view.mlp, view.deterministic_output)
    return export_onnx(actor, normalizer, contract, path, seed=seed)
