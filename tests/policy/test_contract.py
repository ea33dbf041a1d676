"""The policy contract: JSON round trip, and every kind of mismatch refused with the field and both values."""

import dataclasses
import json
import re

import pytest

from robot_rl.policy.contract import (
    SCHEMA_VERSION,
    ContractError,
    ContractMismatch,
    PolicyContract,
    Provenance,
)
from robot_rl.policy.contract_check import check_contract, compare_contracts
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm

A1 = load_robot("a1")
LAYOUT = ObservationLayout(
    (
        ObsTerm("base_ang_vel", scale=0.25, history_length=2),
        ObsTerm("projected_gravity"),
        ObsTerm("command"),
        ObsTerm("joint_pos_rel", clip=5.0),
        ObsTerm("joint_vel", scale=0.05),
        ObsTerm("last_action"),
    )
)
COMMANDS = CommandSpec(("lin_vel_x", "lin_vel_y", "ang_vel_z"), ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)))
ACTION = JointPositionAction(scale=0.25, clip=100.0)


def _expected(layout: ObservationLayout = LAYOUT) -> PolicyContract:
    return PolicyContract.expected_from(A1, layout, COMMANDS, ACTION)


def _replace(obj, path: str, value):
    """dataclasses.replace along a dotted path, e.g. 'observation.terms' or 'action.scale'."""
    head, _, rest = path.partition(".")
    new = value if not rest else _replace(getattr(obj, head), rest, value)
    return dataclasses.replace(obj, **{head: new})


def _term(i: int, **changes):
    terms = list(_expected().observation.terms)
    terms[i] = dataclasses.replace(terms[i], **changes)
    return tuple(terms)


def test_expected_from_reads_every_robot_fact_from_the_spec():
    c = _expected()
    assert c.robot == "a1" and c.spec_hash == A1.spec_hash
    assert c.joint_names == A1.joint_names
    assert c.default_positions == tuple(A1.default_positions) == c.action.offset
    assert c.kp == tuple(A1.kp) and c.kd == tuple(A1.kd)
    assert c.policy_period_s == A1.timing.policy_period_s
    assert [t.size for t in c.observation.terms] == [3, 3, 3, 12, 12, 12]
    assert c.obs_dim == 3 * 2 + 3 + 3 + 12 * 3 == LAYOUT.size(12, 3, 12)
    assert c.input.shape == ("batch", c.obs_dim) and c.output.shape == ("batch", 12)
    assert c.observation.terms[3].clip == 5.0 and c.observation.terms[0].clip is None


def test_json_round_trip_is_exact_and_stable():
    prov = Provenance(
        task="a1_flat",
        seed=3,
        iterations=1500,
        env_steps=10**8,
        git_commit="abc123",
        created_utc="2026-01-01T00:00:00+00:00",
        metrics={"z": 1.5, "a": -0.25},
        notes={"command": "robot-rl train a1_flat", "nested": {"k": [1, 2]}},
    )
    c = dataclasses.replace(_expected(), provenance=prov)
    text = c.to_json()
    back = PolicyContract.from_json(text)
    assert back == c
    assert back.to_json() == text  # stable: same contract, same bytes
    keys = list(json.loads(text))
    assert keys[0] == "schema_version" and keys[-1] == "provenance"
    assert list(json.loads(text)["provenance"]["metrics"]) == ["a", "z"]  # sorted
    # floats survive exactly (repr round trip), so the 1e-9 tolerance never hides a real change
    assert back.default_positions == tuple(A1.default_positions)


def test_matching_contract_passes():
    check_contract(PolicyContract.from_json(_expected().to_json()), _expected())


MISMATCHES = [
    # (path to replace, new value, text the message must contain)
    (
        "joint_names",
        (*tuple(A1.joint_names[:2]), A1.joint_names[3], A1.joint_names[2], *tuple(A1.joint_names[4:])),
        "joint_names[2]: model has 'FL_hip_joint', spec has 'FR_lower_joint'",
    ),
    ("joint_names", tuple(A1.joint_names[:11]), "joint_names (length 11 vs 12): model has ["),
    (
        "default_positions",
        (-0.1, 0.9, *tuple(A1.default_positions[2:])),
        "default_positions[1]: model has 0.9, spec has 0.8",
    ),
    ("kp", (25.0, *tuple(A1.kp[1:])), "kp[0]: model has 25.0, spec has 20.0"),
    ("kd", (*tuple(A1.kd[:11]), 0.6), "kd[11]: model has 0.6, spec has 0.5"),
    ("policy_period_s", 0.005, "policy_period_s: model has 0.005, spec has 0.02"),
    ("action.scale", 0.5, "action.scale: model has 0.5, task has 0.25"),
    ("action.clip", 1.0, "action.clip: model has 1.0, task has 100.0"),
    ("action.offset", (0.0,) * 12, "action.offset[0]: model has 0.0, spec has -0.1"),
    ("action.type", "joint_velocity", "action.type: model has 'joint_velocity', task has 'joint_position'"),
    ("observation.terms", _term(4, scale=1.0), "observation.terms[4] (joint_vel).scale: model has 1.0, task has 0.05"),
    (
        "observation.terms",
        _term(3, clip=None),
        "observation.terms[3] (joint_pos_rel).clip: model has None, task has 5.0",
    ),
    (
        "observation.terms",
        _term(0, history_length=1),
        "observation.terms[0] (base_ang_vel).history_length: model has 1, task has 2",
    ),
    ("observation.terms", _term(2, size=4), "observation.terms[2] (command).size: model has 4, task has 3"),
    (
        "observation.terms",
        _expected().observation.terms[:-1],
        "observation.terms: model has ['base_ang_vel', 'projected_gravity', 'command', 'joint_pos_rel', 'joint_vel'], "
        "task has ['base_ang_vel', 'projected_gravity', 'command', 'joint_pos_rel', 'joint_vel', 'last_action']",
    ),
    (
        "observation.terms",
        tuple(reversed(_expected().observation.terms)),
        "observation.terms: model has ['last_action'",
    ),
    (
        "observation.history_layout",
        "time_major",
        "observation.history_layout: model has 'time_major', task has 'term_major'",
    ),
    ("observation.dim", 45, "observation.dim: model has 45, task has 48"),
    (
        "commands.names",
        ("lin_vel_x", "lin_vel_y", "yaw_rate"),
        "commands.names[2]: model has 'yaw_rate', task has 'ang_vel_z'",
    ),
    (
        "commands.ranges",
        ((-2.0, 2.0), (-0.5, 0.5), (-1.0, 1.0)),
        "commands.ranges[0] (lin_vel_x): model has [-2.0, 2.0], task has [-1.0, 1.0]",
    ),
    ("input.shape", ("batch", 45), "input.shape: model has ['batch', 45], runtime has ['batch', 48]"),
    ("input.shape", (1, 48), "input.shape: model has [1, 48], runtime has ['batch', 48]"),
    ("output.shape", ("batch", 13), "output.shape: model has ['batch', 13], runtime has ['batch', 12]"),
    ("input.name", "observations", "input.name: model has 'observations', runtime has 'obs'"),
    ("robot", "go2", "robot: model has 'go2', spec has 'a1'"),
    ("spec_hash", "0123456789abcdef", f"spec_hash: model has '0123456789abcdef', spec has '{A1.spec_hash}'"),
]


@pytest.mark.parametrize(
    ("path", "value", "message"), MISMATCHES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MISMATCHES)]
)
def test_every_mismatch_refuses_naming_field_and_both_values(path, value, message):
    found = _replace(_expected(), path, value)
    with pytest.raises(ContractMismatch) as info:
        check_contract(found, _expected())
    assert message in str(info.value), str(info.value)
    assert info.value.mismatches  # structured too, for tools


def test_schema_newer_and_older_are_refused_with_a_reason():
    with pytest.raises(ContractMismatch, match=r"schema_version: model has 2, runtime has 1 \(.*upgrade robot_rl"):
        check_contract(dataclasses.replace(_expected(), schema_version=SCHEMA_VERSION + 1), _expected())
    with pytest.raises(ContractMismatch, match=r"schema_version: model has 0, runtime has 1 \(.*re-export"):
        check_contract(dataclasses.replace(_expected(), schema_version=0), _expected())
    newer = json.loads(_expected().to_json())
    newer["schema_version"] = 2
    newer["a_field_from_the_future"] = 1
    with pytest.raises(ContractMismatch, match="schema_version: model has 2"):  # not "unknown key"
        PolicyContract.from_json(json.dumps(newer))


def test_float_tolerance_absorbs_last_bits_but_not_float32_rounding():
    period = A1.timing.physics_period_s * 4  # 0.02 by arithmetic, possibly off in the last bit
    check_contract(dataclasses.replace(_expected(), policy_period_s=period), _expected())
    check_contract(_replace(_expected(), "action.scale", 0.25 * (1 + 1e-12)), _expected())
    float32_scale = float(__import__("numpy").float32(0.05))
    with pytest.raises(ContractMismatch, match=r"joint_vel\)\.scale"):
        check_contract(_replace(_expected(), "observation.terms", _term(4, scale=float32_scale)), _expected())


def test_all_differences_are_listed_and_provenance_is_ignored():
    found = dataclasses.replace(
        _replace(_expected(), "action.scale", 1.0), kp=(1.0,) * 12, provenance=Provenance(task="other", seed=9)
    )
    mismatches = compare_contracts(found, _expected())
    assert len(mismatches) == 13  # 12 gains + the scale; provenance never counts
    text = str(ContractMismatch(mismatches))
    assert text.startswith("policy contract does not match (13 differences)")
    assert "action.scale" in text


def test_spec_hash_check_can_be_waived_but_nothing_else():
    found = dataclasses.replace(_expected(), spec_hash="0" * 16)
    check_contract(found, _expected(), check_spec_hash=False)
    with pytest.raises(ContractMismatch, match=r"kp\[0\]"):
        check_contract(dataclasses.replace(found, kp=(1.0,) * 12), _expected(), check_spec_hash=False)


def test_a_policy_for_another_robot_is_refused():
    panda = load_robot("panda")
    arm_layout = ObservationLayout((ObsTerm("joint_pos_rel"), ObsTerm("joint_vel"), ObsTerm("last_action")))
    arm = PolicyContract.expected_from(panda, arm_layout, CommandSpec((), ()), ACTION)
    with pytest.raises(ContractMismatch) as info:
        check_contract(arm, _expected())
    text = str(info.value)
    assert "robot: model has 'panda', spec has 'a1'" in text
    assert re.search(r"joint_names \(length \d+ vs 12\)", text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"robot": "a1"}', "schema_version missing"),
        ('{"schema_version": "1"}', "schema_version missing or not an integer"),
    ],
)
def test_malformed_json_is_a_contract_error(text, message):
    with pytest.raises(ContractError, match=message):
        PolicyContract.from_json(text)


def test_missing_or_ill_typed_fields_name_the_key_path():
    data = json.loads(_expected().to_json())
    del data["kp"]
    with pytest.raises(ContractError, match=r"kp: missing key 'kp'"):
        PolicyContract.from_json(json.dumps(data))
    data = json.loads(_expected().to_json())
    data["observation"]["terms"][1]["scale"] = "big"
    with pytest.raises(ContractError, match=r"observation\.terms\[1\]\.scale: expected a number, got 'big'"):
        PolicyContract.from_json(json.dumps(data))


def test_non_finite_metrics_cannot_be_written():
    c = dataclasses.replace(_expected(), provenance=Provenance(metrics={"reward": float("nan")}))
    with pytest.raises(ContractError, match="not JSON-serializable"):
        c.to_json()


def test_contract_for_task_uses_the_actor_observations_and_the_task_robot():
    from robot_rl.policy.contract import contract_for_task
    from robot_rl.tasks.registry import make_task

    task = make_task("a1-flat")
    contract = contract_for_task(task, A1, Provenance(seed=4))
    assert contract == PolicyContract.expected_from(
        A1, task.actor_obs, task.commands, task.action, provenance=Provenance(task="a1-flat", seed=4)
    )
    assert "base_lin_vel" not in [t.name for t in contract.observation.terms]  # critic-only term dropped
    assert contract_for_task(task).spec_hash == A1.spec_hash  # the spec defaults to the task's robot
    with pytest.raises(ValueError, match="task 'a1-flat' is for robot 'a1', got the spec of 'panda'"):
        contract_for_task(task, load_robot("panda"))


def test_a_composed_residual_with_history_takes_the_task_layout_with_longer_history():
    from robot_rl.policy.contract import Provenance, layout_for_policy, residual_history

    plain = _expected()
    assert residual_history(plain) == 1 and layout_for_policy(LAYOUT, plain) == LAYOUT
    composed = dataclasses.replace(plain, provenance=Provenance(notes={"residual": {"history": 3}}))
    longer = layout_for_policy(LAYOUT, composed)
    assert [t.history_length for t in longer.terms] == [4, 3, 3, 3, 3, 3]  # base_ang_vel kept 2 already
    assert residual_history(dataclasses.replace(plain, provenance=Provenance(notes={"residual": "odd"}))) == 1
    with pytest.raises(ValueError, match="≥ 0"):
        LAYOUT.with_more_history(-1)


def test_the_lengthened_contract_is_the_contract_of_the_lengthened_layout():
    """An exported residual's contract (PolicyContract.with_more_history) and the layout the runtime builds for
    it (ObservationLayout.with_more_history) lengthen by one rule: they describe the same input."""
    plain = _expected()
    for extra in (0, 2):
        longer = plain.with_more_history(extra)
        assert longer == _expected(layout=LAYOUT.with_more_history(extra))
        width = LAYOUT.with_more_history(extra).size(A1.num_joints, COMMANDS.size, A1.num_joints)
        assert longer.input.shape[1] == longer.obs_dim == width


def test_a_chunk_field_round_trips_and_fixes_the_output_shape():
    from robot_rl.policy.contract import ChunkContract

    chunked = _expected().with_chunk(ChunkContract(10, "temporal_ensemble", 0.01))
    assert chunked.output.shape == ("batch", 10, A1.num_joints)
    assert PolicyContract.from_json(chunked.to_json()) == chunked
    assert json.loads(chunked.to_json())["chunk"] == {"length": 10, "consume": "temporal_ensemble",
                                                      "ensemble_m": 0.01}
    check_contract(chunked, _expected())  # the runtime expects no chunk: the model's choice, shape checked


def test_contracts_without_a_chunk_read_and_write_as_before():
    plain = _expected()
    assert plain.chunk is None and "chunk" not in json.loads(plain.to_json())  # older readers refuse unknown keys
    assert PolicyContract.from_json(plain.to_json()).chunk is None


def test_a_chunk_that_disagrees_with_the_output_or_is_malformed_is_refused():
    from robot_rl.policy.contract import ChunkContract

    lying = dataclasses.replace(_expected(), chunk=ChunkContract(4))  # output still (batch, A)
    with pytest.raises(ContractMismatch, match=r"output.shape: model has \['batch', 12\], runtime has "
                                               r"\['batch', 4, 12\]"):
        check_contract(lying, _expected())
    with pytest.raises(ContractError, match=r"chunk\.length must be an integer ≥ 1"):
        ChunkContract(0)
    data = json.loads(_expected().with_chunk(ChunkContract(3)).to_json())
    data["chunk"]["ensemble_m"] = float("inf")
    with pytest.raises(ContractError, match="ensemble_m must be finite"):
        PolicyContract.from_json(json.dumps(data))
    data["chunk"] = {"length": 3, "consume": "average"}
    with pytest.raises(ContractError, match="consume"):
        PolicyContract.from_json(json.dumps(data))
