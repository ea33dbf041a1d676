"""Small exported Panda reach and push policies for the residual tests, made once per session through the real
exporter.

They stand in for trained base policies (a PPO reach policy, a BC push policy): the tests check the residual
machinery around a base, not the base's skill (the benchmarks use trained ones)."""

from __future__ import annotations

from pathlib import Path

import pytest


def export_small_panda(path: Path, seed: int = 0, task_name: str = "panda-reach") -> Path:
    import torch

    from robot_rl.policy import collect_provenance, contract_for_task, export_onnx
    from robot_rl.tasks.registry import make_task

    task = make_task(task_name)
    contract = contract_for_task(task, provenance=collect_provenance(task_name, seed=seed))
    torch.manual_seed(seed)
    actor = torch.nn.Sequential(torch.nn.Linear(contract.obs_dim, 32), torch.nn.ELU(),
                                torch.nn.Linear(32, contract.num_actions))
    with torch.no_grad():
        actor[2].weight.mul_(0.1)  # small actions: the arm stays near its ready pose
    export_onnx(actor, None, contract, path)
    return path


@pytest.fixture(scope="session")
def panda_base(tmp_path_factory) -> Path:
    return export_small_panda(tmp_path_factory.mktemp("residual_base") / "panda_small.onnx")


@pytest.fixture(scope="session")
def push_base(tmp_path_factory) -> Path:
    return export_small_panda(tmp_path_factory.mktemp("residual_push_base") / "push_small.onnx", task_name="panda-push")
