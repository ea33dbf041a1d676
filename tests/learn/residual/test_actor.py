"""The in-loop actor: the residual bound under adversarial weights, the safety chain around the sum,
interventions, weight sync and the fall back to the base when the learner goes silent."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.control.controller import PolicyController
from robot_rl.control.runtime import DeployRuntime
from robot_rl.control.state_machine import ControllerMode
from robot_rl.hardware.sim_robot import SimRobot
from robot_rl.learn.residual.actor import ResidualPolicy, residual_bound
from robot_rl.learn.residual.config import ResidualCfg
from robot_rl.learn.residual.shared import LearnerStatus, WeightBoard
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task

CFG = ResidualCfg(fraction=0.1, hidden=(16, 16), sync_every=1, learner_timeout_s=0.5)


@pytest.fixture
def base(panda_base):
    return load_policy(panda_base, read_contract(panda_base))


def _observations(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 3.0, (n, 1, dim)).astype(np.float32)


@pytest.mark.parametrize("poison", [1e30, -1e30, np.inf, -np.inf, np.nan, "random_huge"])
def test_residual_stays_within_its_bound_whatever_the_network_outputs(base, poison):
    policy = ResidualPolicy(base, CFG, explore=True)
    alpha = residual_bound(base.contract, CFG.fraction)
    assert alpha == pytest.approx(0.1 * base.contract.action.clip)
    flat = (np.random.default_rng(1).normal(0, 1e6, policy.actor.flat.shape) if poison == "random_huge"
            else np.full(policy.actor.flat.shape, poison))
    policy.load_weights(flat.astype(np.float32))
    for obs in _observations(50, base.contract.obs_dim):
        action = policy.act(obs).copy()
        base_action = base.act(obs).copy()
        assert np.all(np.isfinite(action))
        assert np.all(np.abs(action - base_action) <= alpha * (1 + 1e-6))
    if poison is np.nan:
        assert policy.stats["nonfinite_residuals"] == 50  # NaN residual → the base alone, counted
        np.testing.assert_array_equal(policy.unit_residual, 0.0)


def _running_runtime(spec, task, policy) -> tuple[DeployRuntime, SimRobot, np.ndarray]:
    """Armed and ramped to RUNNING; also the last target sent (the rate limiter's reference)."""
    runtime = DeployRuntime(spec, PolicyController.for_task(task, spec, policy))
    robot = SimRobot(spec, "mujoco")
    robot.connect()
    runtime.arm()
    while runtime.mode is not ControllerMode.RUNNING:
        sent = runtime.step(robot.read(), robot.sim_time()).command
        robot.write(sent)
    return runtime, robot, sent.q_target.copy()


def test_the_safety_chain_wraps_base_plus_residual(base):
    spec, task = load_robot("panda"), make_task("panda-reach")
    policy = ResidualPolicy(base, CFG)
    runtime, robot, last_sent = _running_runtime(spec, task, policy)
    try:
        # A residual saturated at +α on every joint from one tick to the next: 0.2 rad at once, far over the
        # chain's 2 rad/s × 20 ms step. The chain must see the sum and rate-limit it.
        flat = np.zeros_like(policy.actor.flat)
        bias = policy.actor.layout.index(("mean.bias", (policy.action_dim,)))
        start = sum(int(np.prod(s)) for _, s in policy.actor.layout[:bias])
        flat[start : start + policy.action_dim] = 50.0
        policy.load_weights(flat)
        state = robot.read()
        result = runtime.step(state, robot.sim_time())
        np.testing.assert_allclose(runtime.controller.last_raw_action,
                                   policy.base_action + residual_bound(base.contract, CFG.fraction), rtol=1e-6)
        expected = spec.default_positions + task.action.scale * np.clip(runtime.controller.last_raw_action,
                                                                        -task.action.clip, task.action.clip)
        np.testing.assert_allclose(result.proposed.q_target, expected, rtol=1e-6)
        assert "rate_limit" in {e.filter_name for e in result.events}
        step = np.abs(result.command.q_target - last_sent)
        assert np.all(step <= spec.safety.max_target_rate_rad_s * spec.timing.policy_period_s + 1e-9)
        # A person's non-finite action is the same: the chain's finite check faults and the robot damps.
        policy.override = np.full(policy.action_dim, np.nan)
        robot.write(runtime.step(robot.read(), robot.sim_time()).command)
        assert runtime.mode is ControllerMode.DAMPING and runtime.chain.faulted
    finally:
        robot.close()


def test_intervention_records_the_residual_that_would_have_produced_it(base):
    policy = ResidualPolicy(base, CFG)
    alpha = residual_bound(base.contract, CFG.fraction)
    obs = _observations(1, base.contract.obs_dim)[0]
    base_action = base.act(obs).copy()
    human = base_action + np.linspace(-3 * alpha, 3 * alpha, policy.action_dim)
    policy.override = human.astype(np.float32)
    out = policy.act(obs)
    np.testing.assert_allclose(out, human, rtol=1e-6)  # the person's action is what is sent
    np.testing.assert_allclose(policy.unit_residual, np.clip(np.linspace(-3, 3, policy.action_dim), -1, 1), atol=1e-5)
    assert policy.intervened


def test_weights_sync_from_the_board_and_the_base_drives_when_the_learner_goes_silent(base):
    board, status = WeightBoard(ResidualPolicy(base, CFG).actor.flat.size), LearnerStatus()
    try:
        policy = ResidualPolicy(base, CFG, board, status)
        obs = _observations(1, base.contract.obs_dim)[0]
        policy.act(obs)
        assert not policy.residual_active  # no weights yet: the base alone
        status.cells[LearnerStatus.STATE] = LearnerStatus.RUNNING
        status.beat()
        board.publish(np.full(policy.actor.flat.size, 0.01, np.float32))
        policy.act(obs)
        assert policy.residual_active and policy.weights_version == 2 and policy.stats["syncs"] == 1
        assert np.any(policy.unit_residual != 0)
        status.cells[LearnerStatus.HEARTBEAT] -= 10.0  # the learner has been silent for 10 s
        out = policy.act(obs)
        assert not policy.residual_active and policy.stats["fallback_ticks"] == 1
        np.testing.assert_array_equal(out, base.act(obs))
        status.beat()  # it comes back
        policy.act(obs)
        assert policy.residual_active
    finally:
        board.close()
        status.close()


def test_holding_weights_scores_one_iterate_and_still_watches_the_learner(base):
    """Inside ``holding_weights`` (an evaluation) newer weights wait; a silent learner still turns the residual off."""
    board, status = WeightBoard(ResidualPolicy(base, CFG).actor.flat.size), LearnerStatus()
    try:
        policy = ResidualPolicy(base, CFG, board, status)
        obs = _observations(1, base.contract.obs_dim)[0]
        status.cells[LearnerStatus.STATE] = LearnerStatus.RUNNING
        status.beat()
        board.publish(np.full(policy.actor.flat.size, 0.01, np.float32))
        with policy.holding_weights():  # not polled by a tick yet: entering syncs the latest weights first
            assert policy.weights_version == 2
        held = policy.actor.flat.copy()
        with policy.holding_weights():
            board.publish(np.full(policy.actor.flat.size, 0.02, np.float32))
            for _ in range(3 * CFG.sync_every):
                policy.act(obs)
            assert policy.weights_version == 2 and policy.residual_active
            np.testing.assert_array_equal(policy.actor.flat, held)
            status.cells[LearnerStatus.HEARTBEAT] -= 10.0  # the learner falls silent mid-evaluation
            for _ in range(CFG.sync_every):
                out = policy.act(obs)
            assert not policy.residual_active
            np.testing.assert_array_equal(out, base.act(obs))
        status.beat()
        for _ in range(CFG.sync_every):
            policy.act(obs)
        assert policy.weights_version == 4 and policy.residual_active  # after it: the newer weights
    finally:
        board.close()
        status.close()


