"""The nodes on a real ROS 2 graph (rclpy). Skipped where ROS 2 is not installed.

Each test runs its own rclpy context and executor; a probe node plays the other side (a driver publishing
joint states and IMU, a gamepad, a subscriber to the outputs).
"""

import json
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="ROS 2 (rclpy) is not installed: source a ROS 2 Humble/Jazzy setup")

from geometry_msgs.msg import Twist  # noqa: E402
from lifecycle_msgs.msg import State  # noqa: E402
from mcap.reader import make_reader  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Imu, JointState, Joy  # noqa: E402
from std_msgs.msg import Bool, Float64MultiArray, String  # noqa: E402

from robot_rl.robots.spec import REPO_ROOT, load_robot  # noqa: E402

PACKAGE_DIR = REPO_ROOT / "ros_ws" / "src" / "robot_rl"
SHIPPED_POLICY = REPO_ROOT / "policies" / "a1_flat" / "policy.onnx"


@pytest.fixture
def ros(monkeypatch):
    """A fresh context and executor; nodes added with ros.add(node) are destroyed at the end."""
    monkeypatch.syspath_prepend(str(PACKAGE_DIR))
    context = rclpy.Context()
    rclpy.init(context=context)
    executor = SingleThreadedExecutor(context=context)

    class Graph:
        def add(self, node):
            executor.add_node(node)
            return node

        def spin_until(self, condition, timeout_s=10.0, each=None):
            """Spin until condition() holds; ``each()`` runs before every spin (e.g. to publish)."""
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if each is not None:
                    each()
                executor.spin_once(timeout_sec=0.02)
                if condition():
                    return True
            return False

    graph = Graph()
    graph.context = context
    yield graph
    for node in list(executor.get_nodes()):
        executor.remove_node(node)
        node.destroy_node()
    executor.shutdown()
    rclpy.shutdown(context=context)


def test_teleop_turns_a_gamepad_into_twists_and_an_estop(ros):
    from robot_rl_ros.teleop_node import TeleopNode

    ros.add(TeleopNode(context=ros.context, parameter_overrides=[Parameter("input", value="joy")]))
    probe = ros.add(rclpy.create_node("probe", context=ros.context))
    twists, estops = [], []
    probe.create_subscription(Twist, "cmd_vel", twists.append, 10)
    probe.create_subscription(Bool, "estop", estops.append, 10)
    joy = probe.create_publisher(Joy, "joy", 10)
    held = Joy(axes=[0.0, 0.5, 0.0, 0.3, 0.0, 0.0, 0.0, 0.0], buttons=[0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0])
    assert ros.spin_until(lambda: any(t.linear.x == 0.5 for t in twists), each=lambda: joy.publish(held))
    assert any(t.angular.z == pytest.approx(0.3) for t in twists)
    held.buttons[1] = 1  # B: e-stop
    assert ros.spin_until(lambda: bool(estops), each=lambda: joy.publish(held))
    assert estops[0].data is True


def test_recorder_writes_the_topics_it_hears_to_mcap(ros, tmp_path):
    from robot_rl_ros.recorder_node import RecorderNode

    output = tmp_path / "rec.mcap"
    probe = ros.add(rclpy.create_node("probe", context=ros.context))
    chatter = probe.create_publisher(String, "chatter", 10)
    recorder = ros.add(RecorderNode(context=ros.context, parameter_overrides=[
        Parameter("topics", value=["chatter"]), Parameter("output", value=str(output)),
        Parameter("discovery_period_s", value=0.1)]))
    assert ros.spin_until(lambda: recorder.writer.message_count >= 3, each=lambda: chatter.publish(String(data="m")))
    recorder.writer.close()
    with output.open("rb") as stream:
        records = [(s.name, c.topic, json.loads(m.data)) for s, c, m in make_reader(stream).iter_messages()]
    assert records[0][:2] == ("std_msgs/msg/String", "/chatter")
    assert all(r[2] == {"data": "m"} for r in records)


@pytest.mark.skipif(not SHIPPED_POLICY.exists(), reason=f"{SHIPPED_POLICY.relative_to(REPO_ROOT)} is not trained yet")
def test_deploy_node_lifecycle_over_ros2_control_topics(ros):
    from robot_rl_ros.deploy_node import DeployNode

    spec = load_robot("a1")
    node = ros.add(DeployNode(context=ros.context, parameter_overrides=[
        Parameter("robot", value="a1"), Parameter("policy", value=str(SHIPPED_POLICY)),
        Parameter("interface", value="ros2_control"), Parameter("pause_gc", value=False)]))
    probe = ros.add(rclpy.create_node("probe", context=ros.context))
    commands, statuses = [], []
    probe.create_subscription(Float64MultiArray, "forward_position_controller/commands", commands.append, 10)
    probe.create_subscription(String, "robot_rl_deploy/status", lambda m: statuses.append(json.loads(m.data)), 10)
    joint_states = probe.create_publisher(JointState, "joint_states", 10)
    imu = probe.create_publisher(Imu, "imu/data", 10)
    estop = probe.create_publisher(Bool, "estop", 10)
    names = list(reversed(spec.joint_names))  # a driver's own order: matched by name

    def publish_state():
        q = list(reversed(spec.default_positions.tolist()))
        joint_states.publish(JointState(name=names, position=q, velocity=[0.0] * len(q), effort=[]))
        imu.publish(Imu())  # identity orientation: upright

    probe.create_timer(0.005, publish_state)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert ros.spin_until(lambda: len(commands) >= 20)
        assert all(len(c.data) == spec.num_joints for c in commands)
        assert ros.spin_until(lambda: any(s["mode"] == "ramp" for s in statuses))
        estop.publish(Bool(data=True))
        assert ros.spin_until(lambda: any(s["mode"] == "damping" for s in statuses))
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        assert node._state_machine.current_state[0] == State.PRIMARY_STATE_UNCONFIGURED
    finally:
        node.release_on_exit()


@pytest.mark.skipif(not SHIPPED_POLICY.exists(), reason=f"{SHIPPED_POLICY.relative_to(REPO_ROOT)} is not trained yet")
def test_deploy_node_refuses_a_stale_parameters_file(ros):
    from robot_rl_ros.deploy_node import DeployNode

    node = ros.add(DeployNode(context=ros.context, parameter_overrides=[
        Parameter("robot", value="a1"), Parameter("policy", value=str(SHIPPED_POLICY)),
        Parameter("spec_hash", value="0000000000000000")]))
    assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    assert Path(SHIPPED_POLICY).exists()  # the refusal is about the parameters, not the file
