"""Behaviour cloning on panda-push: scripted demos → BC policy → success rate through the deploy runtime.

Pipeline, all in one run:

1. ``collect_demos``: the scripted expert drives arm teleop (``ArmTeleopController`` in ``DeployRuntime``,
   MuJoCo) until ``--demos`` successful episodes are in a LeRobot v3 dataset; its success rate over the
   attempts is reported. Layouts are stratified (a Latin hypercube over the task's ranges;
   ``--demo-layouts random`` for independent draws, as before). DART noise on the executed action
   (``--demo-twist-noise`` / ``--demo-joint-noise``, ``robot_rl/learn/demo_noise.py``) was measured not to help
   (benchmarks/results/RESULTS_bc_push.md) and was removed from the product (git history has it).
2. ``train_bc``: MLP on ``observation.state → action``, exported to ONNX with the task's policy contract;
   ``--chunk k`` predicts the next k actions and exports the whole chunk with the contract's ``chunk`` field,
   which the controller consumes as ``--consume`` says (ACT's temporal ensembling, ``--ensemble-m``).
3. Evaluation on ``--eval-episodes`` fresh layouts (seed 10 000 + seed, or ``--eval-seed``; never used for
   demos): the ONNX
   policy loaded with ``load_policy`` (contract checked) runs in ``DeployRuntime`` exactly as the expert
   did, in each simulator (PyBullet too: the scene is built there by the same ``SimRobot`` hook). The
   baseline is the expert itself on the same layouts, through the same runtime: the table prints the
   BC / expert ratio.

Success: the cube within 3 cm of the goal at the end of the 10 s episode.

    .venv/bin/python benchmarks/bench_bc_push.py --demos 50 --eval-episodes 100 --seed 0 --eval-seed 10000

While iterating: ``--simulators mujoco --no-expert --work-dir runs/bc_x``, then ``--reuse`` to evaluate
the same demos and policy again without collecting or training.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import tyro

from robot_rl.learn.bc import DEFAULT_ENSEMBLE_M, train_bc
from robot_rl.learn.demos import DemoSummary, collect_demos, evaluate_expert, evaluate_push_policy


@dataclass(frozen=True)
class Args:
    demos: int = 100  # 50 before issue 29 (RESULTS_bc_push.md: 100 lifts the weakest demo seed 66 → 84 %)
    epochs: int = 200
    chunk: int = 10  # 1: one action per observation, as before issue 29
    # How the controller consumes a chunk (chunk > 1): ACT's temporal ensembling, w_i = exp(−m·i) with i = 0 the
    # oldest prediction, or the first action only (robot_rl.learn.bc.DEFAULT_ENSEMBLE_M says why −0.2).
    consume: Literal["temporal_ensemble", "first_action"] = "temporal_ensemble"
    ensemble_m: float = DEFAULT_ENSEMBLE_M
    seed: int = 0
    eval_seed: int | None = None  # default 10 000 + seed; pass 10000 to score every demo seed on one layout set
    demo_layouts: Literal["random", "stratified"] = "stratified"  # see collect_demos ("random": as before)
    eval_episodes: int = 50
    simulators: tuple[str, ...] = ("mujoco", "pybullet")
    expert: bool = True  # also evaluate the expert (the baseline); --no-expert while iterating
    work_dir: Path | None = None  # demos and policy go here (default: a temporary directory)
    reuse: bool = False  # work_dir already holds demos (and policy): evaluate them, collect/train nothing
    markdown_out: Path | None = None
    json_out: Path | None = None


def main(args: Args) -> int:
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench_bc_push_"))
    policy = str(work / "bc" / "policy.onnx")
    if args.reuse:
        saved = json.loads((work / "demos_summary.json").read_text())
        demos = DemoSummary(**saved["summary"])
        t_demos = t_train = float("nan")
    else:
        if (work / "demos").exists():
            raise SystemExit(f"{work / 'demos'} exists: pass --reuse to evaluate it, or another --work-dir")
        t0 = time.perf_counter()
        demos = collect_demos("panda-push", episodes=args.demos, out_dir=str(work / "demos"), seed=args.seed,
                              layouts=args.demo_layouts)
        (work / "demos_summary.json").write_text(json.dumps({"summary": asdict(demos)}))
        t_demos = time.perf_counter() - t0
        t0 = time.perf_counter()
        train_bc(str(work / "demos"), out=str(work / "bc"), epochs=args.epochs, chunk=args.chunk, seed=args.seed,
                 consume=args.consume, ensemble_m=args.ensemble_m)
        t_train = time.perf_counter() - t0
    eval_seed = 10_000 + args.seed if args.eval_seed is None else args.eval_seed
    rows = []
    for sim in args.simulators:
        expert = (evaluate_expert("panda-push", args.eval_episodes, seed=eval_seed, simulator=sim, progress=True)
                  if args.expert else None)
        bc = evaluate_push_policy(policy, "panda-push", args.eval_episodes, seed=eval_seed, simulator=sim,
                                  progress=True)
        rows.append({"simulator": sim,
                     "expert": asdict(expert) | {"success_rate": expert.success_rate} if expert else None,
                     "bc": asdict(bc) | {"success_rate": bc.success_rate}})
    result = {
        "command": " ".join(shlex.quote(a) for a in ["benchmarks/bench_bc_push.py", *sys.argv[1:]]),
        "machine": f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
                   f"Python {platform.python_version()}",
        "demos": asdict(demos) | {"expert_success_rate": demos.expert_success_rate, "wall_s": t_demos},
        "train_s": t_train, "epochs": args.epochs, "chunk": args.chunk, "consume": args.consume,
        "ensemble_m": args.ensemble_m, "seed": args.seed, "eval_seed": eval_seed, "policy": policy,
        "evaluation": rows,
    }
    lines = [
        f"demos: {demos.written} written from {demos.attempts} expert attempts "
        f"(expert success {demos.expert_success_rate:.0%}), {demos.frames} frames, {t_demos:.0f} s; "
        f"BC training {t_train:.0f} s ({args.epochs} epochs, chunk {args.chunk}"
        f"{f', {args.consume}, m {args.ensemble_m}' if args.chunk > 1 else ''}); evaluation seed {eval_seed}",
        "",
        "| simulator | expert success | BC success | BC / expert | BC mean final distance (cm) | BC faults | "
        "BC safety interventions / episode |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        e, b = row["expert"], row["bc"]
        ratio = b["success_rate"] / e["success_rate"] if e and e["success_rate"] else float("nan")
        expert_cell = f"{e['successes']}/{e['episodes']} ({e['success_rate']:.0%})" if e else "—"
        lines.append(f"| {row['simulator']} | {expert_cell} | "
                     f"{b['successes']}/{b['episodes']} ({b['success_rate']:.0%}) | {ratio:.2f} | "
                     f"{100 * b['mean_final_distance_m']:.1f} | {b['faults']} | "
                     f"{b['safety_interventions'] / max(b['episodes'], 1):.1f} |")
    table = "\n".join(lines)
    print(table)
    if args.markdown_out is not None:
        args.markdown_out.write_text(table + "\n")
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(tyro.cli(Args)))
