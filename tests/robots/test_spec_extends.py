"""A spec file that extends another (``extends: g1`` and only what differs): the merged spec is the base with
those facts changed, checked like any spec file; bad references and unknown joints are one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_rl.robots.spec import load_robot
from robot_rl.typed_yaml import ConfigError

G1 = load_robot("g1")


def _write(path: Path, data: dict) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_extending_changes_only_the_facts_it_states(tmp_path):
    path = _write(tmp_path / "g1.yaml", {"extends": "g1", "policy_joints": [],
                                         "safety": {"max_tilt_rad": 0.9},
                                         "joints": [{"name": "waist_roll_joint", "kp": 600.0, "kd": 6.0}]})
    spec = load_robot(path)
    assert spec.source_file == path and spec.name == "g1"
    assert spec.policy_joint_names == G1.joint_names  # every joint is a policy joint
    waist = G1.joint_names.index("waist_roll_joint")
    expected_kp = np.array(G1.kp)
    expected_kp[waist] = 600.0
    np.testing.assert_array_equal(spec.kp, expected_kp)
    assert spec.kd[waist] == 6.0 and spec.joints[waist].effort_limit == G1.joints[waist].effort_limit
    assert spec.safety.max_tilt_rad == 0.9 and spec.safety.ramp_duration_s == G1.safety.ramp_duration_s
    assert spec.sim_model == G1.sim_model and spec.interface == G1.interface
    assert spec.spec_hash != G1.spec_hash


def test_an_unchanged_extension_is_the_same_robot(tmp_path):
    spec = load_robot(_write(tmp_path / "g1.yaml", {"extends": "g1"}))
    assert spec.spec_hash == G1.spec_hash


def test_a_chain_of_files_by_relative_path(tmp_path):
    _write(tmp_path / "base" / "g1.yaml", {"extends": "g1", "policy_joints": []})
    path = _write(tmp_path / "stiff" / "g1.yaml", {"extends": "../base/g1.yaml",
                                                   "joints": [{"name": "left_knee_joint", "kp": 200.0}]})
    spec = load_robot(path)
    assert spec.policy_joint_names == G1.joint_names
    assert spec.kp[G1.joint_names.index("left_knee_joint")] == 200.0


def test_a_model_path_stays_relative_to_the_file_that_names_it(tmp_path):
    base = yaml.safe_load(Path(load_robot("a1").source_file).read_text())
    base["sim_model"] = {**base["sim_model"], "source": "path", "path": "models/a1.urdf"}
    _write(tmp_path / "lab" / "a1.yaml", base)
    spec = load_robot(_write(tmp_path / "mine" / "a1.yaml", {"extends": "../lab/a1.yaml"}))
    assert Path(spec.sim_model.path) == (tmp_path / "lab" / "models" / "a1.urdf").resolve()


@pytest.mark.parametrize(("data", "message"), [
    ({"extends": "g1", "joints": [{"name": "tail_joint", "kp": 1.0}]},
     r"joints\[0\]\.name: 'tail_joint' is not a joint of the spec it extends .*g1\.yaml\); joints cannot be added"),
    ({"extends": "g1", "joints": [{"kp": 1.0}]}, r"joints: in a spec that extends another: a list of \{name"),
    ({"extends": "g2"}, r"extends: 'g2': no spec file at .*g2\.yaml"),
    ({"extends": "g1.yaml"}, r"extends: 'g1.yaml' extends itself"),
    ({"extends": 3}, r"extends: must be a robot name or a spec file path, got 3"),
    ({"extends": "g1", "joints": [{"name": "left_knee_joint", "kp": -1.0}]}, r"kp"),  # checked as any spec
])
def test_bad_extensions_are_one_line_errors(tmp_path, data, message):
    path = _write(tmp_path / "g1.yaml", data)
    with pytest.raises(ConfigError, match=message) as info:
        load_robot(path)
    assert "\n" not in str(info.value)
