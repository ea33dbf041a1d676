"""Episodes through the runtime: state-machine resets, transitions, safety stops, interventions."""

from __future__ import annotations

from itertools import pairwise
from types import SimpleNamespace

import numpy as np
import pytest

from robot_rl.control.controller import PolicyController
from robot_rl.control.runtime import DeployRuntime
from robot_rl.control.state_machine import ControllerMode
from robot_rl.learn.residual.actor import ResidualPolicy
from robot_rl.learn.residual.config import ResidualCfg
from robot_rl.learn.residual.episodes import EpisodeCfg, EpisodeLoop
from robot_rl.learn.residual.interventions import HumanInput, ScriptedIntervention
from robot_rl.learn.residual.learner import ingest
from robot_rl.learn.residual.replay import NStepFolder, ReplayBuffer
from robot_rl.learn.residual.rewards import StateReward
from robot_rl.learn.residual.shared import TransitionRing
from robot_rl.learn.residual.shifted_sim import RealityShift, ShiftedSimRobot
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task

CFG = ResidualCfg(fraction=0.1, hidden=(16, 16))
LENGTH_S = 0.5
TICKS = 25


@pytest.fixture
def setup(panda_base):
    spec, task = load_robot("panda"), make_task("panda-reach")
    policy = ResidualPolicy(load_policy(panda_base, read_contract(panda_base)), CFG, explore=True)
    policy.load_weights(np.random.default_rng(0).normal(0, 0.3, policy.actor.flat.shape).astype(np.float32))
    runtime = DeployRuntime(spec, PolicyController.for_task(task, spec, policy))
    robot = ShiftedSimRobot(spec, RealityShift(kp_scale=0.6, payload_kg=1.0, latency_steps=1))
    robot.connect()
    ring = TransitionRing(2 * policy.state_dim + policy.action_dim + 4, 4096)
    yield SimpleNamespace(spec=spec, task=task, policy=policy, runtime=runtime, robot=robot, ring=ring)
    robot.close()
    ring.close()


def _loop(s, intervention=None) -> EpisodeLoop:
    return EpisodeLoop(s.runtime, s.robot, s.policy, StateReward(s.task, s.spec), EpisodeCfg(length_s=LENGTH_S),
                       realtime=False, write=s.ring.write, intervention=intervention)


def test_episodes_reset_through_the_state_machine_and_write_one_transition_per_tick(setup):
    s = setup
    loop = _loop(setup)
    target = np.array([0.5, 0.0, 0.4])
    first = loop.run_episode(target, explore=True, learn=True)
    second = loop.run_episode(target, explore=False, learn=False)
    assert first.ended_by == second.ended_by == "time_limit"
    assert first.ticks == TICKS and first.transitions == TICKS - 1  # the first tick only opens a transition
    assert second.transitions == 0
    modes = [m for _, m in s.runtime.mode_changes]
    assert modes == ["damping", "passive", "ramp", "running"] * 2  # stop → reset → arm → ramp, every episode
    rows = TransitionRing.attach(s.ring.ref).read()
    codec = loop.codec
    steps = [codec.unpack(r) for r in rows]
    assert len(steps) == TICKS - 1 and [s.end for s in steps] == [False] * (TICKS - 2) + [True]
    assert not any(s.terminal for s in steps)  # a time limit is a truncation
    for a, b in pairwise(steps):
        np.testing.assert_array_equal(a.next_state, b.state)  # transitions chain
    assert np.all(np.abs([s.action for s in steps]) <= 1.0)
    assert first.episode_return == pytest.approx(sum(s.reward for s in steps), rel=1e-5)
    assert second.final_tip_error_m is not None and second.tail_tip_error_m is not None


def test_training_episodes_can_be_shorter_than_evaluation_ones(setup):
    """train_length_s shortens learning episodes only (more resets per transition budget); evaluation keeps the
    task's length, and the shortened episode still ends as a truncation (the critics bootstrap through it)."""
    s = setup
    loop = EpisodeLoop(s.runtime, s.robot, s.policy, StateReward(s.task, s.spec),
                       EpisodeCfg(length_s=LENGTH_S, train_length_s=0.2), realtime=False, write=s.ring.write)
    target = np.array([0.5, 0.0, 0.4])
    train = loop.run_episode(target, explore=True, learn=True)
    evaluation = loop.run_episode(target, explore=False, learn=False)
    assert train.ended_by == evaluation.ended_by == "time_limit"
    assert (train.ticks, train.transitions) == (10, 9)
    assert evaluation.ticks == TICKS
    steps = [loop.codec.unpack(r) for r in TransitionRing.attach(s.ring.ref).read()]
    assert len(steps) == 9 and steps[-1].end and not any(step.terminal for step in steps)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="train_length_s must be positive"):
            EpisodeCfg(length_s=LENGTH_S, train_length_s=bad)


def test_a_safety_stop_ends_the_episode_cleanly_and_the_next_one_rearms(setup):
    s = setup
    bad = ScriptedIntervention(lambda state, cmd, k: HumanInput(action=np.full(7, np.nan)) if k == 10 else HumanInput())
    loop = _loop(setup, bad)
    target = np.array([0.5, 0.0, 0.4])
    result = loop.run_episode(target, explore=True, learn=True)
    assert result.ended_by == "safety_stop" and result.ticks == 11
    steps = [loop.codec.unpack(r) for r in TransitionRing.attach(s.ring.ref).read()]
    assert len(steps) == 10 and steps[-1].end and not steps[-1].terminal
    assert s.runtime.mode is ControllerMode.DAMPING and s.runtime.chain.faulted
    again = _loop(setup).run_episode(target, explore=True, learn=True)  # acknowledged, re-armed, ramped
    assert again.ended_by == "time_limit" and not s.runtime.chain.faulted


def test_interventions_are_recorded_and_replayed_into_the_prior_buffer(setup):
    s = setup
    offset = np.linspace(-0.2, 0.2, 7)  # raw action units; α = 0.4 here

    def person(state, cmd, k):
        if 5 <= k < 15:
            return HumanInput(action=offset_target(state))
        return HumanInput(success=k == 20)

    def offset_target(state):  # the person asks for the measured pose plus an offset, in raw action units
        return (state.q - s.spec.default_positions) / s.task.action.scale + offset

    loop = _loop(setup, ScriptedIntervention(person))
    result = loop.run_episode(np.array([0.5, 0.0, 0.4]), explore=True, learn=True)
    assert result.ended_by == "success" and result.interventions == 10
    rows = TransitionRing.attach(s.ring.ref).read()
    steps = [loop.codec.unpack(r) for r in rows]
    flagged = [i for i, step in enumerate(steps) if step.intervention]
    assert flagged == list(range(5, 15))  # transition k carries tick k's action
    assert steps[-1].terminal and steps[-1].reward > 5.0  # the success bonus, no bootstrap
    for step in steps:
        assert np.all(np.abs(step.action) <= 1.0)
    d = s.policy.state_dim
    folder, online, prior = NStepFolder(3, 0.97), ReplayBuffer(100, d, 7), ReplayBuffer(100, d, 7)
    assert ingest(rows, loop.codec, folder, online, prior) == len(steps)
    assert len(online) == len(steps) and len(prior) == 10
    assert np.all(prior.data["intervention"][:10] == 1.0)


def test_an_estop_from_the_person_ends_the_episode_and_damps(setup):
    s = setup
    loop = _loop(setup, ScriptedIntervention(lambda s, c, k: HumanInput(estop=k == 3)))
    result = loop.run_episode(np.array([0.5, 0.0, 0.4]), explore=False, learn=True)
    assert result.ended_by == "estop"
    state = s.robot.read()
    s.robot.write(s.runtime.step(state, s.robot.sim_time()).command)
    assert s.runtime.mode is ControllerMode.DAMPING


def test_push_episodes_reset_the_cube_to_their_layout_after_the_ramp(push_base):
    from robot_rl.hardware.sim_robot import SimRobot
    from robot_rl.learn.residual.scenes import sample_setups
    from robot_rl.tasks import panda_push

    spec, task = load_robot("panda"), make_task("panda-push")
    policy = ResidualPolicy(load_policy(push_base, read_contract(push_base)), CFG, explore=False)
    runtime = DeployRuntime(spec, PolicyController.for_task(task, spec, policy))
    first, second = sample_setups(task, np.random.default_rng(3), 2)
    robot = ShiftedSimRobot(spec, RealityShift(kp_scale=0.6), scene=first.scene)
    ring = TransitionRing(2 * policy.state_dim + policy.action_dim + 4, 4096)
    robot.connect()
    try:
        loop = EpisodeLoop(runtime, robot, policy, StateReward(task, spec), EpisodeCfg(length_s=LENGTH_S),
                           realtime=False, write=ring.write)
        one = loop.run_episode(first.command, explore=False, learn=False, scene=first.scene)
        assert one.final_object_error_m == pytest.approx(
            panda_push.goal_distance(robot.object_position(), first.command), abs=1e-9)
        assert one.success is False  # half a second of a near-zero policy pushes nothing 10 cm
        backend = robot._backend  # the cube knocked away between episodes
        joint = backend.robot.model.body(panda_push.CUBE).jntadr[0]
        backend.data.qpos[backend.robot.model.jnt_qposadr[joint]] += 0.2
        two = loop.run_episode(second.command, explore=False, learn=True, scene=second.scene)
        steps = [loop.codec.unpack(r) for r in TransitionRing.attach(ring.ref).read()]
        assert two.transitions == len(steps) == TICKS - 1
        # the policy's first recorded observation sees the cube at this episode's start, and its goal
        obs = steps[0].state
        cube_xy = second.scene.boxes[1].pos[:2]
        np.testing.assert_allclose(obs[14:16], cube_xy, atol=2e-3)  # joint_pos_rel, joint_vel (7 + 7), object
        np.testing.assert_allclose(obs[17:19], second.command, atol=1e-6)  # then the command (the goal)
        assert [m for _, m in runtime.mode_changes][-4:] == ["damping", "passive", "ramp", "running"]
        with pytest.raises(ValueError, match="needs its scene"):
            loop.run_episode(second.command, explore=False, learn=False)
    finally:
        robot.close()
        ring.close()
    with pytest.raises(ValueError, match="needs its scene reset every episode"):
        EpisodeLoop(runtime, SimRobot(spec), policy, StateReward(task, spec), EpisodeCfg(length_s=LENGTH_S),
                    realtime=False)
