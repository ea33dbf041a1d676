"""What symmetry augmentation costs per PPO iteration: rsl_rl's update with and without it, same process.

Two runners of one task's recipe (``--task``, its envs, rollout length, epochs and mini-batches), one with
``PPOCfg.symmetry_augmentation`` on, take turns for ``--rounds`` blocks of ``--iterations`` iterations each, so a
change of machine load lands on both. Each ``alg.update`` call is timed (the rollout collection is the same for
both and is not); the table gives the median update ms of each and their ratio (baseline: off). Augmentation
doubles every mini-batch and adds one forward pass of the actor for the (logged) mirror loss, so the update should
cost about 2×; collection, which dominates an iteration on a CPU, is untouched.

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/bench_symmetry_update.py --task a1-flat --rounds 6 \\
        --iterations 2
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="a1-flat")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--iterations", type=int, default=2, help="iterations per runner per round")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the trainer's default on 2 cores)")
    args = parser.parse_args()

    import torch

    from robot_rl.learn.ppo import RslRlVecEnv, TaskRunner
    from robot_rl.learn.train import seed_everything
    from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
    from robot_rl.tasks.registry import make_task

    torch.set_num_threads(args.threads)
    seed_everything(0)
    base = make_task(args.task)
    times: dict[bool, list[float]] = {False: [], True: []}
    runners = {}
    for on in (False, True):
        task = dataclasses.replace(base, ppo=dataclasses.replace(base.ppo, symmetry_augmentation=on))
        runner = TaskRunner(RslRlVecEnv(MujocoVecEnv(task, task.ppo.num_envs, seed=0)), task, log_dir=None)
        update = runner.alg.update

        def timed(update=update, on=on):
            start = time.perf_counter()
            result = update()
            times[on].append(time.perf_counter() - start)
            return result

        runner.alg.update = timed
        runners[on] = runner
    for _ in range(args.rounds):
        for on in (False, True):
            runners[on].learn(args.iterations)
    for on in (False, True):
        del times[on][0]  # the first update warms up (allocations, the normalizers' first batch)
    off, on = statistics.median(times[False]) * 1e3, statistics.median(times[True]) * 1e3
    ppo = base.ppo
    print(f"{args.task}: {ppo.num_envs} envs × {ppo.num_steps_per_env} steps, {ppo.num_learning_epochs} epochs × "
          f"{ppo.num_mini_batches} mini-batches; torch threads {args.threads}; {os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}")
    print("| update | median ms | n | ratio |\n|---|---:|---:|---:|")
    print(f"| symmetry off (baseline) | {off:.0f} | {len(times[False])} | 1.00 |")
    print(f"| symmetry augmentation | {on:.0f} | {len(times[True])} | {on / off:.2f} |")
    for runner in runners.values():
        runner.env.close()


if __name__ == "__main__":
    main()
