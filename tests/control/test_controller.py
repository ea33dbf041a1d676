"""PolicyController: state → observation (the training builder) → ONNX policy → decoded joint targets.

The policy here is a real exported ONNX model whose output is known: a linear layer with zero weights and a
fixed bias, so every raw action is the bias and the decoded targets can be checked by hand.
"""

import numpy as np
import pytest
import torch

from robot_rl.control.controller import PolicyController
from robot_rl.core.types import RobotState
from robot_rl.policy.contract import ContractMismatch, PolicyContract
from robot_rl.policy.export import export_onnx
from robot_rl.policy.onnx_policy import load_policy
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm

A1 = load_robot("a1")
J = A1.num_joints
LAYOUT = ObservationLayout(
    (
        ObsTerm("base_ang_vel", scale=0.5, history_length=2),
        ObsTerm("projected_gravity"),
        ObsTerm("command"),
        ObsTerm("joint_pos_rel", history_length=2),
        ObsTerm("joint_vel", scale=0.05, clip=1.0),
        ObsTerm("last_action", history_length=2),
    )
)
COMMANDS = CommandSpec(("lin_vel_x", "lin_vel_y", "ang_vel_z"), ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)))
ACTION = JointPositionAction(scale=0.25, clip=1.0)
CONTRACT = PolicyContract.expected_from(A1, LAYOUT, COMMANDS, ACTION)
BIAS = np.linspace(-3.0, 3.0, J)  # the raw action of the known-output policy; half of it beyond the clip


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    actor = torch.nn.Linear(CONTRACT.obs_dim, J)
    with torch.no_grad():
        actor.weight.zero_()
        actor.bias.copy_(torch.from_numpy(BIAS))
    path = tmp_path_factory.mktemp("ctrl") / "known.onnx"
    export_onnx(actor, None, CONTRACT, path)
    return load_policy(path, CONTRACT)


@pytest.fixture
def controller(policy):
    return PolicyController(A1, LAYOUT, COMMANDS, ACTION, policy)


def _state(tick: int, q=None, dq=None, gyro=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), lin_vel=None) -> RobotState:
    return RobotState(
        timestamp=0.02 * tick, tick=tick,
        q=np.array(A1.default_positions if q is None else q, dtype=np.float64),
        dq=np.zeros(J) if dq is None else np.asarray(dq, dtype=np.float64), tau=np.zeros(J),
        base_quat=np.array(quat), base_ang_vel=np.array(gyro),
        base_lin_vel=None if lin_vel is None else np.array(lin_vel),
    )


def _split(obs: np.ndarray) -> dict[str, np.ndarray]:
    """Cut a flat observation into its term blocks (term-major: each term's frames, oldest first)."""
    out, col = {}, 0
    for term, size in zip(LAYOUT.terms, LAYOUT.term_sizes(J, COMMANDS.size, J), strict=True):
        width = size * term.history_length
        out[term.name] = obs[0, col : col + width].reshape(term.history_length, size)
        col += width
    assert col == obs.shape[1]
    return out


def test_the_policy_reads_the_observation_in_place_with_the_same_actions(controller, tmp_path):
    """The controller binds its observation builder's output as the policy's input (no copy per tick): each
    tick's raw action equals an unbound policy's on a copy of that tick's observation, on random states."""
    torch.manual_seed(1)
    actor = torch.nn.Sequential(torch.nn.Linear(CONTRACT.obs_dim, 16), torch.nn.ELU(), torch.nn.Linear(16, J))
    path = tmp_path / "random.onnx"
    export_onnx(actor, None, CONTRACT, path)
    ctrl = PolicyController(A1, LAYOUT, COMMANDS, ACTION, load_policy(path, CONTRACT))
    plain = load_policy(path, CONTRACT)
    rng = np.random.default_rng(5)
    for tick in range(30):
        ctrl.step(_state(tick, q=A1.default_positions + rng.normal(size=J) * 0.1, dq=rng.normal(size=J),
                         gyro=rng.normal(size=3)), rng.uniform(-1, 1, 3))
        assert ctrl.policy._obs_buffer is ctrl.last_obs  # bound, not copied
        np.testing.assert_array_equal(ctrl.last_raw_action, plain.act(ctrl.last_obs.copy()))


def test_observation_size_and_layout_equal_the_contract(controller):
    controller.step(_state(0))
    assert controller.obs_dim == CONTRACT.obs_dim == LAYOUT.size(J, 3, J) == 3 * 2 + 3 + 3 + J * 2 + J + J * 2
    assert controller.last_obs.shape == (1, CONTRACT.obs_dim) and controller.last_obs.dtype == np.float32
    assert [t.name for t in CONTRACT.observation.terms] == list(_split(controller.last_obs))


def test_history_is_term_major_oldest_first(controller):
    q1 = A1.default_positions + 0.01 * np.arange(J)
    q2 = A1.default_positions - 0.02 * np.arange(J)
    controller.step(_state(0, q=q1, gyro=(1.0, 2.0, 3.0)), command=(0.1, 0.2, 0.3))
    first = _split(controller.last_obs.copy())
    # A fresh history is filled with the first frame.
    np.testing.assert_allclose(first["base_ang_vel"], [[0.5, 1.0, 1.5], [0.5, 1.0, 1.5]])
    np.testing.assert_allclose(first["joint_pos_rel"], [q1 - A1.default_positions] * 2, atol=1e-6)
    np.testing.assert_allclose(first["last_action"], np.zeros((2, J)))

    controller.step(_state(1, q=q2, gyro=(4.0, 5.0, 6.0)))
    obs = controller.last_obs[0]
    expected_head = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 0.0, 0.0, -1.0, 0.1, 0.2, 0.3]  # gyro t0, t1 | gravity | cmd
    np.testing.assert_allclose(obs[:12], expected_head, atol=1e-6)
    np.testing.assert_allclose(obs[12 : 12 + J], q1 - A1.default_positions, atol=1e-6)  # older frame first
    np.testing.assert_allclose(obs[12 + J : 12 + 2 * J], q2 - A1.default_positions, atol=1e-6)
    blocks = _split(controller.last_obs)
    np.testing.assert_allclose(blocks["last_action"], [np.zeros(J), BIAS], atol=1e-6)  # the action of tick 0


def test_decode_applies_scale_offset_and_clip_and_spec_gains(controller):
    cmd = controller.step(_state(0))
    np.testing.assert_allclose(controller.last_raw_action, BIAS, atol=1e-6)  # raw: not clipped
    np.testing.assert_allclose(cmd.q_target, A1.default_positions + 0.25 * np.clip(BIAS, -1.0, 1.0), atol=1e-6)
    np.testing.assert_allclose(cmd.q_target, ACTION.decode(controller.last_raw_action, A1.default_positions))
    np.testing.assert_array_equal(cmd.kp, A1.kp)
    np.testing.assert_array_equal(cmd.kd, A1.kd)
    np.testing.assert_array_equal(cmd.dq_target, np.zeros(J))
    np.testing.assert_array_equal(cmd.tau_ff, np.zeros(J))
    with pytest.raises(ValueError, match="read-only"):
        cmd.kp[0] = 100.0  # shared constant: the safety chain must build a new command, not edit this one


def test_commands_are_clamped_to_the_contract_ranges(controller):
    controller.step(_state(0), command=(2.0, -3.0, 0.3))
    np.testing.assert_array_equal(controller.last_command, [1.0, -0.5, 0.3])
    assert controller.command_clamped
    np.testing.assert_allclose(_split(controller.last_obs)["command"][0], [1.0, -0.5, 0.3], atol=1e-7)
    controller.step(_state(1), command=(0.5, 0.5, -1.0))
    assert not controller.command_clamped
    controller.step(_state(2))  # None keeps the last command
    np.testing.assert_array_equal(controller.last_command, [0.5, 0.5, -1.0])
    with pytest.raises(ValueError, match=r"this policy takes 3 \(lin_vel_x, lin_vel_y, ang_vel_z\)"):
        controller.step(_state(3), command=(0.1, 0.2))


def test_reset_clears_history_and_last_action(controller):
    controller.step(_state(0, gyro=(1.0, 1.0, 1.0)))
    controller.step(_state(1, gyro=(2.0, 2.0, 2.0)))
    assert controller.ticks == 2
    controller.reset()
    assert controller.ticks == 0
    np.testing.assert_array_equal(controller.last_raw_action, np.zeros(J))
    controller.step(_state(2, gyro=(3.0, 3.0, 3.0)))
    blocks = _split(controller.last_obs)
    np.testing.assert_allclose(blocks["base_ang_vel"], np.full((2, 3), 1.5))  # no trace of ticks 0 and 1
    np.testing.assert_allclose(blocks["last_action"], np.zeros((2, J)))


def test_non_finite_inputs_are_not_hidden(controller):
    controller.step(_state(0))
    assert controller.last_tick_finite()
    q = np.array(A1.default_positions)
    q[4] = np.nan
    cmd = controller.step(_state(1, q=q))
    assert not controller.last_tick_finite()
    assert np.isnan(controller.last_obs).any()  # the observation clip does not remove NaN

    controller.reset()
    dq = np.zeros(J)
    dq[0] = np.inf  # joint_vel is clipped to ±1: the observation becomes finite, the flag must not
    cmd = controller.step(_state(2, dq=dq))
    assert np.isfinite(controller.last_obs).all() and np.isfinite(cmd.q_target).all()
    assert not controller.last_tick_finite()
    assert np.isinf(controller.last_inputs).any()


def test_nan_action_reaches_the_command(tmp_path):
    actor = torch.nn.Linear(CONTRACT.obs_dim, J)  # real weights: a NaN observation gives NaN actions
    export_onnx(actor, None, CONTRACT, tmp_path / "p.onnx")
    controller = PolicyController(A1, LAYOUT, COMMANDS, ACTION, load_policy(tmp_path / "p.onnx", CONTRACT))
    cmd = controller.step(_state(0, gyro=(np.nan, 0.0, 0.0)))
    assert np.isnan(controller.last_raw_action).all() and np.isnan(cmd.q_target).all()
    assert not controller.last_tick_finite()


def test_a_policy_with_another_contract_is_refused(policy):
    with pytest.raises(ContractMismatch, match=r"action\.scale: model has 0\.25, task has 0\.5"):
        PolicyController(A1, LAYOUT, COMMANDS, JointPositionAction(scale=0.5, clip=1.0), policy)
    other_layout = ObservationLayout(LAYOUT.terms[:-1])
    with pytest.raises(ContractMismatch, match=r"observation\.terms: model has"):
        PolicyController(A1, other_layout, COMMANDS, ACTION, policy)


def test_wrong_state_shapes_and_missing_base_velocity_are_clear_errors(controller, policy):
    bad = _state(0)
    bad.q = np.zeros(J + 1)
    with pytest.raises(ValueError, match=r"robot state does not fit 'a1': q \(13,\)"):
        controller.step(bad)
    layout = ObservationLayout((ObsTerm("base_lin_vel"), *LAYOUT.terms))
    contract = PolicyContract.expected_from(A1, layout, COMMANDS, ACTION)
    # Stands in for a policy exported for this layout: only its contract is read before the builder fails.
    stub_policy = type("ContractOnly", (), {"contract": contract, "act": policy.act})()
    ctrl = PolicyController(A1, layout, COMMANDS, ACTION, stub_policy)
    with pytest.raises(ValueError, match="base linear velocity"):
        ctrl.step(_state(0))  # the builder names the missing input before the policy is ever called


def test_the_returned_command_is_owned_and_reused(controller):
    first = controller.step(_state(0))
    second = controller.step(_state(1))
    assert first is second  # preallocated: callers copy() what they keep


def test_for_task_builds_the_controller_from_the_task_definition(tmp_path):
    from robot_rl.policy.contract import contract_for_task
    from robot_rl.tasks.registry import make_task

    task = make_task("a1-flat")
    contract = contract_for_task(task, A1)
    export_onnx(torch.nn.Linear(contract.obs_dim, J), None, contract, tmp_path / "a1_flat.onnx")
    controller = PolicyController.for_task(task, A1, load_policy(tmp_path / "a1_flat.onnx", contract))
    cmd = controller.step(_state(0), command=(0.5, 0.0, 0.0))
    assert controller.obs_dim == contract.obs_dim and np.isfinite(cmd.q_target).all()
    with pytest.raises(ValueError, match="is for robot 'a1'"):
        PolicyController.for_task(task, load_robot("panda"), controller.policy)
