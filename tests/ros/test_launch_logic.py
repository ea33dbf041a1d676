"""The launch files' decisions (launch/launch_logic.py), without the ROS `launch` package."""

import ast
import importlib.util

import pytest

from robot_rl.robots.spec import REPO_ROOT

LAUNCH_DIR = REPO_ROOT / "launch"


def _load():
    spec = importlib.util.spec_from_file_location("launch_logic_under_test", LAUNCH_DIR / "launch_logic.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


logic = _load()
deploy_node_parameters, exit_shutdown_reason = logic.deploy_node_parameters, logic.exit_shutdown_reason
is_true, sim_link_domain = logic.is_true, logic.sim_link_domain


@pytest.mark.parametrize("name", ["launch_logic.py", "deploy.launch.py", "sim.launch.py", "teleop.launch.py"])
def test_launch_files_import_nothing_from_robot_rl(name):
    # `ros2 launch` runs on the interpreter ROS 2 was installed for (/usr/bin/python3), which does not see
    # the virtualenv where robot_rl is installed.
    for node in ast.walk(ast.parse((LAUNCH_DIR / name).read_text())):
        if isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("robot_rl"), f"{name} imports {node.module}"
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("robot_rl") for a in node.names), f"{name} imports robot_rl"


def test_bridge_exit_shuts_the_launch_down_once():
    # The bridge exiting on its own (crash, window closed): shut the launch down, saying why.
    assert exit_shutdown_reason(False, "the sim bridge", 0) == "the sim bridge exited"
    assert exit_shutdown_reason(False, "the sim bridge", 3) == "the sim bridge exited with status 3"
    # The bridge exiting because the launch is shutting down (Ctrl-C): no second Shutdown event, which made
    # launch_ros raise "Cannot shutdown a ROS adapter that is not running" and `ros2 launch` exit 1.
    assert exit_shutdown_reason(True, "the sim bridge", -2) is None
    assert exit_shutdown_reason(True, "the sim bridge", 0) is None


@pytest.mark.parametrize(("text", "value"), [("true", True), ("True", True), ("1", True), ("yes", True),
                                             ("false", False), ("0", False), ("", False), ("no", False)])
def test_is_true(text, value):
    assert is_true(text) is value


def test_deploy_node_parameters(tmp_path):
    share = tmp_path / "share" / "robot_rl"
    (share / "config").mkdir(parents=True)
    (share / "config" / "a1_params.yaml").write_text("{}")
    generated = str(share / "config" / "a1_params.yaml")
    # the generated file, then the launch arguments; an empty interface leaves the file's (the robot's own)
    assert deploy_node_parameters(str(share), "a1", "p.onnx") == [generated, {"robot": "a1", "policy": "p.onnx"}]
    assert deploy_node_parameters(str(share), "a1", "p.onnx", "unitree_dds")[-1]["interface"] == "unitree_dds"
    # a given file replaces the generated one
    assert deploy_node_parameters(str(share), "a1", "p.onnx", params_file="/x.yaml")[0] == "/x.yaml"
    # a robot without a generated file: no file at all, the node's defaults come from its spec
    assert deploy_node_parameters(str(share), "mybot", "p.onnx") == [{"robot": "mybot", "policy": "p.onnx"}]
    # sim.launch.py's extra overrides
    assert deploy_node_parameters(str(share), "a1", "p.onnx", "unitree_dds", dds_domain_id=1)[-1] == {
        "robot": "a1", "policy": "p.onnx", "interface": "unitree_dds", "dds_domain_id": 1}


@pytest.mark.parametrize(("requested", "ros_domain", "domain"), [
    ("auto", None, 1), ("auto", "0", 1), ("", "7", 8), ("AUTO", "232", 0), ("auto", "not a number", 1),
    ("5", None, 5), ("0", "3", 0),
])
def test_sim_link_domain_defaults_to_one_ros_does_not_use(requested, ros_domain, domain):
    assert sim_link_domain(requested, ros_domain) == domain
    if requested.lower() in ("", "auto"):
        assert str(domain) != (ros_domain or "0")  # ROS 2 processes never see the Unitree topics


@pytest.mark.parametrize("requested", ["233", "-1", "lo"])
def test_sim_link_domain_rejects_what_dds_does_not_take(requested):
    with pytest.raises(ValueError, match="link_domain_id"):
        sim_link_domain(requested, None)
