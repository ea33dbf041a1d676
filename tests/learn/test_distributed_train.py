"""Multi-process training (torchrun, torch.distributed over gloo on the CPU): two ranks end with one policy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

WORKER = Path(__file__).with_name("distributed_worker.py")


@pytest.mark.slow
def test_two_gloo_ranks_train_one_policy_and_only_rank_0_writes(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(WORKER),
           str(tmp_path)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    runs = list((tmp_path / "runs" / "a1-flat").iterdir())
    assert len(runs) == 1, runs  # one run directory: rank 1 writes none
    final = Path((tmp_path / "final0.txt").read_text())
    assert final.parent == runs[0] and final.name == "model_2.pt"
    assert (tmp_path / "final1.txt").read_text() == "None"

    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    written = torch.load(final, weights_only=False)
    first = torch.load(runs[0] / "model_0.pt", weights_only=False)
    for key in ("actor_state_dict", "critic_state_dict"):
        for name, value in ranks[0][key].items():
            # Bit-identical: both ranks apply the same all-reduced gradients and normalizer statistics.
            assert torch.equal(value, ranks[1][key][name]), f"{key}.{name} differs between the ranks"
            assert torch.equal(value, written[key][name]), f"{key}.{name} differs from rank 0's checkpoint"
    moved = [n for n, v in written["actor_state_dict"].items() if not torch.equal(v, first["actor_state_dict"][n])]
    assert moved, "the actor did not change between the first and the last iteration"
    assert written["infos"]["world_size"] == 2
