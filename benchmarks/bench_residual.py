"""Sim-as-real fine-tuning benchmark: how much of the sim-to-"real" gap residual fine-tuning recovers, and
in how many transitions, against no fine-tuning and against continuing PPO on the full policy.

1. A base policy trained in the nominal training sim (``sim/train.py``; its checkpoint and ONNX export).
2. A "real" robot: the same MuJoCo robot shifted beyond the training randomization (``RealityShift``:
   motor kp down, an uncompensated payload (an arm's hand, a legged robot's base), actuator latency,
   friction) — the shifted ``SimRobot`` that the fine-tuning drives through the deploy runtime and its
   safety chain.
3. Every method is scored by the same harness: deterministic episodes through ``DeployRuntime`` on the shifted
   robot, over one fixed, seeded set of commands, each episode reset by the state machine's ramp. Score: the
   task's episode return (what the base was trained to maximize), mean over episodes; a physical error of the
   task is reported next to it (reach: tool-point error, walking: velocity tracking error).
4. gap recovered = (R_method − R_base,real) / (R_base,nominal − R_base,real): 0 = no better than the base on
   the real robot, 1 = as good as the base in its own training sim.

Methods, on the x axis by *transitions collected on the "real" robot*:
  no fine-tuning   the base policy as deployed
  residual         ``run_finetune``: base + bounded residual, SAC in its own process, lockstep, UTD ratio
  continued PPO    rsl_rl PPO from the base checkpoint in the vectorized env with the same shift (fixed, all
                   envs), i.e. training the whole policy on the "real" robot; 128 envs × 24 steps per iteration

Phases (``--phase``, each adds its part to ``OUT_DIR/results.json``): base, prior (the same fine-tuning in the
nominal sim), residual, residual-more, ppo, timing (real-time loop, learner killed), final-eval (exported
policies on a larger, separate command set), decompose (the base on each part of the shift), ceiling (another
policy's correction of the base clipped to the residual's bound: what that bound leaves reachable), report.

    .venv/bin/python benchmarks/bench_residual.py --out-dir runs/bench_residual [--phase all]
        [--base-onnx P --checkpoint C]  (default: train the base, 3 min)
        [--markdown-out benchmarks/results/RESULTS_residual.md --png benchmarks/results/RESULTS_residual.png]

The settings flags (``--fraction``, ``--lr``, ``--calibrate`` ...) set fields of the product's ``FinetuneCfg`` over a
preset (:func:`settings`). Variants the results did not support were removed at commit eaf2417 (git history has
them): ``--history``, ``--algorithm td3`` / ``--explore-std``, ``--critic-dropout``, ``--actor-ema`` and
``--command-every-s``; benchmarks/results/RESULTS_residual.md lists their runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

# This folder (run as benchmarks/bench_residual.py): the report half of this benchmark.
from residual_ceiling import bounded_ceiling
from residual_report import METHODS, METRIC, RUNS, first_reaching, plot, recovered, write_markdown

from robot_rl.control.controller import PolicyController
from robot_rl.control.runtime import DeployRuntime
from robot_rl.learn.residual.actor import ResidualPolicy
from robot_rl.learn.residual.calibrated import sim_residual_cfg
from robot_rl.learn.residual.config import ReplayCfg, ResidualCfg, SACCfg
from robot_rl.learn.residual.episodes import EpisodeCfg, EpisodeLoop, ramp_tick_limit
from robot_rl.learn.residual.evaluation import eval_commands, evaluate
from robot_rl.learn.residual.finetune import parse_shift, run_finetune
from robot_rl.learn.residual.learner import read_checkpoint
from robot_rl.learn.residual.rewards import StateReward
from robot_rl.learn.residual.scenes import EpisodeSetup, initial_scene
from robot_rl.learn.residual.settings import PRESETS, FinetuneCfg, RunCfg
from robot_rl.learn.residual.shifted_sim import RealityShift, ShiftedSimRobot
from robot_rl.learn.residual.sim_ppo import SimResidualCfg
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.tasks.registry import make_task

FINAL_EVAL_SEED = 777  # phase final-eval's command set: not the one evaluated during fine-tuning (seed 12345)


def train_base(task_name: str, minutes: float, out: Path) -> tuple[Path, Path]:
    """PPO in the nominal training sim, then export; returns (onnx, checkpoint)."""
    from robot_rl.learn.train import TrainArgs, train

    checkpoint = train(TrainArgs(task=task_name, max_minutes=minutes, log_dir=out / "train", progress=False))
    onnx = out / f"{task_name.replace('-', '_')}_base.onnx"
    export_checkpoint(task_name, checkpoint, onnx)
    return onnx, checkpoint


def _runner(task, checkpoint: Path, env):
    from robot_rl.learn.ppo import RslRlVecEnv, TaskRunner

    runner = TaskRunner(RslRlVecEnv(env), task, log_dir=None, ppo=dataclasses.replace(task.ppo, num_envs=env.num_envs))
    runner.load(str(checkpoint), load_cfg={"actor": True, "critic": True})
    return runner


def export_checkpoint(task_name: str, checkpoint: Path, onnx: Path) -> None:
    from robot_rl.policy import collect_provenance, contract_for_task, export_rsl_rl_policy
    from robot_rl.sim.mujoco_vec_env import MujocoVecEnv

    task = make_task(task_name)
    env = MujocoVecEnv(task, 2, seed=0, nthread=1)
    runner = _runner(task, checkpoint, env)
    contract = contract_for_task(task, provenance=collect_provenance(task_name, notes={"checkpoint": str(checkpoint)}))
    export_rsl_rl_policy(runner.alg.get_policy(), contract, onnx)
    env.close()


class TorchActorPolicy:
    """A PPO actor evaluated in torch (normalizer + MLP + mean), with its task's contract. Stands in for the
    ONNX export of each intermediate PPO iterate, so the curve needs no export per point."""

    def __init__(self, runner, contract):
        import torch

        self.torch = torch
        self.view = runner.alg.get_policy().as_onnx(verbose=False).eval()
        self.contract = contract

    def act(self, obs: np.ndarray) -> np.ndarray:
        with self.torch.inference_mode():
            return self.view(self.torch.from_numpy(obs)).numpy()[0]

    def act_batch(self, obs: np.ndarray) -> np.ndarray:
        with self.torch.inference_mode():
            return self.view(self.torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float32))).numpy()


def vec_env_return(policy, task, shift: RealityShift | None, commands: np.ndarray) -> float:
    """PPO's own yardstick: the mean deterministic episode return in the vectorized training env (no runtime,
    no safety chain), shifted or nominal, one env per command, each episode cut at its first end."""
    from robot_rl.learn.residual.shifted_sim import shifted_vec_env

    task = dataclasses.replace(task, command_resample_s=None)
    env = shifted_vec_env(task, shift or RealityShift(), len(commands), seed=2, nthread=1)
    try:
        env.commands[:] = commands
        env._compute_obs()
        ret, alive = np.zeros(len(commands)), np.ones(len(commands), bool)
        for _ in range(env.max_episode_length):
            result = env.step(policy.act_batch(env.actor_obs))
            ret += result.reward * alive
            alive &= ~(result.terminated | result.truncated)
            if not alive.any():
                break
        return float(ret.mean())
    finally:
        env.close()


def evaluate_policy(policy, task, shift: RealityShift | None, commands: np.ndarray | list[EpisodeSetup],
                    spec: RobotSpec | None = None) -> dict:
    """The shared harness: ``policy`` (base only) through the runtime on the nominal or shifted robot, over
    ``commands`` (or, push tasks, episode setups with their scenes). ``spec``: the robot's, if not as loaded from
    its file (a safety chain told the calibrated motors)."""
    spec = load_robot(task.robot) if spec is None else spec
    res = ResidualPolicy(policy, ResidualCfg())
    res.enabled = False  # the base alone, through the very path the residual runs in
    runtime = DeployRuntime(spec, PolicyController.for_task(task, spec, res))
    robot = ShiftedSimRobot(spec, shift or RealityShift(), scene=initial_scene(task))  # None: the nominal sim
    loop = EpisodeLoop(runtime, robot, res, StateReward(task, spec), EpisodeCfg(length_s=task.episode_length_s),
                       realtime=False)
    robot.connect()
    try:
        return evaluate(loop, commands)
    finally:
        robot.close()


def shift_parts(shift: RealityShift) -> dict[str, RealityShift]:
    """Each part of ``shift`` alone, and the whole shift without each part: which part of the gap is which."""
    nominal = RealityShift()
    moved = [f.name for f in dataclasses.fields(shift) if getattr(shift, f.name) != getattr(nominal, f.name)]
    parts = {f"only {name}": dataclasses.replace(nominal, **{name: getattr(shift, name)}) for name in moved}
    parts |= {f"all but {name}": dataclasses.replace(shift, **{name: getattr(nominal, name)}) for name in moved}
    return parts


def decompose_gap(policy, task, shift: RealityShift, commands: np.ndarray) -> dict:
    """The base on every :func:`shift_parts` robot (the gap's make-up: parts of a shift need not add up)."""
    out = {}
    for name, part in shift_parts(shift).items():
        out[name] = evaluate_policy(policy, task, part, commands) | {"shift": part.describe()}
        print(f"[decompose] {name}: return {out[name][METRIC]:.3f}", flush=True)
    return out


def continued_ppo(task, checkpoint: Path, shift: RealityShift, commands: np.ndarray, points: list[int],
                  nominal: float, real: float, stop_at: float, budget_s: float,
                  export_dir: Path | None = None) -> list[dict]:
    """``export_dir``: also export each scored iterate as ONNX (``ppo_<transitions>.onnx``), for final-eval."""
    import torch

    from robot_rl.learn.residual.shifted_sim import shifted_vec_env
    from robot_rl.learn.train import set_torch_threads
    from robot_rl.policy import contract_for_task

    set_torch_threads(1)
    torch.manual_seed(0)
    env = shifted_vec_env(task, shift, task.ppo.num_envs, seed=1)
    runner = _runner(task, checkpoint, env)
    contract = contract_for_task(task)
    per_iter = task.ppo.num_envs * task.ppo.num_steps_per_env
    curve, done, started = [], 0, time.monotonic()
    for point in [0, *points]:
        iters = math.ceil((point - done) / per_iter)
        if point > 0 and iters <= 0:
            continue  # this point falls inside an iteration already run
        if iters > 0:
            runner.learn(iters)
            done += iters * per_iter
        policy = TorchActorPolicy(runner, contract)
        score = evaluate_policy(policy, task, shift, commands)
        score |= {"transitions": done, "wall_s": time.monotonic() - started,
                  "recovered": recovered(score[METRIC], nominal, real),
                  "vec_env_return": vec_env_return(policy, task, shift, commands)}
        if export_dir is not None:
            from robot_rl.policy import collect_provenance, export_rsl_rl_policy

            export_dir.mkdir(parents=True, exist_ok=True)
            stamped = contract_for_task(task, provenance=collect_provenance(
                task.name, notes={"continued_ppo_from": str(checkpoint), "transitions": done}))
            export_rsl_rl_policy(runner.alg.get_policy(), stamped, export_dir / f"ppo_{done}.onnx")
            score["onnx"] = str(export_dir / f"ppo_{done}.onnx")
        curve.append(score)
        print(f"[ppo] {done:>8} transitions: {METRIC} {score[METRIC]:.4f}, recovered {score['recovered']:.2f}, "
              f"in its own vec env {score['vec_env_return']:.3f}", flush=True)
        if score["recovered"] >= stop_at or time.monotonic() - started > budget_s:
            break
    env.close()
    return curve


def loop_timing(base_onnx: Path, task, seconds: float, kill_at_s: float) -> dict:
    """A real-time 50 Hz loop (RateLoop, GC paused) on the SimRobot with a live learner training on the loop's
    own transitions, killed (SIGKILL) at ``kill_at_s``: ``runtime.step`` time with base + residual against the
    same runtime with the base alone on the same states and ticks, weight-sync time, lateness, missed deadlines."""
    import os
    import signal

    from robot_rl.control.state_machine import ControllerMode
    from robot_rl.core.loop_timing import RateLoop
    from robot_rl.learn.residual.config import LearnerCfg
    from robot_rl.learn.residual.learner import LearnerProcess

    spec = load_robot(task.robot)
    base = load_policy(base_onnx, read_contract(base_onnx))
    cfg = ResidualCfg()
    j = base.contract.num_actions
    learner = LearnerProcess(LearnerCfg(state_dim=base.contract.obs_dim + j, action_dim=j, residual=cfg,
                                        sac=SACCfg(warmup_transitions=100, utd_ratio=2.0, reward_scale=50.0)))
    robot = ShiftedSimRobot(spec, RealityShift())  # the nominal sim
    try:
        learner.start()
        assert learner.wait_ready()
        res = ResidualPolicy(base, cfg, learner.board, learner.status, explore=True)
        runtime = DeployRuntime(spec, PolicyController.for_task(task, spec, res))
        # The baseline: the same runtime with the base policy alone, stepped on the same states (not sent).
        plain = DeployRuntime(spec, PolicyController.for_task(task, spec, load_policy(base_onnx, base.contract)))
        robot.connect()
        robot.reposition()  # the default pose at rest: a legged robot ramps up from its feet (as between episodes)
        runtime.arm()
        plain.arm()
        for _ in range(ramp_tick_limit(spec)):
            state = robot.read()
            plain.step(state, robot.sim_time())
            robot.write(runtime.step(state, robot.sim_time()).command)
            if runtime.mode is ControllerMode.RUNNING:
                break
        else:
            raise RuntimeError(f"the ramp to the default pose did not finish: {runtime.diagnostics()['fault']}")
        period = spec.timing.policy_period_s
        ticks, kill_tick = round(seconds / period), round(kill_at_s / period)
        t_res, t_base = np.zeros(ticks), np.zeros(ticks)
        poll_s = []
        loop = RateLoop(period)
        with loop.realtime(fifo_priority=50) as rt_report:  # as on hardware; reported when refused
            for k in range(ticks):
                tick = loop.wait_next()
                if k == kill_tick:
                    os.kill(learner.process.pid, signal.SIGKILL)
                state = robot.read()
                polls, sync_total = res.stats["polls"], res.stats["sync_total_s"]
                # Alternate which runtime steps first: the first work after the wait runs on colder caches.
                if k % 2:
                    t2 = time.perf_counter()
                    plain.step(state, tick.deadline, missed_deadlines=tick.missed)
                    t3 = time.perf_counter()
                t0 = time.perf_counter()
                result = runtime.step(state, tick.deadline, missed_deadlines=tick.missed)
                t1 = time.perf_counter()
                if k % 2 == 0:
                    t2 = time.perf_counter()
                    plain.step(state, tick.deadline, missed_deadlines=tick.missed)
                    t3 = time.perf_counter()
                if res.stats["polls"] != polls:
                    poll_s.append(res.stats["sync_total_s"] - sync_total)
                robot.write(result.command)
                t_res[k], t_base[k] = t1 - t0, t3 - t2
                row = learner.codec.pack(res.state, res.unit_residual, 0.0, res.state, False, False, False)
                learner.ring.write(row)
        stats = loop.stats.summary()
        us = lambda a, q: float(np.percentile(a, q) * 1e6)  # noqa: E731
        return {"ticks": ticks, "kill_tick": kill_tick, "missed_deadlines": stats["missed_deadlines"],
                "lateness_us": {k: (v or 0) * 1e6 for k, v in stats["lateness_s"].items()},
                "runtime_step_us": {"p50": us(t_res[:kill_tick], 50), "p99": us(t_res[:kill_tick], 99),
                                    "max": float(t_res[:kill_tick].max() * 1e6)},
                "base_only_step_us": {"p50": us(t_base[:kill_tick], 50), "p99": us(t_base[:kill_tick], 99),
                                      "max": float(t_base[:kill_tick].max() * 1e6)},
                "after_kill_step_us": {"p50": us(t_res[kill_tick:], 50), "p99": us(t_res[kill_tick:], 99),
                                       "max": float(t_res[kill_tick:].max() * 1e6)},
                "act_us": act_microbench(base_onnx, cfg),
                "sync_poll_us": {"p50": us(np.array(poll_s), 50), "p99": us(np.array(poll_s), 99),
                                 "max": float(max(poll_s) * 1e6), "n": len(poll_s)},
                "syncs": res.stats["syncs"], "fallback_ticks": res.stats["fallback_ticks"],
                "learner_updates_before_kill": learner.status.updates, "mode_at_end": runtime.mode.value,
                "fault": [(e.filter_name, str(e)) for e in runtime.chain.fault],
                "scheduling": rt_report.fifo_detail if rt_report.fifo_applied else f"normal ({rt_report.fifo_detail})"}
    finally:
        robot.close()
        learner.close()


def act_microbench(base_onnx: Path, cfg: ResidualCfg, n: int = 3000) -> dict:
    """``ResidualPolicy.act`` (exploring, weights loaded, no learner) against ``base.act``, alternated, µs."""
    base = load_policy(base_onnx, read_contract(base_onnx))
    res = ResidualPolicy(load_policy(base_onnx, base.contract), cfg, explore=True)
    res.load_weights(np.random.default_rng(0).normal(0, 0.05, res.actor.flat.shape).astype(np.float32))
    obs = np.random.default_rng(1).normal(size=(1, base.contract.obs_dim)).astype(np.float32)
    t_b, t_r = np.zeros(n), np.zeros(n)
    for i in range(n + 200):
        t0 = time.perf_counter()
        base.act(obs)
        t1 = time.perf_counter()
        res.act(obs)
        t2 = time.perf_counter()
        if i >= 200:
            t_b[i - 200], t_r[i - 200] = t1 - t0, t2 - t1
    return {"base_p50": float(np.median(t_b) * 1e6), "residual_p50": float(np.median(t_r) * 1e6),
            "base_p99": float(np.percentile(t_b, 99) * 1e6), "residual_p99": float(np.percentile(t_r, 99) * 1e6)}


# The benchmarks' settings flags: each sets the FinetuneCfg field of that name (FinetuneCfg.with_fields); not given,
# the field keeps the preset's value (robot_rl.learn.residual.settings.PRESETS: "calibrated" with --calibrate,
# else "scratch"). Types and defaults live in the dataclasses only. The variants the results did not support
# (--history, --algorithm td3 / --explore-std, --critic-dropout, --actor-ema, --command-every-s; --learn-sent in
# bench_residual_push.py) were removed at commit eaf2417: git history has them (RESULTS_residual.md says which runs).
SETTINGS_FLAGS = {"fraction": "fraction", "utd": "utd_ratio", "lr": "lr", "gamma": "gamma",
                  "num-critics": "num_critics", "critic-norm": "critic_norm", "actor-warmup": "actor_warmup_updates",
                  "residual-penalty": "residual_penalty", "anchor-penalty": "anchor_penalty",
                  "anchor-q-scaled": "anchor_q_scaled", "init-log-std": "init_log_std",
                  "target-entropy": "target_entropy_per_dim", "prior-fraction": "prior_fraction",
                  "train-episode-s": "train_episode_s", "learner-timeout-s": "learner_timeout_s"}
# The calibrated start's sim residual (SimResidualCfg fields, over the task's: calibrated.sim_residual_cfg).
SIM_FLAGS = {"sim-iterations": "iterations", "sim-start": "start", "sim-noise": "init_noise_std",
             "sim-lr": "learning_rate", "sim-critic-warmup": "critic_warmup"}


def _flag_type(field: str):
    """The flag's type, read off the settings' own default (a None default is a float: the learning rate)."""
    if field in SIM_FLAGS.values():
        return type(getattr(SimResidualCfg(), field))
    value = next(getattr(cfg, field) for cfg in (RunCfg(policy=""), ResidualCfg(), SACCfg(), ReplayCfg())
                 if hasattr(cfg, field))
    return float if value is None else type(value)


def add_settings_args(p: argparse.ArgumentParser) -> None:
    """The fine-tuning settings' flags, shared by the residual benchmarks (read back by :func:`settings`)."""
    for flag, field in {**SETTINGS_FLAGS, **SIM_FLAGS}.items():
        kind = _flag_type(field)
        if kind is bool:
            p.add_argument(f"--{flag}", action="store_true", default=None, help=f"{field} (default: the preset's)")
        else:
            p.add_argument(f"--{flag}", type=kind, help=f"{field} (default: the preset's)")
    p.add_argument("--calibrate", action="store_true", help="phase residual: the calibrated preset, a calibrated "
                   "start (log the base on the robot, fit the sim to it, train the residual there by PPO, then "
                   "fine-tune on the robot from it); its settings unless flags say otherwise")
    p.add_argument("--calibration-ticks", type=int, help="robot policy ticks a calibrated start logs (counted)")
    p.add_argument("--calibrate-chain", action="store_true", help="the safety chain's torque limit told the fitted "
                   "motor gains for the sim residual and the robot run (CalibratedStartCfg.chain)")


def settings(args: argparse.Namespace, task, policy: str) -> FinetuneCfg:
    """The run's settings: the preset (``--calibrate``: calibrated, else scratch) with the flags given over it and
    the task's measurements filled in (``FinetuneCfg.for_task``: its learning rate where none is given). The
    learning rate used is recorded back into ``args.lr`` so the results say which."""
    preset = PRESETS["calibrated" if args.calibrate else "scratch"][0]
    cfg = preset.with_fields(policy=policy, robot=task.robot, seed=args.seed,
                             **{field: getattr(args, flag.replace("-", "_")) for flag, field in SETTINGS_FLAGS.items()})
    if cfg.calibrated is not None:
        sim = sim_residual_cfg(task, args.seed, **{field: getattr(args, flag.replace("-", "_"))
                                                    for flag, field in SIM_FLAGS.items()})
        log_ticks = args.calibration_ticks or cfg.calibrated.log_ticks
        cfg = dataclasses.replace(cfg, calibrated=dataclasses.replace(cfg.calibrated, sim=sim, log_ticks=log_ticks),
                                  calibrate_chain=args.calibrate_chain)
    cfg = cfg.for_task(task)
    args.lr = cfg.sac.lr
    return cfg


def add_output_args(p: argparse.ArgumentParser, out_dir: str) -> None:
    """Where a residual benchmark keeps its results (``OUT_DIR/results.json``) and writes its report."""
    p.add_argument("--out-dir", type=Path, default=Path(out_dir))
    p.add_argument("--markdown-out", type=Path)
    p.add_argument("--png", type=Path)


def open_results(out_dir: Path) -> tuple[dict, Callable[[], None]]:
    """``OUT_DIR/results.json`` as a dict (empty if new) and the function that writes it back: every phase
    adds its part to the same file, so phases run separately and a report can be redrawn from it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    store = out_dir / "results.json"
    results = json.loads(store.read_text()) if store.exists() else {}

    def save() -> None:
        store.write_text(json.dumps(results, indent=1, default=str))

    return results, save


def sac_settings(cfg: FinetuneCfg) -> dict:
    """What a run's results record of its learner settings."""
    sac = cfg.sac
    return {"utd": sac.utd_ratio, "fraction": cfg.residual.fraction, "critic_norm": sac.critic_norm, "lr": sac.lr,
            "gamma": sac.gamma, "actor_warmup": sac.actor_warmup_updates, "residual_penalty": sac.residual_penalty,
            "anchor_penalty": sac.anchor_penalty, "anchor_q_scaled": sac.anchor_q_scaled,
            "init_log_std": sac.init_log_std, "target_entropy": sac.target_entropy_per_dim,
            "num_critics": sac.num_critics}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="panda-reach")
    p.add_argument("--base-onnx", type=Path)
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--train-minutes", type=float, default=3.0)
    p.add_argument("--shift", default="kp=0.3,payload=3,latency=2,friction=0.5")
    p.add_argument("--transitions", type=int, default=20_000)
    p.add_argument("--eval-every", type=int, default=2000)
    p.add_argument("--eval-episodes", type=int, default=16)
    add_settings_args(p)
    p.add_argument("--ppo-points", type=int, nargs="*",
                   default=[3072 * k for k in (1, 2, 4, 7, 13, 26, 52, 104, 208, 416)])
    p.add_argument("--ppo-budget-s", type=float, default=1500.0)
    p.add_argument("--ppo-stop-at", type=float, help="stop continued PPO at this recovery on the curve's commands "
                   "(default: 0.8 or the residual's best, whichever is higher)")
    p.add_argument("--phase", default="all",
                   choices=("all", "base", "prior", "residual", "residual-more", "ppo", "timing", "final-eval",
                            "decompose", "ceiling", "report"))
    p.add_argument("--final-eval", action="extend", nargs="+", default=[], metavar="NAME=ONNX",
                   help="phase final-eval: exported policies (a run's policy_residual.onnx) scored on a larger, "
                   "separate command set, with the base on the same set (the flag may repeat)")
    p.add_argument("--final-eval-episodes", type=int, default=32)
    p.add_argument("--prior-transitions", type=int, default=20_000,
                   help="phase prior: transitions of base + exploring residual collected in the NOMINAL sim")
    p.add_argument("--prior", type=Path, help="phase residual: an .npz of prior transitions (RLPD-style mixing); "
                   "'sim' = the buffer phase prior wrote to OUT_DIR/prior_sim")
    p.add_argument("--init-from", type=Path, help="phase residual: start the residual and critics from this run's "
                   "checkpoint; 'sim' = the run phase prior made in the nominal sim")
    p.add_argument("--run-name", default="residual", choices=tuple(RUNS))
    p.add_argument("--seed", type=int, default=0, help="phase residual: the learner's and the episodes' seed")
    p.add_argument("--ceiling-onnx", type=Path, help="phase ceiling: the policy whose correction of the base is "
                   "clipped (e.g. continued PPO's ppo/ppo_N.onnx)")
    p.add_argument("--ceiling-name", default="continued PPO", help="phase ceiling: what --ceiling-onnx is")
    p.add_argument("--ceiling-fractions", type=float, nargs="+", default=[0.1, 0.2, 0.4, math.inf],
                   help="phase ceiling: bounds, as fractions of the action clip (inf: unclipped)")
    p.add_argument("--timing-seconds", type=float, default=20.0)
    add_output_args(p, "runs/bench_residual")
    args = p.parse_args(argv)

    results, save = open_results(args.out_dir)
    task = make_task(args.task)
    shift = parse_shift(args.shift)
    commands = eval_commands(task, args.eval_episodes)

    if args.phase in ("all", "base"):
        if args.base_onnx is None:
            args.base_onnx, args.checkpoint = train_base(args.task, args.train_minutes, args.out_dir)
        results |= {"task": args.task, "shift": dataclasses.asdict(shift), "shift_text": shift.describe(),
                    "base_onnx": str(args.base_onnx), "checkpoint": str(args.checkpoint),
                    "eval_episodes": args.eval_episodes,
                    "machine": f"{platform.processor() or platform.machine()}, Python {sys.version.split()[0]}"}
        base = load_policy(args.base_onnx, read_contract(args.base_onnx))
        results["base_nominal"] = evaluate_policy(base, task, None, commands)
        results["base_real"] = evaluate_policy(base, task, shift, commands)
        results["base_nominal"]["vec_env_return"] = vec_env_return(base, task, None, commands)
        results["base_real"]["vec_env_return"] = vec_env_return(base, task, shift, commands)
        print(f"base return: nominal {results['base_nominal'][METRIC]:.3f}, real {results['base_real'][METRIC]:.3f}")
        save()
    nominal, real = results["base_nominal"][METRIC], results["base_real"][METRIC]

    cfg = settings(args, task, results["base_onnx"])  # the preset with the flags given over it
    plain = dataclasses.replace(cfg, calibrated=None, calibrate_chain=False)  # the phases that start no calibration
    if args.phase == "prior":  # sim prior data: the same fine-tuning, in the nominal sim (not counted as "real")
        started = time.monotonic()
        whole = dataclasses.replace(plain, run=dataclasses.replace(plain.run, train_episode_s=None))  # the task's
        report = run_finetune(whole.with_fields(transitions=args.prior_transitions, seed=7, eval_every=0,
                                                run_dir=str(args.out_dir / "prior_sim"),
                                                eval_episodes=args.eval_episodes), export=False)
        results["prior_run"] = {"transitions": report.transitions, "wall_s": time.monotonic() - started,
                                "buffer": str(args.out_dir / "prior_sim" / "buffer.npz"), "learner": report.learner}
        save()

    prior = None
    if args.prior is not None:
        prior = str(args.out_dir / "prior_sim" / "buffer.npz") if str(args.prior) == "sim" else str(args.prior)
    init_from = None
    if args.init_from is not None:
        init_from = str(args.out_dir / "prior_sim") if str(args.init_from) == "sim" else str(args.init_from)

    if args.phase in ("all", "residual"):
        started = time.monotonic()
        run = cfg.with_fields(transitions=args.transitions, prior_path=prior, shift=shift,
                              run_dir=str(args.out_dir / args.run_name), init_from=init_from,
                              eval_every=args.eval_every, eval_episodes=args.eval_episodes)
        report = run_finetune(run)
        curve = [{**e, "recovered": recovered(e[METRIC], nominal, real)} for e in report.evaluations]
        results[args.run_name] = curve
        results[f"{args.run_name}_run"] = {"wall_s": time.monotonic() - started, "learner": report.learner,
                                   "sync": report.sync, "episodes": report.episodes, **sac_settings(run),
                                   "seed": args.seed, "train_episode_s": run.run.train_episode_s,
                                   "exported": str(report.exported), "prior": prior,
                                   "prior_fraction": run.replay.prior_fraction if prior else None,
                                   "init_from": init_from,
                                   "init_transitions": read_checkpoint(init_from)["received"] if init_from else None,
                                   "calibrated": report.calibrated}
        save()

    if args.phase == "residual-more":  # continue the residual run (resume: its learner state and buffer)
        done = results[args.run_name][-1]["transitions"]
        report = run_finetune(plain.with_fields(transitions=args.transitions, prior_path=prior, shift=shift,
                                                run_dir=str(args.out_dir / f"{args.run_name}_from_{done}"),
                                                eval_every=args.eval_every, eval_episodes=args.eval_episodes,
                                                resume=str(args.out_dir / args.run_name), seed=args.seed + 1))
        results[args.run_name] += [{**e, "transitions": done + e["transitions"],
                                 "recovered": recovered(e[METRIC], nominal, real)} for e in report.evaluations[1:]]
        results[f"{args.run_name}_run"]["continued"] = {"from": done, "learner": report.learner, "sync": report.sync}
        save()

    if args.phase in ("all", "ppo"):
        best_residual = max((c["recovered"] for c in results.get("residual", [])), default=0.8)
        results["ppo"] = continued_ppo(task, Path(results["checkpoint"]), shift, commands, args.ppo_points, nominal,
                                       real, stop_at=args.ppo_stop_at or max(0.8, best_residual),
                                       budget_s=args.ppo_budget_s, export_dir=args.out_dir / "ppo")
        save()

    if args.phase == "final-eval":  # a second look at a few points with 4× the episodes, on commands not seen before
        final_commands = eval_commands(task, args.final_eval_episodes, seed=FINAL_EVAL_SEED)
        base = load_policy(results["base_onnx"], read_contract(results["base_onnx"]))
        final = results.setdefault("final_eval", {"episodes": args.final_eval_episodes, "seed": FINAL_EVAL_SEED,
                                                  "runs": {}})
        if final["episodes"] != args.final_eval_episodes or "base_real" not in final:
            final.update(episodes=args.final_eval_episodes, runs={},
                         base_nominal=evaluate_policy(base, task, None, final_commands),
                         base_real=evaluate_policy(base, task, shift, final_commands))
            save()
        for item in args.final_eval:
            name, _, onnx = item.rpartition("=")  # the name may hold "=" (α = 0.15), a path seldom does
            score = evaluate_policy(load_policy(onnx, read_contract(onnx)), task, shift, final_commands)
            score |= {"onnx": onnx, "recovered": recovered(score[METRIC], final["base_nominal"][METRIC],
                                                           final["base_real"][METRIC])}
            final["runs"][name] = score
            print(f"[final-eval] {name}: return {score[METRIC]:.3f}, recovered {score['recovered']:.2f}", flush=True)
            save()

    if args.phase == "decompose":  # the base on each part of the shift: where the gap comes from
        final_commands = eval_commands(task, args.final_eval_episodes, seed=FINAL_EVAL_SEED)
        base = load_policy(results["base_onnx"], read_contract(results["base_onnx"]))
        results["decomposition"] = {"episodes": args.final_eval_episodes, "seed": FINAL_EVAL_SEED,
                                    "nominal": evaluate_policy(base, task, None, final_commands),
                                    "real": evaluate_policy(base, task, shift, final_commands),
                                    "parts": decompose_gap(base, task, shift, final_commands)}
        save()

    if args.phase == "ceiling":  # on the final-eval commands: what a residual at each bound could reach
        final = results.get("final_eval")
        if not args.ceiling_onnx or not final or final.get("episodes") != args.final_eval_episodes:
            raise SystemExit("--phase ceiling needs --ceiling-onnx and a --phase final-eval with the same "
                             "--final-eval-episodes first (its base scores are the yardstick)")
        final_commands = eval_commands(task, args.final_eval_episodes, seed=FINAL_EVAL_SEED)
        base = load_policy(results["base_onnx"], read_contract(results["base_onnx"]))
        other = load_policy(str(args.ceiling_onnx), read_contract(args.ceiling_onnx))
        parts = bounded_ceiling(base, other, args.ceiling_fractions,
                                lambda policy: evaluate_policy(policy, task, shift, final_commands))
        for score in parts.values():
            score["recovered"] = recovered(score[METRIC], final["base_nominal"][METRIC], final["base_real"][METRIC])
        results["ceiling"] = {"onnx": str(args.ceiling_onnx), "name": args.ceiling_name, "episodes":
                              args.final_eval_episodes, "seed": FINAL_EVAL_SEED, "fractions": parts}
        save()

    if args.phase in ("all", "timing"):
        results["timing"] = loop_timing(Path(results["base_onnx"]), task, args.timing_seconds,
                                        kill_at_s=args.timing_seconds / 2)
        print(json.dumps(results["timing"], indent=1))
        save()

    png = args.png or args.out_dir / "residual.png"
    plot(results, png)
    for key, _, _ in METHODS:
        if results.get(key):
            print(f"{key}: first ≥ 80 % at {first_reaching(results[key], 0.8)} transitions; best "
                  f"{max(c['recovered'] for c in results[key]):.2f}")
    if args.markdown_out:
        write_markdown(results, png, args.markdown_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
