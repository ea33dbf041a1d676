"""Gate thresholds: documented defaults, YAML overrides, and errors that name the file, key and value."""

from __future__ import annotations

import dataclasses

import pytest

from robot_rl.evaluation.gate_config import GateConfig
from robot_rl.typed_yaml import ConfigError


def test_every_threshold_is_documented():
    for name, value, _unit, doc in GateConfig().describe():
        assert value and len(doc) > 20, name
    assert {f.name for f in dataclasses.fields(GateConfig)} == {row[0] for row in GateConfig().describe()}


def test_yaml_overrides_some_fields_and_keeps_the_other_defaults(tmp_path):
    path = tmp_path / "gate.yaml"
    path.write_text("settle_s: 1.5\nlin_vel_error_mean_max_m_s: 0.2\nmax_falls: 1\n")
    config = GateConfig.from_yaml(path)
    assert (config.settle_s, config.lin_vel_error_mean_max_m_s, config.max_falls) == (1.5, 0.2, 1)
    assert config.fall_tilt_rad == GateConfig().fall_tilt_rad
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert GateConfig.from_yaml(empty) == GateConfig()


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ("setle_s: 1.0\n", "setle_s", "unknown key"),
        ("settle_s: fast\n", "settle_s", "expected a number"),
        ("max_falls: 0.5\n", "max_falls", "expected an integer"),
        ("fall_tilt_rad: -0.1\n", "fall_tilt_rad", "must be ≥ 0"),
        ("fall_height_fraction: 1.5\n", "fall_height_fraction", "in (0, 1)"),
        ("- 1\n- 2\n", "", "expected a mapping"),
    ],
)
def test_bad_overrides_name_file_key_and_value(tmp_path, text, key, words):
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        GateConfig.from_yaml(path)
    assert str(path) in str(err.value) and words in str(err.value)
    assert err.value.key_path == key


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read file"):
        GateConfig.from_yaml(tmp_path / "nope.yaml")
