"""Settings of the calibrated start's sim residual, side by side: each variant trains the residual by PPO in the
calibrated sim (its own process) and is scored on the "real" robot by the benchmark's harness, on the 32-command
second look (seed 777), against the base's scores on the same commands (from ``bench_residual.py --phase
final-eval``'s results). Variants run in parallel, ``--threads`` MuJoCo threads each.

    .venv/bin/python benchmarks/sweep_sim_residual.py --results runs/cal_a1/results.json \\
        --calibrated kp=0.7,payload=4.25,latency=2,friction=0.363 --iterations 330 \\
        --variant base= --variant 'bound 0.2=fraction:0.2' --variant 'seed 1=seed:1' --out runs/sweep.json

A variant is NAME=KEY:VALUE,... over ``SimResidualCfg`` fields and ``fraction`` (the residual's bound).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def parse_variant(text: str) -> tuple[str, dict]:
    name, _, body = text.partition("=")
    settings: dict = {}
    for part in filter(None, body.split(",")):
        key, _, raw = part.partition(":")
        settings[key] = raw.lower() == "true" if raw.lower() in ("true", "false") else float(raw) if "." in raw \
            else int(raw)
    return name, settings


def run(job: tuple[str, dict, dict]) -> dict:
    name, settings, common = job
    import bench_residual as br
    import torch
    from residual_report import METRIC, recovered

    from robot_rl.learn.residual.actor import ResidualPolicy
    from robot_rl.learn.residual.config import ResidualCfg
    from robot_rl.learn.residual.evaluation import eval_commands
    from robot_rl.learn.residual.finetune import parse_shift
    from robot_rl.learn.residual.shifted_sim import RealityShift
    from robot_rl.learn.residual.sim_ppo import SimResidualCfg, train_sim_residual
    from robot_rl.policy.onnx_policy import load_policy, read_contract
    from robot_rl.tasks.registry import make_task

    torch.set_num_threads(common["threads"])
    settings = dict(settings)
    residual = ResidualCfg(fraction=settings.pop("fraction", ResidualCfg.fraction))
    cfg = SimResidualCfg(iterations=common["iterations"], nthread=common["threads"], **settings)
    task, onnx = make_task(common["task"]), common["base_onnx"]
    base = load_policy(onnx, read_contract(onnx))
    started = time.monotonic()
    out = train_sim_residual(task, base, parse_shift(common["calibrated"]), residual, cfg)
    train_s = time.monotonic() - started
    policy = ResidualPolicy(base, residual)
    policy.load_weights(out.flat)
    score = br.evaluate_policy(policy, task, RealityShift(**common["real"]),
                               eval_commands(task, common["episodes"], seed=br.FINAL_EVAL_SEED))
    line = {"name": name, "settings": settings | {"fraction": residual.fraction}, "iterations": cfg.iterations,
            "sim_transitions": out.transitions, "train_s": round(train_s), METRIC: score[METRIC],
            "recovered": recovered(score[METRIC], common["nominal"], common["real_return"]),
            "falls": score.get("falls")}
    print(json.dumps(line), flush=True)
    return line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", type=Path, required=True, help="a bench_residual results.json with a final_eval")
    p.add_argument("--calibrated", required=True, help="the calibrated sim, as a --shift (calibration.json's)")
    p.add_argument("--iterations", type=int, default=330)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--variant", action="append", default=[], help="NAME=KEY:VALUE,... (may repeat)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    results = json.loads(args.results.read_text())
    final = results.get("final_eval")
    if not final:
        raise SystemExit(f"{args.results} has no final_eval: run bench_residual.py --phase final-eval first")
    common = {"task": results["task"], "base_onnx": results["base_onnx"], "calibrated": args.calibrated,
              "real": results["shift"],  # RealityShift's fields, as the store keeps them
              "iterations": args.iterations, "threads": args.threads, "episodes": final["episodes"],
              "nominal": final["base_nominal"]["return"], "real_return": final["base_real"]["return"]}
    jobs = [(name, settings, common) for name, settings in map(parse_variant, args.variant or ["base="])]
    with mp.get_context("spawn").Pool(len(jobs)) as pool:
        lines = pool.map(run, jobs)
    if args.out:
        args.out.write_text(json.dumps(lines, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
