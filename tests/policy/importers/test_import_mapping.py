"""The importer's pure parts: history layouts, joint permutation, scales in the contract or the graph, and the
recurrent contract's JSON. No upstream files needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robot_rl.policy.contract import PolicyContract, RecurrentContract, RecurrentState
from robot_rl.policy.importers.build import build_adapter, match_joints
from robot_rl.policy.importers.description import ForeignPolicy, ForeignTerm, PolicyImportError
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.a1_velocity import COMMANDS


def _foreign(spec, layout="time_major", history=(0, 1), order=None, defaults=None, terms=None) -> ForeignPolicy:
    names = tuple(order or spec.joint_names)
    index = [spec.joint_names.index(n) for n in names]
    n = len(names)
    return ForeignPolicy(
        trainer="test", model_path=Path("x.pt"), model_format="torchscript", joint_names=names,
        default_positions=tuple(defaults if defaults is not None else np.asarray(spec.default_positions)[index]),
        kp=tuple(np.asarray(spec.kp)[index]), kd=tuple(np.asarray(spec.kd)[index]),
        action_scale=(0.25,) * n, action_clip=((-10.0, 10.0),) * n,
        terms=terms or (ForeignTerm("base_ang_vel", "ang_vel", (0.25,), 100.0),
                        ForeignTerm("joint_pos_rel", "dof_pos", (1.0,), 100.0)),
        history=history, history_layout=layout)


@pytest.fixture
def a1():
    return load_robot("a1")


def _contract_columns(spec, history_length: int):
    """Contract layout (term-major, oldest → newest): ang_vel frames then joint_pos frames."""
    j = spec.num_joints
    ang = [[f * 3 + c for c in range(3)] for f in range(history_length)]
    pos = [[3 * history_length + f * j + c for c in range(j)] for f in range(history_length)]
    return ang, pos


def test_time_major_newest_first_history_is_gathered_frame_by_frame(a1):
    adapter = build_adapter(_foreign(a1, "time_major", (0, 1)), a1, match_joints(_foreign(a1), a1, ()), COMMANDS)
    ang, pos = _contract_columns(a1, 2)
    # the trainer: [frame 0 (newest): ang, pos][frame 1: ang, pos]; ours: newest is the last frame
    assert adapter.index.tolist() == ang[1] + pos[1] + ang[0] + pos[0]


def test_term_major_history_is_gathered_term_by_term(a1):
    foreign = _foreign(a1, "term_major", (0, 1))
    adapter = build_adapter(foreign, a1, match_joints(foreign, a1, ()), COMMANDS)
    ang, pos = _contract_columns(a1, 2)
    assert adapter.index.tolist() == ang[1] + ang[0] + pos[1] + pos[0]


def test_joints_are_gathered_and_scattered_by_name(a1):
    order = list(a1.joint_names[3:6]) + list(a1.joint_names[:3]) + list(a1.joint_names[6:])  # FL first
    foreign = _foreign(a1, history=(0,), order=order)
    adapter = build_adapter(foreign, a1, match_joints(foreign, a1, ()), COMMANDS)
    assert adapter.index[3:6].tolist() == [3 + 3, 3 + 4, 3 + 5]  # policy joint 0 reads spec joint 3's column
    assert adapter.action_matrix[0].argmax() == 3 and adapter.action_matrix[3].argmax() == 0


def test_uniform_scales_go_into_the_contract_and_vector_scales_into_the_graph(a1):
    terms = (ForeignTerm("base_ang_vel", "ang_vel", (0.25,), 100.0),
             ForeignTerm("command", "commands", (2.0, 2.0, 0.25), 100.0))
    foreign = _foreign(a1, history=(0,), terms=terms)
    adapter = build_adapter(foreign, a1, match_joints(foreign, a1, ()), COMMANDS)
    ang, cmd = adapter.layout.terms
    assert (ang.scale, ang.clip) == (0.25, 100.0) and (cmd.scale, cmd.clip) == (1.0, None)
    assert adapter.scale[3:].tolist() == [2.0, 2.0, 0.25] and adapter.clip[3:].tolist() == [100.0] * 3


def test_an_unknown_joint_and_a_term_the_robot_cannot_measure_are_refused(a1):
    order = list(a1.joint_names)
    order[4] = "FR_knee"
    with pytest.raises(PolicyImportError, match=r"policy joint 4 'FR_knee' \(test\) is not a joint of robot 'a1'"):
        match_joints(ForeignPolicy(**{**_foreign(a1).__dict__, "joint_names": tuple(order)}), a1, ())
    foreign = _foreign(a1, history=(0,), terms=(ForeignTerm("base_lin_vel", "lin_vel", (2.0,)),))
    with pytest.raises(PolicyImportError, match=r"'lin_vel' .* needs 'base_lin_vel', which a real robot does not"):
        build_adapter(foreign, a1, match_joints(foreign, a1, ()), COMMANDS)


def test_recurrent_contract_round_trips_and_is_omitted_when_absent(a1):
    from robot_rl.tasks.registry import make_task

    task = make_task("a1-flat")
    plain = PolicyContract.expected_from(a1, task.actor_obs, task.commands, task.action)
    assert "recurrent" not in plain.to_json()
    states = RecurrentContract((RecurrentState("lstm_h", "lstm_h_next", 64),
                                RecurrentState("lstm_c", "lstm_c_next", 64)))
    recurrent = PolicyContract(**{**plain.__dict__, "recurrent": states})
    assert PolicyContract.from_json(recurrent.to_json()) == recurrent
