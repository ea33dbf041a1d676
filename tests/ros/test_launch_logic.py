"""The launch files' decisions (robot_rl.ros.launch_logic), without the ROS `launch` package."""

import pytest

from robot_rl.ros.launch_logic import deploy_node_parameters, exit_shutdown_reason, is_true


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
