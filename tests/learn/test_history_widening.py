"""Widening a checkpoint's actor to a longer observation history: it acts the same, and only such a layout widens."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from robot_rl.learn.history_widening import HistoryWideningError, column_map, widen_checkpoint
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.observations import ObservationLayout, ObsTerm
from robot_rl.tasks.registry import make_task
from robot_rl.tasks.task_observation import observation_names

POLICIES = Path(__file__).resolve().parents[2] / "policies"
FLAT = POLICIES / "candidates" / "a1_flat_turn" / "model_6050.pt"  # the shipped a1_flat


@pytest.fixture(scope="module")
def tasks():
    return make_task("a1-flat"), make_task("a1-flat-history"), load_robot("a1")


def _sizes(task, spec):
    return task.actor_obs.term_sizes(spec.num_joints, task.commands.size, spec.num_joints)


def _actions(path: Path, obs: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: obs})[0]


def test_the_widened_policy_acts_as_the_checkpoint_on_every_input(tasks, tmp_path):
    """The shipped a1_flat's checkpoint, widened to five ticks and exported, gives the checkpoint's action whatever
    the older frames hold: the new input's newest frames are matched to the old input by observation name."""
    from robot_rl.learn.export_checkpoint import export_checkpoint

    old_task, new_task, spec = tasks
    checkpoint = torch.load(FLAT, weights_only=False, map_location="cpu")
    widened = widen_checkpoint(checkpoint, old_task.actor_obs, new_task.actor_obs, _sizes(new_task, spec))
    widened["infos"] = {**widened["infos"], "task": new_task.name}
    torch.save(widened, tmp_path / "widened.pt")
    assert export_checkpoint(str(FLAT), str(tmp_path / "old.onnx")) == 0
    assert export_checkpoint(str(tmp_path / "widened.pt"), str(tmp_path / "new.onnx")) == 0

    old_names, new_names = observation_names(old_task, spec), observation_names(new_task, spec)
    assert len(new_names) == 213 and len(old_names) == 45
    rng = np.random.default_rng(0)
    new_obs = rng.normal(size=(64, len(new_names))).astype(np.float32)
    newest = {n.replace("[t-0]", ""): i for i, n in enumerate(new_names) if "[t-" not in n or "[t-0]" in n}
    old_obs = new_obs[:, [newest[n] for n in old_names]]
    old_actions, new_actions = _actions(tmp_path / "old.onnx", old_obs), _actions(tmp_path / "new.onnx", new_obs)
    assert np.abs(old_actions).max() > 0.1  # a policy that acts
    np.testing.assert_allclose(new_actions, old_actions, rtol=0, atol=1e-5)
    new_obs[:, [i for i, n in enumerate(new_names) if "[t-" in n and "[t-0]" not in n]] += 10.0  # the past
    np.testing.assert_allclose(_actions(tmp_path / "new.onnx", new_obs), old_actions, rtol=0, atol=1e-5)


def test_added_frames_are_normalized_as_their_term_and_adam_moves_with_the_columns(tasks):
    old_task, new_task, spec = tasks
    checkpoint = torch.load(FLAT, weights_only=False, map_location="cpu")
    widened = widen_checkpoint(checkpoint, old_task.actor_obs, new_task.actor_obs, _sizes(new_task, spec))
    old_mean = checkpoint["actor_state_dict"]["obs_normalizer._mean"][0]
    new_mean = widened["actor_state_dict"]["obs_normalizer._mean"][0]
    new_weight = widened["actor_state_dict"]["mlp.0.weight"]
    old_moment = checkpoint["optimizer_state_dict"]["state"][1]["exp_avg_sq"]
    new_moment = widened["optimizer_state_dict"]["state"][1]["exp_avg_sq"]
    for c in column_map(old_task.actor_obs, new_task.actor_obs, _sizes(new_task, spec)):
        term = old_mean[c.old_start:c.old_start + c.size]
        for f in range(c.new_frames):
            np.testing.assert_array_equal(new_mean[c.new_start + f * c.size:c.new_start + (f + 1) * c.size], term)
        added = slice(c.new_start, c.kept_start)
        assert torch.count_nonzero(new_weight[:, added]) == 0 and torch.count_nonzero(new_moment[:, added]) == 0
        assert torch.equal(new_moment[:, c.kept_start:c.new_end], old_moment[:, c.old_start:c.old_end])
    # The checkpoint it came from is unchanged, and the critic is the same.
    assert checkpoint["actor_state_dict"]["mlp.0.weight"].shape == (128, 45)
    assert widened["critic_state_dict"] is checkpoint["critic_state_dict"]


def test_only_a_longer_history_of_the_same_terms_widens(tasks):
    old_task, new_task, spec = tasks
    sizes = _sizes(new_task, spec)
    checkpoint = torch.load(FLAT, weights_only=False, map_location="cpu")
    rescaled = dataclasses.replace(new_task.actor_obs, terms=tuple(
        dataclasses.replace(t, scale=2 * t.scale) if t.name == "joint_vel" else t for t in new_task.actor_obs.terms))
    fewer_terms = ObservationLayout(terms=tuple(t for t in new_task.actor_obs.terms if t.name != "last_action"))
    for layout in (rescaled, fewer_terms):
        with pytest.raises(HistoryWideningError, match="not the old one with more past frames"):
            widen_checkpoint(checkpoint, old_task.actor_obs, layout, sizes)
    with pytest.raises(HistoryWideningError, match="takes 45 inputs, its task's observation has 213"):
        widen_checkpoint(checkpoint, new_task.actor_obs, new_task.actor_obs, sizes)
    no_normalizer = {**checkpoint, "actor_state_dict": {k: v for k, v in checkpoint["actor_state_dict"].items()
                                                        if "normalizer" not in k}}
    with pytest.raises(HistoryWideningError, match=r"no obs_normalizer\._mean"):
        widen_checkpoint(no_normalizer, old_task.actor_obs, new_task.actor_obs, sizes)


def test_extends_history_of_compares_everything_but_the_frame_counts():
    base = ObservationLayout(terms=(ObsTerm("base_ang_vel", scale=0.25), ObsTerm("command")))
    longer = ObservationLayout(terms=(ObsTerm("base_ang_vel", scale=0.25, history_length=3), ObsTerm("command")))
    assert longer.extends_history_of(base) and base.extends_history_of(base)
    assert not base.extends_history_of(longer)  # fewer frames
    assert not ObservationLayout(terms=(ObsTerm("base_ang_vel", history_length=3), ObsTerm("command"))
                                 ).extends_history_of(base)  # another scale
    assert not ObservationLayout(terms=(ObsTerm("command"), ObsTerm("base_ang_vel", scale=0.25))
                                 ).extends_history_of(base)  # another order
    assert not ObservationLayout(terms=base.terms[:1]).extends_history_of(base)
