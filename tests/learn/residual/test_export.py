"""Base + residual as one ONNX policy: the base's contract, the numpy actor's outputs, the bound kept."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.control.controller import PolicyController
from robot_rl.control.runtime import DeployRuntime
from robot_rl.control.state_machine import ControllerMode
from robot_rl.hardware.sim_robot import SimRobot
from robot_rl.learn.residual.actor import ResidualPolicy, residual_bound
from robot_rl.learn.residual.config import ResidualCfg
from robot_rl.learn.residual.export import export_residual, history_index, sequence_observations
from robot_rl.policy.contract import PolicyContract, check_contract, contract_for_task
from robot_rl.policy.onnx_policy import ContractMismatch, PolicyLoadError, load_policy, read_contract
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.observations import ObservationLayout, ObsTerm
from robot_rl.tasks.registry import make_task

CFG = ResidualCfg(fraction=0.15, hidden=(24, 16))



def _policy(base_path) -> ResidualPolicy:
    return ResidualPolicy(load_policy(base_path, read_contract(base_path)), CFG)


def test_composed_policy_loads_with_the_base_contract_and_matches_the_loop(panda_base, tmp_path):
    policy = _policy(panda_base)
    flat = np.random.default_rng(0).normal(0.0, 0.5, policy.actor.flat.shape).astype(np.float32)
    policy.load_weights(flat)
    path = export_residual(panda_base, flat, CFG, tmp_path / "residual.onnx", notes={"transitions": 123})
    base_contract = read_contract(panda_base)
    composed = load_policy(path, base_contract)  # the runtime's loader, the base's contract
    notes = composed.contract.provenance.notes["residual"]
    assert notes["transitions"] == 123 and notes["alpha_raw"] == pytest.approx(residual_bound(base_contract, 0.15))
    obs = np.random.default_rng(1).normal(0.0, 2.0, (32, 1, base_contract.obs_dim)).astype(np.float32)
    for o in obs:
        np.testing.assert_allclose(composed.act(o), policy.act(o), rtol=1e-5, atol=1e-5)  # what the loop ran


def test_composed_policy_keeps_the_bound_under_poisoned_weights(panda_base, tmp_path):
    policy = _policy(panda_base)
    base = load_policy(panda_base, read_contract(panda_base))
    alpha = residual_bound(base.contract, CFG.fraction)
    obs = np.random.default_rng(2).normal(0.0, 3.0, (16, base.contract.obs_dim)).astype(np.float32)
    for i, poison in enumerate((1e30, np.nan)):
        flat = np.full(policy.actor.flat.shape, poison, np.float32)
        path = export_residual(panda_base, flat, CFG, tmp_path / f"poisoned{i}.onnx")
        got = load_policy(path, base.contract).act_batch(obs)
        diff = got - base.act_batch(obs)
        assert np.all(np.isfinite(got)) and np.all(np.abs(diff) <= alpha * (1 + 1e-6))
        if np.isnan(poison):
            np.testing.assert_array_equal(diff, 0.0)  # NaN residual → the base alone, as in the loop


def test_an_edited_composed_file_is_refused(panda_base, tmp_path):
    policy = _policy(panda_base)
    path = export_residual(panda_base, np.zeros_like(policy.actor.flat), CFG, tmp_path / "r.onnx")
    data = bytearray(path.read_bytes())
    at = data.find(b"residual/mean.weight")
    data[at - 40] ^= 0xFF  # flip a byte near the residual's weights
    path.write_bytes(bytes(data))
    with pytest.raises(PolicyLoadError):
        load_policy(path, read_contract(panda_base))


# -- a residual with history: the past travels in the observation -------------------------------------------


def test_history_index_cuts_each_past_base_observation_out_of_the_longer_one():
    """Pure: a layout whose terms already keep 1–3 frames; every age's rows must be the base's observation
    of that tick (the first one for ticks before the episode, as a restart fills the history)."""

    task = make_task("a1-flat")
    layout = ObservationLayout((ObsTerm("base_ang_vel", history_length=3), ObsTerm("joint_pos_rel"),
                                ObsTerm("last_action", history_length=2)))
    base = PolicyContract.expected_from(load_robot("a1"), layout, task.commands, task.action)
    for history in (2, 4):
        composed = base.with_more_history(history - 1)
        assert [t.history_length for t in composed.observation.terms] == [3 + history - 1, history, 1 + history]
        base_obs, obs = sequence_observations(base, composed, 9, np.random.default_rng(history))
        index = history_index(base, history)
        for now in range(9):
            for age in range(history):
                np.testing.assert_array_equal(obs[now][index[age]], base_obs[max(now - age, 0)])


def test_a_composed_residual_with_history_drives_like_the_loops_actor(panda_base, tmp_path):
    """The exported file (H = 3), loaded by DeployRuntime.load as a user deploys it, against the numpy actor
    in the fine-tuning loop's runtime: the same commands on every tick of a real MuJoCo episode, a restart
    (ramp) in the middle included."""

    cfg = ResidualCfg(fraction=0.15, hidden=(24, 16), history=3)
    base = load_policy(panda_base, read_contract(panda_base))
    actor = ResidualPolicy(base, cfg)
    flat = np.random.default_rng(3).normal(0.0, 0.3, actor.actor.flat.shape).astype(np.float32)
    actor.load_weights(flat)
    path = export_residual(panda_base, flat, cfg, tmp_path / "history.onnx")
    written = read_contract(path)
    assert written.provenance.notes["residual"]["history"] == 3
    assert [t.history_length for t in written.observation.terms] == [3] * len(written.observation.terms)
    with pytest.raises(ContractMismatch, match="history_length"):  # not a plain reach policy: refused as one
        check_contract(written, contract_for_task(make_task("panda-reach")))

    spec, task = load_robot("panda"), make_task("panda-reach")
    deployed = DeployRuntime.load("panda", path)
    looped = DeployRuntime(spec, PolicyController.for_task(task, spec, actor))
    robot = SimRobot(spec, "mujoco")
    robot.connect()
    try:
        compared = 0
        for _episode in range(2):
            for rt in (deployed, looped):
                rt.stop()
                rt.set_command(np.array([0.5, 0.1, 0.4]))
                rt.arm()
            for _ in range(400):
                state, now = robot.read(), robot.sim_time()
                sent = looped.step(state, now).command
                other = deployed.step(state, now).command
                np.testing.assert_allclose(other.q_target, sent.q_target, atol=2e-5)
                compared += looped.mode is ControllerMode.RUNNING
                robot.write(sent)
        assert compared > 400  # both episodes reached RUNNING and ran the policy
    finally:
        robot.close()


def test_a_base_with_a_fixed_batch_is_refused_for_a_residual_with_history(panda_base):
    import onnx

    from robot_rl.learn.residual.export import check_batch_dimension
    from robot_rl.policy.export import ExportError

    graph = onnx.load(str(panda_base)).graph
    check_batch_dimension(graph, 3)  # ours: a dynamic batch
    graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    with pytest.raises(ExportError, match="fixed batch of 1"):
        check_batch_dimension(graph, 3)
