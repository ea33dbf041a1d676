"""Action chunks → one action per tick: ACT's temporal ensembling, the first action, and a chunked ONNX policy
driven by PolicyController as its contract says."""

import numpy as np
import pytest
import torch

from robot_rl.control.action_chunks import ChunkConsumer
from robot_rl.control.controller import PolicyController
from robot_rl.core.types import RobotState
from robot_rl.policy.contract import ChunkContract, PolicyContract
from robot_rl.policy.export import export_onnx
from robot_rl.policy.onnx_policy import load_policy
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm


def _act_reference(chunks: list[np.ndarray], t: int, m: float) -> np.ndarray:
    """ACT's temporal aggregation written out: every prediction for tick t, oldest first, w_i = exp(−m·i)."""
    length = len(chunks[0])
    made = range(max(0, t - length + 1), t + 1)  # ticks whose chunk covers t, oldest first
    preds = np.stack([chunks[s][t - s] for s in made])
    w = np.exp(-m * np.arange(len(preds)))
    return (w[:, None] * preds).sum(0) / w.sum()


@pytest.mark.parametrize("m", [0.0, 0.01, 0.5])
def test_temporal_ensemble_is_acts_weighted_mean_of_every_prediction_for_the_tick(m):
    rng = np.random.default_rng(0)
    length, actions = 5, 3
    consumer = ChunkConsumer(ChunkContract(length, "temporal_ensemble", m), actions)
    chunks = [rng.normal(size=(length, actions)) for _ in range(12)]
    for t, chunk in enumerate(chunks):
        np.testing.assert_allclose(consumer.step(chunk), _act_reference(chunks, t, m), rtol=1e-12)


def test_older_predictions_weigh_more_for_positive_m():
    consumer = ChunkConsumer(ChunkContract(3, "temporal_ensemble", 1.0), 1)
    consumer.step(np.array([[0.0], [10.0], [20.0]]))  # tick 0: predicts 10 for tick 1
    out = consumer.step(np.array([[0.0], [0.0], [0.0]]))  # tick 1: predicts 0 for itself
    assert out[0] == pytest.approx(10.0 / (1.0 + np.exp(-1.0)))  # the older 10 has weight 1, the newer 0 e^-1


def test_first_action_and_reset():
    first = ChunkConsumer(ChunkContract(4, "first_action"), 2)
    chunk = np.arange(8.0).reshape(4, 2)
    np.testing.assert_array_equal(first.step(chunk), [0.0, 1.0])
    ensemble = ChunkConsumer(ChunkContract(4, "temporal_ensemble", 0.0), 2)
    ensemble.step(chunk)
    ensemble.step(chunk)
    ensemble.reset()
    np.testing.assert_array_equal(ensemble.step(chunk + 100), [100.0, 101.0])  # nothing from before the reset


# --- a chunked ONNX policy in the controller ---------------------------------------------------------------------

A1 = load_robot("a1")
J = A1.num_joints
LAYOUT = ObservationLayout((ObsTerm("projected_gravity"), ObsTerm("command"), ObsTerm("joint_pos_rel"),
                            ObsTerm("last_action")))
COMMANDS = CommandSpec(("lin_vel_x", "lin_vel_y", "ang_vel_z"), ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)))
ACTION = JointPositionAction(scale=0.25, clip=100.0)
CHUNK = ChunkContract(4, "temporal_ensemble", 0.1)


class KnownChunk(torch.nn.Module):
    """Chunk element k is 0.1·k on every joint, whatever the observation."""

    def __init__(self, obs_dim: int):
        super().__init__()
        self.zero = torch.nn.Linear(obs_dim, 1)
        with torch.no_grad():
            self.zero.weight.zero_()
            self.zero.bias.zero_()

    def forward(self, obs):
        steps = 0.1 * torch.arange(CHUNK.length, dtype=torch.float32).reshape(1, CHUNK.length, 1)
        return self.zero(obs).unsqueeze(-1) + steps.expand(1, CHUNK.length, J)


def _state(tick: int) -> RobotState:
    return RobotState(timestamp=0.02 * tick, tick=tick, q=np.array(A1.default_positions), dq=np.zeros(J),
                      tau=np.zeros(J), base_quat=np.array([1.0, 0, 0, 0]), base_ang_vel=np.zeros(3))


def test_the_controller_ensembles_a_chunked_policy_as_its_contract_says(tmp_path):
    expected = PolicyContract.expected_from(A1, LAYOUT, COMMANDS, ACTION)
    written = export_onnx(KnownChunk(expected.obs_dim), None, expected.with_chunk(CHUNK), tmp_path / "chunk.onnx")
    assert written.chunk == CHUNK and written.output.shape == ("batch", CHUNK.length, J)
    policy = load_policy(tmp_path / "chunk.onnx", expected)  # the runtime expects no chunk: the model's choice
    assert policy.act(np.zeros((1, expected.obs_dim), np.float32)).shape == (CHUNK.length, J)
    controller = PolicyController(A1, LAYOUT, COMMANDS, ACTION, policy)
    chunks = [np.tile(0.1 * np.arange(CHUNK.length)[:, None], (1, J))] * 6
    for t in range(6):
        controller.step(_state(t))
        np.testing.assert_allclose(controller.last_raw_action, _act_reference(chunks, t, CHUNK.ensemble_m),
                                   rtol=1e-6)
    # The ensembled action is the one decoded and fed back as last_action (what the policy was trained on).
    np.testing.assert_allclose(controller._output.q_target,
                               ACTION.decode(controller.last_raw_action, A1.default_positions))
    controller.reset()
    controller.step(_state(7))
    np.testing.assert_allclose(controller.last_raw_action, np.zeros(J), atol=1e-7)  # a fresh start: chunk[0]
