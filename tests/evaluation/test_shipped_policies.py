"""The policies committed under policies/ against the full sim2sim gate (20 s per simulator, real MuJoCo
and PyBullet, the exact runtime): the shipped A1 passes in both; the negative control trained without
domain randomization fails, for the reasons its model card gives. Each run is a few seconds of work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robot_rl.evaluation.sim2sim import policy_gate

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def _failed(score) -> set[str]:
    return {c.name for c in score.checks if not c.passed}


def test_shipped_a1_policy_passes_the_gate_in_both_simulators():
    result = policy_gate(POLICIES / "a1_flat" / "policy.onnx")
    assert result.passed, {s.simulator: _failed(s) for s in result.scores}
    assert [s.simulator for s in result.scores] == ["mujoco", "pybullet"]


def test_shipped_arm_policy_passes_the_gate_in_both_simulators():
    """panda_reach steps its targets inside the safety chain's limits (a chain-projected actor): the chain that
    clipped 17 % of the previous policy's ticks has (almost) nothing to do."""
    result = policy_gate(POLICIES / "panda_reach" / "policy.onnx")
    assert result.passed, {s.simulator: _failed(s) for s in result.scores}
    assert all(s.intervention_rate <= 0.02 for s in result.scores), [s.intervention_rate for s in result.scores]


def test_policy_trained_without_randomization_fails_the_gate_where_its_card_says():
    """It walks well in its own training sim (see its MODEL_CARD.md) but is never pushed there and leans
    on the safety chain: the gate must catch both, in each simulator."""
    result = policy_gate(POLICIES / "a1_flat_no_dr" / "policy.onnx")
    assert not result.passed
    scores = {s.simulator: s for s in result.scores}
    assert "falls" in _failed(scores["mujoco"])
    assert "safety interventions per tick" in _failed(scores["pybullet"])
    # The tracking itself is fine where it stays up: the failure is robustness, not the gait.
    assert not any("error" in name for name in _failed(scores["pybullet"]))


@pytest.mark.parametrize("name", ["a1_flat", "a1_flat_no_dr", "panda_reach"])
def test_model_card_verdict_matches_the_committed_gate_report(name):
    gate = json.loads((POLICIES / name / "sim2sim" / "gate.json").read_text())
    card = (POLICIES / name / "MODEL_CARD.md").read_text()
    assert f"sim2sim gate: **{'PASS' if gate['passed'] else 'FAIL'}**" in card
