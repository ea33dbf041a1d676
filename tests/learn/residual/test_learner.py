"""The learner process: fed through the ring, it updates at the update-to-data ratio, publishes weights,
checkpoints and resumes; killed mid-run, the real-time loop carries on with the base on every deadline."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from robot_rl.control.controller import PolicyController
from robot_rl.control.runtime import DeployRuntime
from robot_rl.control.state_machine import ControllerMode
from robot_rl.core.loop_timing import RateLoop
from robot_rl.hardware.sim_robot import SimRobot
from robot_rl.learn.residual.actor import ResidualPolicy
from robot_rl.learn.residual.config import LearnerCfg, ReplayCfg, ResidualCfg, SACCfg
from robot_rl.learn.residual.learner import BUFFER, CHECKPOINT, LearnerProcess, read_checkpoint
from robot_rl.learn.residual.replay import ReplayBuffer
from robot_rl.learn.residual.shared import LearnerStatus
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task

SMALL = dict(residual=ResidualCfg(hidden=(32, 32), sync_every=1, learner_timeout_s=1.0),
             sac=SACCfg(critic_hidden=(32, 32), batch_size=32, utd_ratio=1.0, warmup_transitions=10),
             replay=ReplayCfg(capacity=5000, n_step=3), publish_every_updates=5)


def _feed(learner: LearnerProcess, n: int, rng: np.random.Generator, intervention_every: int = 0) -> None:
    d, a = learner.cfg.state_dim, learner.cfg.action_dim
    for i in range(n):
        end = i % 50 == 49
        learner.ring.write(learner.codec.pack(rng.normal(size=d), np.tanh(rng.normal(size=a)), rng.normal(),
                                              rng.normal(size=d), False, end,
                                              bool(intervention_every and i % intervention_every == 0)))


def _wait_updates(learner: LearnerProcess, n: int, timeout_s: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while learner.status.updates < n and time.monotonic() < deadline:
        assert learner.alive(), (Path(learner.cfg.run_dir) / "learner_error.txt").read_text()
        time.sleep(0.01)
    assert learner.status.updates >= n


def test_learner_trains_publishes_checkpoints_and_resumes(tmp_path):
    cfg = LearnerCfg(state_dim=8, action_dim=2, run_dir=str(tmp_path), **SMALL)
    learner = LearnerProcess(cfg)
    try:
        learner.start()
        assert learner.wait_ready()
        first = np.zeros(learner.board.size, np.float32)
        assert learner.board.poll(0, first) == 2
        _feed(learner, 200, np.random.default_rng(0), intervention_every=10)
        _wait_updates(learner, 190)  # utd 1 × (200 − 10 warmup)
        summary = learner.status.summary()
        assert summary["received"] == 200 and summary["lost"] == 0
        assert summary["prior_transitions"] == 20  # every intervention is replayed from the prior buffer too
        assert learner.stop() == 0
        assert learner.status.state == LearnerStatus.FINISHED
        last = np.zeros(learner.board.size, np.float32)
        assert learner.board.poll(2, last) is not None and not np.array_equal(first, last)
    finally:
        learner.close()
    assert len(ReplayBuffer.load(tmp_path / BUFFER, gamma=cfg.sac.gamma, n_step=3)) == 200
    saved = read_checkpoint(tmp_path)
    np.testing.assert_array_equal(saved["actor_flat"], last)

    resumed = LearnerProcess(LearnerCfg(state_dim=8, action_dim=2, run_dir=str(tmp_path / "again"),
                                        resume_from=str(tmp_path), **SMALL))
    (tmp_path / "again").mkdir()
    try:
        resumed.start()
        assert resumed.wait_ready()
        got = np.zeros(resumed.board.size, np.float32)
        resumed.board.poll(0, got)
        np.testing.assert_array_equal(got, last)  # the resumed actor is the saved one
        _feed(resumed, 1, np.random.default_rng(1))
        _wait_updates(resumed, saved["sac"]["updates"])
        assert resumed.status.summary()["online_transitions"] >= 200  # the old buffer came back
    finally:
        resumed.close()


def test_a_warm_start_takes_the_networks_but_not_the_buffer_or_the_counts(tmp_path):
    """--init-from (e.g. a run in sim before the robot): the new run starts from that residual and those critics,
    counts its own transitions from zero and replays only its own data."""
    source = LearnerProcess(LearnerCfg(state_dim=8, action_dim=2, run_dir=str(tmp_path), **SMALL))
    try:
        source.start()
        assert source.wait_ready()
        _feed(source, 120, np.random.default_rng(0))
        _wait_updates(source, 100)
        assert source.stop() == 0
    finally:
        source.close()
    saved = read_checkpoint(tmp_path)

    (tmp_path / "warm").mkdir()
    warm = LearnerProcess(LearnerCfg(state_dim=8, action_dim=2, run_dir=str(tmp_path / "warm"),
                                     init_from=str(tmp_path), **SMALL))
    try:
        warm.start()
        assert warm.wait_ready()
        got = np.zeros(warm.board.size, np.float32)
        warm.board.poll(0, got)
        np.testing.assert_array_equal(got, saved["actor_flat"])  # the saved residual drives from the first tick
        summary = warm.status.summary()
        assert summary["received"] == 0 and summary["updates"] == 0 and summary["online_transitions"] == 0
        _feed(warm, 30, np.random.default_rng(1))
        _wait_updates(warm, 20)  # utd 1 × (30 − 10 warmup): a fresh run's schedule
        assert warm.stop() == 0
    finally:
        warm.close()
    resumed = read_checkpoint(tmp_path / "warm")
    assert resumed["received"] == 30 and resumed["sac"]["updates"] < saved["sac"]["updates"]


def test_a_broken_checkpoint_is_reported_by_the_learner(tmp_path):
    (tmp_path / CHECKPOINT).write_bytes(b"garbage")
    learner = LearnerProcess(LearnerCfg(state_dim=8, action_dim=2, run_dir=str(tmp_path), resume_from=str(tmp_path),
                                        **SMALL))
    try:
        learner.start()
        assert not learner.wait_ready(timeout_s=60)
        assert "not a readable residual checkpoint" in (tmp_path / "learner_error.txt").read_text()
    finally:
        learner.close()


@pytest.mark.timeout(120)
def test_learner_killed_mid_run_the_real_time_loop_keeps_every_deadline_on_the_base(panda_base, tmp_path):
    spec, task = load_robot("panda"), make_task("panda-reach")
    base = load_policy(panda_base, read_contract(panda_base))
    j = base.contract.num_actions
    learner = LearnerProcess(LearnerCfg(state_dim=base.contract.obs_dim + j, action_dim=j, run_dir=str(tmp_path),
                                        **SMALL))
    robot = SimRobot(spec, "mujoco")
    try:
        learner.start()
        assert learner.wait_ready()
        policy = ResidualPolicy(base, SMALL["residual"], learner.board, learner.status, explore=True)
        runtime = DeployRuntime(spec, PolicyController.for_task(task, spec, policy))
        robot.connect()
        runtime.arm()
        while runtime.mode is not ControllerMode.RUNNING:  # the ramp, in lockstep (not timed)
            robot.write(runtime.step(robot.read(), robot.sim_time()).command)
        _feed(learner, 100, np.random.default_rng(0))  # past the warmup: the learner is training when timing starts
        _wait_updates(learner, 20)

        period = spec.timing.policy_period_s
        ticks = round(3.0 / period)
        kill_at = ticks // 2
        active = np.zeros(ticks, bool)
        versions = np.zeros(ticks, int)
        loop = RateLoop(period)
        with loop.realtime(fifo_priority=50):  # as a deploy on hardware runs (granted to root; else reported)
            for k in range(ticks):
                tick = loop.wait_next()
                if k == kill_at:
                    os.kill(learner.process.pid, signal.SIGKILL)
                state = robot.read()
                result = runtime.step(state, tick.deadline, missed_deadlines=tick.missed)
                robot.write(result.command)
                learner.ring.write(learner.codec.pack(policy.state, policy.unit_residual, 0.0, policy.state,
                                                      False, False, False))
                active[k], versions[k] = policy.residual_active, policy.weights_version
        stats = loop.stats.summary()
        assert stats["ticks"] == ticks and stats["missed_deadlines"] == 0
        assert runtime.mode is ControllerMode.RUNNING and not runtime.chain.faulted
        # It learned and synced while alive (a learner starved of CPU for over a second is treated as stalled:
        # the base drives meanwhile, so allow a few such ticks on a loaded machine).
        assert active[:kill_at].mean() > 0.9 and versions[kill_at - 1] > versions[0]
        timeout_ticks = round(SMALL["residual"].learner_timeout_s / period) + 2
        assert not active[kill_at + timeout_ticks :].any()  # then the base alone, on every remaining tick
        sync = policy.sync_summary()
        assert sync["sync_max_s"] < period  # a weight copy never takes a tick (benchmarks measure it exactly)
        learner.process.join(5)
        assert learner.process.exitcode == -signal.SIGKILL
    finally:
        robot.close()
        learner.close()


def test_an_orphaned_learner_saves_and_exits(tmp_path):
    """Its loop process was killed without a stop request: the learner must not linger (run in-process here,
    with a parent pid that is not its parent's)."""
    from robot_rl.learn.residual.learner import _learner_main

    cfg = LearnerCfg(state_dim=8, action_dim=2, run_dir=str(tmp_path), **SMALL)
    handle = LearnerProcess(cfg)  # only for its shared blocks; nothing is spawned
    try:
        _learner_main(cfg, handle.ring.ref, handle.board.ref, handle.status.ref, parent_pid=-1)
        assert handle.status.state == LearnerStatus.FINISHED
        assert (tmp_path / CHECKPOINT).is_file() and handle.board.version > 0
    finally:
        handle.close()
