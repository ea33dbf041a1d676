"""``robot-rl train --algo fasttd3``: FastTD3 on the vectorized MuJoCo env, written like a PPO run.

One loop for both backends (``device_env.DeviceEnv``): ``--backend cpu`` steps ``MujocoVecEnv`` and learns on the
CPU; ``--backend warp --device cuda:N`` keeps the env's tensors, the replay and the learner on that device (the
recipe's layout). Checkpoints are written with CPU tensors either way, so export / play / resume read them anywhere.

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

import torch

from robot_rl.learn.errors import CheckpointError
from robot_rl.learn.offpolicy.config import FastTD3Cfg
from robot_rl.learn.offpolicy.device_env import DeviceEnv
from robot_rl.learn.offpolicy.fasttd3 import FastTD3, checkpoint_cfg
from robot_rl.learn.offpolicy.replay import NStepReplay
from robot_rl.learn.ppo import checkpoint_info
from robot_rl.learn.train import _postfix as progress_postfix  # PPO's progress bar text, the same fields
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.task import TaskCfg
from robot_rl.typed_yaml import ConfigError

ALGORITHM = "fasttd3"
PHASES = ("act", "env", "store", "sample", "update", "log_save")


def fasttd3_settings(num_envs: int | None, max_iterations: int | None, num_steps_per_env: int | None,
                     base: FastTD3Cfg | None = None, device: str = "cpu", world_size: int = 1) -> FastTD3Cfg:
    """``base`` (default: the recipe's settings for ``device``, the learner's; a resumed run: its checkpoint's)
    with the command line's sizes."""
    if num_steps_per_env is not None:
        raise ConfigError("robot-rl train --algo fasttd3", "--num-steps-per-env",
                          "is a PPO rollout length; an off-policy iteration is one step of every env")
    if world_size > 1:  # one replay and one learner: no gradient averaging across ranks
        raise ConfigError("robot-rl train --algo fasttd3", "torchrun",
                          "fasttd3 runs in one process (multi-rank training is PPO's for now)")
    changes = {k: v for k, v in (("num_envs", num_envs), ("max_iterations", max_iterations)) if v is not None}
    return dataclasses.replace(base or FastTD3Cfg.for_device(device), **changes)


def check_algorithm(info: dict, algo: str, path: Path) -> None:
    """A checkpoint resumes only under the algorithm that wrote it (PPO's record none: they predate the key)."""
    written = info.get("algorithm", "ppo")
    if written != algo:
        raise CheckpointError(f"checkpoint {path} was trained with {written}, not {algo}; pass --algo {written}")


def fasttd3_run_settings(args, world_size: int = 1) -> tuple[FastTD3Cfg, dict | None]:
    """The settings this run uses and the checkpoint it resumes (None: a fresh run). A resumed run keeps the
    settings it was trained with (its envs too), and runs as long as a fresh one would."""
    resume = None if args.resume is None else torch.load(args.resume, weights_only=False, map_location="cpu")
    base = None if resume is None else dataclasses.replace(checkpoint_cfg(resume),
                                                           max_iterations=FastTD3Cfg.max_iterations)
    cfg = fasttd3_settings(args.num_envs, args.max_iterations, args.num_steps_per_env, base, args.device, world_size)
    return cfg, resume


def train_fasttd3(args, task: TaskCfg, spec: RobotSpec, run_dir: Path, started: float, bar, vec_env,
                  cfg: FastTD3Cfg, resume: dict | None) -> Path:
    """Run FastTD3 for ``args`` (a ``TrainArgs``) into ``run_dir`` on ``vec_env`` (``cfg.num_envs`` envs), with
    the settings and checkpoint of :func:`fasttd3_run_settings`; returns the final checkpoint's path."""
    from torch.utils.tensorboard import SummaryWriter

    env = DeviceEnv(vec_env)
    n, dev, sizes = env.env.num_envs, env.device, (env.env.num_actor_obs, env.env.num_critic_obs, env.env.num_actions)
    learner = FastTD3(cfg, *sizes, n, seed=args.seed, device=str(dev))
    replay = NStepReplay(n, cfg.buffer_per_env, *sizes, n_step=cfg.n_step, gamma=cfg.gamma, device=str(dev))
    infos = {**checkpoint_info(task, spec), "algorithm": ALGORITHM, "seed": args.seed, "num_envs": n,
             "randomize": args.randomize, "randomization_overrides": list(args.dr), "backend": args.backend,
             "actor_hidden_dims": list(cfg.actor_hidden), "activation": "relu"}
    notes = getattr(env.env, "notes", ())  # what the backend does differently from the task's settings
    if notes:  # recorded as PPO's runs record them
        infos["backend_notes"] = list(notes)
    for note in notes:
        bar.write(f"note: {note}")
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
    running = torch.zeros(n, dtype=torch.float64, device=dev)
    metrics: dict[str, float | torch.Tensor] = {}  # the last finished episodes' means, read at log time
    losses: dict[str, float] = {}

    def save(it: int) -> Path:
        path = run_dir / f"model_{it}.pt"
        tmp = path.with_name(path.name + ".tmp")
        state = _on_cpu(learner.state_dict())  # loads on any machine, as PPO's (rsl_rl maps them at load)
        torch.save({**state, "infos": {**infos, "iteration": it, "env_steps": env_steps}}, tmp)
        tmp.replace(path)
        return path

    bar.write(f"training {task.name} with fasttd3: {n} envs, {cfg.num_updates} updates of {cfg.batch_size} per "
              f"iteration, up to {cfg.max_iterations} iterations ({args.backend} physics on {dev}) → {run_dir}")
    # On a GPU the phases' clocks need the device's queue drained at their ends; elsewhere that is a no-op.
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    actor_obs, critic_obs = env.observations()
    new_episode = torch.ones(n, dtype=torch.bool, device=dev)
    it, last_log, steps_at_log = first, time.monotonic(), env_steps
    try:
        for it in range(first, first + cfg.max_iterations):
            t0 = time.perf_counter()
            learner.observe(actor_obs, critic_obs)
            action = learner.explore(actor_obs, new_episode)
            sync()
            t1 = time.perf_counter()
            step = env.step(action * cfg.action_bound)
            sync()
            t2 = time.perf_counter()
            done = step.done
            stored_actor, stored_critic = step.actor_obs, step.critic_obs
            any_done = bool(done.any())
            if any_done:
                stored_actor, stored_critic = step.actor_obs.clone(), step.critic_obs.clone()
                env.patch_final_obs(done, stored_actor, stored_critic)
            replay.add(actor_obs=actor_obs, critic_obs=critic_obs, action=action, reward=step.reward,
                       next_actor_obs=stored_actor, next_critic_obs=stored_critic, terminated=step.terminated,
                       done=done)
            actor_obs, critic_obs, new_episode = step.actor_obs, step.critic_obs, done
            env_steps += n
            running += step.reward
            if any_done:
                returns.extend(running[done].tolist())
                running[done] = 0.0
            metrics.update(step.log)
            sync()
            t3 = time.perf_counter()
            seconds["act"] += t1 - t0
            seconds["env"] += t2 - t1
            seconds["store"] += t3 - t2
            if it - first >= cfg.learning_starts:
                for _ in range(cfg.num_updates):
                    t4 = time.perf_counter()
                    batch = replay.sample(cfg.batch_size, learner.generator)
                    sync()
                    t5 = time.perf_counter()
                    losses.update(learner.update(batch))  # floats: the update's end is a host sync
                    seconds["sample"] += t5 - t4
                    seconds["update"] += time.perf_counter() - t5
            t6 = time.perf_counter()
            if it % cfg.save_interval == 0:
                save(it)
            if it % cfg.log_interval == 0:
                now = time.monotonic()
                info = {"steps_per_s": (env_steps - steps_at_log) / max(now - last_log, 1e-9),
                        "mean_reward": sum(returns) / len(returns) if returns else float("nan"),
                        **{k: float(v) for k, v in metrics.items()}}
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
    _write_profile(run_dir / "profile.json", seconds, it - first + 1, cfg, n, dev)
    return final


def _on_cpu(value):
    """A state dict's tensors (nested in dicts and lists, as an optimizer's) moved to the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _on_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(v) for v in value)
    return value


def _write_profile(path: Path, seconds: dict[str, float], iterations: int, cfg: FastTD3Cfg, num_envs: int,
                   device: torch.device) -> None:
    total = sum(seconds.values())
    profile = {"iterations": iterations, "num_envs": num_envs, "device": str(device), "num_updates": cfg.num_updates,
               "batch_size": cfg.batch_size, "torch_threads": torch.get_num_threads(), "seconds": seconds,
               "share": {k: v / total if total else 0.0 for k, v in seconds.items()},
               "ms_per_iteration": {k: 1e3 * v / max(iterations, 1) for k, v in seconds.items()}}
    path.write_text(json.dumps(profile, indent=2))
