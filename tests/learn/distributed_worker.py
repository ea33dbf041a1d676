"""One rank of the two-process training in ``test_distributed_train.py`` (started by torchrun).

Trains through the trainer's own entry point, then saves this rank's final models with the runner's own save
(to the test's directory, not the run directory) so the test can compare the ranks' weights.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from robot_rl.learn.train import TrainArgs, train_runner

if __name__ == "__main__":
    out = Path(sys.argv[1])
    args = TrainArgs(task="a1-flat", num_envs=8, num_steps_per_env=8, max_iterations=3, log_dir=out / "runs",
                     progress=False, physics_threads=1, torch_threads=1)
    runner, final = train_runner(args)
    runner.save(str(out / f"rank{os.environ['RANK']}.pt"))
    (out / f"final{os.environ['RANK']}.txt").write_text(str(final))
