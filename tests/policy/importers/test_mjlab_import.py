"""mjlab ONNX policies, described by the metadata mjlab's exporter writes into the file. No mjlab-trained Go2
policy is at hand and mjlab cannot run here (it needs mujoco-warp and its own torch), so the file is made at test
time: the real robot_lab Go2 network (../shared/external) with its weights permuted to Menagerie's joint order
(what mjlab's natural order is for that model), and metadata in mjlab 1.6's keys and number format
(foreign_networks.robot_lab_mjlab_metadata; exporter_utils.get_base_metadata / list_to_csv_str). It imports alone,
matched by name, to the policy the rl_sar path gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robot_rl.policy.contract import IMPORTED_NOTE
from robot_rl.policy.importers import PolicyImportError, read_description
from robot_rl.policy.importers.convert import convert
from robot_rl.policy.onnx_policy import load_policy, read_contract

from .foreign_networks import MENAGERIE_ORDER, mjlab_csv, robot_lab_in_order, robot_lab_mjlab_metadata

ROBOT_LAB = "rl_sar/policy/go2/robot_lab"


def _mjlab_onnx(external: Path, tmp_path: Path, **override) -> Path:
    return robot_lab_in_order(external / ROBOT_LAB / "policy.pt", MENAGERIE_ORDER, tmp_path / "mjlab_go2.onnx",
                              robot_lab_mjlab_metadata(MENAGERIE_ORDER, **override))


def test_metadata_format_is_mjlabs():
    assert mjlab_csv([0.125, 0.8, -1.5]) == "0.125,0.800,-1.500"
    assert mjlab_csv([[-100.0, 100.0], [float("-inf"), float("inf")]]) == "-100.000;100.000,-inf;inf"
    assert mjlab_csv([True, 0]) == "1.000,0.000"  # a bool is an int to mjlab's formatter


def test_mjlab_onnx_imports_alone_and_acts_as_the_rl_sar_import(external, tmp_path):
    model = _mjlab_onnx(external, tmp_path)
    foreign = read_description(model, None)
    assert foreign.joint_names == MENAGERIE_ORDER and foreign.history == (0,)
    assert foreign.terms[0].clip == pytest.approx(25.0)  # clip ±100, then the 0.25 scale
    ours, ref = tmp_path / "mjlab.onnx", tmp_path / "rl_sar.onnx"
    convert(model, None, "go2", "go2-flat", ours, ("default-pose",))
    convert(external / ROBOT_LAB / "config.yaml", None, "go2", "go2-flat", ref, ("default-pose",))
    a_contract, b_contract = read_contract(ours), read_contract(ref)
    assert a_contract.joint_names == b_contract.joint_names  # the spec's order, whatever the trainer's
    a, b = load_policy(ours, a_contract), load_policy(ref, b_contract)
    obs = np.random.default_rng(5).normal(0.0, 1.0, (64, a.obs_dim)).astype(np.float32)
    np.testing.assert_allclose(a.act_batch(obs), b.act_batch(obs), rtol=1e-4, atol=1e-4)
    note = a_contract.provenance.notes[IMPORTED_NOTE]
    assert note["trainer"].startswith("mjlab ONNX") and note["policy_joint_order"] == list(MENAGERIE_ORDER)
    assert set(note["sources"]) == {"model"}


def test_mjlab_import_walks_on_the_menagerie_go2(external, go2_model, tmp_path):
    from robot_rl.control.runtime import DeployRuntime
    from robot_rl.evaluation.walk import walk

    path = tmp_path / "mjlab.onnx"
    convert(_mjlab_onnx(external, tmp_path), None, "go2", "go2-flat", path, ("default-pose",))
    result = walk(DeployRuntime.load("go2", path), vx=0.5, walk_s=4.0)
    assert result.fell_at_s is None and not result.faulted, result
    assert result.distance_m > 1.4, result


def test_rounded_metadata_agrees_within_its_three_decimals(external, tmp_path):
    """mjlab writes 3 decimals: a gain 0.0004 off the spec's is the same gain, 0.002 off is not."""
    model = _mjlab_onnx(external, tmp_path, joint_damping=[0.5004] * 12)
    convert(model, None, "go2", "go2-flat", tmp_path / "ok.onnx", ("default-pose",))
    (tmp_path / "off").mkdir()
    model = _mjlab_onnx(external, tmp_path / "off", joint_damping=[0.502] * 12)
    with pytest.raises(PolicyImportError, match=r"kd of FL_hip_joint: the policy was trained with 0\.502, robot "
                                                r"'go2' .* has 0\.5 \(and 11 more joints\); pass --allow gains"):
        convert(model, None, "go2", "go2-flat", tmp_path / "off.onnx", ("default-pose",))


@pytest.mark.parametrize(("override", "message"), [
    ({"joint_names": ["FL_hip_roll_joint", *MENAGERIE_ORDER[1:]]},
     r"policy joint 0 'FL_hip_roll_joint' \(mjlab ONNX .*\) is not a joint of robot 'go2'"),
    ({"observation_names": ["base_lin_vel", "projected_gravity", "command", "joint_pos", "joint_vel", "actions"]},
     r"observation term 'base_lin_vel' \(mjlab ONNX .*\) needs 'base_lin_vel', which a real robot does not measure"),
    ({"observation_names": ["base_ang_vel", "projected_gravity", "command", "joint_pos", "joint_vel", "height_scan"]},
     r"observation term 'height_scan' is not one of mjlab's velocity-task terms"),
    ({"joint_stiffness": [20.0] * 11}, r"metadata joint_stiffness has 11 values for 12 joint_names"),
])
def test_a_bad_metadata_is_refused_in_one_line_naming_it(external, tmp_path, override, message):
    with pytest.raises(PolicyImportError, match=message) as info:
        convert(_mjlab_onnx(external, tmp_path, **override), None, "go2", "go2-flat", tmp_path / "p.onnx",
                ("default-pose",))
    assert "\n" not in str(info.value) and not (tmp_path / "p.onnx").exists()


def test_metadata_without_observation_scales_is_refused(external, tmp_path):
    """mjlab's exporter before it recorded observation scales (the keys of its 0.1 release): not enough."""
    import onnx

    model = _mjlab_onnx(external, tmp_path)
    proto = onnx.load(str(model))
    kept = [p for p in proto.metadata_props if not p.key.startswith("observation_terms_")]
    del proto.metadata_props[:]
    proto.metadata_props.extend(kept)
    onnx.save(proto, str(model))
    with pytest.raises(PolicyImportError, match=r"mjlab metadata without observation_terms_scale"):
        read_description(model, None)
