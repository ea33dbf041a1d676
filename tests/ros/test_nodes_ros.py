"""The nodes on a real ROS 2 graph (rclpy). Skipped where ROS 2 is not installed.

Each test runs its own rclpy context and executor; a probe node plays the other side (a driver publishing
joint states and IMU, a gamepad, a subscriber to the outputs).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="ROS 2 (rclpy) is not installed: source a ROS 2 Humble/Jazzy setup")

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from geometry_msgs.msg import PointStamped, Twist  # noqa: E402
from lifecycle_msgs.msg import State, Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState  # noqa: E402
from mcap.reader import make_reader  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Imu, JointState, Joy  # noqa: E402
from std_msgs.msg import Bool, Float64MultiArray, String  # noqa: E402

from robot_rl.robots.spec import REPO_ROOT, load_robot  # noqa: E402

PACKAGE_DIR = REPO_ROOT / "ros_ws" / "src" / "robot_rl"
SHIPPED_POLICY = REPO_ROOT / "policies" / "a1_flat" / "policy.onnx"
PANDA_POLICY = REPO_ROOT / "policies" / "panda_reach" / "policy.onnx"
needs_policy = pytest.mark.skipif(not SHIPPED_POLICY.exists(), reason="the shipped A1 policy is missing")


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


@needs_policy
def test_deploy_node_parameters_have_the_spec_defaults_without_a_parameters_file(ros):
    # `ros2 run robot_rl deploy_node --ros-args -p robot:=a1 -p policy:=...`: no params file, configures.
    from robot_rl_ros.deploy_node import DeployNode

    spec = load_robot("a1")
    node = ros.add(DeployNode(context=ros.context, parameter_overrides=[
        Parameter("robot", value="a1"), Parameter("policy", value=str(SHIPPED_POLICY)),
        Parameter("interface", value="ros2_control"), Parameter("pause_gc", value=False)]))
    try:
        assert node.get_parameter("joint_names").value == list(spec.joint_names)
        assert node.get_parameter("use_imu").value is True
        assert node.get_parameter("spec_hash").value == spec.spec_hash
        assert node.describe_parameter("robot").read_only is True
        assert node.describe_parameter("joint_names").description
        assert not node.set_parameters([Parameter("robot", value="go2")])[0].successful
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    finally:
        node.release_on_exit()


@needs_policy
def test_deploy_node_reports_status_and_diagnostics_in_every_lifecycle_state(ros):
    from robot_rl_ros.deploy_node import DeployNode

    spec = load_robot("a1")
    node = ros.add(DeployNode(context=ros.context, parameter_overrides=[
        Parameter("robot", value="a1"), Parameter("policy", value=str(SHIPPED_POLICY)),
        Parameter("interface", value="ros2_control"), Parameter("pause_gc", value=False),
        Parameter("diagnostics_period_s", value=0.1)]))
    probe = ros.add(rclpy.create_node("probe", context=ros.context))
    statuses, diagnostics = [], []
    probe.create_subscription(String, "robot_rl_deploy/status", lambda m: statuses.append(json.loads(m.data)), 10)
    probe.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
    joint_states = probe.create_publisher(JointState, "joint_states", 10)
    imu = probe.create_publisher(Imu, "imu/data", 10)

    def publish_state():
        q = spec.default_positions.tolist()
        joint_states.publish(JointState(name=list(spec.joint_names), position=q, velocity=[0.0] * len(q)))
        imu.publish(Imu())

    probe.create_timer(0.005, publish_state)

    def heard(lifecycle, count=2):
        """``count`` more status and diagnostics messages in ``lifecycle``."""
        n_status, n_diag = sum(s["lifecycle"] == lifecycle for s in statuses), len(diagnostics)
        ok = ros.spin_until(lambda: sum(s["lifecycle"] == lifecycle for s in statuses) >= n_status + count
                            and len(diagnostics) >= n_diag + count)
        return ok and diagnostics[-1].status[0].message.startswith(lifecycle)

    try:
        assert heard("unconfigured")
        assert diagnostics[-1].status[0].level == DiagnosticStatus.OK
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert heard("inactive")
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert ros.spin_until(lambda: any(s["lifecycle"] == "active" and s["mode"] == "ramp" for s in statuses))
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        assert ros.spin_until(lambda: statuses[-1]["lifecycle"] == "inactive")
        assert statuses[-1]["mode"] == "damping"
        assert heard("inactive")  # still reporting while inactive, no longer "running"
        assert diagnostics[-1].status[0].message.startswith("inactive (damping)")
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        assert heard("unconfigured")
    finally:
        node.release_on_exit()


@pytest.mark.skipif(not PANDA_POLICY.exists(), reason="the shipped Panda reach policy is missing")
def test_panda_reach_target_comes_from_a_point_stamped(ros):
    from robot_rl_ros.deploy_node import DeployNode

    node = ros.add(DeployNode(context=ros.context, parameter_overrides=[
        Parameter("robot", value="panda"), Parameter("policy", value=str(PANDA_POLICY)),
        Parameter("pause_gc", value=False)]))
    probe = ros.add(rclpy.create_node("probe", context=ros.context))
    target = probe.create_publisher(PointStamped, "target", 10)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        commands = []
        node._runtime.set_command = commands.append
        point = PointStamped()
        point.point.x, point.point.y, point.point.z = 0.5, -0.1, 0.4
        assert ros.spin_until(lambda: bool(commands), each=lambda: target.publish(point))
        assert commands[0].tolist() == [0.5, -0.1, 0.4]
    finally:
        node.release_on_exit()


def test_recorder_writes_diagnostic_levels_as_integers_and_refuses_an_existing_file(ros, tmp_path):
    from robot_rl_ros.recorder_node import RecorderNode

    from robot_rl.data.mcap_log_reader import summarize_log

    output = tmp_path / "rec.mcap"
    probe = ros.add(rclpy.create_node("probe", context=ros.context))
    diagnostics = probe.create_publisher(DiagnosticArray, "/diagnostics", 10)
    estop = probe.create_publisher(Bool, "estop", 10)
    recorder = ros.add(RecorderNode(context=ros.context, parameter_overrides=[
        Parameter("topics", value=["/diagnostics", "estop"]), Parameter("output", value=str(output)),
        Parameter("discovery_period_s", value=0.1)]))
    array = DiagnosticArray(status=[DiagnosticStatus(level=DiagnosticStatus.ERROR, name="x", message="estop")])

    def publish():
        diagnostics.publish(array)
        estop.publish(Bool(data=True))

    assert ros.spin_until(lambda: recorder.writer.message_count >= 4, each=publish)
    recorder.writer.close()
    with output.open("rb") as stream:
        levels = [json.loads(m.data)["status"][0]["level"] for _, c, m in make_reader(stream).iter_messages()
                  if c.topic == "/diagnostics"]
    assert levels and all(level == 2 for level in levels)
    summary = summarize_log(output)
    assert summary["closed_cleanly"] and summary["safety_events"]["faults"] >= 1
    with pytest.raises(FileExistsError):
        RecorderNode(context=ros.context, parameter_overrides=[Parameter("output", value=str(output))])


def _wait_for(predicate, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@needs_policy
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_deploy_node_process_sends_damping_and_exits_0_on_a_signal(ros, tmp_path, signum):
    # The node's own main(): configured and activated over its lifecycle services, driven by joint states,
    # then signalled (twice, as a terminal's Ctrl-C and launch's SIGINT both arrive) while it publishes.
    spec = load_robot("a1")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PACKAGE_DIR), str(REPO_ROOT),
                                                         os.environ.get("PYTHONPATH", "")])}
    log = (tmp_path / "node.log").open("w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "robot_rl_ros.deploy_node", "--ros-args", "-r", "__node:=robot_rl_deploy_proc",
         "-p", "robot:=a1", "-p", f"policy:={SHIPPED_POLICY}", "-p", "interface:=ros2_control",
         "-p", "pause_gc:=false", "-p", "diagnostics_period_s:=0.05"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        probe = ros.add(rclpy.create_node("probe", context=ros.context))
        joint_states = probe.create_publisher(JointState, "joint_states", 10)
        imu = probe.create_publisher(Imu, "imu/data", 10)
        commands = []
        probe.create_subscription(Float64MultiArray, "forward_position_controller/commands", commands.append, 10)
        change = probe.create_client(ChangeState, "robot_rl_deploy_proc/change_state")

        def publish_state():
            q = spec.default_positions.tolist()
            joint_states.publish(JointState(name=list(spec.joint_names), position=q, velocity=[0.0] * len(q)))
            imu.publish(Imu())

        probe.create_timer(0.005, publish_state)
        assert ros.spin_until(lambda: change.service_is_ready(), timeout_s=30.0)
        for transition in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE):
            future = change.call_async(ChangeState.Request(transition=Transition(id=transition)))
            assert ros.spin_until(future.done, timeout_s=30.0) and future.result().success
        assert ros.spin_until(lambda: len(commands) >= 20)
        process.send_signal(signum)
        process.send_signal(signum)
        assert _wait_for(lambda: process.poll() is not None, 15.0)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    log.seek(0)
    output = log.read()
    assert process.returncode == 0, output
    assert "exit: damping sent (ros2_control)" in output
    assert "context is invalid" not in output and "Traceback" not in output, output
