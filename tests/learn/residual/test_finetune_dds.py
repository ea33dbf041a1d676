"""The same finetune command over Unitree DDS against the sim bridge (a separate process, real time)."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from robot_rl.dds import close_domain
from robot_rl.learn.residual.config import ResidualCfg, SACCfg
from robot_rl.learn.residual.finetune import run_finetune


def export_small_a1(path: Path) -> Path:
    """A near-zero A1 actor (holds the default stance). Stands in for the walking policy: this test checks
    the fine-tuning plumbing over DDS, not walking."""
    import torch

    from robot_rl.policy import collect_provenance, contract_for_task, export_onnx
    from robot_rl.tasks.registry import make_task

    contract = contract_for_task(make_task("a1-flat"), provenance=collect_provenance("a1-flat", seed=0))
    torch.manual_seed(0)
    actor = torch.nn.Sequential(torch.nn.Linear(contract.obs_dim, 16), torch.nn.ELU(),
                                torch.nn.Linear(16, contract.num_actions))
    with torch.no_grad():
        actor[2].weight.mul_(0.01)
        actor[2].bias.zero_()
    export_onnx(actor, None, contract, path)
    return path


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_finetune_over_dds_against_the_sim_bridge(tmp_path):
    policy = export_small_a1(tmp_path / "a1_small.onnx")
    domain = random.SystemRandom().randint(150, 230)
    bridge = subprocess.Popen([sys.executable, "-m", "robot_rl.hardware.sim_bridge", "--robot", "a1", "--domain-id",
                               str(domain), "--duration-s", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        report = run_finetune(policy, "a1", "unitree-dds", transitions=90, run_dir=tmp_path / "run", eval_every=0,
                              episode_length_s=1.0, domain_id=domain, network_interface="lo", log=False,
                              fifo_priority=50,
                              residual=ResidualCfg(hidden=(32, 32)),
                              sac=SACCfg(critic_hidden=(32, 32), batch_size=32, warmup_transitions=20))
    finally:
        bridge.kill()
        bridge.communicate()
        close_domain(domain)
    assert report.transitions >= 90 and report.ended_by.get("time_limit", 0) >= 1
    # A bridge starved of CPU can let the state go stale: the chain faults, the episode ends cleanly, the next runs.
    assert set(report.ended_by) <= {"time_limit", "safety_stop"}
    assert report.learner["received"] == report.transitions and report.learner["updates"] > 0
    assert "tracking_lin_vel" in report.reward_terms_dropped  # DDS reports no base velocity
    assert report.exported is not None and report.exported.is_file()
