"""Behaviour cloning: a LeRobot dataset of demos → an MLP policy → ONNX with the task's policy contract.

The dataset's ``observation.state`` must be the task's actor observation (as ``robot_rl.learn.demos``
records it: same terms, order and scales, checked by name) and its ``action`` the task's joint position
action ``(q_target − default) / scale``. The trained network therefore drops into the deploy runtime like a
PPO policy: ``load_policy`` checks its contract, ``PolicyController`` feeds it and decodes its output.

Action parameterization: absolute (the default) — the network predicts the action itself, with a linear
skip path from the observation (``BCConfig.linear_skip``): a demo's action is the current joints plus a
small lead (the motion), and the linear path carries the "current joints" part exactly. Residual
(``residual=True``) — the network predicts ``action − anchor``, the anchor being the current joints in
action units read from the observation and added back inside the exported graph (the ONNX model still maps
raw observations to absolute actions; the contract is unchanged). Absolute is the default because in the
residual form nothing pulls the redundant joint back, so small biases walk the arm into its joint limits,
while the absolute form keeps a pose to return to (``benchmarks/results/RESULTS_bc_push.md``).

Normalization: observation mean/std and output mean/std come from the training episodes; both are baked
into the exported graph (``normalizer_baked_in``), which maps raw observations to raw actions.

Action chunking (``chunk = k > 1``): the network predicts the next k actions ``a_t … a_{t+k−1}`` from
``o_t`` (targets past an episode's end repeat its last action: the demos end holding still). Predicting a
chunk regularizes the network towards temporally consistent motion (ACT, Zhao et al. 2023). The exported
graph outputs the whole chunk, (batch, k, A), and the contract's ``chunk`` field (length, how to consume it)
tells the deploy controller what to do with it: temporal ensembling by default — every tick a new chunk,
the executed action the exponentially weighted mean of the k predictions made for this tick
(:mod:`robot_rl.control.action_chunks`) — or the first action (receding horizon). Chunk 1 exports the
one-action contract of old.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.core.validate import non_negative, positive
from robot_rl.hardware.sim_robot import SimulatorName
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.tasks.registry import make_task
from robot_rl.tasks.task import TaskCfg
from robot_rl.tasks.task_observation import observation_names

ChunkConsume = Literal["temporal_ensemble", "first_action"]
# ACT's weights w_i = exp(−m·i), i = 0 the oldest prediction. ACT uses m = 0.01 (older ones weigh slightly more);
# on panda-push (chunk 10, 50 Hz, three demo seeds, 100 layouts) that lags on the weakest demo seed (65 % in
# MuJoCo); m = −0.2 (newer predictions weigh a little more, all ten still average) gives 83 / 88 / 72 % in MuJoCo
# and keeps PyBullet's; m = −0.5 helps MuJoCo more and costs PyBullet; the first action alone is worse (MuJoCo)
# (benchmarks/results/RESULTS_bc_push.md).
DEFAULT_ENSEMBLE_M = -0.2
STD_FLOOR = 1e-3  # a feature that never varies in the demos (the cube's height) is scaled as if it did a little


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("behaviour cloning needs torch: pip install 'robot-rl[train]'") from None
    return torch


class DatasetMismatch(RobotRLError, ValueError):
    """The dataset does not hold this task's observations and actions."""


@dataclass(frozen=True)
class BCConfig:
    hidden: tuple[int, ...] = (256, 256)
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 256
    # Gaussian noise on the normalized observations in training, per observation term (default for terms not listed). On
    # the joints it keeps the cloned closed loop stable: without it the network's map from joints to joint targets can
    # be expansive somewhere and the arm runs away (benchmarks/results/RESULTS_bc_push.md). On joint velocities it is
    # large, so the policy leans on them only a little (trusting them fully makes the arm oscillate: see the panda-push
    # observation). The cube and the goal get none: where to stop pushing is a matter of millimetres.
    obs_noise: float = 0.05
    term_noise: tuple[tuple[str, float], ...] = (("joint_vel", 1.5), ("object_pos", 0.0), ("command", 0.0))
    val_fraction: float = 0.1  # episodes held out for the validation loss
    # A linear map of the observation added to the MLP's output: the action is mostly the current joints
    # plus a small motion, and a linear path represents that part exactly, leaving the MLP the motion.
    linear_skip: bool = True


@dataclass(frozen=True)
class DemoArrays:
    obs: np.ndarray  # (N, obs_dim) float32
    targets: np.ndarray  # (N, chunk, num_actions) float32
    episode: np.ndarray  # (N,) episode index of each frame


def load_demos(dataset: str | Path, task: TaskCfg, spec: RobotSpec, chunk: int = 1) -> DemoArrays:
    """Frames of every episode, with each frame's next ``chunk`` actions. Refuses a dataset recorded for
    another observation layout or robot, naming what differs."""
    from robot_rl.data.lerobot_dataset import LeRobotDataset

    if chunk < 1:
        raise ValueError(f"chunk must be ≥ 1, got {chunk}")
    ds = LeRobotDataset(dataset)
    where = f"dataset {dataset}"
    for key in ("observation.state", "action"):
        if key not in ds.features:
            raise DatasetMismatch(f"{where} has no {key!r} feature (it has {sorted(ds.features)})")
    names = observation_names(task, spec)
    state, action = ds.features["observation.state"], ds.features["action"]
    if state.shape != (len(names),):
        raise DatasetMismatch(f"{where}: observation.state has shape {state.shape}, task {task.name!r} observes "
                              f"({len(names)},)")
    if state.names is not None and tuple(state.names) != names:
        diff = next(i for i, (a, b) in enumerate(zip(state.names, names, strict=True)) if a != b)
        raise DatasetMismatch(f"{where}: observation.state[{diff}] is {state.names[diff]!r}, task {task.name!r} "
                              f"has {names[diff]!r} there: recorded for another observation layout")
    if action.shape != (spec.num_joints,):
        raise DatasetMismatch(f"{where}: action has shape {action.shape}, robot {spec.name!r} has "
                              f"{spec.num_joints} joints")
    if action.names is not None and tuple(action.names) != tuple(spec.joint_names):
        raise DatasetMismatch(f"{where}: action names {list(action.names)} are not {spec.name!r}'s joints "
                              f"{list(spec.joint_names)}")
    if ds.num_episodes == 0:
        raise DatasetMismatch(f"{where} holds no episodes")
    obs_all, tgt_all, ep_all = [], [], []
    for e in range(ds.num_episodes):
        frames = ds.episode(e)
        obs, act = frames["observation.state"].astype(np.float32), frames["action"].astype(np.float32)
        idx = np.minimum(np.arange(len(act))[:, None] + np.arange(chunk)[None, :], len(act) - 1)
        obs_all.append(obs)
        tgt_all.append(act[idx])
        ep_all.append(np.full(len(act), e))
    return DemoArrays(np.concatenate(obs_all), np.concatenate(tgt_all), np.concatenate(ep_all))


@dataclass(frozen=True)
class Anchor:
    """Where the current joint positions sit in the observation, in action units: the residual
    parameterization predicts ``action − anchor`` (the motion), not the absolute target."""

    start: int  # first column of the newest joint_pos_rel frame
    size: int
    to_action: float  # observation units → action units: 1 / (obs term scale · action scale)

    @classmethod
    def for_task(cls, task: TaskCfg, num_joints: int) -> Anchor:
        j, c = num_joints, task.commands.size
        col = 0
        for term, size in zip(task.actor_obs.terms, task.actor_obs.term_sizes(j, c, j), strict=True):
            if term.name == "joint_pos_rel":
                return cls(col + (term.history_length - 1) * size, size, 1.0 / (term.scale * task.action.scale))
            col += size * term.history_length
        raise ValueError(f"task {task.name!r}: residual BC needs joint_pos_rel in the actor observation")

    def of(self, obs: np.ndarray) -> np.ndarray:
        return obs[..., self.start : self.start + self.size] * self.to_action


def build_modules(obs_mean, obs_std, out_mean, out_std, num_actions: int, chunk: int, hidden: tuple[int, ...],
                  anchor: Anchor | None, linear_skip: bool = False, whole_chunk: bool = False):
    """(obs normalizer, MLP, deploy head).

    The MLP maps normalized observations to a normalized chunk (B, chunk·A). The deploy head wraps it:
    normalized observation → the chunk's first action (``whole_chunk``: every action of the chunk,
    (B, chunk, A), for a contract with a chunk field), de-normalized, plus the anchor (the current joints,
    read back from the observation) in residual mode — raw action units, what the ONNX graph returns.
    """
    torch = _torch()
    nn = torch.nn

    def buffer(module, name, value):
        module.register_buffer(name, torch.as_tensor(np.asarray(value), dtype=torch.float32))

    class ObsNormalizer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            buffer(self, "mean", obs_mean)
            buffer(self, "std", obs_std)

        def forward(self, obs):
            return (obs - self.mean) / self.std

    class BCNet(nn.Module):
        """An MLP, plus a linear map of the input when ``linear_skip`` (see BCConfig)."""

        def __init__(self) -> None:
            super().__init__()
            layers: list = []
            width = len(obs_mean)
            for h in hidden:
                layers += [nn.Linear(width, h), nn.ELU()]
                width = h
            layers.append(nn.Linear(width, chunk * num_actions))
            self.mlp = nn.Sequential(*layers)
            self.skip = nn.Linear(len(obs_mean), chunk * num_actions) if linear_skip else None

        def forward(self, x):
            y = self.mlp(x)
            return y if self.skip is None else y + self.skip(x)

    mlp = BCNet()

    class FirstActionHead(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mlp = mlp
            buffer(self, "out_mean", out_mean[:num_actions])
            buffer(self, "out_std", out_std[:num_actions])
            if anchor is not None:
                sl = slice(anchor.start, anchor.start + anchor.size)
                buffer(self, "anchor_mean", obs_mean[sl])
                buffer(self, "anchor_std", obs_std[sl])

        def forward(self, x):
            if whole_chunk:  # out_mean/std are per joint, shared by every step of the chunk
                action = self.mlp(x).reshape(-1, chunk, num_actions) * self.out_std + self.out_mean
            else:
                action = self.mlp(x)[:, :num_actions] * self.out_std + self.out_mean
            if anchor is not None:
                q_obs = x[:, anchor.start : anchor.start + anchor.size] * self.anchor_std + self.anchor_mean
                q_obs = q_obs * anchor.to_action
                action = action + (q_obs[:, None, :] if whole_chunk else q_obs)
            return action

    return ObsNormalizer(), mlp, FirstActionHead()


@dataclass(frozen=True)
class BCResult:
    policy: str
    frames: int
    episodes: int
    chunk: int
    epochs: int
    residual: bool
    train_loss: float
    val_loss: float | None
    train_s: float


def fit_bc(demos: DemoArrays, chunk: int, epochs: int, seed: int, cfg: BCConfig, anchor: Anchor | None = None,
           progress: bool = True, obs_names: tuple[str, ...] | None = None, whole_chunk: bool = False):
    """Train; returns (obs normalizer, deploy head, train loss, val loss or None). Losses are mean squared
    errors of the normalized (residual, with ``anchor``) chunk. ``whole_chunk``: the head returns the chunk
    (see ``build_modules``)."""
    torch = _torch()
    torch.manual_seed(seed)
    # Small MLP, small batches: one thread is faster than the default pool's synchronization (and leaves
    # the machine's other cores alone).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        noise = np.full(demos.obs.shape[1], cfg.obs_noise, dtype=np.float32)
        for term, std in cfg.term_noise if obs_names is not None else ():
            noise[[i for i, name in enumerate(obs_names) if name.split(".")[0].split("[")[0] == term]] = std
        return _fit(torch, demos, chunk, epochs, seed, cfg, anchor, progress, noise, whole_chunk)
    finally:
        torch.set_num_threads(threads)


def _fit(torch, demos: DemoArrays, chunk: int, epochs: int, seed: int, cfg: BCConfig, anchor: Anchor | None,
         progress: bool, noise: np.ndarray, whole_chunk: bool = False):
    rng = np.random.default_rng(seed)
    n, _, n_actions = demos.targets.shape
    if demos.targets.shape[1] != chunk:
        raise ValueError(f"demos were loaded with chunk {demos.targets.shape[1]}, training asked for {chunk}")
    targets = demos.targets - (anchor.of(demos.obs)[:, None, :] if anchor is not None else 0.0)
    targets = targets.reshape(n, chunk * n_actions)
    episodes = np.unique(demos.episode)
    n_val = round(cfg.val_fraction * len(episodes)) if len(episodes) > 2 else 0
    val = np.isin(demos.episode, rng.choice(episodes, size=n_val, replace=False) if n_val else [])
    obs_mean, obs_std = demos.obs[~val].mean(0), np.maximum(demos.obs[~val].std(0), STD_FLOOR)
    # One mean/std per joint, shared by every step of the chunk.
    per_joint = targets[~val].reshape(-1, n_actions)
    out_mean = np.tile(per_joint.mean(0), chunk)
    out_std = np.tile(np.maximum(per_joint.std(0), STD_FLOOR), chunk)
    normalizer, mlp, head = build_modules(obs_mean, obs_std, out_mean, out_std, n_actions, chunk, cfg.hidden, anchor,
                                          cfg.linear_skip, whole_chunk)

    def tensors(mask):
        x = torch.as_tensor((demos.obs[mask] - obs_mean) / obs_std, dtype=torch.float32)
        return x, torch.as_tensor((targets[mask] - out_mean) / out_std, dtype=torch.float32)

    x, y = tensors(~val)
    noise_t = torch.as_tensor(noise)
    optim = torch.optim.AdamW(mlp.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(optim, T_max=max(epochs, 1))
    bar = range(epochs)
    if progress:
        from tqdm import tqdm

        bar = tqdm(bar, desc="bc", unit="epoch")
    train_loss = float("nan")
    for _ in bar:
        perm = torch.randperm(len(x))
        total = 0.0
        for start in range(0, len(x), cfg.batch_size):
            b = perm[start : start + cfg.batch_size]
            xb = x[b]
            xb = xb + noise_t * torch.randn_like(xb)
            loss = torch.nn.functional.mse_loss(mlp(xb), y[b])
            optim.zero_grad()
            loss.backward()
            optim.step()
            total += float(loss.detach()) * len(b)
        sched.step()
        train_loss = total / len(x)
        if progress:
            bar.set_postfix(loss=f"{train_loss:.4f}")
    mlp.eval()
    val_loss = None
    if val.any():
        xv, yv = tensors(val)
        with torch.no_grad():
            val_loss = float(torch.nn.functional.mse_loss(mlp(xv), yv))
    return normalizer, head, train_loss, val_loss


def train_bc(dataset: str, task: str = "panda-push", out: str = "runs/bc", epochs: int = 200, chunk: int = 1,
             seed: int = 0, residual: bool = False, eval_episodes: int = 0,
             eval_simulator: SimulatorName = "mujoco", consume: ChunkConsume = "temporal_ensemble",
             ensemble_m: float = DEFAULT_ENSEMBLE_M) -> int:
    """Train a BC policy on a LeRobot dataset and export ``<out>/policy.onnx`` with the task's contract.

    Args:
        dataset: LeRobot v3 dataset directory (e.g. from ``collect_demos``).
        task: the task the demos are for; sets the observation layout, action and contract.
        out: output directory (policy.onnx, bc.json).
        epochs: passes over the training frames.
        chunk: actions predicted per observation (1: plain BC; > 1: action chunking, the whole chunk exported
            with a ``chunk`` field in the contract, consumed by the controller as ``consume`` says).
        seed: torch / split seed.
        residual: predict the motion relative to the current joints instead of the absolute action (see the
            module docstring for why it is not the default).
        eval_episodes: if > 0, run this many fresh episodes through the deploy runtime and record the success
            rate in the policy's provenance metrics and bc.json.
        eval_simulator: simulator for that evaluation.
        consume: how the deploy controller turns chunks into actions: "temporal_ensemble" (ACT) or
            "first_action" (receding horizon). Ignored for chunk 1.
        ensemble_m: ACT's m in the ensemble weights w_i = exp(−m·i), i = 0 the oldest prediction.
    """
    from robot_rl.policy.contract import ChunkContract, contract_for_task
    from robot_rl.policy.export import collect_provenance, export_onnx

    positive(epochs=epochs, chunk=chunk)
    non_negative(seed=seed, eval_episodes=eval_episodes)
    cfg_task = make_task(task)
    spec = load_robot(cfg_task.robot)
    demos = load_demos(dataset, cfg_task, spec, chunk)
    start = time.perf_counter()
    cfg = BCConfig()
    anchor = Anchor.for_task(cfg_task, spec.num_joints) if residual else None
    chunk_contract = ChunkContract(chunk, consume, float(ensemble_m)) if chunk > 1 else None
    normalizer, head, train_loss, val_loss = fit_bc(demos, chunk, epochs, seed, cfg, anchor,
                                                    obs_names=observation_names(cfg_task, spec),
                                                    whole_chunk=chunk_contract is not None)
    train_s = time.perf_counter() - start
    out_dir = Path(out)
    path = out_dir / "policy.onnx"
    notes = {"algorithm": "bc", "dataset": str(dataset), "chunk": chunk, "epochs": epochs, "residual": residual,
             "hidden": list(cfg.hidden), "obs_noise": cfg.obs_noise,
             "term_noise": dict(cfg.term_noise)}
    if chunk_contract is not None:
        notes |= {"chunk_consume": consume, "ensemble_m": float(ensemble_m)}
    metrics = {"train_loss": train_loss} | ({"val_loss": val_loss} if val_loss is not None else {})

    def export(metrics: dict[str, float]) -> None:
        provenance = collect_provenance(task, seed=seed, iterations=epochs, env_steps=len(demos.obs),
                                        metrics=metrics, notes=notes)
        export_onnx(head, normalizer, contract_for_task(cfg_task, spec, provenance, chunk=chunk_contract), path,
                    seed=seed)

    export(metrics)
    result = BCResult(str(path), len(demos.obs), len(np.unique(demos.episode)), chunk, epochs, residual, train_loss,
                      val_loss, train_s)
    report = asdict(result)
    if eval_episodes > 0:
        from robot_rl.learn.demos import evaluate_push_policy

        summary = evaluate_push_policy(str(path), task, eval_episodes, seed=seed + 10_000, simulator=eval_simulator)
        metrics |= {f"success_rate_{eval_simulator}": summary.success_rate}
        export(metrics)  # again, with the evaluation in the provenance
        report["evaluation"] = asdict(summary)
    (out_dir / "bc.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0
