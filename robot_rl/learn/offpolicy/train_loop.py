"""``robot-rl train --algo fasttd3``: FastTD3 on the vectorized MuJoCo env, written like a PPO run.

One iteration = one env step of every env (the actor with per-env exploration noise) + ``num_updates``
learner updates on batches drawn from the replay. The run directory holds what a PPO run's does:
``model_<it>.pt`` checkpoints stamped with the task, robot-spec hash, seed and env steps (``robot-rl export``,
``play`` and the time-to-walk bench read them), TensorBoard events, ``config.json``; plus ``profile.json``,
where the wall time went (acting, env step, replay write, replay sampling, updates).

Resume restores the networks, normalizers, optimizers and counters, not the replay (hundreds of MB): a resumed
run refills it through ``learning_starts`` iterations of its current policy before it updates again.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import deque
from pathlib import Path

import numpy as np
import torch

from robot_rl.learn.errors import CheckpointError
from robot_rl.learn.offpolicy.config import FastTD3Cfg
from robot_rl.learn.offpolicy.fasttd3 import FastTD3, checkpoint_cfg
from robot_rl.learn.offpolicy.replay import NStepReplay
from robot_rl.learn.ppo import checkpoint_info
from robot_rl.learn.train import _postfix as progress_postfix  # PPO's progress bar text, the same fields
from robot_rl.robots.spec import RobotSpec
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.observations import ObservationBuilder
from robot_rl.tasks.task import TaskCfg
from robot_rl.typed_yaml import ConfigError

ALGORITHM = "fasttd3"
PHASES = ("act", "env", "store", "sample", "update", "log_save")


def fasttd3_settings(num_envs: int | None, max_iterations: int | None, num_steps_per_env: int | None,
                     base: FastTD3Cfg | None = None, backend: str = "cpu", world_size: int = 1) -> FastTD3Cfg:
    """``base`` (default: the recipe's settings; a resumed run: its checkpoint's) with the command line's sizes."""
    if num_steps_per_env is not None:
        raise ConfigError("robot-rl train --algo fasttd3", "--num-steps-per-env",
                          "is a PPO rollout length; an off-policy iteration is one step of every env")
    if backend != "cpu" or world_size > 1:  # its loop reads the CPU env's final observations, in one process
        raise ConfigError("robot-rl train --algo fasttd3", "--backend" if backend != "cpu" else "torchrun",
                          "fasttd3 runs on the CPU backend in one process (warp and multi-rank are PPO's for now)")
    changes = {k: v for k, v in (("num_envs", num_envs), ("max_iterations", max_iterations)) if v is not None}
    return dataclasses.replace(base or FastTD3Cfg(), **changes)


def check_algorithm(info: dict, algo: str, path: Path) -> None:
    """A checkpoint resumes only under the algorithm that wrote it (PPO's record none: they predate the key)."""
    written = info.get("algorithm", "ppo")
    if written != algo:
        raise CheckpointError(f"checkpoint {path} was trained with {written}, not {algo}; pass --algo {written}")


class _FinalObs:
    """The finished envs' last observations, rebuilt from their final state (the env has already reset them):
    a time-out's target bootstraps from these, not from the next episode's first observation."""

    def __init__(self, env: MujocoVecEnv):
        task, n = env.task, env.num_envs
        if any(t.history_length > 1 for t in (*task.actor_obs.terms, *task.critic_obs.terms)):
            raise ConfigError("--task", task.name, "has observation histories; fasttd3 rebuilds a finished "
                              "episode's last observation from its final state, which a history cannot be")
        dims = (env.num_joints, env.num_commands, env.num_actions)
        self.env = env
        self.actor = ObservationBuilder(task.actor_obs, n, *dims)
        self.critic = ObservationBuilder(task.critic_obs, n, *dims)

    def patch(self, done: np.ndarray, actor_next: torch.Tensor, critic_next: torch.Tensor) -> None:
        inputs = self.env.final_obs_inputs
        actor_next[done] = torch.from_numpy(self.actor.compute(inputs)[done])
        critic_next[done] = torch.from_numpy(self.critic.compute(inputs)[done])


def train_fasttd3(args, task: TaskCfg, spec: RobotSpec, run_dir: Path, started: float, bar) -> Path:
    """Run FastTD3 for ``args`` (a ``TrainArgs``) into ``run_dir``; returns the final checkpoint's path."""
    from torch.utils.tensorboard import SummaryWriter

    resume = None if args.resume is None else torch.load(args.resume, weights_only=False, map_location="cpu")
    # A resumed run keeps the settings it was trained with (its envs too), and runs as long as a fresh one would.
    base = None if resume is None else dataclasses.replace(checkpoint_cfg(resume),
                                                           max_iterations=FastTD3Cfg.max_iterations)
    cfg = fasttd3_settings(args.num_envs, args.max_iterations, args.num_steps_per_env, base)
    if resume is not None:  # config.json records the settings this run uses: the checkpoint's
        config = json.loads((run_dir / "config.json").read_text())
        (run_dir / "config.json").write_text(json.dumps({**config, "fasttd3": _jsonable(cfg)}, indent=2))
    env = MujocoVecEnv(task, cfg.num_envs, seed=args.seed, randomize=args.randomize, nthread=args.physics_threads)
    n = env.num_envs
    final_obs = _FinalObs(env)
    learner = FastTD3(cfg, env.num_actor_obs, env.num_critic_obs, env.num_actions, n, seed=args.seed)
    replay = NStepReplay(n, cfg.buffer_per_env, env.num_actor_obs, env.num_critic_obs, env.num_actions,
                         n_step=cfg.n_step, gamma=cfg.gamma)
    infos = {**checkpoint_info(task, spec), "algorithm": ALGORITHM, "seed": args.seed, "num_envs": n,
             "randomize": args.randomize, "randomization_overrides": list(args.dr),
             "actor_hidden_dims": list(cfg.actor_hidden), "activation": "relu"}
    first, env_steps = 0, 0
    if resume is not None:
        learner.load_state_dict(resume)
        first, env_steps = int(resume["infos"]["iteration"]) + 1, int(resume["infos"]["env_steps"])
        env.continue_curriculum(first)  # one policy step per env per iteration: the push curriculum goes on
        bar.write(f"resumed from {args.resume} (iteration {first - 1}, {env_steps:,} env steps)")
    bar.reset(total=cfg.max_iterations)
    bar.update(first)
    writer = SummaryWriter(log_dir=str(run_dir))
    seconds = dict.fromkeys(PHASES, 0.0)
    returns: deque[float] = deque(maxlen=100)
    running = np.zeros(n)
    metrics: dict[str, float] = {}
    losses: dict[str, float] = {}

    def save(it: int) -> Path:
        path = run_dir / f"model_{it}.pt"
        tmp = path.with_name(path.name + ".tmp")
        torch.save({**learner.state_dict(), "infos": {**infos, "iteration": it, "env_steps": env_steps}}, tmp)
        tmp.replace(path)
        return path

    bar.write(f"training {task.name} with fasttd3: {n} envs, {cfg.num_updates} updates of {cfg.batch_size} per "
              f"iteration, up to {cfg.max_iterations} iterations → {run_dir}")
    actor_obs, critic_obs = torch.from_numpy(env.actor_obs.copy()), torch.from_numpy(env.critic_obs.copy())
    new_episode = torch.ones(n, dtype=torch.bool)
    it, last_log, steps_at_log = first, time.monotonic(), env_steps
    try:
        for it in range(first, first + cfg.max_iterations):
            t0 = time.perf_counter()
            learner.observe(actor_obs, critic_obs)
            action = learner.explore(actor_obs, new_episode)
            t1 = time.perf_counter()
            result = env.step((action * cfg.action_bound).numpy())
            t2 = time.perf_counter()
            done = result.terminated | result.truncated
            next_actor = torch.from_numpy(result.actor_obs.copy())  # copies: the env reuses its arrays
            next_critic = torch.from_numpy(result.critic_obs.copy())
            stored_actor, stored_critic = next_actor, next_critic
            if done.any():
                stored_actor, stored_critic = next_actor.clone(), next_critic.clone()
                final_obs.patch(done, stored_actor, stored_critic)
            done_t = torch.from_numpy(done)
            replay.add(actor_obs=actor_obs, critic_obs=critic_obs, action=action,
                       reward=torch.from_numpy(result.reward.astype(np.float32)), next_actor_obs=stored_actor,
                       next_critic_obs=stored_critic, terminated=torch.from_numpy(result.terminated), done=done_t)
            actor_obs, critic_obs, new_episode = next_actor, next_critic, done_t
            env_steps += n
            running += result.reward
            returns.extend(running[done].tolist())
            running[done] = 0.0
            metrics.update(result.log)
            t3 = time.perf_counter()
            seconds["act"] += t1 - t0
            seconds["env"] += t2 - t1
            seconds["store"] += t3 - t2
            if it - first >= cfg.learning_starts:
                for _ in range(cfg.num_updates):
                    t4 = time.perf_counter()
                    batch = replay.sample(cfg.batch_size, learner.generator)
                    t5 = time.perf_counter()
                    losses.update(learner.update(batch))
                    seconds["sample"] += t5 - t4
                    seconds["update"] += time.perf_counter() - t5
            t6 = time.perf_counter()
            if it % cfg.save_interval == 0:
                save(it)
            if it % cfg.log_interval == 0:
                now = time.monotonic()
                info = {"steps_per_s": (env_steps - steps_at_log) / max(now - last_log, 1e-9),
                        "mean_reward": float(np.mean(returns)) if returns else float("nan"), **metrics}
                last_log, steps_at_log = now, env_steps
                for key, value in {**info, **losses}.items():
                    writer.add_scalar(key if "/" in key else f"Train/{key}", value, env_steps)
                bar.set_postfix_str(progress_postfix(info), refresh=False)
            bar.update(1)
            seconds["log_save"] += time.perf_counter() - t6
            if args.max_minutes is not None and time.monotonic() - started > 60 * args.max_minutes:
                bar.write(f"stopped at the {args.max_minutes} min budget")
                break
        final = save(it)
    finally:
        writer.close()
        env.close()
    _write_profile(run_dir / "profile.json", seconds, it - first + 1, cfg, n)
    return final


def _jsonable(cfg: FastTD3Cfg) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(cfg).items()}


def _write_profile(path: Path, seconds: dict[str, float], iterations: int, cfg: FastTD3Cfg, num_envs: int) -> None:
    total = sum(seconds.values())
    profile = {"iterations": iterations, "num_envs": num_envs, "num_updates": cfg.num_updates,
               "batch_size": cfg.batch_size, "torch_threads": torch.get_num_threads(), "seconds": seconds,
               "share": {k: v / total if total else 0.0 for k, v in seconds.items()},
               "ms_per_iteration": {k: 1e3 * v / max(iterations, 1) for k, v in seconds.items()}}
    path.write_text(json.dumps(profile, indent=2))
