"""Base + residual as one ONNX policy: the base's contract, the numpy actor's outputs, the bound kept."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.learn.residual.actor import ResidualPolicy, residual_bound
from robot_rl.learn.residual.config import ResidualCfg
from robot_rl.learn.residual.export import export_residual
from robot_rl.policy.onnx_policy import PolicyLoadError, load_policy, read_contract

CFG = ResidualCfg(fraction=0.15, hidden=(24, 16))



def _policy(base_path) -> ResidualPolicy:
    return ResidualPolicy(load_policy(base_path, read_contract(base_path)), CFG)


def test_composed_policy_loads_with_the_base_contract_and_matches_the_loop(panda_base, tmp_path):
    policy = _policy(panda_base)
    flat = np.random.default_rng(0).normal(0.0, 0.5, policy.actor.flat.shape).astype(np.float32)
    policy.load_weights(flat)
    path = export_residual(panda_base, flat, CFG, tmp_path / "residual.onnx", notes={"transitions": 123})
    base_contract = read_contract(panda_base)
    composed = load_policy(path, base_contract)  # the runtime's loader, the base's contract
    notes = composed.contract.provenance.notes["residual"]
    assert notes["transitions"] == 123 and notes["alpha_raw"] == pytest.approx(residual_bound(base_contract, 0.15))
    obs = np.random.default_rng(1).normal(0.0, 2.0, (32, 1, base_contract.obs_dim)).astype(np.float32)
    for o in obs:
        np.testing.assert_allclose(composed.act(o), policy.act(o), rtol=1e-5, atol=1e-5)  # what the loop ran


def test_composed_policy_keeps_the_bound_under_poisoned_weights(panda_base, tmp_path):
    policy = _policy(panda_base)
    base = load_policy(panda_base, read_contract(panda_base))
    alpha = residual_bound(base.contract, CFG.fraction)
    obs = np.random.default_rng(2).normal(0.0, 3.0, (16, base.contract.obs_dim)).astype(np.float32)
    for i, poison in enumerate((1e30, np.nan)):
        flat = np.full(policy.actor.flat.shape, poison, np.float32)
        path = export_residual(panda_base, flat, CFG, tmp_path / f"poisoned{i}.onnx")
        got = load_policy(path, base.contract).act_batch(obs)
        diff = got - base.act_batch(obs)
        assert np.all(np.isfinite(got)) and np.all(np.abs(diff) <= alpha * (1 + 1e-6))
        if np.isnan(poison):
            np.testing.assert_array_equal(diff, 0.0)  # NaN residual → the base alone, as in the loop


def test_an_edited_composed_file_is_refused(panda_base, tmp_path):
    policy = _policy(panda_base)
    path = export_residual(panda_base, np.zeros_like(policy.actor.flat), CFG, tmp_path / "r.onnx")
    data = bytearray(path.read_bytes())
    at = data.find(b"residual/mean.weight")
    data[at - 40] ^= 0xFF  # flip a byte near the residual's weights
    path.write_bytes(bytes(data))
    with pytest.raises(PolicyLoadError):
        load_policy(path, read_contract(panda_base))




