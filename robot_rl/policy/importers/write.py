"""The imported policy as a torch module (adapter + rebuilt network) and its ONNX export, verified on load."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from robot_rl.policy.contract import BATCH_DIM, IMPORTED_NOTE, PolicyContract
from robot_rl.policy.export import OPSET, ExportError, _quiet_exporter, stamp_contract
from robot_rl.policy.importers.build import Adapter
from robot_rl.policy.importers.description import ForeignPolicy, PolicyImportError
from robot_rl.policy.onnx_policy import PolicyLoadError, load_policy

VERIFY_STEPS = 200
VERIFY_ATOL = 1e-4  # on |onnx − torch| / (1 + |torch|), as the exporter's own check


def adapted_module(net, adapter: Adapter, foreign: ForeignPolicy, num_net_states: int, period_s: float):
    """``module(obs, *states) → (actions, *next states)`` in the contract's terms (see build's docstring)."""
    import torch

    gait = "gait_phase" in foreign.extra_inputs
    memory = adapter.action_memory

    class ImportedPolicy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net
            for name in ("index", "offset", "scale", "clip", "action_low", "action_high", "action_matrix",
                         "action_bias"):
                self.register_buffer(name, torch.from_numpy(np.ascontiguousarray(getattr(adapter, name))))

        def forward(self, obs, *states):
            if memory:  # the previous action (policy space) is the last state: its columns follow the observation
                obs = torch.cat([obs, states[-1]], dim=1)
            x = (obs.index_select(1, self.index) + self.offset) * self.scale
            x = torch.minimum(torch.maximum(x, -self.clip), self.clip)
            extra = []
            if gait:  # the trainer's clock: phase = (t mod period) / period, t counted from the first tick
                clock = states[num_net_states] + period_s
                phase = torch.remainder(clock, foreign.gait_period_s) / foreign.gait_period_s
                x = torch.cat([x, torch.sin(2 * torch.pi * phase), torch.cos(2 * torch.pi * phase)], dim=1)
                extra = [clock]
            out, *net_states = self.net(x, *states[:num_net_states])
            action = torch.minimum(torch.maximum(out, self.action_low), self.action_high)
            if memory:
                extra.append(action)
            return (action @ self.action_matrix + self.action_bias, *net_states, *extra)

    module = ImportedPolicy().eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def _onnx_bytes(module, contract: PolicyContract) -> bytes:
    import torch

    states = contract.recurrent.states if contract.recurrent is not None else ()
    args = (torch.zeros(2, contract.obs_dim), *(torch.zeros(2, s.size) for s in states))
    batch = torch.export.Dim(BATCH_DIM)
    with _quiet_exporter():
        try:
            program = torch.onnx.export(
                module, args, None, opset_version=OPSET, dynamo=True, verbose=False,
                input_names=[contract.input.name, *(s.input_name for s in states)],
                output_names=[contract.output.name, *(s.output_name for s in states)],
                # forward(obs, *states): the states are one varargs tuple in torch.export's view
                dynamic_shapes=({0: batch},) + ((tuple({0: batch} for _ in states),) if states else ()),
            )
        except Exception as exc:
            raise ExportError(f"torch.onnx.export failed: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    model = program.model_proto
    trainer = contract.provenance.notes.get(IMPORTED_NOTE, {}).get("trainer")
    stamp_contract(model, contract, f"robot_rl import of a policy trained elsewhere ({trainer})")
    return model.SerializeToString(deterministic=True)


def verify_sequence(module, path: Path, contract: PolicyContract, steps: int = VERIFY_STEPS, seed: int = 0) -> float:
    """Run the written file through the runtime loader for ``steps`` ticks of random observations (state
    carried by the loader, as the controller does) against the torch module; return the worst error."""
    import torch

    try:
        policy = load_policy(path, contract)
    except PolicyLoadError as exc:
        raise ExportError(f"the imported model does not load back: {exc.reason}") from None
    rng = np.random.default_rng(seed)
    states = [torch.zeros(1, s.size) for s in (contract.recurrent.states if contract.recurrent else ())]
    worst = 0.0
    with torch.no_grad():
        for _ in range(steps):
            obs = rng.normal(0.0, 1.0, (1, contract.obs_dim)).astype(np.float32)
            ref, *states = module(torch.from_numpy(obs), *states)
            got = policy.act(obs)
            worst = max(worst, float(np.max(np.abs(got - ref[0].numpy()) / (1.0 + np.abs(ref[0].numpy())))))
    if not worst <= VERIFY_ATOL:
        raise ExportError(f"onnxruntime differs from the imported torch module by {worst:.3g} over {steps} ticks "
                          f"(tolerance {VERIFY_ATOL:g})")
    return worst


def write_policy(module, contract: PolicyContract, out: Path, overwrite: bool) -> float:
    """Export, verify along a sequence, and move into place (never a half-written file, never over a file
    unless ``overwrite``)."""
    if out.exists() and not overwrite:
        raise PolicyImportError(f"--out {out}: a file is already there; choose another path or pass --overwrite")
    blob = _onnx_bytes(module, contract)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=".onnx.tmp", dir=out.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        err = verify_sequence(module, tmp, contract)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return err
