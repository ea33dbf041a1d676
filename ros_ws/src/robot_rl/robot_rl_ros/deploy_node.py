"""Lifecycle deploy node: the robot_rl runtime (policy + safety chain) on ROS 2 topics or Unitree DDS.

Lifecycle:
- configure: load the robot spec and the policy, check the contract (DeployRuntime.load), check the
  parameters file against the spec, open the Unitree DDS interface when that is the output.
- activate: arm the runtime (it ramps from the pose measured on its next step, then runs the policy) and
  run the control loop at the policy rate; the loop steps once a complete state has arrived.
- deactivate: stop the runtime, send its damping command, stop the loop.
- cleanup / shutdown / error: all of the above as needed, then release everything.

Re-arming after an e-stop or fault is explicit: deactivate, then activate.

Parameters: every one is declared with a default (robot_rl.ros.gen_config.node_parameters): the robot's
spec supplies joint_names, use_imu, interface, ..., so the node configures without the generated parameters
file; the file, when given, must agree with the spec. ``robot`` is read-only (set it at start); the others
are read on configure, as in ros2_control nodes.

~/status and /diagnostics are published in every lifecycle state (every ``diagnostics_period_s``, and at
once on each lifecycle transition and mode change); with unitree_dds, joint_states and imu/data are
republished from configure to cleanup, active or not.

Process exit (SIGINT / SIGTERM, e.g. Ctrl-C or a launch shutdown): the node handles the signals itself
(rclpy's own handler is off), stops the control thread, sends damping and logs it, and only then destroys
the node and shuts the ROS context down, so nothing publishes on a dead context.

The node is plumbing only. Message content is converted by robot_rl.ros.conversions (tested without
ROS); every decision about what to send is the runtime's.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
import traceback

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PointStamped, Twist
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import ParameterUninitializedException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from robot_rl.core.loop_timing import RateLoop, realtime_context
from robot_rl.core.types import JointCommand
from robot_rl.ros import conversions as conv
from robot_rl.ros.gen_config import DEPLOY_NODE_NAME, OUTPUTS, PARAMETER_DESCRIPTIONS, node_parameters, spec_parameters
from robot_rl_ros import messages
from robot_rl_ros.deploy_support import open_unitree_interface, resolve_policy_path

MAX_STATUS_EVENTS = 20
SUCCESS = TransitionCallbackReturn.SUCCESS
FAILURE = TransitionCallbackReturn.FAILURE


class DeployNode(LifecycleNode):
    def __init__(self, **node_options) -> None:
        super().__init__(DEPLOY_NODE_NAME, **node_options)
        self._declare_parameters()
        self._lock = threading.Lock()  # runtime and state assembler: control thread vs. callbacks
        self._stop_loop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lifecycle = "unconfigured"
        self._reset_session()
        # In every lifecycle state: plain publishers (a lifecycle publisher says nothing while inactive).
        self._status_pub = self.create_publisher(String, "~/status", 10)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diag_timer = self.create_timer(self._param("diagnostics_period_s"), self._publish_diagnostics)

    def _declare_parameters(self) -> None:
        """Every parameter with a default, the spec's values for the spec-derived ones (gen_config)."""
        from robot_rl.robots.spec import load_robot

        robot = self.declare_parameter("robot", "a1", ParameterDescriptor(
            description=PARAMETER_DESCRIPTIONS["robot"], read_only=True)).value
        try:
            declared = node_parameters(load_robot(robot))
        except Exception as exc:  # an unknown robot: configure says so; declare what needs no spec
            self.get_logger().error(f"robot {robot!r}: {exc} (configure will fail)")
            declared = [p for p in node_parameters(load_robot("a1"))
                        if p.name not in spec_parameters(load_robot("a1"))]
            self.declare_parameter("joint_names", Parameter.Type.STRING_ARRAY,
                                   ParameterDescriptor(description=PARAMETER_DESCRIPTIONS["joint_names"]))
            for name in ("spec_hash", "interface", "forward_command_topic"):
                self.declare_parameter(name, "", ParameterDescriptor(description=PARAMETER_DESCRIPTIONS[name]))
            self.declare_parameter("use_imu", False, ParameterDescriptor(description=PARAMETER_DESCRIPTIONS["use_imu"]))
            self.declare_parameter("trajectory_time_from_start_s", 0.0, ParameterDescriptor(
                description=PARAMETER_DESCRIPTIONS["trajectory_time_from_start_s"]))
        for p in declared:
            if p.name != "robot":
                self.declare_parameter(p.name, p.default, ParameterDescriptor(
                    description=p.description, read_only=p.read_only))

    # ------------------------------------------------------------------------------------------ helpers

    def _reset_session(self) -> None:
        self._runtime = None
        self._spec = None
        self._dds = None  # Unitree RobotInterface when interface == unitree_dds
        self._assembler: conv.StateAssembler | None = None
        self._twist_indices: tuple[int, ...] | None = None
        self._source = conv.CommandSource(None)
        self._entities: list[tuple[str, object]] = []  # (kind, handle) to destroy on cleanup
        self._output_pub = self._js_pub = self._imu_pub = None
        self._interface = ""
        self._last_state = None
        self._loop_stats = None
        self._mode = "unconfigured"
        self._events: list = []
        self._errors: list[str] = []
        self._last_cmd_vel = -np.inf
        self._cmd_zeroed = True
        self._last_error_log: dict[str, float] = {}

    def _param(self, name: str):
        try:
            return self.get_parameter(name).value
        except ParameterUninitializedException:
            return None

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
            self._errors = [f"configure failed: {exc}"]
            self._publish_status(with_stats=False)
            return FAILURE
        self._mode = "configured"
        self._lifecycle = "inactive"
        self._publish_status(with_stats=False)
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
        self._source = conv.command_source(self._param("command_input"), command_names)
        self._twist_indices = self._source.indices if self._source.kind == "cmd_vel" else None
        if self._source.warning:
            self.get_logger().warning(self._source.warning)

        self._runtime, self._spec, self._interface = runtime, spec, interface
        self._assembler = conv.StateAssembler(spec.joint_names, use_imu)
        self._period = spec.timing.policy_period_s
        self._damping = JointCommand.damping(spec.num_joints, spec.safety.damping_kd)
        self._time_from_start = self._param("trajectory_time_from_start_s") or expected["trajectory_time_from_start_s"]
        self._cmd_vel_timeout = self._param("cmd_vel_timeout_s")

        self._create_io(interface, use_imu, expected)
        topics = {"cmd_vel": self._param("cmd_vel_topic"), "target": self._param("target_topic")}
        self.get_logger().info(
            f"configured: robot {spec.name}, policy {policy}, output {interface}, "
            f"commands {list(command_names)} from "
            f"{topics[self._source.kind] if self._source.kind else 'nowhere (initial values)'}"
        )

    def _create_io(self, interface: str, use_imu: bool, expected: dict) -> None:
        track, p = self._track, self._param
        if interface == "unitree_dds":
            domain = p("dds_domain_id")
            self._dds = open_unitree_interface(self._spec, None if domain is None or domain < 0 else domain)
            if p("publish_state"):  # plain publishers: the robot's state is news whether or not the policy runs
                self._js_pub = track("pub", self.create_publisher(JointState, p("joint_states_topic"), 10))
                if use_imu:
                    self._imu_pub = track("pub", self.create_publisher(Imu, p("imu_topic"), 10))
                track("timer", self.create_timer(self._period, self._publish_idle_state))
        else:
            track("sub", self.create_subscription(
                JointState, p("joint_states_topic"), self._on_joint_state, qos_profile_sensor_data))
            if use_imu:
                track("sub", self.create_subscription(Imu, p("imu_topic"), self._on_imu, qos_profile_sensor_data))
            if interface == "ros2_control":
                topic = p("forward_command_topic") or expected["forward_command_topic"]
                self._output_pub = track("lpub", self.create_lifecycle_publisher(Float64MultiArray, topic, 10))
            else:
                topic = p("joint_trajectory_topic")
                self._output_pub = track("lpub", self.create_lifecycle_publisher(JointTrajectory, topic, 10))
        if self._source.kind == "cmd_vel":
            track("sub", self.create_subscription(Twist, p("cmd_vel_topic"), self._on_cmd_vel, 10))
        elif self._source.kind == "target":
            track("sub", self.create_subscription(PointStamped, p("target_topic"), self._on_target, 10))
        track("sub", self.create_subscription(Bool, p("estop_topic"), self._on_estop_topic, 10))
        track("srv", self.create_service(Trigger, "~/estop", self._on_estop_service))
        track("srv", self.create_service(Trigger, "~/reset_fault", self._on_reset_fault_service))
        self.destroy_timer(self._diag_timer)  # the period is read on configure, like every parameter
        self._diag_timer = self.create_timer(p("diagnostics_period_s"), self._publish_diagnostics)

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
        self._lifecycle = "active"
        self._thread.start()
        self.get_logger().info("activated: armed (ramp, then policy) once a complete state has arrived")
        self._publish_status(with_stats=False)
        return SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_and_damp()
        self._lifecycle = "inactive"
        self.get_logger().info("deactivated: damping")
        self._publish_status(with_stats=False)
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        self._lifecycle = "unconfigured"
        self._publish_status(with_stats=False)
        return SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_and_damp()
        self._release()
        self._lifecycle = "finalized"
        self._publish_status(with_stats=False)
        return SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_and_damp()
        self._release()
        self._lifecycle = "unconfigured"
        self._publish_status(with_stats=False)
        return SUCCESS  # → unconfigured; configure again to retry

    def release_on_exit(self) -> None:
        """Process exit (Ctrl-C, launch shutdown): stop the loop, send damping and log it, then release.
        Called before the node is destroyed and the context shut down (see main)."""
        if self._runtime is not None:
            was_active, interface = self._lifecycle == "active", self._interface
            if self._stop_and_damp():
                self.get_logger().info(f"exit: damping sent ({interface})")
            elif not was_active:
                self.get_logger().info(f"exit: inactive, damping was sent on deactivate ({interface})")
            elif self._last_state is None:  # the loop never stepped: nothing was ever sent to the robot
                self.get_logger().info(f"exit: no state ever arrived, so nothing was sent ({interface})")
            else:
                self.get_logger().error(f"exit: damping NOT sent ({interface})")
        self._release()
        self._lifecycle = "finalized"

    def _stop_and_damp(self) -> bool:
        """Stop the loop; the runtime goes to damping and that command is sent once more from here.
        Returns whether the damping command went out (False: no runtime, or the write failed)."""
        self._stop_loop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            if self._thread.is_alive():
                self.get_logger().error("the control thread did not stop within 2 s")
            self._thread = None
        if self._runtime is None:
            return False
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
        try:
            return self._write(command, state)
        except Exception as exc:
            self.get_logger().error(f"sending damping failed: {exc!r}")
            return False

    def _release(self) -> None:
        for kind, handle in reversed(self._entities):
            with contextlib.suppress(Exception):
                {"sub": self.destroy_subscription, "pub": self.destroy_publisher,
                 "lpub": self.destroy_lifecycle_publisher, "srv": self.destroy_service,
                 "timer": self.destroy_timer}[kind](handle)
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

    def _on_target(self, msg: PointStamped) -> None:
        p = msg.point
        try:
            command = conv.point_to_command((p.x, p.y, p.z), self._source.indices)
        except conv.MessageError as exc:
            self._throttled_error(f"{exc}: ignored")
            return
        with self._lock:
            self._runtime.set_command(command)  # held until the next target (no timeout: a target is a pose)

    def _estop(self, source: str) -> None:
        self._runtime.estop()  # thread-safe; applied at the start of the next step
        with self._lock:
            self._errors = [f"e-stop from {source} (deactivate, then activate to re-arm)"]
            self._events.append(conv.estop_event(f"e-stop from {source}"))
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
            previous, self._mode = self._mode, mode
            mode_changed = mode != previous
            self._events.extend(result.events)
        for event in result.events:
            if conv.event_log_level(event) == "error":
                self._throttled_error(f"safety fault: {event}", key=event.filter_name)
        if mode_changed:
            self.get_logger().info(f"mode {previous} -> {mode}")
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

    def _write(self, command: JointCommand, state) -> bool:
        """Send ``command``; False when it cannot go out (a position output with no measured pose to hold, or
        its lifecycle publisher is off because the node is not active)."""
        if self._dds is not None:
            self._dds.write(command)
            return True
        if state is None or self._lifecycle != "active":
            return False
        if self._interface == "ros2_control":
            self._output_pub.publish(messages.float64_multi_array(conv.forward_command_data(command, state.q)))
        else:
            self._output_pub.publish(messages.joint_trajectory(
                conv.joint_trajectory_content(command, state.q, self._spec.joint_names, self._time_from_start)
            ))
        return True

    def _publish_idle_state(self) -> None:
        """unitree_dds while not active: keep republishing the robot's state (the control loop does it while
        active)."""
        if self._thread is not None or self._dds is None or self._js_pub is None:
            return
        try:
            state = self._dds.read()
        except Exception as exc:
            self._throttled_error(f"reading the robot's state failed: {exc!r}")
            return
        if state is not None:
            self._publish_state(state)

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
        # Each event's fields and the runtime's own wording; at most the newest MAX_STATUS_EVENTS per message.
        dropped = max(0, len(events) - MAX_STATUS_EVENTS)
        events = [conv.event_record(e) for e in events[dropped:]]
        if dropped:
            events.insert(0, conv.event_record(f"({dropped} earlier events not shown)"))
        return mode, events, stats, errors, waiting

    def _robot_name(self) -> str:
        return self._spec.name if self._spec is not None else str(self._param("robot"))

    def _publish_status(self, with_stats: bool) -> None:
        mode, events, stats, errors, waiting = self._snapshot(with_stats)
        text = conv.status_json(mode, events, stats, errors=errors, waiting_for=waiting, robot=self._robot_name(),
                                lifecycle=self._lifecycle)
        self._status_pub.publish(String(data=text))

    def _publish_diagnostics(self) -> None:
        """~/status and /diagnostics, every diagnostics_period_s in every lifecycle state."""
        mode, events, stats, errors, waiting = self._snapshot(with_stats=True)
        stats = {"runtime": stats or {}, "node": {"lifecycle": self._lifecycle, "interface": self._interface,
                                                  "waiting_for": waiting}}
        if self._loop_stats is not None and self._thread is not None:
            stats["node"]["loop"] = self._loop_stats.summary()
        warnings = [f"waiting for {', '.join(waiting)}"] if (waiting and self._thread is not None) else []
        robot = self._robot_name()
        content = conv.diagnostic_status(
            f"{self.get_fully_qualified_name()}: {robot}", robot, conv.lifecycle_mode(self._lifecycle, mode),
            stats, warnings, errors)
        self._diag_pub.publish(messages.diagnostic_array([content], self.get_clock().now().to_msg()))
        text = conv.status_json(mode, events, stats, errors=errors, waiting_for=waiting, robot=robot,
                                lifecycle=self._lifecycle)
        self._status_pub.publish(String(data=text))

    def _log_failure(self, what: str, exc: Exception) -> None:
        self.get_logger().error(f"{what} failed: {exc}")
        # robot_rl's own errors (bad spec, policy, contract, connection) say it all; anything else is a bug.
        ours = type(exc).__module__.startswith("robot_rl") or isinstance(exc, ValueError | ImportError | OSError)
        if not ours:
            self.get_logger().error(traceback.format_exc())

    def _throttled_error(self, text: str, key: str = "") -> None:
        """At most one error line a second per ``key``."""
        now = time.monotonic()
        if now - self._last_error_log.get(key, -np.inf) >= 1.0:
            self._last_error_log[key] = now
            self.get_logger().error(text)


def main(args: list[str] | None = None) -> None:
    # rclpy's SIGINT handler would shut the context down under the control thread (which then publishes on
    # a dead context) and race this function's damping. The node takes the signals itself: the first
    # SIGINT/SIGTERM ends spinning; damping is sent and logged while the context still works; only then is
    # the context shut down. Later signals (launch sends SIGINT after the terminal's) change nothing.
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()

    def on_signal(signum, frame) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    node = DeployNode()
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    except ExternalShutdownException:
        pass
    finally:
        node.release_on_exit()
        executor.remove_node(node)
        node.destroy_node()
        executor.shutdown()
        rclpy.try_shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    main()
