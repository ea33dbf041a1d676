"""Sim-as-real fine-tuning benchmark on panda-push: how much of the sim-to-"real" success gap of a behaviour-
cloned policy residual fine-tuning recovers, and in how many transitions, against no fine-tuning and continued PPO.

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
                   the safety chain's torque limit told the fitted motor gains. Every run also exports its
                   best-evaluated iterate (``policy_residual_best.onnx``, the start included). ``--learn-sent``
                   (transitions record the residual the chain let through) did not change the collapse and was
                   removed at commit eaf2417 (git history has it; RESULTS_residual_calibrated.md).
  continued PPO    ``--phase ppo``: the full BC network (rebuilt from its ONNX: ``robot_rl.learn.bc_ppo``) trained on
                   by rsl_rl PPO in the vectorized push env under the same shift, behind the chain's rate and
                   torque limits; every transition it collects counts (its critic-only warm-up's too)

Continued BC is not a row: it would need new demos on the "real" robot.

    .venv/bin/python benchmarks/bench_residual_push.py --out-dir runs/res_push [--phase all|base|residual|ppo|report]
        [--base-onnx runs/res_push/bc/policy.onnx] --markdown-out benchmarks/results/RESULTS_residual.md
        --png benchmarks/results/RESULTS_residual_push.png
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import platform
import shlex
import sys
import time
from pathlib import Path

# This folder (run as benchmarks/bench_residual_push.py): the learner's settings, shared with the A1 benchmark.
from bench_residual import (
    TorchActorPolicy,
    add_output_args,
    add_settings_args,
    evaluate_policy,
    open_results,
    sac_settings,
    settings,
)
from residual_push_report import RUN_LABELS, plot, recovered, section, write_section

from robot_rl.learn.residual.finetune import parse_shift, run_finetune
from robot_rl.learn.residual.scenes import EVAL_SEED, EpisodeSetup, eval_setups
from robot_rl.learn.residual.shifted_sim import RealityShift
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.registry import make_task

TASK = "panda-push"
FINAL_EVAL_SEED = 777  # phase final-eval's layouts: not the set evaluated during fine-tuning (EVAL_SEED)


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


def continued_bc_ppo(base_onnx: Path, shift: RealityShift, setups: list[EpisodeSetup], points: list[int],
                     nominal: float, real: float, *, init_std: float, critic_warmup: int, stop_at: float,
                     learning_rate: float, schedule: str, num_envs: int | None = None,
                     budget_s: float, export_dir: Path, seed: int) -> list[dict]:
    """The full BC network trained on by rsl_rl PPO in the vectorized push env under ``shift`` (fixed: the "real"
    robot; behind the chain's rate and torque limits, as the task trains), scored by the harness at ``points``
    (transitions, the critic-only warm-up's included: they are robot transitions too). Each scored iterate is
    exported (``ppo_<transitions>.onnx``) for the second look. ``num_envs``: None, the task's PPO size."""
    import torch

    from robot_rl.learn.bc_ppo import bc_actor_cfg
    from robot_rl.learn.ppo import RslRlVecEnv, TaskRunner
    from robot_rl.learn.residual.shifted_sim import shifted_vec_env
    from robot_rl.learn.train import set_torch_threads
    from robot_rl.policy import collect_provenance, contract_for_task, export_rsl_rl_policy
    from robot_rl.robots.spec import load_robot

    task = make_task(TASK)
    spec = load_robot(task.robot)
    set_torch_threads(1)
    torch.manual_seed(seed)
    # No entropy bonus widening σ: PPO starts where the BC network is sure.
    ppo = dataclasses.replace(task.ppo, entropy_coef=0.0, save_interval=10**9, learning_rate=learning_rate,
                              schedule=schedule, num_envs=num_envs or task.ppo.num_envs)
    env = shifted_vec_env(task, shift, ppo.num_envs, seed=seed + 1)
    iterations: list[dict] = []  # PPO's own view: the mean training-episode reward in its env, per iteration
    # A log directory: rsl_rl keeps the episodes' rewards (what on_iteration reports) only when it logs.
    runner = TaskRunner(RslRlVecEnv(env), task, log_dir=export_dir / "tensorboard", ppo=ppo,
                        on_iteration=iterations.append,
                        actor=bc_actor_cfg(base_onnx, task, spec, init_std))
    per_iter = ppo.num_envs * ppo.num_steps_per_env
    actor = runner.alg.actor
    curve, done, started = [], 0, time.monotonic()
    for point in [0, *points]:
        iters = math.ceil((point - done) / per_iter)
        if point > 0 and iters <= 0:
            continue  # inside an iteration already run
        warm = min(iters, max(0, critic_warmup - done // per_iter))
        if warm:  # the critic alone first (they count: robot transitions too)
            runner.learn_critic_only(warm, ppo.learning_rate, init_at_random_ep_len=done == 0)
        if iters - warm > 0:
            runner.learn(iters - warm, init_at_random_ep_len=done == 0 and not warm)
        done += max(iters, 0) * per_iter
        score = evaluate_policy(TorchActorPolicy(runner, contract_for_task(task)), task, shift, setups)
        onnx = export_dir / f"ppo_{done}.onnx"
        export_rsl_rl_policy(runner.alg.get_policy(), contract_for_task(task, provenance=collect_provenance(
            TASK, notes={"continued_ppo_from": str(base_onnx), "transitions": done})), onnx)
        score |= {"transitions": done, "wall_s": time.monotonic() - started, "onnx": str(onnx),
                  "recovered": recovered(score["success"], nominal, real),
                  "std": float(actor.distribution.log_std_param.detach().exp().mean()),  # σ, action units
                  # PPO's own view, from its stochastic training episodes in the env (the first ones cut short):
                  "train_episode_reward": iterations[-1]["mean_reward"] if iterations else None,
                  "train_success": iterations[-1].get("Episode/success") if iterations else None}
        curve.append(score)
        print(f"[ppo] {done:>8} transitions: success {score['success']:.2f}, recovered {score['recovered']:.2f}, "
              f"return {score['return']:.2f}; training episodes: reward {score['train_episode_reward']}, success "
              f"{score['train_success']}, σ {score['std']:.3f} ({score['wall_s']:.0f} s)", flush=True)
        if score["recovered"] >= stop_at or time.monotonic() - started > budget_s:
            break
    env.close()
    return curve


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
    add_settings_args(p)  # --learner-timeout-s among them: raise it on a machine shared with other jobs
    p.add_argument("--search-shifts", nargs="*", default=[],
                   help="candidate shifts to score the base on (phase base), e.g. kp=0.5,latency=2")
    p.add_argument("--search-episodes", type=int, default=20)
    p.add_argument("--phase", default="all", choices=("all", "base", "residual", "ppo", "final-eval", "report"))
    p.add_argument("--ppo-points", type=int, nargs="*", default=[24_576, 49_152, 98_304, 196_608, 393_216, 786_432],
                   help="phase ppo: transitions at which continued PPO is scored")
    p.add_argument("--ppo-init-std", type=float, default=0.1, help="phase ppo: the BC network's initial σ "
                   "(action units)")
    p.add_argument("--ppo-critic-warmup", type=int, default=4, help="phase ppo: critic-only iterations first")
    p.add_argument("--ppo-lr", type=float, default=1e-3, help="phase ppo: learning rate (the task's PPO default)")
    p.add_argument("--ppo-schedule", default="adaptive", choices=("adaptive", "fixed"))
    p.add_argument("--ppo-budget-s", type=float, default=2400.0)
    p.add_argument("--ppo-stop-at", type=float, default=1.0, help="phase ppo: stop at this gap recovered")
    p.add_argument("--final-eval", action="extend", nargs="+", default=[], metavar="NAME=ONNX",
                   help="phase final-eval: exported policies scored on a larger set of layouts never seen before")
    p.add_argument("--final-eval-episodes", type=int, default=120)
    p.add_argument("--final-eval-chain", default=None, metavar="kp=..,kd=..", help="phase final-eval: run these "
                   "with the safety chain told the motors' measured gain scales (a --calibrate-chain run's "
                   "deployment), e.g. kp=0.5,kd=1")
    p.add_argument("--run-name", default="residual", choices=tuple(RUN_LABELS))
    p.add_argument("--seed", type=int, default=0)
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
        run = settings(args, task, results["base_onnx"]).with_fields(
            transitions=args.transitions, shift=shift, run_dir=str(args.out_dir / args.run_name),
            eval_every=args.eval_every, eval_episodes=args.eval_episodes)
        report = run_finetune(run)
        results[args.run_name] = [{**e, "recovered": recovered(e["success"], nominal, real)}
                                  for e in report.evaluations]
        results[f"{args.run_name}_run"] = {"wall_s": time.monotonic() - started, "learner": report.learner,
                                   "sync": report.sync, "episodes": report.episodes, **sac_settings(run),
                                   "learner_timeout_s": run.residual.learner_timeout_s,
                                   "exported": str(report.exported), "ended_by": report.ended_by,
                                   "exported_best": str(report.exported_best), "best": report.best,
                                   "seed": args.seed, "calibrated": report.calibrated}
        save()

    if args.phase == "ppo":
        name = args.run_name if args.run_name.startswith("ppo") else "ppo"
        results[name] = continued_bc_ppo(Path(results["base_onnx"]), shift, setups, args.ppo_points, nominal, real,
                                          init_std=args.ppo_init_std, critic_warmup=args.ppo_critic_warmup,
                                          learning_rate=args.ppo_lr, schedule=args.ppo_schedule,
                                          stop_at=args.ppo_stop_at, budget_s=args.ppo_budget_s,
                                          export_dir=args.out_dir / name, seed=args.seed)
        results[f"{name}_run"] = {"num_envs": task.ppo.num_envs, "init_std": args.ppo_init_std,
                                  "critic_warmup": args.ppo_critic_warmup, "learning_rate": args.ppo_lr,
                                  "schedule": args.ppo_schedule, "seed": args.seed}
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
