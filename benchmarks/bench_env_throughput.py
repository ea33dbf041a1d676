"""Throughput of the vectorized MuJoCo env, as a ratio to the raw MuJoCo physics ceiling of the same run.

Two workloads for a1-flat with domain randomization on (pushes, latency, DR resets included):
  stand    zero actions: the robots hold the default pose (as a policy does once it has learned to stand)
  random   N(0, 0.5) actions: the robots flail and fall, with many more contacts (early training)
For each, per repeat and env count N:
  env      MujocoVecEnv.step(): physics + resets, DR, pushes, latency, rewards, observations
  ceiling  mujoco.rollout re-run on exactly the states and ctrl the env produced: the same models, substeps
           and physics work, no Python env logic. For "stand" this is rollout with constant ctrl.
  loop-1/2 the same work as a Python loop of mj_step(nstep=decimation) over N MjData, on 1 and 2 threads
           (the alternative to rollout, for the design choice)
Physics steps/s = policy steps/s × decimation. Medians over repeats; single-core speed drifts, so only ratios
within one run are meaningful.

With ``--backend warp`` (the gpu extra) the same workloads run in ``WarpVecEnv`` on ``--device`` (cuda:0, or warp's
CPU device), for each N:
  warp env      WarpVecEnv.step(): physics, resets, DR, pushes, latency, rewards, observations, all on the device
  warp ceiling  the same batched model and data stepped alone (decimation × mujoco_warp.step, the held ctrl)
  cpu env       MujocoVecEnv.step() on the same N in the same run (the CPU backend, all cores)

    .venv/bin/python benchmarks/bench_env_throughput.py [--envs 64 128 256] [--repeats 5] [--steps 100]
        [--markdown-out benchmarks/results/RESULTS_env_throughput.md]
    .venv/bin/python benchmarks/bench_env_throughput.py --backend warp --device cuda:0 --envs 1024 4096 16384
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import mujoco
import numpy as np
from mujoco import rollout

from robot_rl.sim.mujoco_vec_env import FULLPHYSICS, MujocoVecEnv
from robot_rl.tasks.registry import make_task

TASK = "a1-flat"


def bench_env(env: MujocoVecEnv, steps: int, rng: np.random.Generator, scale: float) -> tuple[float, list, list]:
    """Policy steps/s of env.step, and the (state, ctrl) inputs of every physics call it made."""
    actions = [rng.normal(scale=scale, size=(env.num_envs, env.num_actions)) for _ in range(steps)]
    states, ctrls = [], []
    start = time.perf_counter()
    for a in actions:
        # The physics inputs of this step (the copies count against the env: a conservative ratio).
        before = env.state.copy()  # rollout input (bar a push, every few hundred steps)
        env.step(a)
        states.append(before)
        ctrls.append(env._ctrl.copy())
    return env.num_envs * steps / (time.perf_counter() - start), states, ctrls


def bench_replay(env: MujocoVecEnv, states: list, ctrls: list, pool: rollout.Rollout, datas: list) -> float:
    out = np.empty_like(env._out)
    sens = np.empty_like(env._sens)
    start = time.perf_counter()
    for s, c in zip(states, ctrls, strict=True):
        pool.rollout(env.models, datas, s, c, nstep=env.decimation, state=out, sensordata=sens, skip_checks=True)
    return env.num_envs * len(states) / (time.perf_counter() - start)


def bench_loop(env: MujocoVecEnv, states: list, ctrls: list, threads: int) -> float:
    n = env.num_envs
    datas = [mujoco.MjData(m) for m in env.models]
    chunks = np.array_split(np.arange(n), threads)
    executor = ThreadPoolExecutor(threads) if threads > 1 else None

    def work(ids: np.ndarray, ctrl: np.ndarray) -> None:
        for i in ids:
            datas[i].ctrl[:] = ctrl[i, 0]
            mujoco.mj_step(env.models[i], datas[i], nstep=env.decimation)

    for i, d in enumerate(datas):
        mujoco.mj_setState(env.models[i], d, states[0][i], FULLPHYSICS)
    start = time.perf_counter()
    for c in ctrls:
        if executor is None:
            work(np.arange(n), c)
        else:
            list(executor.map(work, chunks, [c] * len(chunks)))
        np.stack([d.qpos for d in datas])  # the env would read the state back every step
    elapsed = time.perf_counter() - start
    if executor is not None:
        executor.shutdown()
    return n * len(ctrls) / elapsed


def bench_warp(n: int, device: str, scale: float, repeats: int, steps: int) -> tuple:
    """(decimation, medians {warp env, warp ceiling, cpu env} in policy steps/s, ratio env/ceiling per repeat)."""
    import torch

    from robot_rl.sim.warp_vec_env import WarpVecEnv

    task = make_task(TASK)
    env = WarpVecEnv(task, n, seed=0, randomize=True, device=device)
    cpu = MujocoVecEnv(task, n, seed=0, randomize=True)
    gen = torch.Generator(device=env.device).manual_seed(0)

    def sync() -> None:
        if env.device.startswith("cuda"):
            torch.cuda.synchronize(env.device)

    def run_env(k: int) -> float:
        actions = [torch.randn((n, env.num_actions), device=env.device, generator=gen) * scale for _ in range(k)]
        sync()
        start = time.perf_counter()
        for a in actions:
            env.step(a)
        sync()
        return n * k / (time.perf_counter() - start)

    def run_ceiling(k: int) -> float:
        sync()
        start = time.perf_counter()
        for _ in range(k * env.decimation):
            env._physics_step()
        sync()
        return n * k / (time.perf_counter() - start)

    rng = np.random.default_rng(0)
    run_env(10)  # warm up: resets, the caching allocator
    results: dict[str, list[float]] = {"warp env": [], "warp ceiling": [], "cpu env": []}
    for _ in range(repeats):
        results["warp env"].append(run_env(steps))
        results["warp ceiling"].append(run_ceiling(steps))
        results["cpu env"].append(bench_env(cpu, steps, rng, scale)[0])
    cpu.close()
    ratios = [e / c for e, c in zip(results["warp env"], results["warp ceiling"], strict=True)]
    return env.decimation, {k: statistics.median(v) for k, v in results.items()}, ratios


def warp_main(args: argparse.Namespace) -> int:
    rows = []
    for workload, scale in WORKLOADS.items():
        for n in args.envs:
            dec, med, ratios = bench_warp(n, args.device, scale, args.repeats, args.steps)
            rows.append(f"| {workload} | {n} | **{med['warp env']:,.0f}** | {med['warp ceiling']:,.0f} | "
                        f"{statistics.median(ratios):.2f} [{min(ratios):.2f}–{max(ratios):.2f}] | "
                        f"{med['cpu env']:,.0f} | {med['warp env'] / med['cpu env']:.2f} |")
    import torch

    device = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else f"warp CPU ({_cpu_name()})"
    table = "\n".join([
        f"Device: {device}; CPU: {_cpu_name()}, {os.cpu_count()} cores. Policy steps/s (× {dec} = physics steps/s), "
        f"medians over {args.repeats} repeats of {args.steps} steps. *warp env*: `WarpVecEnv.step` (physics, DR "
        "resets, pushes, latency, rewards, observations on the device); *warp ceiling*: the same batched model and "
        "data stepped alone (decimation × `mujoco_warp.step`); *cpu env*: `MujocoVecEnv.step` on the same N in the "
        "same run, all cores.\n",
        "| workload | envs | warp env policy steps/s | warp ceiling (physics alone) | ratio env/ceiling [min–max] | "
        "cpu env policy steps/s (same run) | warp / cpu |",
        "|" + "---|" * 7, *rows])
    print(table)
    if args.markdown_out:
        write_section(args.markdown_out, WARP_SECTION, f"Command: `{' '.join(['python', *sys.argv])}`\n\n{table}\n")
    return 0


TITLE = "# Env throughput (a1-flat, domain randomization on)"
CPU_SECTION, WARP_SECTION = "## CPU backend (mujoco.rollout)", "## Warp backend (MuJoCo Warp)"


def write_section(path: str, heading: str, body: str) -> None:
    """Replace one backend's section of the results page (or add it), keeping the other's."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = TITLE + "\n"
    sections: dict[str, str] = {}
    for chunk in text.split("\n## ")[1:]:
        name, _, rest = chunk.partition("\n")
        sections["## " + name] = rest.strip("\n")
    sections[heading] = body.strip("\n")
    head = text.split("\n## ")[0].rstrip("\n")
    with open(path, "w") as f:
        f.write(head + "\n\n" + "\n\n".join(f"{k}\n\n{v}" for k, v in sections.items()) + "\n")
    print(f"wrote {path}")


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


WORKLOADS = {"stand": 0.0, "random": 0.5}  # action scale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100, help="policy steps per timed run")
    parser.add_argument("--markdown-out", default=None)
    parser.add_argument("--backend", choices=("cpu", "warp"), default="cpu")
    parser.add_argument("--device", default="cuda:0", help="the warp backend's device (cuda:N or cpu)")
    args = parser.parse_args()
    if args.backend == "warp":
        return warp_main(args)
    threads = os.cpu_count() or 1
    task = make_task(TASK)
    rows = []
    for workload, scale in WORKLOADS.items():
        for n in args.envs:
            env = MujocoVecEnv(task, n, seed=0, randomize=True)
            pool = rollout.Rollout(nthread=threads if threads > 1 else 0)
            datas = [mujoco.MjData(env.models[0]) for _ in range(max(threads, 1))]
            rng = np.random.default_rng(0)
            bench_env(env, 20, rng, scale)  # warm up: resets, pools, caches
            results: dict[str, list[float]] = {k: [] for k in ("env", "ceiling", "loop-1", "loop-2")}
            for _ in range(args.repeats):
                sps, states, ctrls = bench_env(env, args.steps, rng, scale)
                results["env"].append(sps)
                results["ceiling"].append(bench_replay(env, states, ctrls, pool, datas))
                results["loop-1"].append(bench_loop(env, states, ctrls, 1))
                results["loop-2"].append(bench_loop(env, states, ctrls, min(2, threads)))
            pool.close()
            env.close()
            med = {k: statistics.median(v) for k, v in results.items()}
            ratios = [e / c for e, c in zip(results["env"], results["ceiling"], strict=True)]
            rows.append((workload, n, env.decimation, med, statistics.median(ratios), min(ratios), max(ratios)))

    lines = [
        "| workload | envs | env policy steps/s | env physics steps/s | ceiling physics steps/s (rollout) | "
        "**ratio env/ceiling** [min–max] | loop 1 thread | loop 2 threads | rollout / loop-2 |",
        "|" + "---|" * 9,
    ]
    for workload, n, dec, med, ratio, lo, hi in rows:
        lines.append(
            f"| {workload} | {n} | {med['env']:,.0f} | {med['env'] * dec:,.0f} | {med['ceiling'] * dec:,.0f} | "
            f"**{ratio:.2f}** [{lo:.2f}–{hi:.2f}] | {med['loop-1'] * dec:,.0f} | {med['loop-2'] * dec:,.0f} | "
            f"{med['ceiling'] / med['loop-2']:.2f} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.markdown_out:
        machine = f"{_cpu_name()}, {threads} cores, Python {sys.version.split()[0]}"
        command = " ".join(["python", *sys.argv])
        text = (
            f"Command: `{command}`\n\nMachine: {machine}, MuJoCo {mujoco.__version__}, shared with other jobs "
            f"(compare ratios, not absolute rates). Medians over {args.repeats} repeats of {args.steps} policy "
            "steps; physics steps = policy steps × decimation (4). The ceiling is `mujoco.rollout` alone re-run "
            "on exactly the states and controls the env produced, on the same per-env models (for *stand*: "
            "constant default-pose ctrl). *loop* is a Python loop of `mj_step(nstep=4)` over N `MjData` doing "
            "the same work (the design alternative; rollout was chosen).\n\n"
            f"{table}\n"
        )
        write_section(args.markdown_out, CPU_SECTION, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
