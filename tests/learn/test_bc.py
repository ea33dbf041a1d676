"""Behaviour cloning: dataset checks, chunking, and an exported policy that runs in the deploy runtime."""

import json

import numpy as np
import pytest

from robot_rl.control.controller import PolicyController
from robot_rl.control.runtime import DeployRuntime
from robot_rl.control.state_machine import ControllerMode
from robot_rl.hardware.sim_robot import SimRobot
from robot_rl.learn.bc import Anchor, BCConfig, DatasetMismatch, build_modules, fit_bc, load_demos, train_bc
from robot_rl.learn.demos import collect_demos
from robot_rl.policy.contract import contract_for_task
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.robots.spec import load_robot
from robot_rl.tasks import panda_push
from robot_rl.tasks.registry import make_task

PANDA = load_robot("panda")
TASK = make_task("panda-push")


@pytest.fixture(scope="module")
def demos_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("bc") / "demos"
    collect_demos("panda-push", episodes=2, out_dir=str(out), seed=2, progress=False)
    return out


def test_tiny_bc_exports_a_policy_that_loads_with_its_contract_and_runs_in_the_runtime(demos_dir, tmp_path):
    out = tmp_path / "bc"
    assert train_bc(str(demos_dir), out=str(out), epochs=3, chunk=2, seed=0) == 0
    path = out / "policy.onnx"
    contract = read_contract(path)
    assert contract.provenance.task == "panda-push" and contract.normalizer_baked_in
    assert contract.provenance.notes["algorithm"] == "bc" and contract.provenance.notes["chunk"] == 2
    policy = load_policy(path, contract_for_task(TASK, PANDA))  # raises on any contract mismatch
    report = json.loads((out / "bc.json").read_text())
    assert report["episodes"] == 2 and report["chunk"] == 2

    runtime = DeployRuntime(PANDA, PolicyController.for_task(TASK, PANDA, policy))
    episode = panda_push.sample_episode(np.random.default_rng(0))
    runtime.set_command(episode.command)
    runtime.arm()
    running = 0
    with SimRobot(PANDA, "mujoco", scene=panda_push.push_scene(episode.cube_xy)) as robot:
        runtime.observe_objects(robot)  # the cube: the task's observation source is the scene
        while running < 50:
            result = runtime.step(robot.read(), robot.sim_time())
            robot.write(result.command)
            assert result.mode is not ControllerMode.DAMPING, runtime.diagnostics()
            running += result.mode is ControllerMode.RUNNING
    assert runtime.diagnostics()["safety"]["faults"] == {}
    assert np.all(np.isfinite(runtime.controller.last_raw_action))


def test_chunk_targets_are_the_next_actions_padded_with_the_last(demos_dir):
    one = load_demos(demos_dir, TASK, PANDA, chunk=1)
    four = load_demos(demos_dir, TASK, PANDA, chunk=4)
    n = len(one.obs)
    assert four.targets.shape == (n, 4, PANDA.num_joints) and one.targets.shape == (n, 1, PANDA.num_joints)
    first_episode = np.flatnonzero(one.episode == 0)
    last = first_episode[-1]
    np.testing.assert_array_equal(four.targets[0, 2], one.targets[2, 0])  # frame 0's third = frame 2's own
    np.testing.assert_array_equal(four.targets[last, 3], one.targets[last, 0])  # past the end: the last action
    np.testing.assert_array_equal(four.targets[last - 1, 1], one.targets[last, 0])


def test_chunked_network_predicts_k_actions_and_the_deploy_head_returns_the_first():
    import torch

    obs_dim, k, a = 12, 5, 7
    ones = np.ones(obs_dim, dtype=np.float32)
    out_mean, out_std = np.arange(k * a, dtype=np.float32), np.full(k * a, 2.0, dtype=np.float32)
    _, net, head = build_modules(np.zeros(obs_dim), ones, out_mean, out_std, a, k, (16,), None)
    x = torch.randn(3, obs_dim)
    chunk = net(x)
    assert chunk.shape == (3, k * a)
    torch.testing.assert_close(head(x), chunk[:, :a] * 2.0 + torch.as_tensor(out_mean[:a]))


def test_residual_head_adds_the_current_joints_back(demos_dir):
    """Residual mode: the network's output is the motion; the exported head returns absolute actions."""
    import torch

    demos = load_demos(demos_dir, TASK, PANDA, chunk=1)
    anchor = Anchor.for_task(TASK, PANDA.num_joints)
    np.testing.assert_allclose(anchor.of(demos.obs) * TASK.action.scale, demos.obs[:, :7], rtol=1e-6)
    normalizer, head, _, _ = fit_bc(demos, 1, 1, 0, BCConfig(hidden=(8,)), anchor, progress=False)
    with torch.no_grad():
        for p in head.mlp.parameters():
            p.zero_()  # no motion predicted …
        out = head(normalizer(torch.as_tensor(demos.obs[:5]))).numpy()
    mean = head.out_mean.numpy()
    np.testing.assert_allclose(out, anchor.of(demos.obs[:5]) + mean, atol=1e-5)  # … the anchor plus the mean


def test_a_dataset_for_another_observation_layout_is_refused(demos_dir):
    import dataclasses

    from robot_rl.tasks.observations import ObservationLayout, ObsTerm

    other = dataclasses.replace(TASK, actor_obs=ObservationLayout(terms=(ObsTerm("object_pos"), *TASK.actor_obs.terms)))
    with pytest.raises(DatasetMismatch, match=r"observation.state"):
        load_demos(demos_dir, other, PANDA)
    with pytest.raises(ValueError, match="chunk"):
        load_demos(demos_dir, TASK, PANDA, chunk=0)
