"""Sim-as-real fine-tuning benchmark on panda-push: how much of the sim-to-"real" success gap of a behaviour-
cloned policy residual fine-tuning recovers, and in how many transitions, against no fine-tuning.

1. A base policy cloned from scripted demos in the nominal sim (``collect_demos`` + ``train_bc``, ~3 min;
   50 demos as in ``bench_bc_push.py``), or ``--base-onnx``.
2. A "real" robot: the same MuJoCo robot and scene shifted beyond anything the demos saw (``RealityShift``:
   weaker motors, actuator latency, a payload on the hand, table/cube friction).
3. One harness scores every policy: deterministic episodes through ``DeployRuntime`` (safety chain on) on
   the shifted robot, over one fixed, seeded set of layouts (cube start, goal) never used for training; each
   episode: ramp to the default pose, the cube set at its start, 10 s of policy ticks. Score: the task's
   success rate (cube within 3 cm of the goal at the end), next to the mean final cube–goal distance.
4. gap recovered = (S − S_base,real) / (S_base,sim − S_base,real): 0 = the base on the "real" robot,
   1 = the base in its own (nominal) sim.

Methods, on the x axis by transitions collected on the "real" robot:
  no fine-tuning   the base policy as deployed
  residual         ``run_finetune``: base + bounded residual (α = fraction × the action clip), SAC in its own
                   process with layernorm critics, UTD 2, 3-step returns, lockstep, reward = panda-push's
                   ``RewardsCfg`` from the robot state (cube → goal distance, success radius)
  calibrated       ``--calibrate``: a calibrated start (the base logged on the "real" robot, the vectorized sim
                   with the table and cube fitted to the log, the residual fitted there: the calibrated actuators'
                   inverse, push's default), then the same SAC run on the robot from it; ``--calibrate-chain``:
                   the safety chain's torque limit told the fitted motor gains

There is no "continued training of the full policy" row: continued BC needs new demos on the "real" robot,
and continued PPO on the BC network needs its architecture (normalizer, ELU MLP with a linear skip) in
rsl_rl's actor — not built (see RESULTS_residual.md).

    .venv/bin/python benchmarks/bench_residual_push.py --out-dir runs/res_push [--phase all|base|residual|report]
        [--base-onnx runs/res_push/bc/policy.onnx] --markdown-out benchmarks/RESULTS_residual.md
        --png benchmarks/RESULTS_residual_push.png
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

# This folder (run as benchmarks/bench_residual_push.py): the learner's settings, shared with the A1 benchmark.
from bench_residual import (
    add_calibrate_args,
    add_output_args,
    add_sac_args,
    calibrated_cfg,
    evaluate_policy,
    open_results,
    sac_cfg,
    sac_settings,
)
from residual_report import learner_extras

from robot_rl.learn.residual.config import ReplayCfg, ResidualCfg
from robot_rl.learn.residual.finetune import parse_shift, run_finetune
from robot_rl.learn.residual.scenes import EVAL_SEED, EpisodeSetup, eval_setups
from robot_rl.learn.residual.shifted_sim import RealityShift
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.registry import make_task

TASK = "panda-push"
# Fine-tuning runs this benchmark knows (``--run-name``), in plot and table order.
RUN_LABELS = {"residual": "residual, α = 0.1 × clip (SAC, ours)",
              "residual_small": "residual, α = 0.03 × clip (SAC)",
              "residual_full": "full-authority residual, α = 1.0 × clip (SAC; base frozen, not its weights)",
              "residual_penalized": "residual, α = 0.1 × clip, critic warm-up and residual penalty (SAC)",
              "calibrated": "calibrated start, α = 0.2 × clip (calibrated actuators' inverse, then SAC)",
              "calibrated_s1": "calibrated start, seed 1", "calibrated_s2": "calibrated start, seed 2",
              "calibrated_anchored": "calibrated start, robot phase anchored harder (anchor 10, lr 1e-4)",
              "calibrated_chain": "calibrated start, the safety chain told the fitted motor gains",
              "calibrated_dagger": "calibrated start, DAgger fit, the chain as in the robot's file",
              "calibrated_chain_dagger": "calibrated start, DAgger fit, the chain told the fitted motor gains (ours)"}
STYLES = ("o-", "^-", "s-", "d-", "*-", "*:", "*--", "P-", "X-", "v-", "D-")
FINAL_EVAL_SEED = 777  # phase final-eval's layouts: not the set evaluated during fine-tuning (EVAL_SEED)
SECTION_START, SECTION_END = "<!-- residual-push:start -->", "<!-- residual-push:end -->"


def train_base(out: Path, demos: int, epochs: int, seed: int) -> Path:
    from robot_rl.learn.bc import train_bc
    from robot_rl.learn.demos import collect_demos

    collect_demos(TASK, episodes=demos, out_dir=str(out / "demos"), seed=seed, progress=False)
    train_bc(str(out / "demos"), task=TASK, out=str(out / "bc"), epochs=epochs, seed=seed)
    return out / "bc" / "policy.onnx"


def evaluate_base(onnx: Path, shift: RealityShift | None, setups: list[EpisodeSetup],
                  spec: RobotSpec | None = None) -> dict:
    """The base alone through the very path the residual runs in (the A1 benchmark's harness, with scenes)."""
    return evaluate_policy(load_policy(onnx, read_contract(onnx)), make_task(TASK), shift, setups, spec)


def recovered(s: float, nominal: float, real: float) -> float:
    return (s - real) / (nominal - real) if nominal != real else float("nan")


def binomial_se(p: float, n: int) -> float:
    return float(np.sqrt(max(p * (1 - p), 1e-12) / max(n, 1)))


def plot(results: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nom, real = results["base_nominal"], results["base_real"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for (name, label), style in zip(RUN_LABELS.items(), STYLES, strict=True):
        curve = results.get(name, [])
        if not curve:
            continue
        x = [c["transitions"] for c in curve]
        se = [binomial_se(c["success"], c["episodes"]) for c in curve]
        ax1.errorbar(x, [c["success"] for c in curve], yerr=se, fmt=style, capsize=3, label=f"{label} ± s.e.")
        ax2.plot(x, [100 * c["final_object_error_m"] for c in curve], style, label=label)
    ax1.axhline(real["success"], color="gray", ls="--", label="no fine-tuning (base on the 'real' robot)")
    ax1.axhline(nom["success"], color="black", ls="-.", label="base in its training sim")
    ax2.axhline(100 * real["final_object_error_m"], color="gray", ls="--", label="no fine-tuning")
    ax2.axhline(100 * nom["final_object_error_m"], color="black", ls="-.", label="base in its training sim")
    ax2.axhline(3.0, color="green", ls=":", label="success radius (3 cm)")
    for ax in (ax1, ax2):
        ax.set_xlabel("transitions on the 'real' robot")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax1.set_ylabel(f"success rate ({results['eval_episodes']} fixed layouts)")
    ax1.set_ylim(-0.02, 1.02)
    ax2.set_ylabel("mean final cube–goal distance (cm)")
    fig.suptitle(f"panda-push, BC base: 'real' = {results['shift_text']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def section(results: dict, png: Path) -> str:
    nom, real = results["base_nominal"], results["base_real"]
    n = results["eval_episodes"]
    base = results.get("base", {})
    lines = [
        SECTION_START,
        "### Panda push (panda-push), a behaviour-cloned base",
        "",
        f"Base: BC policy ({base.get('how', 'see results.json')}). The \"real\" robot is the same MuJoCo Panda, "
        f"table and cube shifted beyond anything the demos saw: {results['shift_text']} (the demos and BC: the "
        "nominal sim, no randomization). Every policy is scored by one harness: deterministic episodes through "
        f"`DeployRuntime` (safety chain on) on the shifted robot, on the same {n} seeded layouts (seed "
        f"{results['eval_seed']}; never trained on: the demos use seed 0, fine-tuning its own stream), each "
        "episode: ramp to the default pose, the cube set at its start, 10 s of policy ticks. Performance = the "
        "task's success rate (cube centre within 3 cm of the goal at the end); **gap recovered** = "
        "(S − S_base,real) / (S_base,sim − S_base,real). x = transitions collected on the \"real\" robot "
        f"(evaluation episodes not counted). Binomial standard error at n = {n}: ±{binomial_se(0.5, n):.2f} "
        "at 50 %.",
        "",
        *("    " + c for c in results.get("commands", [])),
        "",
        "| | success | gap recovered | mean final cube–goal distance (cm) | return | safety interventions |",
        "|---|---:|---:|---:|---:|---:|",
        f"| base in its training sim | {nom['success']:.2f} | 1 (definition) | "
        f"{100 * nom['final_object_error_m']:.1f} | {nom['return']:.2f} | {nom['safety_events']} |",
        f"| base on the \"real\" robot, no fine-tuning | {real['success']:.2f} | 0 (definition) | "
        f"{100 * real['final_object_error_m']:.1f} | {real['return']:.2f} | {real['safety_events']} |",
    ]
    for name, label in RUN_LABELS.items():
        for c in results.get(name, []):
            lines.append(f"| {label.split(' (')[0]}, {c['transitions']:,} transitions | {c['success']:.2f} | "
                         f"{c['recovered']:.2f} | {100 * c['final_object_error_m']:.1f} | {c['return']:.2f} | "
                         f"{c['safety_events']} |")
    for name in RUN_LABELS:
        run = results.get(f"{name}_run")
        if not run:
            continue
        learner, sync = run["learner"], run["sync"]
        lines += ["", f"Run `{name}`: α = {run['fraction']} × the action clip, SAC with {run['critic_norm']} critics, "
                  f"UTD {run['utd']}, 3-step returns{learner_extras(run)}, the learner in its own process (the "
                  f"lockstep sim paces itself to the UTD ratio, waiting up to {run.get('learner_timeout_s', 2.0):g} s "
                  f"for a learner slowed by other jobs); {run['episodes']} training episodes, "
                  f"{int(learner['updates']):,} updates, "
                  f"{int(learner['lost'])} transitions lost in the ring, {sync['syncs']} weight syncs; wall time "
                  f"{run['wall_s'] / 60:.1f} min on 2 cores shared with other jobs. Reward (panda-push `REWARDS`, "
                  "used by fine-tuning only): cube → goal distance −5/m·s, exp kernel (σ 5 cm) 1/s, inside the "
                  "success radius 2/s, tool → cube −0.2/m·s, action rate −0.01."]
        cal = run.get("calibrated")
        if cal:
            how = ("the calibrated actuators' inverse fitted by regression" if cal["sim"].get("start") == "actuators"
                   else "from the base alone")
            how += f", then {cal['sim']['iterations']} PPO iterations" if cal["sim"].get("iterations") else ", no PPO"
            lines[-1] += (f" Calibrated start: {cal['log_transitions']:,} robot transitions logged (counted), the sim "
                          f"fitted as {cal['calibration']['shift_text']}; sim residual: {how} "
                          f"({cal['sim']['transitions']:,} sim transitions).")
    final = results.get("final_eval")
    if final and final.get("runs"):
        fn, fr = final["base_nominal"], final["base_real"]
        lines += ["", f"Second look (`--phase final-eval`): {final['episodes']} other layouts (seed {final['seed']}), "
                  f"binomial standard error ±{binomial_se(0.5, final['episodes']):.2f} at 50 %.", "",
                  "| policy | success | gap recovered | mean final cube–goal distance (cm) | return |",
                  "|---|---:|---:|---:|---:|",
                  f"| base in its training sim | {fn['success']:.2f} | 1 (definition) | "
                  f"{100 * fn['final_object_error_m']:.1f} | {fn['return']:.2f} |",
                  f"| base on the \"real\" robot | {fr['success']:.2f} | 0 (definition) | "
                  f"{100 * fr['final_object_error_m']:.1f} | {fr['return']:.2f} |"]
        for name, r in final["runs"].items():
            lines.append(f"| {name} | {r['success']:.2f} | {r['recovered']:.2f} | "
                         f"{100 * r['final_object_error_m']:.1f} | {r['return']:.2f} |")
    shifts = results.get("shift_search")
    if shifts:
        lines += ["", "How the shift was chosen: the base's success on the first layouts of the evaluation set "
                  "under candidate shifts (the nominal sim first):", "",
                  *("    " + c for c in results.get("shift_search_commands", [])), "",
                  "| shift | episodes | success | mean final distance (cm) |", "|---|---:|---:|---:|"]
        for row in shifts:
            lines.append(f"| {row['shift_text']} | {row['episodes']} | {row['success']:.2f} | "
                         f"{100 * row['final_object_error_m']:.1f} |")
    for note in results.get("notes", []):  # findings written by hand after a run (results.json "notes")
        lines += ["", note]
    lines += ["", "Compared with: no fine-tuning. The \"continued training of the full policy\" baseline of the "
              "A1/reach benchmark (continued PPO in the shifted vectorized env, which now has the table and cube) "
              "is not run here: it needs the BC network's architecture (normalizer, ELU MLP with a linear skip) in "
              "rsl_rl's actor, and continued BC would need new demos on the \"real\" robot. Residual PPO in the "
              "vectorized push env under the true shift (the calibrated start's PPO phase, given the exact "
              "calibration) did not raise the return in 300 iterations from zero and drifted away from the "
              "actuators start (benchmarks/RESULTS_residual_calibrated.md).",
              "", f"![success vs transitions]({png.name})", "",
              f"Machine: {results.get('machine', '?')}, 2 cores shared with other jobs.", SECTION_END]
    return "\n".join(lines) + "\n"


def write_section(text: str, path: Path) -> None:
    """Replace this benchmark's section of ``path`` (between its markers), or append it; keep the rest."""
    old = path.read_text() if path.exists() else ""
    if SECTION_START in old and SECTION_END in old:
        head, rest = old.split(SECTION_START, 1)
        new = head + text.rstrip("\n") + rest.split(SECTION_END, 1)[1]
    else:
        new = (old.rstrip("\n") + "\n\n" if old.strip() else "") + text
    path.write_text(new)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-onnx", type=Path)
    p.add_argument("--base-note", default=None, help="how --base-onnx was made (for the results)")
    p.add_argument("--demos", type=int, default=50)
    p.add_argument("--bc-epochs", type=int, default=200)
    p.add_argument("--shift", default="kp=0.5,latency=2,object_friction=1.6")
    p.add_argument("--transitions", type=int, default=20_000)
    p.add_argument("--eval-every", type=int, default=4000)
    p.add_argument("--eval-episodes", type=int, default=40)
    add_sac_args(p)
    p.add_argument("--learner-timeout-s", type=float, default=2.0,
                   help="the actor's learner heartbeat timeout (lockstep: also how long the sim waits for a slow "
                        "learner); raise it on a machine shared with other jobs")
    p.add_argument("--search-shifts", nargs="*", default=[],
                   help="candidate shifts to score the base on (phase base), e.g. kp=0.5,latency=2")
    p.add_argument("--search-episodes", type=int, default=20)
    p.add_argument("--phase", default="all", choices=("all", "base", "residual", "final-eval", "report"))
    p.add_argument("--final-eval", action="extend", nargs="+", default=[], metavar="NAME=ONNX",
                   help="phase final-eval: exported policies scored on a larger set of layouts never seen before")
    p.add_argument("--final-eval-episodes", type=int, default=120)
    p.add_argument("--final-eval-chain", default=None, metavar="kp=..,kd=..", help="phase final-eval: run these "
                   "with the safety chain told the motors' measured gain scales (a --calibrate-chain run's "
                   "deployment), e.g. kp=0.5,kd=1")
    p.add_argument("--run-name", default="residual", choices=tuple(RUN_LABELS))
    p.add_argument("--seed", type=int, default=0)
    add_calibrate_args(p)
    add_output_args(p, "runs/res_push")
    args = p.parse_args(argv)

    results, save = open_results(args.out_dir)
    task = make_task(TASK)
    shift = parse_shift(args.shift) or RealityShift()
    setups = eval_setups(task, args.eval_episodes)  # the set run_finetune evaluates on (seed EVAL_SEED)

    if args.phase in ("all", "base"):
        if args.base_onnx is None:
            started = time.monotonic()
            args.base_onnx = train_base(args.out_dir, args.demos, args.bc_epochs, args.seed)
            results["base"] = {"how": f"{args.demos} scripted demos (seed {args.seed}) → `train_bc`, "
                                      f"{args.bc_epochs} epochs", "wall_s": time.monotonic() - started}
        results |= {"task": TASK, "shift": dataclasses.asdict(shift), "shift_text": shift.describe(),
                    "base_onnx": str(args.base_onnx), "eval_episodes": args.eval_episodes, "eval_seed": EVAL_SEED,
                    "machine": f"{platform.processor() or platform.machine()}, Python {sys.version.split()[0]}"}
        if args.base_note:
            results["base"] = {"how": args.base_note}
        results.setdefault("base", {"how": f"`{args.base_onnx}`"})
        if args.search_shifts:
            rows = []
            for text in ["", *args.search_shifts]:
                candidate = parse_shift(text) or RealityShift()
                score = evaluate_base(args.base_onnx, candidate, setups[: args.search_episodes])
                rows.append({**score, "shift_text": candidate.describe() if text else "none (nominal sim)"})
                print(f"[shift] {rows[-1]['shift_text']}: success {score['success']:.2f}, final distance "
                      f"{100 * score['final_object_error_m']:.1f} cm", flush=True)
                results["shift_search"] = rows
                save()
        results["base_nominal"] = evaluate_base(args.base_onnx, None, setups)
        results["base_real"] = evaluate_base(args.base_onnx, shift, setups)
        print(f"base success: nominal {results['base_nominal']['success']:.2f}, "
              f"real {results['base_real']['success']:.2f}", flush=True)
        save()
    nominal, real = results["base_nominal"]["success"], results["base_real"]["success"]

    if args.phase in ("all", "residual"):
        started = time.monotonic()
        report = run_finetune(results["base_onnx"], task.robot, "sim", transitions=args.transitions,
                              residual=ResidualCfg(fraction=args.fraction, learner_timeout_s=args.learner_timeout_s),
                              sac=sac_cfg(args, task), replay=ReplayCfg(),
                              shift=shift, run_dir=args.out_dir / args.run_name, eval_every=args.eval_every,
                              eval_episodes=args.eval_episodes, seed=args.seed, calibrated=calibrated_cfg(args, task))
        results[args.run_name] = [{**e, "recovered": recovered(e["success"], nominal, real)}
                                  for e in report.evaluations]
        results[f"{args.run_name}_run"] = {"wall_s": time.monotonic() - started, "learner": report.learner,
                                   "sync": report.sync, "episodes": report.episodes, **sac_settings(args),
                                   "learner_timeout_s": args.learner_timeout_s,
                                   "exported": str(report.exported), "ended_by": report.ended_by,
                                   "seed": args.seed, "calibrated": report.calibrated}
        save()

    if args.phase == "final-eval":  # a second look with 3× the layouts, from a seed no run has evaluated on
        final_setups = eval_setups(task, args.final_eval_episodes, seed=FINAL_EVAL_SEED)
        final = results.setdefault("final_eval", {"episodes": args.final_eval_episodes, "seed": FINAL_EVAL_SEED,
                                                  "runs": {}})
        if final["episodes"] != args.final_eval_episodes or "base_real" not in final:
            final.update(episodes=args.final_eval_episodes, runs={},
                         base_nominal=evaluate_base(results["base_onnx"], None, final_setups),
                         base_real=evaluate_base(results["base_onnx"], shift, final_setups))
            save()
        chain_spec = None
        if args.final_eval_chain:
            from robot_rl.learn.residual.shifted_sim import with_measured_actuators
            from robot_rl.robots.spec import load_robot

            chain_spec = with_measured_actuators(load_robot(task.robot), parse_shift(args.final_eval_chain))
        for item in args.final_eval:
            name, _, onnx = item.rpartition("=")
            score = evaluate_base(Path(onnx), shift, final_setups, chain_spec)
            score |= {"onnx": onnx, "recovered": recovered(score["success"], final["base_nominal"]["success"],
                                                           final["base_real"]["success"])}
            final["runs"][name] = score
            print(f"[final-eval] {name}: success {score['success']:.2f}, recovered {score['recovered']:.2f}",
                  flush=True)
            save()

    given = argv if argv is not None else sys.argv[1:]
    command = ".venv/bin/python benchmarks/bench_residual_push.py " + shlex.join(given)
    if args.phase != "report" and command not in results.setdefault("commands", []):
        results["commands"].append(command)
    png = args.png or args.out_dir / "residual_push.png"
    plot(results, png)
    if args.markdown_out:
        write_section(section(results, png), args.markdown_out)
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
