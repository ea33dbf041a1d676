"""FastTD3's update cost on this machine: one learner update (critic step, every 2nd an actor step, target
Polyak) and one replay sample, median ms, for the recipe's GPU sizes, the CPU defaults and a few shapes
between, each as a ratio to the CPU default measured in the same run. It explains the defaults in
``robot_rl/learn/offpolicy/config.py`` and, with a run's ``profile.json``, where an iteration's time goes.

    nice -n 10 python benchmarks/bench_fasttd3_update.py --threads 1 2
"""

from __future__ import annotations

import dataclasses
import statistics
import time

import tyro

# (label, batch, critic hidden, actor hidden)
SHAPES = (
    ("CPU default", 2048, (256, 128, 64), (128, 64, 32)),
    ("batch 4096", 4096, (256, 128, 64), (128, 64, 32)),
    ("batch 1024", 1024, (256, 128, 64), (128, 64, 32)),
    ("critic 512-256-128, batch 2048", 2048, (512, 256, 128), (256, 128, 64)),
    ("recipe (GPU): critic 1024-512-256, batch 32768", 32768, (1024, 512, 256), (512, 256, 128)),
)
A1_DIMS = (45, 48, 12)  # a1-flat: actor obs, critic obs, actions


@dataclasses.dataclass(frozen=True)
class Args:
    threads: tuple[int, ...] = (1,)
    repeats: int = 7
    skip_recipe: bool = False  # the recipe's shape takes seconds per update here


def time_shape(batch: int, critic: tuple[int, ...], actor: tuple[int, ...], repeats: int) -> tuple[float, float]:
    """Median ms of one update and of one replay sample at this shape (a replay of 128 envs × 256 rows)."""
    import torch

    from robot_rl.learn.offpolicy.config import FastTD3Cfg
    from robot_rl.learn.offpolicy.fasttd3 import FastTD3
    from robot_rl.learn.offpolicy.replay import NStepReplay

    actor_dim, critic_dim, actions = A1_DIMS
    cfg = dataclasses.replace(FastTD3Cfg(), batch_size=batch, critic_hidden=critic, actor_hidden=actor)
    learner = FastTD3(cfg, actor_dim, critic_dim, actions, num_envs=128)
    replay = NStepReplay(128, 256, actor_dim, critic_dim, actions, n_step=cfg.n_step, gamma=cfg.gamma)
    g = torch.Generator().manual_seed(0)
    for _ in range(256):
        replay.add(actor_obs=torch.randn(128, actor_dim, generator=g),
                   critic_obs=torch.randn(128, critic_dim, generator=g),
                   action=torch.rand(128, actions, generator=g) * 2 - 1, reward=torch.rand(128, generator=g) * 0.05,
                   next_actor_obs=torch.randn(128, actor_dim, generator=g),
                   next_critic_obs=torch.randn(128, critic_dim, generator=g),
                   terminated=torch.rand(128, generator=g) < 0.01, done=torch.rand(128, generator=g) < 0.02)
    sample_ms, update_ms = [], []
    batch_data = replay.sample(batch, g)
    learner.update(batch_data)  # warm-up: allocator, first-call costs
    for _ in range(repeats):
        t0 = time.perf_counter()
        batch_data = replay.sample(batch, g)
        t1 = time.perf_counter()
        learner.update(batch_data)
        t2 = time.perf_counter()
        sample_ms.append(1e3 * (t1 - t0))
        update_ms.append(1e3 * (t2 - t1))
    return statistics.median(update_ms), statistics.median(sample_ms)


def main(args: Args) -> None:
    import os
    import platform

    import torch

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; torch {torch.__version__}")
    print("| shape | torch threads | ms per update | ratio to CPU default (same threads) | ms per replay sample |")
    print("|---|---:|---:|---:|---:|")
    for threads in args.threads:
        torch.set_num_threads(threads)
        base = None
        for label, batch, critic, actor in SHAPES:
            if args.skip_recipe and label.startswith("recipe"):
                continue
            update, sample = time_shape(batch, critic, actor, args.repeats if batch < 32768 else 2)
            base = base or update
            print(f"| {label} | {threads} | {update:.1f} | {update / base:.2f} | {sample:.1f} |", flush=True)


if __name__ == "__main__":
    main(tyro.cli(Args))
