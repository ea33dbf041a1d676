"""Policies for the gate tests: untrained rsl_rl actors exported through the real exporter (ONNX with the
policy contract of the real task), once per session."""

from __future__ import annotations

from pathlib import Path

import pytest


def export_untrained(task_name: str, path: Path, seed: int = 0) -> Path:
    """A randomly initialised rsl_rl MLPModel actor for ``task_name``, exported with its task's contract.
    It stands in for a trained policy where the test needs one that does NOT do the task."""
    import torch
    from rsl_rl.models.mlp_model import MLPModel
    from tensordict import TensorDict

    from robot_rl.policy import collect_provenance, contract_for_task, export_rsl_rl_policy
    from robot_rl.tasks.registry import make_task

    task = make_task(task_name)
    contract = contract_for_task(task, provenance=collect_provenance(task_name, seed=seed, iterations=0))
    torch.manual_seed(seed)
    obs = TensorDict({"policy": torch.zeros(2, contract.obs_dim)}, batch_size=[2])
    model = MLPModel(
        obs, {"actor": ["policy"]}, "actor", contract.num_actions, hidden_dims=(64, 64), activation="elu",
        obs_normalization=False,
        distribution_cfg={"class_name": "rsl_rl.modules.distribution:GaussianDistribution", "init_std": 1.0},
    )
    export_rsl_rl_policy(model, contract, path, seed=seed)
    return path


def export_folding_a1(path: Path) -> Path:
    """A constant-output A1 "policy": every thigh +5, every calf −5 (raw, before the contract's 0.25 scale).
    It stands in for a broken policy that folds the legs; the robot sinks to the floor."""
    import torch

    from robot_rl.policy import collect_provenance, contract_for_task, export_onnx
    from robot_rl.tasks.registry import make_task

    contract = contract_for_task(make_task("a1-flat"), provenance=collect_provenance("a1-flat", seed=0))
    actor = torch.nn.Linear(contract.obs_dim, contract.num_actions)
    with torch.no_grad():
        actor.weight.zero_()
        actor.bias.copy_(torch.tensor([0.0, 5.0, -5.0] * 4))
    export_onnx(actor, None, contract, path)
    return path


@pytest.fixture(scope="session")
def folding_a1_policy(tmp_path_factory) -> Path:
    return export_folding_a1(tmp_path_factory.mktemp("policies") / "a1_folding.onnx")


@pytest.fixture(scope="session")
def untrained_a1_policy(tmp_path_factory) -> Path:
    return export_untrained("a1-flat", tmp_path_factory.mktemp("policies") / "a1_untrained.onnx")


@pytest.fixture(scope="session")
def untrained_panda_policy(tmp_path_factory) -> Path:
    return export_untrained("panda-reach", tmp_path_factory.mktemp("policies") / "panda_untrained.onnx")


SHORT = 1.0 / 6.0  # the 18 s script in 3 s: each gate run is 2 s of ramp + 3 s of script per simulator


@pytest.fixture(scope="session")
def short_gate(untrained_a1_policy, tmp_path_factory):
    """The gate on the untrained A1 policy, short scenario, both simulators, outputs written."""
    from robot_rl.evaluation.gate_config import GateConfig
    from robot_rl.evaluation.sim2sim import policy_gate, write_outputs

    result = policy_gate(untrained_a1_policy, time_scale=SHORT, config=GateConfig(settle_s=0.25),
                         command="robot-rl sim2sim --policy a1_untrained.onnx --time-scale 0.1667")
    paths = write_outputs(result, tmp_path_factory.mktemp("gate_report"))
    return result, paths
