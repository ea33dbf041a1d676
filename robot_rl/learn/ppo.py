"""PPO through rsl-rl-lib 5.x: our env as its VecEnv, our task as its config, checkpoints that name the task.

rsl_rl 5 builds separate actor and critic ``MLPModel``s from observation *groups*: the env returns a
TensorDict with ``policy`` (the actor's observation, what the real robot measures) and ``critic``
(privileged); ``obs_groups`` maps the actor to ``policy`` and the critic to ``critic``. Both normalize
their inputs (empirical mean/std, updated from every rollout); the actor's normalizer is part of the
exported policy.

Every checkpoint records the task name, robot and robot-spec hash; loading it into another task, or after
the robot spec changed, raises ``CheckpointError`` naming both values.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner
from tensordict import TensorDict

from robot_rl.learn.errors import CheckpointError
from robot_rl.robots.spec import RobotSpec
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.registry import make_task
from robot_rl.tasks.task import PPOCfg, TaskCfg, actor_history_added, resume_mismatches

if TYPE_CHECKING:  # mujoco_warp is an optional extra
    from robot_rl.sim.warp_contact_mix import ContactMixVecEnv
    from robot_rl.sim.warp_vec_env import WarpVecEnv

ACTOR_GROUP, CRITIC_GROUP = "policy", "critic"
__all__ = ["CheckpointError", "RslRlVecEnv", "TaskRunner", "check_checkpoint", "train_cfg"]




def _copy(x: np.ndarray | torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor copy of an env output (numpy from the CPU env, a device tensor from the warp env)."""
    return x.to(dtype).clone() if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=dtype)


class RslRlVecEnv(VecEnv):
    """rsl_rl's VecEnv over ``MujocoVecEnv`` (CPU tensors; the env is numpy inside) or ``WarpVecEnv`` (tensors on
    its device: rsl_rl runs there too)."""

    def __init__(self, env: MujocoVecEnv | WarpVecEnv | ContactMixVecEnv):
        self.env = env
        self.num_envs = env.num_envs
        self.num_actions = env.num_actions
        self.max_episode_length = env.max_episode_length
        self.device = getattr(env, "device", "cpu")
        self.cfg = {"task": env.task.name, "robot": env.spec.name, "num_envs": env.num_envs}

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return torch.as_tensor(self.env.episode_length)

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        # rsl_rl spreads the first episodes' lengths (init_at_random_ep_len) by assigning this buffer.
        self.env.episode_length[:] = value if isinstance(self.env.episode_length, torch.Tensor) else value.cpu().numpy()

    def _obs(self, actor: np.ndarray | torch.Tensor, critic: np.ndarray | torch.Tensor) -> TensorDict:
        # Copies: the env reuses its observation arrays on the next step.
        return TensorDict({ACTOR_GROUP: _copy(actor), CRITIC_GROUP: _copy(critic)}, batch_size=[self.num_envs],
                          device=self.device)

    def get_observations(self) -> TensorDict:
        return self._obs(self.env.actor_obs, self.env.critic_obs)

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        return self._package(self.env.step(self._env_action(actions)))

    def _env_action(self, actions: torch.Tensor) -> np.ndarray | torch.Tensor:
        """What the env steps with (a wrapper's policy may act in another space, e.g. a residual's)."""
        if isinstance(self.env.episode_length, torch.Tensor):  # the warp env: it stays on the device
            return actions.detach()
        return actions.detach().cpu().numpy()

    def _package(self, result) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """An env step's result as rsl_rl wants it: observations, rewards, dones, extras (time-outs, logs)."""
        dones = _copy(result.terminated | result.truncated, torch.long)
        extras: dict[str, Any] = {
            "time_outs": _copy(result.truncated),
            "log": {f"/{k}" if not k.startswith("/") else k: v for k, v in result.log.items()},
        }
        rewards = _copy(result.reward, torch.float32)
        return self._obs(result.actor_obs, result.critic_obs), rewards, dones, extras

    def close(self) -> None:
        self.env.close()


def train_cfg(ppo: PPOCfg, run_name: str = "") -> dict:
    """The runner configuration dict rsl_rl 5.5 expects, from our typed PPO settings."""
    return {
        "num_steps_per_env": ppo.num_steps_per_env,
        "save_interval": ppo.save_interval,
        "run_name": run_name,
        "logger": "tensorboard",
        "check_for_nan": True,
        "obs_groups": {"actor": [ACTOR_GROUP], "critic": [CRITIC_GROUP]},
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": ppo.num_learning_epochs,
            "num_mini_batches": ppo.num_mini_batches,
            "clip_param": ppo.clip_param,
            "gamma": ppo.gamma,
            "lam": ppo.lam,
            "value_loss_coef": ppo.value_loss_coef,
            "entropy_coef": ppo.entropy_coef,
            "learning_rate": ppo.learning_rate,
            "max_grad_norm": ppo.max_grad_norm,
            "use_clipped_value_loss": True,
            "schedule": ppo.schedule,
            "desired_kl": ppo.desired_kl,
        },
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": list(ppo.actor_hidden_dims),
            "activation": ppo.activation,
            "obs_normalization": True,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": ppo.init_noise_std,
                                 "std_type": "scalar"},
        },
        "critic": {
            "class_name": "MLPModel",
            "hidden_dims": list(ppo.critic_hidden_dims),
            "activation": ppo.activation,
            "obs_normalization": True,
        },
    }


def chain_projected_actor_entries(task: TaskCfg, spec: RobotSpec) -> dict[str, Any]:
    """The actor entries for ``PPOCfg.chain_projected_actor``; training, play and export build the actor from these."""
    from robot_rl.learn.chain_projected import projection_settings

    return {"class_name": "robot_rl.learn.chain_projected:ChainProjectedMLP",
            "projection": projection_settings(task, spec)}


def checkpoint_info(task: TaskCfg, spec: RobotSpec) -> dict[str, Any]:
    """What a checkpoint records about what it was trained for (checked when it is loaded)."""
    return {"task": task.name, "robot": spec.name, "spec_hash": spec.spec_hash}


class TaskRunner(OnPolicyRunner):
    """rsl_rl's OnPolicyRunner that stamps every checkpoint with the task, and reports each iteration to
    ``on_iteration`` instead of printing rsl_rl's per-iteration block (that text goes to ``console``).

    rsl_rl keeps episode statistics (the rewards and metrics ``on_iteration`` reports) only while it logs: without a
    ``log_dir`` they read NaN / empty."""

    def __init__(
        self,
        env: RslRlVecEnv,
        task: TaskCfg,
        log_dir: str | Path | None,
        console: Any = None,
        on_iteration: Callable[[dict[str, float]], None] | None = None,
        ppo: PPOCfg | None = None,
        provenance: dict[str, Any] | None = None,
        actor: dict[str, Any] | None = None,
    ):
        """``actor``: the runner's actor entry in place of the MLP ``train_cfg`` builds (e.g.
        ``bc_ppo.bc_actor_cfg``: continued PPO on a behaviour-cloned network)."""
        ppo = ppo or task.ppo
        self.task_info = checkpoint_info(task, env.env.spec)
        self._task = task
        # For export and model cards: how the actor is built, and how it was trained (seed, settings).
        self._provenance = {"actor_hidden_dims": list(ppo.actor_hidden_dims), "activation": ppo.activation,
                            **(provenance or {})}
        self._console = console
        cfg = train_cfg(ppo, run_name=task.name)
        if ppo.chain_projected_actor and actor is None:
            cfg["actor"] |= chain_projected_actor_entries(task, env.env.spec)
        if ppo.symmetry_augmentation:
            from robot_rl.learn.symmetry import symmetry_cfg

            cfg["algorithm"]["symmetry_cfg"] = symmetry_cfg(task, env.env.spec, env.device)
            self._provenance["symmetry_augmentation"] = True
        if actor is not None:
            cfg["actor"] = actor
            self._provenance |= {"actor": getattr(actor["class_name"], "__name__", str(actor["class_name"]))}
        with self._quiet():
            super().__init__(env, cfg, log_dir=str(log_dir) if log_dir is not None else None, device=env.device)
        self._on_iteration = on_iteration
        self._log = self.logger.log
        self.logger.log = self._log_iteration  # type: ignore[method-assign]

    def _configure_multi_gpu(self) -> None:
        """rsl_rl's multi-GPU setup (torchrun sets WORLD_SIZE, RANK, LOCAL_RANK) is NCCL on ``cuda:<local rank>``;
        on the CPU the same training runs over gloo: every rank steps its own envs, gradients are averaged and the
        normalizers' statistics reduced across ranks by rsl_rl, rank 0's parameters broadcast at the start."""
        world = int(os.getenv("WORLD_SIZE", "1"))
        if world == 1 or str(self.device).startswith("cuda"):
            super()._configure_multi_gpu()
            return
        self.gpu_world_size, self.is_distributed = world, True
        self.gpu_local_rank, self.gpu_global_rank = int(os.getenv("LOCAL_RANK", "0")), int(os.getenv("RANK", "0"))
        self.cfg["multi_gpu"] = {"global_rank": self.gpu_global_rank, "local_rank": self.gpu_local_rank,
                                 "world_size": world}
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group(backend="gloo", rank=self.gpu_global_rank, world_size=world)

    @contextlib.contextmanager
    def _quiet(self):
        if self._console is None:
            with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
                yield
        else:
            with contextlib.redirect_stdout(self._console):
                yield

    def _log_iteration(self, **kw: Any) -> None:
        logger = self.logger
        extras: dict[str, list[float]] = {}
        for ep in logger.ep_extras:  # the logger clears these; keep the numbers the progress bar shows
            for key, value in ep.items():
                extras.setdefault(key, []).append(float(value))
        with self._quiet():
            self._log(**kw)
        if self._on_iteration is not None:
            steps = self.cfg["num_steps_per_env"] * self.env.num_envs * self.gpu_world_size  # every rank's envs
            info = {
                "iteration": kw["it"] + 1,
                "steps_per_s": steps / max(kw["collect_time"] + kw["learn_time"], 1e-9),
                "mean_reward": float(np.mean(logger.rewbuffer)) if logger.rewbuffer else float("nan"),
                "mean_episode_length": float(np.mean(logger.lenbuffer)) if logger.lenbuffer else float("nan"),
                "total_steps": float(logger.tot_timesteps),
            }
            info |= {k.strip("/"): float(np.mean(v)) for k, v in extras.items()}
            self._on_iteration(info)

    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        actor = self.alg.actor
        projecting = getattr(actor, "projecting", None)
        if projecting is not None:  # a chain-projected actor trains its MLP unprojected (chain_projected says why)
            actor.projecting = False
        try:
            with self._quiet():
                super().learn(num_learning_iterations, init_at_random_ep_len)
        finally:
            if projecting is not None:
                actor.projecting = projecting

    def learn_critic_only(self, iterations: int, learning_rate: float, init_at_random_ep_len: bool = False) -> None:
        """PPO iterations that train the critic alone (the actor frozen): a started actor's first updates on an
        untrained critic's advantages undo its start. The adaptive schedule moves the learning rate while the
        actor holds still (its KL is 0): it is set back to ``learning_rate`` after."""
        actor = self.alg.actor
        actor.requires_grad_(False)
        try:
            self.learn(iterations, init_at_random_ep_len)
        finally:
            actor.requires_grad_(True)
        self.alg.learning_rate = learning_rate
        for group in self.alg.optimizer.param_groups:
            group["lr"] = learning_rate

    def load(self, path: str, *args: Any, **kwargs: Any) -> dict:
        if not args:  # onto this runner's device: a checkpoint trained on a GPU loads on a CPU, and the other way
            kwargs.setdefault("map_location", str(self.device))
        with _widened_for(self._task, path) as path:
            infos = super().load(path, *args, **kwargs)
        # rsl_rl's logger counts steps from zero in every process: carry the resumed run's count, so a
        # checkpoint (and the model card written from it) records the policy's whole training.
        self.logger.tot_timesteps = int((infos or {}).get("env_steps", 0))
        return infos

    def save(self, path: str, infos: dict | None = None) -> None:
        stats = {"env_steps": int(self.logger.tot_timesteps), "iteration": self.current_learning_iteration}
        super().save(path, {**(infos or {}), **self._provenance, **stats, **self.task_info})


@contextlib.contextmanager
def _widened_for(task: TaskCfg, path: str):
    """``path``, or (a checkpoint of ``task.starts_from`` whose actor sees fewer past frames) a temporary copy
    whose actor takes ``task``'s history and acts the same (``robot_rl.learn.history_widening``)."""
    start = None
    if task.starts_from is not None and read_checkpoint_info(path)["task"] == task.starts_from:
        start = make_task(task.starts_from)
    if start is None or not actor_history_added(task, start):
        yield path
        return
    import tempfile

    from robot_rl.learn.history_widening import widen_checkpoint
    from robot_rl.robots.spec import load_robot

    spec = load_robot(task.robot)
    sizes = task.actor_obs.term_sizes(spec.num_joints, task.commands.size, spec.num_joints)
    checkpoint = torch.load(path, weights_only=False, map_location="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        widened = Path(tmp) / Path(path).name
        torch.save(widen_checkpoint(checkpoint, start.actor_obs, task.actor_obs, sizes), widened)
        yield str(widened)


def read_checkpoint_info(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        data = torch.load(path, weights_only=False, map_location="cpu")
    except Exception as exc:  # torch raises many types for a file that is not a checkpoint
        raise CheckpointError(f"{path} is not a readable torch checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict) or "actor_state_dict" not in data:
        raise CheckpointError(f"{path} is not an rsl_rl checkpoint (no actor_state_dict)")
    info = data.get("infos") or {}
    if "task" not in info:
        raise CheckpointError(f"{path} does not record its task (not written by robot_rl's trainer)")
    return info


def check_checkpoint(path: str | Path, task: TaskCfg, spec: RobotSpec, *, resuming: bool = False) -> dict[str, Any]:
    """The checkpoint's recorded info, after checking it was trained for this task and robot spec. ``resuming``
    (train --resume) also accepts a checkpoint of the task's ``starts_from`` task, when it still fits."""
    info = read_checkpoint_info(path)
    if resuming and task.starts_from is not None and info["task"] == task.starts_from:
        mismatches = resume_mismatches(task, make_task(task.starts_from))
        if mismatches:
            raise CheckpointError(f"checkpoint {path} of task {task.starts_from!r} cannot start {task.name!r}: their "
                                  f"{', '.join(mismatches)} differ")
    elif info["task"] != task.name:
        raise CheckpointError(
            f"checkpoint {path} was trained for task {info['task']!r}, not {task.name!r}; "
            f"pass --task {info['task']} or a checkpoint of {task.name!r}"
        )
    if info.get("spec_hash") != spec.spec_hash:
        raise CheckpointError(
            f"checkpoint {path}: robot spec {info.get('robot')!r} hash {info.get('spec_hash')!r} differs from the "
            f"current {spec.name!r} spec hash {spec.spec_hash!r} ({spec.source_file}); the robot facts changed "
            "since training (joints, gains, limits or timing), so the policy no longer fits"
        )
    return info
