"""The learner: its own process, fed by the loop's transition ring, publishing actor weights.

    loop process                                 learner process (spawned: a fresh interpreter)
    ResidualPolicy ── TransitionRing (shm) ───►  n-step fold → online buffer (+ prior, interventions)
          ▲                                      SAC updates, utd_ratio per transition
          └──────── WeightBoard (shm) ◄────────  actor weights, every publish_every_updates
                    LearnerStatus (shm) ◄──────  heartbeat, counters, state; the loop's stop request

The learner never blocks the loop and the loop never waits on the learner (except, by choice, a lockstep
simulation pacing itself to the configured update-to-data ratio). If the learner dies or stalls, its
heartbeat stops and the loop's actor drives the base policy alone.

Spawned, not forked: forking a process that holds MuJoCo, onnxruntime and DDS threads copies their locks in
whatever state they were; a spawned learner imports only what it needs (torch, numpy).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from pathlib import Path

import numpy as np

from robot_rl.learn.residual.config import LearnerCfg
from robot_rl.learn.residual.networks import actor_layout, layout_size
from robot_rl.learn.residual.replay import MixedSampler, NStepFolder, ReplayBuffer, StepCodec
from robot_rl.learn.residual.shared import BlockRef, LearnerStatus, TransitionRing, WeightBoard

CHECKPOINT = "checkpoint.pt"
BUFFER = "buffer.npz"
ERROR_LOG = "learner_error.txt"
UPDATE_CHUNK = 4  # updates between ring reads / heartbeats (tens of ms on 2 cores)


def _learner_main(cfg: LearnerCfg, ring_ref: BlockRef, board_ref: BlockRef, status_ref: BlockRef,
                  parent_pid: int) -> None:
    status = LearnerStatus.attach(status_ref)
    status.beat()
    try:
        _run(cfg, TransitionRing.attach(ring_ref), WeightBoard.attach(board_ref), status, parent_pid)
        status.cells[LearnerStatus.STATE] = LearnerStatus.FINISHED
    except BaseException:
        if cfg.run_dir is not None:  # whole, and before the state: the loop reads it as soon as it sees FAILED
            tmp = Path(cfg.run_dir, ERROR_LOG + ".tmp")
            tmp.write_text(traceback.format_exc())
            tmp.replace(tmp.with_name(ERROR_LOG))
        status.cells[LearnerStatus.STATE] = LearnerStatus.FAILED
        raise


def _run(cfg: LearnerCfg, ring: TransitionRing, board: WeightBoard, status: LearnerStatus, parent_pid: int) -> None:
    import torch

    from robot_rl.learn.residual.sac import SAC

    torch.set_num_threads(cfg.torch_threads)
    sac_cfg, rep = cfg.sac, cfg.replay
    sac = SAC(sac_cfg, cfg.state_dim, cfg.action_dim, cfg.residual.hidden, seed=cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    codec = StepCodec(cfg.state_dim, cfg.action_dim)
    folder = NStepFolder(rep.n_step, sac_cfg.gamma)
    online = ReplayBuffer(rep.capacity, cfg.state_dim, cfg.action_dim)
    prior = ReplayBuffer(rep.capacity, cfg.state_dim, cfg.action_dim)
    if rep.prior_path is not None:
        prior = ReplayBuffer.load(rep.prior_path, gamma=sac_cfg.gamma, n_step=rep.n_step, capacity=rep.capacity)
    received = 0
    if cfg.resume_from is not None:
        received = _resume(cfg, sac, online)
        status.cells[LearnerStatus.RECEIVED], status.cells[LearnerStatus.UPDATES] = received, sac.updates
    elif cfg.init_from is not None:
        data = _checked_checkpoint(cfg, cfg.init_from)
        sac.load_weights(data["sac"], str(cfg.init_from))
        sac.set_anchor()  # the start (a sim run, a calibrated start): what anchor_penalty pulls towards
    sampler = MixedSampler(online, prior, rep.prior_fraction)
    board.publish(sac.actor.flat_params())
    status.cells[LearnerStatus.STATE] = LearnerStatus.RUNNING
    run_dir = None if cfg.run_dir is None else Path(cfg.run_dir)
    since_publish = since_checkpoint = 0
    while not status.stop_requested:
        if os.getppid() != parent_pid:
            break  # the loop's process died without asking us to stop (killed): save and exit, don't linger
        status.beat()
        received += ingest(ring.read(), codec, folder, online, prior)
        c = status.cells
        c[LearnerStatus.RECEIVED], c[LearnerStatus.LOST] = received, ring.lost
        c[LearnerStatus.ONLINE], c[LearnerStatus.PRIOR] = len(online), len(prior)
        due = int(sac_cfg.utd_ratio * (received - sac_cfg.warmup_transitions)) - sac.updates
        if due <= 0 or len(online) == 0:
            time.sleep(0.001)
            continue
        for _ in range(min(due, UPDATE_CHUNK)):
            info = sac.update(sampler.sample(rng, sac_cfg.batch_size))
            since_publish += 1
            since_checkpoint += 1
        c[LearnerStatus.UPDATES], c[LearnerStatus.CRITIC_LOSS], c[LearnerStatus.ALPHA] = (
            sac.updates, info["critic_loss"], sac.alpha)
        if since_publish >= cfg.publish_every_updates:
            board.publish(sac.actor.flat_params())
            since_publish = 0
        if run_dir is not None and since_checkpoint >= cfg.checkpoint_every_updates:
            save_checkpoint(run_dir / CHECKPOINT, cfg, sac, received)
            since_checkpoint = 0
    received += ingest(ring.read(), codec, folder, online, prior)  # what the loop wrote before it asked to stop
    status.cells[LearnerStatus.RECEIVED], status.cells[LearnerStatus.ONLINE] = received, len(online)
    board.publish(sac.actor.flat_params())
    status.cells[LearnerStatus.UPDATES] = sac.updates
    if run_dir is not None:
        save_checkpoint(run_dir / CHECKPOINT, cfg, sac, received)
        online.save(run_dir / BUFFER, gamma=sac_cfg.gamma, n_step=rep.n_step)


def ingest(rows: np.ndarray, codec: StepCodec, folder: NStepFolder, online: ReplayBuffer, prior: ReplayBuffer) -> int:
    """Fold ring rows into n-step transitions: all go online; those a person made also go to the prior buffer
    (HIL-SERL: their corrections keep being replayed at the prior's share of every batch). Returns len(rows)."""
    for row in rows:
        for item in folder.add(codec.unpack(row)):
            online.add(item)
            if item["intervention"]:
                prior.add(item)
    return len(rows)


def save_checkpoint(path: Path, cfg: LearnerCfg, sac, received: int) -> None:
    import torch

    tmp = path.with_name(path.name + ".tmp")
    torch.save({"sac": sac.state_dict(), "received": received, "state_dim": cfg.state_dim,
                "action_dim": cfg.action_dim, "actor_hidden": cfg.residual.hidden,
                "actor_flat": sac.actor.flat_params()}, tmp)
    tmp.replace(path)


def read_checkpoint(path: str | Path) -> dict:
    """A learner checkpoint (trusted: written by this code), with a clear error for anything else."""
    import torch

    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT
    if not path.is_file():
        raise FileNotFoundError(f"residual checkpoint {path} does not exist")
    try:
        data = torch.load(path, weights_only=False, map_location="cpu")
    except Exception as exc:  # torch raises many types for a file that is not a checkpoint
        raise ValueError(f"{path} is not a readable residual checkpoint ({type(exc).__name__})") from None
    if not isinstance(data, dict) or "sac" not in data:
        raise ValueError(f"{path} is not a residual checkpoint (no 'sac' entry)")
    return data


def _checked_checkpoint(cfg: LearnerCfg, path: str) -> dict:
    data = read_checkpoint(path)
    dims = (data["state_dim"], data["action_dim"], tuple(data["actor_hidden"]))
    if dims != (cfg.state_dim, cfg.action_dim, cfg.residual.hidden):
        raise ValueError(f"checkpoint {path}: residual (state, action, hidden) {dims} differs from this "
                         f"run's {(cfg.state_dim, cfg.action_dim, cfg.residual.hidden)} (the state is observation + "
                         f"base action: was it trained for another policy, or with the removed --history?)")
    return data


def _resume(cfg: LearnerCfg, sac, online: ReplayBuffer) -> int:
    data = _checked_checkpoint(cfg, cfg.resume_from)
    sac.load_state_dict(data["sac"], str(cfg.resume_from))
    buffer = Path(cfg.resume_from)
    buffer = (buffer if buffer.is_dir() else buffer.parent) / BUFFER
    if buffer.is_file():
        old = ReplayBuffer.load(buffer, gamma=cfg.sac.gamma, n_step=cfg.replay.n_step)
        for i in range(len(old)):
            online.add({k: v[i] for k, v in old.data.items()})
    return int(data["received"])


class LearnerProcess:
    """The loop side's handle: creates the shared blocks, spawns the learner, stops or kills it."""

    def __init__(self, cfg: LearnerCfg, ring_capacity: int = 1 << 14):  # ≈ 5 min at 50 Hz of slack
        self.cfg = cfg
        self.codec = StepCodec(cfg.state_dim, cfg.action_dim)
        self.ring = TransitionRing(self.codec.width, ring_capacity)
        self.board = WeightBoard(layout_size(actor_layout(cfg.state_dim, cfg.action_dim, cfg.residual.hidden)))
        self.status = LearnerStatus()
        self.process: mp.process.BaseProcess | None = None

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        self.process = ctx.Process(target=_learner_main, name="residual-learner", daemon=True,
                                   args=(self.cfg, self.ring.ref, self.board.ref, self.status.ref, os.getpid()))
        self.process.start()

    def wait_ready(self, timeout_s: float = 60.0) -> bool:
        """Block (outside the control loop) until the learner published its first weights."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.board.version > 0:
                return True
            if self.status.state == LearnerStatus.FAILED or not self.alive():
                return False
            time.sleep(0.01)
        return False

    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """Ask the learner to save and exit; kill it if it does not within ``timeout_s``. Its exit code."""
        if self.process is None:
            return None
        self.status.request_stop()
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5.0)
        return self.process.exitcode

    def close(self) -> None:
        if self.process is not None and self.process.is_alive():
            self.stop()
        for block in (self.ring, self.board, self.status):
            block.close()
