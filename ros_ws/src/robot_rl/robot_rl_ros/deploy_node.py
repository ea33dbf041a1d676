"""Lifecycle deploy node: the robot_rl runtime (policy + safety chain) on ROS 2 topics or Unitree DDS.

Lifecycle:
- configure: load the robot spec and the policy, check the contract (DeployRuntime.load), check the
  parameters file against the spec, open the Unitree DDS interface when that is the output.
- activate: arm the runtime (it ramps from the pose measured on its next step, then runs the policy) and
  run the control loop at the policy rate; the loop steps once a complete state has arrived.
- deactivate: stop the runtime, send its damping command, stop the loop.
- cleanup / shutdown / error: all of the above as needed, then release everything.

Re-arming after an e-stop or fault is explicit: deactivate, then activate.

The node is plumbing only. Message content is converted by robot_rl.ros.conversions (tested without
ROS); every decision about what to send is the runtime's.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
from rclpy.executors import ExternalShutdownException
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from robot_rl.core.loop_timing import RateLoop, realtime_context
from robot_rl.core.types import JointCommand
from robot_rl.ros import conversions as conv
from robot_rl.ros.gen_config import DEPLOY_NODE_NAME, NODE_DEFAULTS, OUTPUTS, spec_parameters
from robot_rl_ros import messages
from robot_rl_ros.deploy_support import open_unitree_interface, resolve_policy_path

MAX_STATUS_EVENTS = 20
SUCCESS = TransitionCallbackReturn.SUCCESS
FAILURE = TransitionCallbackReturn.FAILURE


class DeployNode(LifecycleNode):
    def __init__(self, **node_options) -> None:
        super().__init__(DEPLOY_NODE_NAME, **node_options)
        self.declare_parameter("robot", "a1")
        self.declare_parameter("policy", "")
        # Derived from the spec when unset (the generated parameters file sets them, and they are checked).
        self.declare_parameter("interface", "")
        self.declare_parameter("spec_hash", "")
        self.declare_parameter("joint_names", Parameter.Type.STRING_ARRAY)
        self.declare_parameter("use_imu", Parameter.Type.BOOL)
        self.declare_parameter("forward_command_topic", "")
        self.declare_parameter("trajectory_time_from_start_s", 0.0)
        for name, default in NODE_DEFAULTS.items():
            self.declare_parameter(name, default)
        self._lock = threading.Lock()  # runtime and state assembler: control thread vs. callbacks
        self._stop_loop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reset_session()

    # ------------------------------------------------------------------------------------------ helpers

    def _reset_session(self) -> None:
        self._runtime = None
        self._spec = None
        self._dds = None  # Unitree RobotInterface when interface == unitree_dds
        self._assembler: conv.StateAssembler | None = None
        self._twist_indices: tuple[int, ...] | None = None
        self._entities: list[tuple[str, object]] = []  # (kind, handle) to destroy on cleanup
        self._output_pub = self._status_pub = self._diag_pub = self._js_pub = self._imu_pub = None
        self._interface = ""
        self._last_state = None
        self._loop_stats = None
        self._mode = "unconfigured"
        self._events: list = []
        self._errors: list[str] = []
        self._last_cmd_vel = -np.inf
        self._cmd_zeroed = True
        self._last_error_log = -np.inf

    def _param(self, name: str):
        return self.get_parameter(name).value

    def _track(self, kind: str, handle):
        self._entities.append((kind, handle))
        return handle

    # ------------------------------------------------------------------------------------------ lifecycle

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._configure()
        except Exception as exc:  # the lifecycle wrapper would swallow it silently
            self._log_failure("configure", exc)
            self._release()
            return FAILURE
        self._mode = "configured"
        return SUCCESS

    def _configure(self) -> None:
        from robot_rl.control.runtime import DeployRuntime  # deferred: a clear log line if it fails

        robot = self._param("robot")
        policy = self._param("policy")
        if not policy:
            raise ValueError("parameter 'policy' is empty: pass the path of a policy .onnx file")
        runtime = DeployRuntime.load(robot, str(resolve_policy_path(policy)))
        spec = runtime.spec
        expected = spec_parameters(spec)
        given_hash, given_joints = self._param("spec_hash"), self._param("joint_names")
        if given_hash and given_hash != spec.spec_hash:
            raise ValueError(
                f"parameter spec_hash {given_hash} was generated from an older {spec.name} spec (now "
                f"{spec.spec_hash}): regenerate the parameters with `robot-rl gen-ros-config --robot {spec.name}`"
            )
        if given_joints is not None and list(given_joints) != expected["joint_names"]:
            raise ValueError(
                f"parameter joint_names {list(given_joints)} differs from the spec's {expected['joint_names']}: "
                f"regenerate the parameters with `robot-rl gen-ros-config --robot {spec.name}`"
            )
        interface = self._param("interface") or expected["interface"]
        if interface not in OUTPUTS:
            raise ValueError(f"parameter interface must be one of {', '.join(OUTPUTS)}, got {interface!r}")
        use_imu = self._param("use_imu")
        use_imu = expected["use_imu"] if use_imu is None else bool(use_imu)
        command_names = runtime.contract.commands.names if runtime.contract is not None else ()
        self._twist_indices, warning = conv.command_input_indices(self._param("command_input"), command_names)
        if warning:
            self.get_logger().warning(warning)

        self._runtime, self._spec, self._interface = runtime, spec, interface
        self._assembler = conv.StateAssembler(spec.joint_names, use_imu)
        self._period = spec.timing.policy_period_s
        self._damping = JointCommand.damping(spec.num_joints, spec.safety.damping_kd)
        self._time_from_start = self._param("trajectory_time_from_start_s") or expected["trajectory_time_from_start_s"]
        self._cmd_vel_timeout = self._param("cmd_vel_timeout_s")

        self._create_io(interface, use_imu, expected)
        self.get_logger().info(
            f"configured: robot {spec.name}, policy {policy}, output {interface}, "
            f"commands {list(command_names)} from "
            f"{'cmd_vel' if self._twist_indices is not None else 'nowhere (initial values)'}"
        )

    def _create_io(self, interface: str, use_imu: bool, expected: dict) -> None:
        track, p = self._track, self._param
        if interface == "unitree_dds":
            self._dds = open_unitree_interface(self._spec)
            if p("publish_state"):
                self._js_pub = track("pub", self.create_lifecycle_publisher(JointState, p("joint_states_topic"), 10))
                if use_imu:
                    self._imu_pub = track("pub", self.create_lifecycle_publisher(Imu, p("imu_topic"), 10))
        else:
            track("sub", self.create_subscription(
                JointState, p("joint_states_topic"), self._on_joint_state, qos_profile_sensor_data))
            if use_imu:
                track("sub", self.create_subscription(Imu, p("imu_topic"), self._on_imu, qos_profile_sensor_data))
            if interface == "ros2_control":
                topic = p("forward_command_topic") or expected["forward_command_topic"]
                self._output_pub = track("pub", self.create_lifecycle_publisher(Float64MultiArray, topic, 10))
            else:
                topic = p("joint_trajectory_topic")
                self._output_pub = track("pub", self.create_lifecycle_publisher(JointTrajectory, topic, 10))
        if self._twist_indices is not None:
            track("sub", self.create_subscription(Twist, p("cmd_vel_topic"), self._on_cmd_vel, 10))
        track("sub", self.create_subscription(Bool, p("estop_topic"), self._on_estop_topic, 10))
        track("srv", self.create_service(Trigger, "~/estop", self._on_estop_service))
        track("srv", self.create_service(Trigger, "~/reset_fault", self._on_reset_fault_service))
        self._status_pub = track("pub", self.create_lifecycle_publisher(String, "~/status", 10))
        self._diag_pub = track("pub", self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", 10))
        track("timer", self.create_timer(p("diagnostics_period_s"), self._publish_diagnostics))

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        result = super().on_activate(state)  # enables the lifecycle publishers
        if result != SUCCESS:
            return result
        with self._lock:
            self._errors.clear()
            self._last_state = None
        # Queued: applied on the next step, which captures the measured pose the ramp starts from. A
        # latched fault refuses it (reported in the diagnostics' "refused"; ~/reset_fault clears the latch).
        self._runtime.arm()
        self._stop_loop.clear()
        self._thread = threading.Thread(target=self._control_loop, name="robot_rl_control", daemon=True)
        self._thread.start()
        self.get_logger().info("activated: armed (ramp, then policy) once a complete state has arrived")
        return SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_and_damp()
        self.get_logger().info("deactivated: damping")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_and_damp()
        self._release()
        return SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_and_damp()
        self._release()
        return SUCCESS  # → unconfigured; configure again to retry

    def release_on_exit(self) -> None:
        """Process exit (Ctrl-C, launch shutdown): damping if running, then release."""
        self._stop_and_damp()
        self._release()

    def _stop_and_damp(self) -> None:
        """Stop the loop; the runtime goes to damping and that command is sent once more from here."""
        self._stop_loop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._runtime is None:
            return
        with self._lock:
            now = time.monotonic()
            state = self._last_state
            command = self._damping  # whatever the runtime says, damping goes out
            try:
                self._runtime.stop()
                if state is not None:
                    command = self._runtime.step(state, now).command
            except Exception as exc:
                self.get_logger().error(f"runtime stop failed ({exc!r}): sending damping directly")
            self._mode = "damping"
        with contextlib.suppress(Exception):  # best effort: the ROS context may already be shut down
            self._write(command, state)

    def _release(self) -> None:
        for kind, handle in reversed(self._entities):
            with contextlib.suppress(Exception):
                {"sub": self.destroy_subscription, "pub": self.destroy_lifecycle_publisher,
                 "srv": self.destroy_service, "timer": self.destroy_timer}[kind](handle)
        if self._dds is not None:
            with contextlib.suppress(Exception):
                self._dds.close()
        self._reset_session()

    # ------------------------------------------------------------------------------------------ inputs

    def _on_joint_state(self, msg: JointState) -> None:
        try:
            with self._lock:
                self._assembler.on_joint_state(msg.name, msg.position, msg.velocity, msg.effort, time.monotonic())
        except conv.MessageError as exc:
            self._throttled_error(str(exc))

    def _on_imu(self, msg: Imu) -> None:
        o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
        try:
            with self._lock:
                self._assembler.on_imu((o.x, o.y, o.z, o.w), (w.x, w.y, w.z), (a.x, a.y, a.z),
                                       msg.orientation_covariance[0], time.monotonic())
        except conv.MessageError as exc:
            self._throttled_error(str(exc))

    def _on_cmd_vel(self, msg: Twist) -> None:
        try:
            command = conv.twist_to_command((msg.linear.x, msg.linear.y, msg.linear.z),
                                            (msg.angular.x, msg.angular.y, msg.angular.z), self._twist_indices)
        except conv.MessageError as exc:
            self._throttled_error(f"{exc}: ignored")
            return
        with self._lock:
            self._runtime.set_command(command)
            self._last_cmd_vel, self._cmd_zeroed = time.monotonic(), False

    def _estop(self, source: str) -> None:
        self._runtime.estop()  # thread-safe; applied at the start of the next step
        with self._lock:
            self._errors = [f"e-stop from {source} (deactivate, then activate to re-arm)"]
        self.get_logger().error(f"E-STOP from {source}")

    def _on_estop_topic(self, msg: Bool) -> None:
        if msg.data:
            self._estop(f"topic {self._param('estop_topic')}")

    def _on_estop_service(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self._estop("service ~/estop")
        response.success, response.message = True, "e-stop latched: the runtime is damping"
        return response

    def _on_reset_fault_service(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self._runtime.reset_fault()
        with self._lock:
            self._errors.clear()
        response.success, response.message = True, "fault latch cleared: deactivate, then activate to re-arm"
        return response

    # ------------------------------------------------------------------------------------------ control loop

    def _control_loop(self) -> None:
        loop = RateLoop(self._period, clock=time.monotonic)  # the clock of the state timestamps
        self._loop_stats = loop.stats
        fifo = self._param("fifo_priority") or None
        realtime = realtime_context(fifo_priority=fifo) if self._param("pause_gc") else contextlib.nullcontext()
        with realtime as report:
            if report is not None and fifo and not report.fifo_applied:
                self.get_logger().warning(f"no real-time scheduling: {report.fifo_detail}")
            for tick in loop:
                if self._stop_loop.is_set():
                    break
                try:
                    self._control_step(tick.deadline, tick.missed)
                except Exception as exc:
                    self._on_loop_error(exc)

    def _control_step(self, now: float, missed_deadlines: int) -> None:
        state = self._dds.read() if self._dds is not None else None
        with self._lock:
            if self._dds is None:
                state = self._assembler.state()
            if state is None:
                return  # waiting for the first complete state; the diagnostics say which input is missing
            stale_cmd = now - self._last_cmd_vel > self._cmd_vel_timeout
            if self._twist_indices is not None and not self._cmd_zeroed and stale_cmd:
                self._runtime.set_command(np.zeros(len(self._twist_indices)))  # teleop went quiet: stand still
                self._cmd_zeroed = True
            result = self._runtime.step(state, now, missed_deadlines=missed_deadlines)
            self._last_state = state
            mode = result.mode.value
            mode_changed = mode != self._mode
            self._mode = mode
            self._events.extend(result.events)
        self._write(result.command, state)
        if self._js_pub is not None:
            self._publish_state(state)
        if mode_changed or result.events:
            self._publish_status(with_stats=False)

    def _on_loop_error(self, exc: Exception) -> None:
        self._throttled_error(f"control step failed, e-stop: {exc!r}\n{traceback.format_exc()}")
        with contextlib.suppress(Exception):
            self._runtime.estop()
        with self._lock:
            self._errors = [f"control step failed: {exc!r}"]
            state = self._last_state
        with contextlib.suppress(Exception):
            self._write(self._damping, state)

    # ------------------------------------------------------------------------------------------ outputs

    def _write(self, command: JointCommand, state) -> None:
        if self._dds is not None:
            self._dds.write(command)
            return
        if state is None:
            return  # a position output cannot express damping without a measured pose to hold
        if self._interface == "ros2_control":
            self._output_pub.publish(messages.float64_multi_array(conv.forward_command_data(command, state.q)))
        else:
            self._output_pub.publish(messages.joint_trajectory(
                conv.joint_trajectory_content(command, state.q, self._spec.joint_names, self._time_from_start)
            ))

    def _publish_state(self, state) -> None:
        stamp = self.get_clock().now().to_msg()
        self._js_pub.publish(messages.joint_state(conv.state_to_joint_state(state, self._spec.joint_names), stamp))
        if self._imu_pub is not None:
            self._imu_pub.publish(messages.imu(conv.state_to_imu(state), stamp))

    def _snapshot(self, with_stats: bool):
        with self._lock:
            events, self._events = self._events, []
            stats = self._runtime.diagnostics() if (with_stats and self._runtime is not None) else None
            waiting = self._assembler.waiting_for() if (self._assembler is not None and self._dds is None) else []
            errors = list(self._errors)
            mode = self._mode
        if stats is not None and stats.get("fault_latched"):
            errors.append(f"fault latched: {'; '.join(stats.get('fault', []))} (~/reset_fault, then re-activate)")
        # The runtime's own wording of each event; at most the newest MAX_STATUS_EVENTS per status message.
        dropped = max(0, len(events) - MAX_STATUS_EVENTS)
        events = [str(e) for e in events[dropped:]]
        if dropped:
            events.insert(0, f"({dropped} earlier events not shown)")
        return mode, events, stats, errors, waiting

    def _publish_status(self, with_stats: bool) -> None:
        if self._status_pub is None:
            return
        mode, events, stats, errors, waiting = self._snapshot(with_stats)
        text = conv.status_json(mode, events, stats, errors=errors, waiting_for=waiting, robot=self._spec.name)
        self._status_pub.publish(String(data=text))

    def _publish_diagnostics(self) -> None:
        if self._diag_pub is None or self._runtime is None:
            return
        mode, events, stats, errors, waiting = self._snapshot(with_stats=True)
        stats = {"runtime": stats, "node": {"interface": self._interface, "waiting_for": waiting}}
        if self._loop_stats is not None:
            stats["node"]["loop"] = self._loop_stats.summary()
        warnings = [f"waiting for {', '.join(waiting)}"] if waiting else []
        content = conv.diagnostic_status(
            f"{self.get_fully_qualified_name()}: {self._spec.name}", self._spec.name, mode, stats, warnings, errors
        )
        self._diag_pub.publish(messages.diagnostic_array([content], self.get_clock().now().to_msg()))
        text = conv.status_json(mode, events, stats, errors=errors, waiting_for=waiting, robot=self._spec.name)
        self._status_pub.publish(String(data=text))

    def _log_failure(self, what: str, exc: Exception) -> None:
        self.get_logger().error(f"{what} failed: {exc}")
        # robot_rl's own errors (bad spec, policy, contract, connection) say it all; anything else is a bug.
        ours = type(exc).__module__.startswith("robot_rl") or isinstance(exc, ValueError | ImportError | OSError)
        if not ours:
            self.get_logger().error(traceback.format_exc())

    def _throttled_error(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_error_log >= 1.0:
            self._last_error_log = now
            self.get_logger().error(text)


def main(args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    node = DeployNode()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.release_on_exit()
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()


if __name__ == "__main__":
    main()
