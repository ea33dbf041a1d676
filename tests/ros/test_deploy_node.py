"""The deploy node's parts that need no rclpy: its declared parameters against the generated files, policy
path resolution, and the Unitree interface lookup. The node's ROS behaviour: test_nodes_ros.py."""

from pathlib import Path

import pytest

from robot_rl.robots.spec import REPO_ROOT, available_robots, load_robot
from robot_rl.ros.gen_config import OUTPUTS, PARAMETER_DESCRIPTIONS, deploy_parameters, node_parameters

PACKAGE_DIR = REPO_ROOT / "ros_ws" / "src" / "robot_rl"
NODE_SOURCE = PACKAGE_DIR / "robot_rl_ros" / "deploy_node.py"


@pytest.fixture
def deploy_support(monkeypatch):
    monkeypatch.syspath_prepend(str(PACKAGE_DIR))
    import robot_rl_ros.deploy_support as module

    return module


@pytest.mark.parametrize("robot", available_robots())
def test_every_parameter_has_a_default_from_the_spec(robot):
    # No parameter is declared without a value (on Jazzy get_parameter raises ParameterUninitializedException
    # for those): the node configures from `-p robot:=... -p policy:=...` alone.
    spec = load_robot(robot)
    declared = node_parameters(spec)
    assert [p.name for p in declared] == list(PARAMETER_DESCRIPTIONS)
    for parameter in declared:
        assert parameter.default is not None, parameter.name
        assert parameter.default != [], f"{parameter.name}: an empty list has no ROS type"
        assert parameter.description, parameter.name
    defaults = {p.name: p.default for p in declared}
    assert defaults["robot"] == spec.name and defaults["joint_names"] == list(spec.joint_names)
    assert defaults["use_imu"] is spec.sim_model.floating_base
    assert defaults["interface"] in OUTPUTS and defaults["spec_hash"] == spec.spec_hash
    assert defaults["policy"] == ""  # the one value with no default that works: configure says so
    assert [p.name for p in declared if p.read_only] == ["robot"]


@pytest.mark.parametrize("robot", available_robots())
def test_the_generated_parameters_file_sets_the_node_defaults(robot):
    # The file is redundant with the defaults (so a node started without it behaves the same), and every
    # entry is a declared parameter (ROS silently ignores an undeclared one: a typo would go unnoticed).
    spec = load_robot(robot)
    defaults = {p.name: p.default for p in node_parameters(spec)}
    generated = deploy_parameters(spec)
    assert set(generated) <= set(defaults), set(generated) - set(defaults)
    assert generated == {name: defaults[name] for name in generated}
    assert set(defaults) - set(generated) == {"policy"}


def test_node_declares_and_reads_every_parameter():
    source = NODE_SOURCE.read_text()
    assert "node_parameters(load_robot(robot))" in source
    for name in PARAMETER_DESCRIPTIONS:
        if name == "robot":
            continue
        assert f'p("{name}")' in source or f'self._param("{name}")' in source, f"{name!r} is never read"
    assert "Parameter.Type.BOOL" not in source  # a type without a value: uninitialized on Jazzy


def test_output_names_are_the_documented_ones():
    assert OUTPUTS == ("ros2_control", "joint_trajectory", "unitree_dds")
    readme = (REPO_ROOT / "ros_ws" / "README.md").read_text()
    for output in OUTPUTS:
        assert f"interface:={output}" in readme


def test_policy_path_resolution(deploy_support, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "policies" / "a1_flat").mkdir(parents=True)
    shipped = repo / "policies" / "a1_flat" / "policy.onnx"
    shipped.write_bytes(b"")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    resolve = deploy_support.resolve_policy_path
    # relative, not in the working directory: found in the repository
    assert resolve("policies/a1_flat/policy.onnx", repo) == shipped
    # relative and present in the working directory: that one wins
    (elsewhere / "mine.onnx").write_bytes(b"")
    assert resolve("mine.onnx", repo) == (elsewhere / "mine.onnx").resolve()
    # absolute: as given, even when missing (the loader reports it)
    assert resolve(str(tmp_path / "none.onnx"), repo) == tmp_path / "none.onnx"
    # missing everywhere: returned unchanged for the loader's error message
    assert resolve("policies/none.onnx", repo) == Path("policies/none.onnx")


def test_missing_unitree_interface_is_a_clear_import_error(deploy_support, monkeypatch):
    monkeypatch.setattr(deploy_support, "UNITREE_INTERFACE", ("robot_rl.hardware.no_such_module", "Missing"))
    with pytest.raises(ImportError, match=r"unitree_dds output needs robot_rl\.hardware\.no_such_module\.Missing"):
        deploy_support.open_unitree_interface(load_robot("a1"))
