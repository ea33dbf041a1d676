"""Train a task's policy with PPO: ``robot-rl train --task a1-flat`` (and ``sim/train.py``); with FastTD3 (off-policy,
``--algo fasttd3``, ``robot_rl.learn.offpolicy``) into the same run layout.

Writes to ``<log-dir>/<task>/<run>/``: TensorBoard events, ``model_<it>.pt`` checkpoints (stamped with the
task and robot-spec hash), ``config.json`` (the task and arguments), ``rsl_rl.log`` (rsl_rl's own
per-iteration report). The terminal shows one progress bar: iteration, steps/s, mean episode reward.

Physics runs on the CPU (``--backend cpu``, ``mujoco.rollout``) or in MuJoCo Warp (``--backend warp --device
cuda:0``, the ``gpu`` extra). Several processes train one policy with torch.distributed as rsl_rl does it
(``torchrun --nproc_per_node 2 -m robot_rl.learn.train ...``: NCCL on GPUs, gloo on CPUs): each rank steps its
own envs (seed + rank), gradients are averaged across ranks, and only rank 0 writes the run directory.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import tyro

from robot_rl.core.validate import non_negative, positive
from robot_rl.robots.spec import load_robot
from robot_rl.sim import randomization as dr
from robot_rl.tasks.registry import TASKS, make_task
from robot_rl.tasks.task import TaskCfg, actor_history_added
from robot_rl.typed_yaml import ConfigError


def ppo_task_names() -> list[str]:
    return [name for name, factory in TASKS.items() if factory().terms.trained_by == "ppo"]


def require_ppo_task(task: TaskCfg) -> None:
    if task.terms.trained_by != "ppo":
        raise ConfigError("--task", task.name, f"this task ({task.objective}) is not trained with PPO in the "
                          f"vectorized env but learned from demonstrations; PPO tasks: {', '.join(ppo_task_names())}")


@dataclass(frozen=True)
class TrainArgs:
    """Train a policy for a task with PPO (rsl_rl) or FastTD3 in the vectorized MuJoCo env."""

    task: str = "a1-flat"  # a task name (see robot_rl.tasks.registry)
    algo: Literal["ppo", "fasttd3"] = "ppo"  # fasttd3: off-policy, the recipe's settings (robot_rl.learn.offpolicy)
    num_envs: int | None = None  # default: the task's ppo.num_envs (fasttd3: its own)
    max_iterations: int | None = None  # default: the task's ppo.max_iterations (fasttd3: its own)
    num_steps_per_env: int | None = None  # rollout length per iteration; default: the task's
    seed: int = 0
    log_dir: Path = Path("runs")
    run_name: str = ""  # appended to the timestamped run directory
    resume: Path | None = None  # checkpoint to continue from (same task and robot spec, or the task's starts_from)
    randomize: bool = True  # domain randomization (the task's ranges)
    dr: tuple[str, ...] = ()  # overrides of the task's randomization, KEY=VALUE, e.g. friction_scale=0.3,1.2
    physics_threads: int | None = None  # mujoco.rollout threads; default: all cores
    backend: Literal["cpu", "warp"] = "cpu"  # physics: mujoco.rollout on CPU threads, or MuJoCo Warp on --device
    device: str = "cpu"  # the warp backend's device (and the learner's): cpu, cuda or cuda:N
    torch_threads: int | None = None  # default: half the cores (see set_torch_threads)
    max_minutes: float | None = None  # stop (and save) once training has run this long, wall clock
    progress: bool = True  # progress bar on stderr


class _TimeBudgetReached(Exception):
    """Raised from the per-iteration report to leave rsl_rl's loop at a wall-clock limit."""


def configure_task(args: TrainArgs) -> TaskCfg:
    """The task with the command-line overrides applied (unknown task or DR key, a number out of range: a clear
    error)."""
    non_negative(seed=args.seed, max_minutes=args.max_minutes)  # 0 minutes: stop after the first iteration
    if args.backend == "cpu" and args.device != "cpu":
        raise ConfigError("robot-rl train", "--device", f"{args.device!r} needs --backend warp (the CPU backend "
                          "runs on the CPU)")
    positive(physics_threads=args.physics_threads, torch_threads=args.torch_threads)
    task = make_task(args.task)
    require_ppo_task(task)
    overrides = dict(dr.parse_override(text) for text in args.dr)
    randomization = dr.with_overrides(task.randomization, overrides)
    ppo_changes = {
        key: value
        for key, value in (
            ("num_envs", args.num_envs),
            ("max_iterations", args.max_iterations),
            ("num_steps_per_env", args.num_steps_per_env),
        )
        if value is not None
    }
    for key, value in ppo_changes.items():  # checked here: deep in the env or rsl_rl it would be a traceback
        if value < 1:
            raise ConfigError("robot-rl train", f"--{key.replace('_', '-')}", f"must be ≥ 1, got {value}")
    return dataclasses.replace(task, randomization=randomization, ppo=dataclasses.replace(task.ppo, **ppo_changes))


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def set_torch_threads(threads: int | None) -> None:
    """Default: half the cores. Torch's intra-op threads spin after each op; on 2 cores two of them starve
    MuJoCo's rollout threads and each other, so on a small machine more threads make the update slower."""
    import torch

    torch.set_num_threads(threads or max(1, (os.cpu_count() or 1) // 2))


def _progress_bar(total: int, start: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=start, unit="it", dynamic_ncols=True, disable=not enabled,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}] {postfix}")


def _postfix(info: dict[str, float]) -> str:
    parts = [f"{info['steps_per_s']:,.0f} steps/s", f"reward {info['mean_reward']:.2f}"]
    if "Episode/length_s" in info:
        parts.append(f"episode {info['Episode/length_s']:.1f}s")
    if "Episode/lin_vel_error_m_s" in info:
        parts.append(f"vel err {info['Episode/lin_vel_error_m_s']:.2f}m/s")
    if "Episode/success" in info:
        parts.append(f"success {info['Episode/success']:.0%}")
    if "Curriculum/terrain_level" in info:
        parts.append(f"level {info['Curriculum/terrain_level']:.1f}")
    return " | ".join(parts)


@dataclass(frozen=True)
class Rank:
    """This process's place in a torchrun launch (one process: rank 0 of 1)."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @classmethod
    def from_env(cls) -> Rank:
        env = os.environ
        return cls(int(env.get("RANK", "0")), int(env.get("LOCAL_RANK", "0")), int(env.get("WORLD_SIZE", "1")))

    @property
    def main(self) -> bool:
        return self.rank == 0


def _device(args: TrainArgs, rank: Rank) -> str:
    """The device of this rank: on GPUs, each rank its own (torchrun's LOCAL_RANK), as rsl_rl's NCCL setup wants."""
    if rank.world_size > 1 and args.device.startswith("cuda"):
        return f"cuda:{rank.local_rank}"
    return args.device


def train(args: TrainArgs) -> Path | None:
    """Run training; returns the path of the final checkpoint (None on ranks other than 0, which write nothing)."""
    _, final = train_runner(args)
    return final


def train_runner(args: TrainArgs) -> tuple[Any, Path | None]:
    """Run training; returns (the runner, the final checkpoint or None where this rank writes none)."""
    started = time.monotonic()
    task = configure_task(args)  # bad task names and overrides fail here, before the heavy imports
    spec = load_robot(task.robot)
    rank = Rank.from_env()

    import torch

    from robot_rl.learn.offpolicy.train_loop import check_algorithm, fasttd3_run_settings
    from robot_rl.learn.ppo import CheckpointError, RslRlVecEnv, TaskRunner, check_checkpoint

    if args.resume is not None:
        # before building anything: a wrong file fails fast
        info = check_checkpoint(args.resume, task, spec, resuming=True)
        check_algorithm(info, args.algo, args.resume)
        if args.algo != "ppo" and info["task"] != task.name and actor_history_added(task, make_task(info["task"])):
            raise CheckpointError(f"checkpoint {args.resume} of task {info['task']!r} sees fewer past frames than "
                                  f"{task.name!r}: only PPO checkpoints are widened to a longer history")
    offpolicy, resume = None, None  # FastTD3's settings (a PPO-only flag or several ranks fail here)
    if args.algo == "fasttd3":
        offpolicy, resume = fasttd3_run_settings(args, rank.world_size)
    seed = args.seed + rank.rank  # every rank its own envs' draws
    seed_everything(seed)
    set_torch_threads(args.torch_threads)

    # Built before the run directory: an env that cannot be built leaves no empty run behind.
    env = _make_env(args, task, task.ppo.num_envs if offpolicy is None else offpolicy.num_envs, seed,
                    _device(args, rank))
    run_dir = None
    if rank.main:  # one writer: the other ranks neither create nor write the run directory
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        run_dir = Path(args.log_dir) / task.name / (f"{stamp}_{args.run_name}" if args.run_name else stamp)
        run_dir.mkdir(parents=True, exist_ok=True)
        config = {"args": _jsonable(dataclasses.asdict(args)), "task": _jsonable(dataclasses.asdict(task)),
                  "robot_spec_hash": spec.spec_hash, "world_size": rank.world_size}
        if offpolicy is not None:
            config["fasttd3"] = _jsonable(dataclasses.asdict(offpolicy))
        (run_dir / "config.json").write_text(json.dumps(config, indent=2))
    if offpolicy is not None:
        return None, _train_fasttd3(args, task, spec, run_dir, started, env, offpolicy, resume)

    vec = RslRlVecEnv(env)
    total = task.ppo.max_iterations
    console = open(run_dir / "rsl_rl.log", "w") if run_dir is not None else open(os.devnull, "w")  # noqa: SIM115
    with console:
        bar = _progress_bar(total, 0, args.progress and rank.main)

        def report(info: dict[str, float]) -> None:
            bar.update(1)
            bar.set_postfix_str(_postfix(info), refresh=False)
            if args.max_minutes is None:
                return
            stop = torch.tensor([float(time.monotonic() - started > 60 * args.max_minutes)], device=env_device)
            if rank.world_size > 1:  # rank 0's clock decides for all: every rank leaves at the same iteration
                torch.distributed.broadcast(stop, src=0)
            if stop.item():
                raise _TimeBudgetReached

        env_device = vec.device
        provenance = {"seed": args.seed, "num_envs": env.num_envs, "randomize": args.randomize,
                      "randomization_overrides": list(args.dr), "backend": args.backend,
                      "world_size": rank.world_size}
        notes = getattr(env, "notes", ())  # what a backend does differently from the task's settings
        if notes:
            provenance["backend_notes"] = list(notes)
            if rank.main:
                for note in notes:
                    bar.write(f"note: {note}")
        runner = TaskRunner(vec, task, run_dir, console=console, on_iteration=report, provenance=provenance)
        if args.resume is not None:
            runner.load(str(args.resume))
            env.continue_curriculum(runner.current_learning_iteration * task.ppo.num_steps_per_env)
            if rank.main:
                bar.write(f"resumed from {args.resume} (iteration {runner.current_learning_iteration})")
        if rank.main:
            ranks = f" on each of {rank.world_size} ranks" if rank.world_size > 1 else ""
            bar.write(f"training {task.name}: {env.num_envs} envs{ranks} × {task.ppo.num_steps_per_env} steps per "
                      f"iteration, {total} iterations ({args.backend} physics on {env_device}) → {run_dir}")
        try:
            runner.learn(total, init_at_random_ep_len=True)
        except _TimeBudgetReached:
            # rsl_rl only saves at its own end: save the iteration just finished, and close the writer.
            if run_dir is not None:
                runner.save(str(run_dir / f"model_{runner.current_learning_iteration}.pt"))
                runner.logger.writer.close()
                bar.write(f"stopped at the {args.max_minutes} min budget")
        finally:
            bar.close()
            env.close()
            if torch.distributed.is_initialized():
                torch.distributed.destroy_process_group()
    if run_dir is None:
        return runner, None
    final = run_dir / f"model_{runner.current_learning_iteration}.pt"
    minutes = (time.monotonic() - started) / 60
    print(f"done in {minutes:.1f} min; checkpoint: {final}")
    print(f"evaluate: python sim/play.py --task {task.name} --checkpoint {final}")
    return runner, final


def _make_env(args: TrainArgs, task: TaskCfg, num_envs: int, seed: int, device: str):
    """The vectorized env on ``args.backend``: MuJoCo on CPU threads, or MuJoCo Warp on ``device``."""
    if args.backend == "warp":
        from robot_rl.sim.warp_contact_mix import make_warp_env

        # PPO gets the task's contact mix (two envs, one per cone); the off-policy loop reads one env's internals.
        return make_warp_env(task, num_envs, seed=seed, randomize=args.randomize, device=device,
                             mix_contacts=args.algo == "ppo")
    from robot_rl.sim.mujoco_vec_env import MujocoVecEnv

    return MujocoVecEnv(task, num_envs, seed=seed, randomize=args.randomize, nthread=args.physics_threads)


def _train_fasttd3(args: TrainArgs, task: TaskCfg, spec, run_dir: Path, started: float, env, cfg,
                   resume: dict | None) -> Path:
    from robot_rl.learn.offpolicy.train_loop import train_fasttd3

    bar = _progress_bar(0, 0, args.progress)
    try:
        final = train_fasttd3(args, task, spec, run_dir, started, bar, env, cfg, resume)
    finally:
        bar.close()
    print(f"done in {(time.monotonic() - started) / 60:.1f} min; checkpoint: {final}")
    print(f"evaluate: python sim/play.py --task {task.name} --checkpoint {final}")
    return final


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if callable(value):  # a task's term (a function): recorded by name
        return f"{value.__module__}.{value.__qualname__}"
    return value


def train_command(args: Annotated[TrainArgs, tyro.conf.arg(name="")]) -> int:
    """Train a policy with PPO (or FastTD3: --algo fasttd3) in the vectorized MuJoCo env."""
    train(args)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``sim/train.py``: errors in the user's input print one line, not a traceback."""
    from robot_rl.core.errors import RobotRLError

    try:
        return tyro.cli(train_command, args=argv)
    except RobotRLError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
