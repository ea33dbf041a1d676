"""Loading a policy: every broken file ends in one PolicyLoadError naming the file; contracts are checked."""

import dataclasses
import json

import numpy as np
import onnx
import pytest
import torch

from robot_rl.policy.contract import GRAPH_DIGEST_KEY, METADATA_KEY, SCHEMA_VERSION, ContractMismatch, PolicyContract
from robot_rl.policy.export import export_onnx
from robot_rl.policy.onnx_policy import PolicyLoadError, load_policy, read_contract
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm

A1 = load_robot("a1")
LAYOUT = ObservationLayout(
    (ObsTerm("base_ang_vel", scale=0.25), ObsTerm("projected_gravity"), ObsTerm("command"),
     ObsTerm("joint_pos_rel"), ObsTerm("joint_vel", scale=0.05), ObsTerm("last_action"))
)
COMMANDS = CommandSpec(("lin_vel_x", "lin_vel_y", "ang_vel_z"), ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)))
ACTION = JointPositionAction(scale=0.25, clip=100.0)
CONTRACT = PolicyContract.expected_from(A1, LAYOUT, COMMANDS, ACTION)


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory):
    torch.manual_seed(0)
    actor = torch.nn.Sequential(torch.nn.Linear(CONTRACT.obs_dim, 32), torch.nn.ELU(), torch.nn.Linear(32, 12))
    path = tmp_path_factory.mktemp("policy") / "a1.onnx"
    export_onnx(actor, None, CONTRACT, path)
    return path


def _with_metadata(src, dst, value: str | None):
    """A copy of an exported model whose contract metadata is replaced (None: removed)."""
    model = onnx.load(str(src))
    kept = [(p.key, p.value) for p in model.metadata_props if p.key != METADATA_KEY]
    del model.metadata_props[:]
    for key, val in kept + ([(METADATA_KEY, value)] if value is not None else []):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, val
    onnx.save(model, str(dst))
    return dst


def _contract_dict(path) -> dict:
    return json.loads(read_contract(path).to_json())


def _load_error(path, expected=CONTRACT) -> PolicyLoadError:
    with pytest.raises(PolicyLoadError) as info:
        load_policy(path, expected)
    err = info.value
    assert err.path == str(path) and str(path) in str(err)
    assert "Traceback" not in str(err) and "onnxruntime_pybind11_state" not in str(err)
    return err


def test_load_runs_single_threaded_on_the_cpu(policy_file):
    policy = load_policy(policy_file, CONTRACT)
    options = policy.session.get_session_options()
    assert options.intra_op_num_threads == 1 and options.inter_op_num_threads == 1
    assert str(options.execution_mode) == "ExecutionMode.ORT_SEQUENTIAL"
    assert policy.session.get_providers() == ["CPUExecutionProvider"]
    action = policy.act(np.zeros((1, CONTRACT.obs_dim), dtype=np.float32))
    assert action.shape == (12,) and action.dtype == np.float32
    assert policy.contract == read_contract(policy_file)


def test_act_refuses_wrong_shape_or_dtype(policy_file):
    policy = load_policy(policy_file, CONTRACT)
    with pytest.raises(ValueError, match=r"shape \(1, 45\), got float32 \(1, 44\)"):
        policy.act(np.zeros((1, 44), dtype=np.float32))
    with pytest.raises(ValueError, match="got float64"):
        policy.act(np.zeros((1, 45)))


def test_a_bound_observation_buffer_runs_in_place_and_equals_a_copied_one(policy_file):
    """bind_observation: act on the bound buffer skips the copy; same actions as an unbound policy, bit for bit
    within this process; any other observation runs from the policy's own buffer and leaves the bound one alone."""
    bound, plain = load_policy(policy_file, CONTRACT), load_policy(policy_file, CONTRACT)
    buffer = np.zeros((1, CONTRACT.obs_dim), dtype=np.float32)
    bound.bind_observation(buffer)
    rng = np.random.default_rng(3)
    for _ in range(20):
        buffer[:] = rng.normal(size=buffer.shape)
        np.testing.assert_array_equal(bound.act(buffer), plain.act(buffer.copy()))
    kept = buffer.copy()
    other = rng.normal(size=buffer.shape).astype(np.float32)
    np.testing.assert_array_equal(bound.act(other), plain.act(other))
    np.testing.assert_array_equal(buffer, kept)  # a foreign observation never lands in the caller's buffer
    np.testing.assert_array_equal(bound.act(buffer), plain.act(buffer.copy()))  # copied now: still right
    bound.bind_observation(buffer)
    np.testing.assert_array_equal(bound.act(buffer), plain.act(buffer.copy()))
    for bad in (np.zeros((1, CONTRACT.obs_dim)), np.zeros((1, 44), dtype=np.float32),
                np.zeros((1, 2 * CONTRACT.obs_dim), dtype=np.float32)[:, ::2], [0.0] * CONTRACT.obs_dim):
        with pytest.raises(ValueError, match="observation buffer must be"):
            bound.bind_observation(bad)


def test_missing_file_directory_and_empty_file(tmp_path):
    assert "no such file" in _load_error(tmp_path / "nope.onnx").reason
    assert "not a file" in _load_error(tmp_path).reason
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert "empty" in _load_error(tmp_path / "empty.onnx").reason


@pytest.mark.parametrize("fraction", [0.02, 0.3, 0.6, 0.97, -1])
def test_truncated_file_is_refused(policy_file, tmp_path, fraction):
    data = policy_file.read_bytes()
    cut = len(data) - 1 if fraction == -1 else int(len(data) * fraction)
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(data[:cut])
    _load_error(bad)


def test_garbage_bytes_are_refused(tmp_path):
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(np.random.default_rng(0).bytes(4096))
    assert "not a valid ONNX model" in _load_error(bad).reason


def test_flipped_weight_bytes_are_caught_by_the_graph_digest(policy_file, tmp_path):
    data = bytearray(policy_file.read_bytes())
    weights = max(onnx.load(str(policy_file)).graph.initializer, key=lambda t: len(t.raw_data)).raw_data
    at = bytes(data).find(weights[:64])
    assert at > 0
    data[at + len(weights) // 2] ^= 0x40  # one bit: protobuf still parses, the weights are wrong
    bad = tmp_path / "bitflip.onnx"
    bad.write_bytes(bytes(data))
    err = _load_error(bad)
    assert "graph digest" in err.reason and "corrupted or edited after export" in err.reason


def test_model_without_graph_digest_is_refused(policy_file, tmp_path):
    model = onnx.load(str(policy_file))
    kept = [(p.key, p.value) for p in model.metadata_props if p.key != GRAPH_DIGEST_KEY]
    del model.metadata_props[:]
    for key, val in kept:
        entry = model.metadata_props.add()
        entry.key, entry.value = key, val
    onnx.save(model, str(tmp_path / "nodigest.onnx"))
    assert "no graph digest" in _load_error(tmp_path / "nodigest.onnx").reason


def test_model_without_contract_is_refused(policy_file, tmp_path):
    err = _load_error(_with_metadata(policy_file, tmp_path / "bare.onnx", None))
    assert "no policy contract in the model metadata" in err.reason and METADATA_KEY in err.reason


def test_unparsable_contract_is_refused(policy_file, tmp_path):
    err = _load_error(_with_metadata(policy_file, tmp_path / "bad.onnx", '{"schema_version": 1, "robot": '))
    assert "unreadable contract" in err.reason and "not valid JSON" in err.reason
    data = _contract_dict(policy_file)
    del data["action"]["clip"]
    err = _load_error(_with_metadata(policy_file, tmp_path / "bad2.onnx", json.dumps(data)))
    assert "action.clip: missing key 'clip'" in err.reason


def test_newer_schema_is_refused(policy_file, tmp_path):
    data = _contract_dict(policy_file)
    data["schema_version"] = SCHEMA_VERSION + 1
    err = _load_error(_with_metadata(policy_file, tmp_path / "future.onnx", json.dumps(data)))
    assert isinstance(err.mismatch, ContractMismatch)
    assert f"schema_version: model has {SCHEMA_VERSION + 1}, runtime has {SCHEMA_VERSION}" in err.reason


def test_graph_disagreeing_with_its_own_contract_is_refused(policy_file, tmp_path):
    data = _contract_dict(policy_file)
    data["input"]["shape"] = ["batch", 48]
    err = _load_error(_with_metadata(policy_file, tmp_path / "liar.onnx", json.dumps(data)))
    assert "graph disagrees with its own contract" in err.reason
    assert "input shape: graph has ['batch', 45], contract has ['batch', 48]" in err.reason
    data = _contract_dict(policy_file)
    data["output"]["name"] = "mu"
    err = _load_error(_with_metadata(policy_file, tmp_path / "liar2.onnx", json.dumps(data)))
    assert "output name: graph has 'actions', contract has 'mu'" in err.reason


def test_contract_mismatch_with_the_runtime_is_refused_naming_fields(policy_file):
    other_action = JointPositionAction(scale=0.5, clip=100.0)
    expected = PolicyContract.expected_from(A1, LAYOUT, COMMANDS, other_action)
    err = _load_error(policy_file, expected)
    assert "action.scale: model has 0.25, task has 0.5" in err.reason
    assert isinstance(err.mismatch, ContractMismatch) and len(err.mismatch.mismatches) == 1

    reordered = dataclasses.replace(CONTRACT, joint_names=tuple(reversed(CONTRACT.joint_names)))
    err = _load_error(policy_file, reordered)
    assert "joint_names[0]: model has 'FR_hip_joint', spec has 'RL_lower_joint'" in err.reason


def test_a_policy_loads_for_a_spec_with_waived_hash(policy_file):
    expected = dataclasses.replace(CONTRACT, spec_hash="f" * 16)
    _load_error(policy_file, expected)
    load_policy(policy_file, expected, check_spec_hash=False)


def test_act_runs_through_onnxruntimes_cpp_binding_and_equals_the_public_call(policy_file):
    """act calls the C++ run_with_iobinding that onnxruntime's Python method wraps (its per-call checks cost ≈ 0.4 µs
    a tick): with the installed onnxruntime it must find it, and give what the public method gives."""
    policy = load_policy(policy_file, CONTRACT)
    # The C++ session's method (bound to onnxruntime's private _sess), not the Python wrapper bound to the session.
    assert policy._run.func.__self__ is policy.session._sess
    obs = np.random.default_rng(4).normal(size=(1, CONTRACT.obs_dim)).astype(np.float32)
    got = policy.act(obs).copy()
    policy.session.run_with_iobinding(policy._binding)
    np.testing.assert_array_equal(got, policy._action)
    np.testing.assert_array_equal(got, policy.session.run([CONTRACT.output.name], {CONTRACT.input.name: obs})[0][0])
