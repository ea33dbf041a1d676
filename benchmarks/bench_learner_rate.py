"""Can the residual learner keep up with a robot? SAC update cost, and the update-to-data ratio a real-time run
actually reaches.

On hardware the loop never waits for the learner (a lockstep sim paces itself; a robot does not), so the
ratio asked for (``--utd``) is only what the learner's machine manages between transitions. Two parts:

1. ``update``: one ``SAC.update`` of the A1 residual's default networks (state = the contract's observation +
   the base action, batch 256), median over ``--updates`` calls, at 1 torch thread (the baseline) and at
   more; ratio = time with N threads / time with 1, and the updates per second each gives against the
   ``utd × policy rate`` a robot needs.
2. ``realtime``: ``run_finetune`` over Unitree DDS against the sim bridge (a separate process, real time),
   the shipped A1 policy as the base: the ratio reached (``FinetuneReport.utd_achieved``), missed deadlines,
   how episodes ended. The learner catches up during resets (ramp, stand, settle), which count no transitions.

    .venv/bin/python benchmarks/bench_learner_rate.py --threads 1 2 --transitions 2000 \
        --markdown-out benchmarks/results/RESULTS_learner_rate.md
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from robot_rl.learn.residual.config import ResidualCfg, SACCfg
from robot_rl.policy.onnx_policy import read_contract
from robot_rl.robots.spec import load_robot

POLICY = Path("policies/a1_flat/policy.onnx")


def update_ms(threads: int, updates: int, state_dim: int, action_dim: int, warmup: int = 20) -> float:
    """Median milliseconds of one SAC update with the default networks at ``threads`` torch threads."""
    import torch

    from robot_rl.learn.residual.sac import SAC

    torch.set_num_threads(threads)
    cfg = SACCfg()
    sac = SAC(cfg, state_dim, action_dim, ResidualCfg().hidden)
    rng = np.random.default_rng(0)
    b = cfg.batch_size
    batch = {"state": rng.standard_normal((b, state_dim), dtype=np.float32),
             "action": rng.uniform(-1, 1, (b, action_dim)).astype(np.float32),
             "reward": rng.standard_normal(b, dtype=np.float32),
             "next_state": rng.standard_normal((b, state_dim), dtype=np.float32),
             "discount": np.full(b, cfg.gamma, np.float32)}
    times = []
    for i in range(warmup + updates):
        t = time.perf_counter()
        sac.update(batch)
        if i >= warmup:
            times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def realtime_run(transitions: int, episode_s: float, threads: int, run_dir: Path) -> dict:
    """The finetune command's path over DDS against the sim bridge; what the learner reached."""
    from robot_rl.dds import close_domain
    from robot_rl.learn.residual.finetune import run_finetune
    from robot_rl.learn.residual.settings import PRESETS

    domain = random.SystemRandom().randint(150, 230)
    bridge = subprocess.Popen([sys.executable, "-m", "robot_rl.hardware.sim_bridge", "--robot", "a1", "--domain-id",
                               str(domain), "--duration-s", str(round(12 * transitions / 50 + 120))],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.monotonic()
    try:
        cfg = PRESETS["scratch"][0].with_fields(policy=POLICY, robot="a1", interface="unitree-dds",
                                                transitions=transitions, run_dir=str(run_dir), eval_every=0,
                                                domain_id=domain, network_interface="lo", learner_threads=threads)
        report = run_finetune(cfg, episode_length_s=episode_s, log=False, export=False)
    finally:
        bridge.kill()
        bridge.communicate()
        close_domain(domain)
    return {"threads": threads, "transitions": report.transitions, "episodes": report.episodes,
            "updates": report.learner["updates"], "utd_achieved": report.utd_achieved,
            "missed_deadlines": report.missed_deadlines, "ended_by": report.ended_by,
            "wall_s": time.monotonic() - started}


def write_markdown(path: Path, argv: list[str], updates: dict[int, float], needed: float, realtime: list[dict],
                   episode_s: float) -> None:
    base = updates[min(updates)]
    lines = ["## Residual learner: update cost and the ratio reached in real time", "",
             "    .venv/bin/python benchmarks/bench_learner_rate.py " + " ".join(argv), "",
             f"One `SAC.update` of the A1 residual's default networks (batch {SACCfg.batch_size}), median; a robot "
             f"at the asked UTD {SACCfg.utd_ratio:g} and the A1's policy rate needs **{needed:.0f} updates/s**:", "",
             "| torch threads | ms per update | ratio to 1 thread | updates/s |", "|---:|---:|---:|---:|"]
    lines += [f"| {n} | {ms:.1f} | {ms / base:.2f} | {1e3 / ms:.0f} |" for n, ms in sorted(updates.items())]
    if realtime:
        lines += ["", f"`run_finetune` over Unitree DDS against the sim bridge, the shipped A1 policy, {episode_s:g} s "
                  "episodes, real time (the loop never waits for the learner):", "",
                  f"| learner threads | transitions | updates | UTD reached (asked {SACCfg.utd_ratio:g}) | "
                  "missed deadlines | episodes ended by | wall (s) |", "|---:|---:|---:|---:|---:|---|---:|"]
        lines += [f"| {r['threads']} | {r['transitions']:,} | {r['updates']:,.0f} | {r['utd_achieved']:.2f} | "
                  f"{r['missed_deadlines']} | {r['ended_by']} | {r['wall_s']:.0f} |" for r in realtime]
    lines += ["", f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores shared with other "
              f"jobs, Python {platform.python_version()}; the bridge's physics runs on the same cores."]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--updates", type=int, default=300)
    p.add_argument("--transitions", type=int, default=2000, help="realtime part (0: skip it)")
    p.add_argument("--episode-s", type=float, default=10.0)
    p.add_argument("--run-dir", type=Path, default=Path("runs/bench_learner_rate"))
    p.add_argument("--markdown-out", type=Path)
    args = p.parse_args(argv)

    contract = read_contract(POLICY)
    state_dim, action_dim = contract.obs_dim + contract.num_actions, contract.num_actions
    threads = sorted({1, *args.threads})  # 1 thread is the baseline every ratio is against
    updates = {n: update_ms(n, args.updates, state_dim, action_dim) for n in threads}
    needed = SACCfg.utd_ratio / load_robot("a1").timing.policy_period_s
    for n, ms in updates.items():
        print(f"[update] {n} thread(s): {ms:.1f} ms ({1e3 / ms:.0f}/s, {needed:.0f}/s needed)", flush=True)
    realtime = []
    if args.transitions > 0:
        for n in args.threads:
            realtime.append(realtime_run(args.transitions, args.episode_s, n, args.run_dir / f"threads_{n}"))
            print(f"[realtime] {realtime[-1]}", flush=True)
    if args.markdown_out:
        write_markdown(args.markdown_out, argv, updates, needed, realtime, args.episode_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
