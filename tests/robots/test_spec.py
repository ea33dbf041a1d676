"""Robot specs: every shipped spec loads and is self-consistent; every bad spec fails with an error naming
the file, the key path and the bad value.

Bad specs are derived from the real a1.yaml (parsed, one fact edited, dumped again) so they stay real.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_rl.robots.spec import (
    RobotSpec,
    UnitreeDdsInterfaceSpec,
    available_robots,
    load_robot,
    load_spec_file,
    specs_dir,
)
from robot_rl.typed_yaml import ConfigError

# Joint counts the rest of the stack is built around (policy sizes, DDS slots): a changed count is a real change.
EXPECTED_JOINT_COUNTS = {"a1": 12, "go2": 12, "g1": 29, "panda": 7}
# LowCmd motor slots per message family (unitree_go: Go2/B2; unitree_hg: G1/H1-2).
SLOTS_PER_FAMILY = {"unitree_go": 20, "unitree_hg": 35}

A1_FILE = specs_dir() / "a1.yaml"


@functools.cache
def spec_of(name: str) -> RobotSpec:
    """Loaded once per run; a spec that fails to load fails only the tests that use it."""
    return load_robot(name)


def a1_data() -> dict:
    return yaml.safe_load(A1_FILE.read_text())


def write_spec(tmp_path: Path, data: dict, stem: str = "a1") -> Path:
    path = tmp_path / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def expect_error(path: Path, key_path: str, *bad_values: str) -> ConfigError:
    """Loading ``path`` fails, and the message names the file, the key path and each bad value."""
    with pytest.raises(ConfigError) as info:
        load_spec_file(path)
    err, message = info.value, str(info.value)
    assert str(path) in message
    assert err.key_path == key_path
    assert f": {key_path}: " in message
    for bad in bad_values:
        assert bad in message, f"{bad!r} not in {message!r}"
    return err


# --- the shipped specs --------------------------------------------------------------------------------------


def test_every_expected_robot_has_a_spec():
    assert set(EXPECTED_JOINT_COUNTS) <= set(available_robots())


@pytest.mark.parametrize("name", available_robots())
def test_spec_loads_with_its_arrays_in_joint_order(name: str):
    spec = load_robot(name)
    assert spec.name == name
    assert Path(spec.source_file) == specs_dir() / f"{name}.yaml"
    n = spec.num_joints
    assert len(spec.joint_names) == len(set(spec.joint_names)) == n
    for arr, attr in [
        (spec.default_positions, "default_position"),
        (spec.kp, "kp"),
        (spec.kd, "kd"),
        (spec.effort_limits, "effort_limit"),
        (spec.velocity_limits, "velocity_limit"),
    ]:
        assert arr.shape == (n,)
        assert not arr.flags.writeable
        np.testing.assert_array_equal(arr, [getattr(j, attr) for j in spec.joints])
    assert np.all(spec.position_lower < spec.position_upper)


@pytest.mark.parametrize("name", sorted(EXPECTED_JOINT_COUNTS))
def test_joint_count(name: str):
    assert spec_of(name).num_joints == EXPECTED_JOINT_COUNTS[name]


@pytest.mark.parametrize("name", ["a1", "go2"])
def test_quadruped_joints_are_in_unitree_motor_order(name: str):
    # Unitree's motor order: legs FR, FL, RR, RL; hip (abduction), thigh, calf within each leg.
    names = spec_of(name).joint_names
    assert [n.split("_")[0] for n in names] == [leg for leg in ("FR", "FL", "RR", "RL") for _ in range(3)]
    assert names[0].endswith("hip_joint")
    assert len({n.split("_", 1)[1] for n in names[0:3]}) == 3
    assert all(n.split("_", 1)[1] == names[i % 3].split("_", 1)[1] for i, n in enumerate(names))


def test_g1_joints_are_in_unitree_motor_order():
    names = spec_of("g1").joint_names
    leg = ["hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll"]
    arm = ["shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw"]
    expected = (
        [f"left_{j}_joint" for j in leg]
        + [f"right_{j}_joint" for j in leg]
        + ["waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint"]
        + [f"left_{j}_joint" for j in arm]
        + [f"right_{j}_joint" for j in arm]
    )
    assert list(names) == expected


def test_panda_joints_in_order():
    assert list(spec_of("panda").joint_names) == [f"panda_joint{i}" for i in range(1, 8)]


@pytest.mark.parametrize("name", available_robots())
def test_default_pose_is_inside_the_soft_limits(name: str):
    # The ramp drives to the default pose; if it sat in the soft-limit margin the safety chain would move it.
    spec = load_robot(name)
    margin = spec.safety.soft_limit_margin_rad
    assert np.all(spec.default_positions >= spec.position_lower + margin)
    assert np.all(spec.default_positions <= spec.position_upper - margin)


def _mirror_pairs(spec: RobotSpec) -> list[tuple[str, str]]:
    names = set(spec.joint_names)
    swaps = [("FR_", "FL_"), ("RR_", "RL_"), ("right_", "left_")]
    return [
        (n, n.replace(a, b, 1))
        for n in spec.joint_names
        for a, b in swaps
        if n.startswith(a) and n.replace(a, b, 1) in names
    ]


@pytest.mark.parametrize("name", ["a1", "go2", "g1"])
def test_left_and_right_joints_mirror(name: str):
    """A typo on one side shows up as a broken mirror: same gains and limits, limits equal or reflected."""
    spec = spec_of(name)
    joints = {j.name: j for j in spec.joints}
    pairs = _mirror_pairs(spec)
    assert len(pairs) == (6 if name != "g1" else 13)
    for right, left in pairs:
        r, lft = joints[right], joints[left]
        assert (r.kp, r.kd, r.effort_limit, r.velocity_limit, r.armature) == (
            lft.kp,
            lft.kd,
            lft.effort_limit,
            lft.velocity_limit,
            lft.armature,
        ), right
        lo, hi = lft.position_limit
        assert r.position_limit in ((lo, hi), (-hi, -lo)), right
        assert r.default_position in (lft.default_position, -lft.default_position), right


# Chosen from the raw YAML so that a spec that fails to load fails its own tests, not the collection.
UNITREE_ROBOTS = [
    n
    for n in available_robots()
    if (yaml.safe_load((specs_dir() / f"{n}.yaml").read_text()).get("interface") or {}).get("type") == "unitree_dds"
]


def test_unitree_robots_found():
    assert {"a1", "go2", "g1"} <= set(UNITREE_ROBOTS)


@pytest.mark.parametrize("name", UNITREE_ROBOTS)
def test_motor_slots_cover_every_joint_once(name: str):
    spec = load_robot(name)
    assert isinstance(spec.interface, UnitreeDdsInterfaceSpec)
    slots = spec.interface.motor_slots
    assert len(slots) == SLOTS_PER_FAMILY[spec.interface.message_family]
    used = [s for s in slots if s]
    assert sorted(used) == sorted(spec.joint_names)
    # Unitree's low-level order is the joint order, so slot i drives joint i.
    assert tuple(used) == spec.joint_names == slots[: spec.num_joints]


@pytest.mark.parametrize(
    ("name", "family", "release"),
    [("go2", "unitree_go", "sport_mode"), ("g1", "unitree_hg", "debug_mode"), ("a1", "unitree_go", "none")],
)
def test_unitree_interfaces(name: str, family: str, release: str):
    iface = spec_of(name).interface
    assert isinstance(iface, UnitreeDdsInterfaceSpec)
    assert (iface.message_family, iface.release_step) == (family, release)


@pytest.mark.parametrize(
    ("name", "source", "path"),
    [("go2", "menagerie", "unitree_go2/go2.xml"), ("g1", "unitree_mujoco", "unitree_robots/g1/g1_29dof.xml")],
)
def test_upstream_checkout_models(name: str, source: str, path: str):
    model = spec_of(name).sim_model
    assert (model.source, model.path) == (source, path)
    assert model.floating_base and model.base_height is not None and model.base_height > 0
    assert len(model.foot_bodies) == (4 if spec_of(name).kind == "quadruped" else 2)


# --- spec hash ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", available_robots())
def test_spec_hash_is_stable_across_loads(name: str):
    first, second = load_robot(name), load_robot(name)
    assert first is not second
    assert first.spec_hash == second.spec_hash
    assert re.fullmatch(r"[0-9a-f]{16}", first.spec_hash)


def test_spec_hashes_differ_between_robots():
    hashes = [spec_of(n).spec_hash for n in available_robots()]
    assert len(set(hashes)) == len(hashes)


def test_spec_hash_ignores_formatting_comments_and_description(tmp_path: Path):
    original = load_spec_file(A1_FILE)
    for sub in ("dumped", "commented", "described"):
        (tmp_path / sub).mkdir()

    # Re-dumped by PyYAML: comments gone, flow style and key layout different.
    data = a1_data()
    assert load_spec_file(write_spec(tmp_path / "dumped", data)).spec_hash == original.spec_hash

    commented = tmp_path / "commented" / "a1.yaml"
    commented.write_text("# a new comment line\n" + A1_FILE.read_text().replace("kind:", "# another\nkind:", 1))
    assert load_spec_file(commented).spec_hash == original.spec_hash

    data["description"] = "the same robot, described differently"
    assert load_spec_file(write_spec(tmp_path / "described", data)).spec_hash == original.spec_hash


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("joints", 3, "kp"), 21.0),
        (("joints", 0, "position_limit"), [-0.8, 0.79]),
        (("joints", 5, "armature"), 0.02),
        (("timing", "policy_period_s"), 0.025),
    ],
)
def test_spec_hash_changes_when_a_fact_changes(tmp_path: Path, where: tuple, value):
    data = a1_data()
    target = data
    for key in where[:-1]:
        target = target[key]
    assert target[where[-1]] != value
    target[where[-1]] = value
    assert load_spec_file(write_spec(tmp_path, data)).spec_hash != load_spec_file(A1_FILE).spec_hash


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("timing", "hardware_period_s"), 0.001),
        (("safety", "max_tilt_rad"), 0.9),
        (("interface", "network_interface"), "eth0"),
    ],
)
def test_spec_hash_ignores_deployment_settings(tmp_path: Path, where: tuple, value):
    """Safety margins, rates of the hardware link and network settings change without retraining."""
    data = a1_data()
    target = data
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    assert load_spec_file(write_spec(tmp_path, data)).spec_hash == load_spec_file(A1_FILE).spec_hash


def test_spec_hash_changes_when_joint_order_changes(tmp_path: Path):
    data = a1_data()
    data["joints"][0], data["joints"][3] = data["joints"][3], data["joints"][0]
    assert load_spec_file(write_spec(tmp_path, data)).spec_hash != load_spec_file(A1_FILE).spec_hash


# --- bad specs ----------------------------------------------------------------------------------------------


def edited(edit) -> dict:
    data = copy.deepcopy(a1_data())
    edit(data)
    return data


def test_the_unedited_copy_loads(tmp_path: Path):
    # Guards the cases below: each fails because of its one edit, not because the dump/reload is broken.
    assert load_spec_file(write_spec(tmp_path, a1_data())).joint_names == load_spec_file(A1_FILE).joint_names


def test_unknown_top_level_key(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d.update(colour="red")))
    err = expect_error(path, "colour", "unknown key 'colour'")
    assert "allowed:" in str(err) and "joints" in str(err)


def test_unknown_key_inside_a_joint(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["joints"][2].update(stiffness=5.0)))
    expect_error(path, "joints[2].stiffness", "unknown key 'stiffness'", "kp")


def test_missing_key_inside_a_joint(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["joints"][0].pop("kd")))
    expect_error(path, "joints[0].kd", "missing key 'kd'", "a number")


def test_missing_top_level_key(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d.pop("timing")))
    expect_error(path, "timing", "missing key 'timing'")


def test_string_for_kp(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["joints"][1].update(kp="twenty")))
    expect_error(path, "joints[1].kp", "expected a number", "'twenty'")


def test_list_for_a_float(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["timing"].update(policy_period_s=[0.02])))
    expect_error(path, "timing.policy_period_s", "expected a number", "[0.02]")


def test_bool_is_not_a_number(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["safety"].update(damping_kd=True)))
    expect_error(path, "safety.damping_kd", "expected a number", "True")


def test_position_limit_of_wrong_length(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["joints"][5].update(position_limit=[-1.0])))
    expect_error(path, "joints[5].position_limit", "2 items", "[-1.0]")


def test_limits_out_of_order(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["joints"][0].update(position_limit=[0.8, -0.8])))
    expect_error(path, "joints[0].position_limit", "out of order", "[0.8, -0.8]")


def test_joint_listed_twice(tmp_path: Path):
    def duplicate(d):
        d["joints"][3]["name"] = d["joints"][0]["name"]

    path = write_spec(tmp_path, edited(duplicate))
    expect_error(path, "joints[3].name", "'FR_hip_joint'", "listed twice", "joints[0]")


def test_negative_kp(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["joints"][4].update(kp=-5.0)))
    expect_error(path, "joints[4].kp", "-5.0")


def test_zero_effort_limit(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["joints"][6].update(effort_limit=0.0)))
    expect_error(path, "joints[6].effort_limit", "must be positive", "0.0")


def test_default_pose_outside_limits(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["joints"][2].update(default_position=0.5)))
    expect_error(path, "joints[2].default_position", "0.5", "outside position_limit")


def test_policy_period_not_a_multiple_of_physics_period(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["timing"].update(policy_period_s=0.021)))
    expect_error(path, "timing.policy_period_s", "0.021", "0.005", "integer multiple")


def test_unknown_interface_type(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["interface"].update(type="can_bus")))
    expect_error(path, "interface.type", "'can_bus'", "'unitree_dds'")


def test_unknown_message_family(tmp_path: Path):
    path = write_spec(tmp_path, edited(lambda d: d["interface"].update(message_family="unitree_xx")))
    expect_error(path, "interface.message_family", "'unitree_xx'", "'unitree_hg'")


def test_motor_slot_naming_a_joint_not_in_the_spec(tmp_path: Path):
    def rename_slot(d):
        d["interface"]["motor_slots"][13] = "tail_joint"

    path = write_spec(tmp_path, edited(rename_slot))
    expect_error(path, "interface.motor_slots[13]", "'tail_joint'", "not a joint")


def test_joint_without_a_motor_slot(tmp_path: Path):
    def drop_slot(d):
        d["interface"]["motor_slots"][11] = ""

    path = write_spec(tmp_path, edited(drop_slot))
    expect_error(path, "interface.motor_slots", "'RL_lower_joint'", "no motor slot")


def test_file_name_differs_from_name(tmp_path: Path):
    path = write_spec(tmp_path, a1_data(), stem="b1")
    expect_error(path, "name", "'a1'", "'b1'")


def test_invalid_yaml_syntax(tmp_path: Path):
    path = tmp_path / "a1.yaml"
    path.write_text(A1_FILE.read_text().replace("kind: quadruped", "kind: [quadruped", 1))
    with pytest.raises(ConfigError) as info:
        load_spec_file(path)
    message = str(info.value)
    assert str(path) in message and "not valid YAML" in message
    assert re.search(r"line \d+", message)


def test_missing_file(tmp_path: Path):
    path = tmp_path / "nowhere.yaml"
    with pytest.raises(ConfigError, match="cannot read file") as info:
        load_spec_file(path)
    assert str(path) in str(info.value)


def test_unknown_robot_name_lists_the_available_ones():
    with pytest.raises(ConfigError) as info:
        load_robot("no_such_robot")
    message = str(info.value)
    assert "'no_such_robot'" in message and str(specs_dir()) in message
    for name in available_robots():
        assert name in message


def test_load_robot_by_path(tmp_path: Path):
    path = write_spec(tmp_path, a1_data())
    spec = load_robot(str(path))
    assert spec.source_file == str(path)
    assert spec == load_robot("a1")  # source_file is not part of equality
