"""The deploy node's parts that need no rclpy: its declared parameters against the generated files, policy
path resolution, and the Unitree interface lookup. The node's ROS behaviour: test_nodes_ros.py."""

import ast
from pathlib import Path

import pytest

from robot_rl.robots.spec import REPO_ROOT, available_robots, load_robot
from robot_rl.ros.gen_config import NODE_DEFAULTS, OUTPUTS, deploy_parameters

PACKAGE_DIR = REPO_ROOT / "ros_ws" / "src" / "robot_rl"
NODE_SOURCE = PACKAGE_DIR / "robot_rl_ros" / "deploy_node.py"


@pytest.fixture
def deploy_support(monkeypatch):
    monkeypatch.syspath_prepend(str(PACKAGE_DIR))
    import robot_rl_ros.deploy_support as module

    return module


def _declared_parameters() -> set[str]:
    """Names passed to self.declare_parameter("...") in the node, plus the NODE_DEFAULTS it loops over."""
    names = set()
    for node in ast.walk(ast.parse(NODE_SOURCE.read_text())):
        call = isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "declare_parameter"
        if call and isinstance(node.args[0], ast.Constant):
            names.add(node.args[0].value)
    assert "for name, default in NODE_DEFAULTS.items():" in NODE_SOURCE.read_text()
    return names | set(NODE_DEFAULTS)


@pytest.mark.parametrize("robot", available_robots())
def test_every_generated_parameter_is_one_the_node_declares(robot):
    # ROS silently ignores a parameter file entry the node never declares: a typo would go unnoticed.
    generated = set(deploy_parameters(load_robot(robot)))
    assert generated <= _declared_parameters(), generated - _declared_parameters()


def test_node_reads_every_parameter_it_declares():
    source = NODE_SOURCE.read_text()
    for name in _declared_parameters() - set(NODE_DEFAULTS):
        assert source.count(f'"{name}"') >= 2, f"deploy_node declares {name!r} but never reads it"
    for name in NODE_DEFAULTS:
        assert f'p("{name}")' in source or f'self._param("{name}")' in source, f"{name!r} is never read"


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
