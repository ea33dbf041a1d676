"""Pure conversions between ROS 2 message fields and the robot_rl runtime. Never imports rclpy.

The nodes pass message *fields* (lists of names and numbers) in and build messages from the plain lists
and dicts that come back, so everything here is tested without a ROS installation.

Conventions that differ between ROS and robot_rl, and are handled only here:

- ``sensor_msgs/JointState`` carries its own joint order (whatever the driver or ros2_control's
  joint_state_broadcaster chose). Joints are matched **by name**; the runtime sees the spec's order.
- ``geometry_msgs/Quaternion`` is (x, y, z, w); :class:`RobotState.base_quat` is (w, x, y, z).
- A position-only controller (ros2_control's forward position controller, a joint trajectory) cannot
  express "no stiffness". Joints whose command has kp = 0 (damping, passive) get their measured position
  as the target, so the controller holds them where they are instead of pulling them to 0 rad.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.core.types import JointCommand, RobotState


class MessageError(RobotRLError, ValueError):
    """A message (or a mapping onto one) the runtime cannot use. The text names the topic field or joint."""


# ---------------------------------------------------------------------------------------------- state


@lru_cache(maxsize=16)
def _joint_index(joint_names: tuple[str, ...], message_names: tuple[str, ...]) -> np.ndarray:
    """For each spec joint, its index in the message. Cached: a driver keeps one order for its lifetime."""
    position_of: dict[str, int] = {}
    for i, name in enumerate(message_names):
        if name in position_of:
            raise MessageError(f"joint_states: joint {name!r} appears twice (name[{position_of[name]}] and name[{i}])")
        position_of[name] = i
    missing = [name for name in joint_names if name not in position_of]
    if missing:
        raise MessageError(
            f"joint_states: missing joint{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} "
            f"(the message names {list(message_names)})"
        )
    index = np.array([position_of[name] for name in joint_names], dtype=np.intp)
    index.setflags(write=False)  # shared by every caller through the cache
    return index


def joint_state_to_arrays(
    joint_names: Sequence[str],
    names: Sequence[str],
    position: Sequence[float],
    velocity: Sequence[float],
    effort: Sequence[float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, dq, tau) in ``joint_names`` order from a JointState's fields. Joints the robot doesn't have are
    ignored. Velocities are required (policies observe them); an empty ``effort`` reads as zeros."""
    names = tuple(names)
    index = _joint_index(tuple(joint_names), names)
    n = len(names)
    if len(position) != n:
        raise MessageError(f"joint_states: {n} names but {len(position)} positions")
    if len(velocity) != n:
        what = "no velocities (the policy needs them)" if len(velocity) == 0 else f"{len(velocity)} velocities"
        raise MessageError(f"joint_states: {n} names but {what}")
    if len(effort) not in (0, n):
        raise MessageError(f"joint_states: {n} names but {len(effort)} efforts")
    q = np.asarray(position, dtype=np.float64)[index]
    dq = np.asarray(velocity, dtype=np.float64)[index]
    tau = np.asarray(effort, dtype=np.float64)[index] if len(effort) else np.zeros(len(index))
    return q, dq, tau


def imu_to_base(
    orientation_xyzw: Sequence[float],
    angular_velocity: Sequence[float],
    linear_acceleration: Sequence[float],
    orientation_covariance0: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base_quat as w, x, y, z; gyro; accelerometer) from a sensor_msgs/Imu's fields.

    ``orientation_covariance0`` is ``orientation_covariance[0]``; by the message's convention -1 there
    means the IMU provides no orientation, which a policy observing gravity cannot run without.
    """
    if orientation_covariance0 == -1.0:
        raise MessageError(
            "imu: orientation_covariance[0] is -1, i.e. this IMU publishes no orientation estimate; "
            "the policy needs the base orientation (run an orientation filter on the raw IMU first)"
        )
    x, y, z, w = (float(v) for v in orientation_xyzw)
    norm = math.sqrt(w * w + x * x + y * y + z * z)
    if not math.isfinite(norm) or norm < 0.5:
        raise MessageError(f"imu: orientation (x={x}, y={y}, z={z}, w={w}) is not a rotation (norm {norm:.3g})")
    quat = np.array([w, x, y, z]) / norm
    return quat, np.asarray(angular_velocity, dtype=np.float64), np.asarray(linear_acceleration, dtype=np.float64)


class StateAssembler:
    """Builds one :class:`RobotState` from the latest JointState and (for a floating base) Imu message.

    ``tick`` is what the runtime's stale-state watchdog watches, so it advances only when *every* input
    has delivered a new message since its last advance: a frozen IMU stops the tick even while joint
    states keep arriving (and vice versa). ``timestamp`` is the arrival time of the older part. Not
    thread-safe: the node holds its lock around every call.
    """

    def __init__(self, joint_names: Sequence[str], use_imu: bool) -> None:
        self.joint_names = tuple(joint_names)
        self.use_imu = use_imu
        self.joint_state_count = 0
        self.imu_count = 0
        self.tick = 0
        self._joints: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._joints_time = -math.inf
        self._imu: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._imu_time = -math.inf
        self._fresh_joints = self._fresh_imu = False

    def on_joint_state(self, names, position, velocity, effort, now: float) -> None:
        self._joints = joint_state_to_arrays(self.joint_names, names, position, velocity, effort)
        self._joints_time = now
        self.joint_state_count += 1
        self._fresh_joints = True
        self._advance()

    def on_imu(self, orientation_xyzw, angular_velocity, linear_acceleration, orientation_covariance0, now: float):
        self._imu = imu_to_base(orientation_xyzw, angular_velocity, linear_acceleration, orientation_covariance0)
        self._imu_time = now
        self.imu_count += 1
        self._fresh_imu = True
        self._advance()

    def _advance(self) -> None:
        if self._fresh_joints and (self._fresh_imu or not self.use_imu):
            self.tick += 1
            self._fresh_joints = self._fresh_imu = False

    def waiting_for(self) -> list[str]:
        """The inputs that have not arrived yet (empty once a complete state exists)."""
        missing = [] if self._joints is not None else ["joint_states"]
        if self.use_imu and self._imu is None:
            missing.append("imu")
        return missing

    def state(self) -> RobotState | None:
        if self.waiting_for():
            return None
        q, dq, tau = self._joints
        state = RobotState(timestamp=self._joints_time, tick=self.tick, q=q, dq=dq, tau=tau)
        if self.use_imu:
            state.base_quat, state.base_ang_vel, state.base_lin_acc = self._imu
            state.timestamp = min(self._joints_time, self._imu_time)
        return state


def state_to_joint_state(state: RobotState, joint_names: Sequence[str]) -> dict[str, list]:
    """JointState fields for a state read from a non-ROS interface (Unitree DDS), for recorders and RViz."""
    return {"name": list(joint_names), "position": state.q.tolist(), "velocity": state.dq.tolist(),
            "effort": state.tau.tolist()}


def state_to_imu(state: RobotState) -> dict[str, list[float]]:
    """Imu fields (orientation as x, y, z, w) for a state read from a non-ROS interface."""
    w, x, y, z = (float(v) for v in state.base_quat)
    return {"orientation_xyzw": [x, y, z, w], "angular_velocity": state.base_ang_vel.tolist(),
            "linear_acceleration": state.base_lin_acc.tolist()}


# ------------------------------------------------------------------------------------------- commands

# Policy command name → index into (linear.x, linear.y, linear.z, angular.x, angular.y, angular.z).
TWIST_FIELDS: dict[str, int] = {
    "lin_vel_x": 0, "lin_vel_y": 1, "lin_vel_z": 2, "ang_vel_x": 3, "ang_vel_y": 4, "ang_vel_z": 5,
}


def _command_indices(command_names: Sequence[str], fields: dict[str, int], topic: str, message: str) -> tuple[int, ...]:
    """Where each of the policy's commands sits in ``message``'s fields; checked once, when the node configures."""
    unknown = [name for name in command_names if name not in fields]
    if unknown:
        raise MessageError(
            f"{topic}: the policy's command{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            f"cannot come from a {message} (it carries {', '.join(fields)})"
        )
    return tuple(fields[name] for name in command_names)


def twist_command_indices(command_names: Sequence[str]) -> tuple[int, ...]:
    """Where each of the policy's commands sits in a Twist."""
    return _command_indices(command_names, TWIST_FIELDS, "cmd_vel", "geometry_msgs/Twist")


# Reach command name → index into a geometry_msgs/Point (x, y, z): the Panda reach policy's target.
TARGET_FIELDS: dict[str, int] = {"target_x": 0, "target_y": 1, "target_z": 2}
COMMAND_INPUTS = ("auto", "cmd_vel", "target", "none")


def target_command_indices(command_names: Sequence[str]) -> tuple[int, ...]:
    """Where each of the policy's commands sits in a Point (x, y, z)."""
    return _command_indices(command_names, TARGET_FIELDS, "target", "geometry_msgs/PointStamped")


@dataclasses.dataclass(frozen=True)
class CommandSource:
    """Where the deploy node takes the policy's commands from: ``kind`` "cmd_vel" (a Twist), "target" (a
    PointStamped) or None (not subscribed: the commands keep their initial values); ``indices`` into the
    message's fields; ``warning`` for the log, or ""."""

    kind: str | None
    indices: tuple[int, ...] = ()
    warning: str = ""


def command_source(command_input: str, command_names: Sequence[str]) -> CommandSource:
    """The ``command_input`` parameter (see gen_config) applied to the policy's command names."""
    if command_input not in COMMAND_INPUTS:
        raise MessageError(f"command_input must be one of {', '.join(COMMAND_INPUTS)}, got {command_input!r}")
    if command_input == "none" or not command_names:
        return CommandSource(None)
    mappers = {"cmd_vel": twist_command_indices, "target": target_command_indices}
    if command_input != "auto":
        try:
            return CommandSource(command_input, mappers[command_input](command_names))
        except MessageError as exc:
            raise MessageError(f"{exc}; set command_input to none to run with the initial commands") from None
    problems = []
    for kind, mapper in mappers.items():
        try:
            return CommandSource(kind, mapper(command_names))
        except MessageError as exc:
            problems.append(str(exc))
    return CommandSource(None, (), f"{'; '.join(problems)}: no command input is subscribed and the commands keep "
                                   "their initial values")


def command_input_indices(command_input: str, command_names: Sequence[str]) -> tuple[tuple[int, ...] | None, str]:
    """Twist indices of the policy's commands, or None when they don't come from cmd_vel; and a warning."""
    source = command_source(command_input, command_names)
    return (source.indices if source.kind == "cmd_vel" else None), source.warning


def point_to_command(xyz: Sequence[float], indices: Sequence[int]) -> np.ndarray:
    """The policy's command vector from a PointStamped's point; the runtime clamps it to the contract's ranges."""
    point = np.asarray(xyz, dtype=np.float64)
    if not np.all(np.isfinite(point)):
        raise MessageError(f"target: non-finite point {list(xyz)}")
    return point[list(indices)]


def twist_to_command(linear_xyz: Sequence[float], angular_xyz: Sequence[float], indices: Sequence[int]) -> np.ndarray:
    """The policy's command vector from a Twist; the runtime clamps it to the contract's ranges."""
    twist = np.array([*linear_xyz, *angular_xyz], dtype=np.float64)
    if not np.all(np.isfinite(twist)):  # clamping to the contract's ranges would let NaN through
        raise MessageError(f"cmd_vel: non-finite velocity (linear {list(linear_xyz)}, angular {list(angular_xyz)})")
    return twist[list(indices)]


def position_targets(command: JointCommand, measured_q: np.ndarray) -> np.ndarray:
    """Position targets for a position-only controller (see the module docstring about kp = 0)."""
    return np.where(command.kp > 0.0, command.q_target, measured_q)


def forward_command_data(command: JointCommand, measured_q: np.ndarray) -> list[float]:
    """``std_msgs/Float64MultiArray.data`` for a forward position controller whose joints are in spec order."""
    return position_targets(command, measured_q).tolist()


def duration_fields(seconds: float) -> dict[str, int]:
    """``builtin_interfaces/Duration`` fields for a non-negative number of seconds."""
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"duration must be finite and >= 0 s, got {seconds!r}")
    nanoseconds = round(seconds * 1e9)
    return {"sec": nanoseconds // 1_000_000_000, "nanosec": nanoseconds % 1_000_000_000}


def joint_trajectory_content(
    command: JointCommand, measured_q: np.ndarray, joint_names: Sequence[str], time_from_start_s: float
) -> dict[str, Any]:
    """A one-point ``trajectory_msgs/JointTrajectory``: reach the targets ``time_from_start_s`` from now
    (header stamp zero = start on receipt)."""
    held = command.kp <= 0.0
    velocities = np.where(held, 0.0, command.dq_target)
    return {
        "joint_names": list(joint_names),
        "points": [{
            "positions": position_targets(command, measured_q).tolist(),
            "velocities": velocities.tolist(),
            "time_from_start": duration_fields(time_from_start_s),
        }],
    }


# ------------------------------------------------------------------------------------ diagnostics/status

# diagnostic_msgs/DiagnosticStatus levels (the message's byte constants, as ints).
LEVEL_OK, LEVEL_WARN, LEVEL_ERROR, LEVEL_STALE = 0, 1, 2, 3
_ERROR_MODE_WORDS = ("fault", "estop", "e_stop", "e-stop", "emergency")


def to_jsonable(value: Any) -> Any:
    """Plain JSON types from numpy scalars/arrays, dataclasses, enums, tuples, bytes and array.array.
    Non-finite floats become None (JSON has no NaN)."""
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if isinstance(value, (bytes, bytearray)):
        return list(value)
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.generic):
        return to_jsonable(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else value
        return [to_jsonable(v) for v in items]
    return str(value)


def flatten_stats(stats: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Nested stats → ("a.b.c", "value") pairs, as diagnostic_msgs/KeyValue wants. Floats keep 6
    significant digits; None reads "n/a"."""
    pairs: list[tuple[str, str]] = []
    for key, value in stats.items():
        name = f"{prefix}{key}"
        value = to_jsonable(value)
        if isinstance(value, dict):
            pairs.extend(flatten_stats(value, f"{name}."))
        elif value is None:
            pairs.append((name, "n/a"))
        elif isinstance(value, float):
            pairs.append((name, f"{value:.6g}"))
        elif isinstance(value, list):
            pairs.append((name, json.dumps(value)))
        else:
            pairs.append((name, str(value)))
    return pairs


def diagnostic_level(mode: str, warnings: Sequence[str] = (), errors: Sequence[str] = ()) -> int:
    if errors or any(word in mode.lower() for word in _ERROR_MODE_WORDS):
        return LEVEL_ERROR
    return LEVEL_WARN if warnings else LEVEL_OK


def diagnostic_status(
    name: str,
    hardware_id: str,
    mode: str,
    stats: Mapping[str, Any],
    warnings: Sequence[str] = (),
    errors: Sequence[str] = (),
) -> dict[str, Any]:
    """``diagnostic_msgs/DiagnosticStatus`` content. Level: ERROR for errors (an e-stop, a fault) or a
    fault/e-stop mode, WARN for warnings, else OK. Message: "mode[: errors; warnings]". Values: the
    flattened stats."""
    notes = [*errors, *warnings]
    message = f"{mode}: {'; '.join(notes)}" if notes else mode
    return {"level": diagnostic_level(mode, warnings, errors), "name": name, "message": message,
            "hardware_id": hardware_id, "values": flatten_stats(stats)}


def event_record(event: Any) -> dict[str, Any]:
    """A runtime safety event (or a plain note) as the status topic's JSON carries it: the fields of the deploy
    log's ``/safety/events`` records (filter, fault, detail, joints) plus ``text``, the runtime's wording."""
    if isinstance(event, str):
        return {"filter": "note", "fault": False, "detail": event, "joints": [], "text": event}
    return {"filter": str(getattr(event, "filter_name", "note")), "fault": bool(getattr(event, "fault", False)),
            "detail": str(getattr(event, "detail", event)),
            "joints": [int(j) for j in getattr(event, "joints", ())], "text": str(event)}


def estop_event(detail: str) -> Any:
    """An operator e-stop as a safety event (filter "estop", a fault), for the status topic and recordings."""
    from robot_rl.safety.filters import SafetyEvent

    return SafetyEvent("estop", True, detail)


LIFECYCLE_STATES = ("unconfigured", "inactive", "active", "finalized")


def lifecycle_mode(lifecycle: str, mode: str) -> str:
    """The mode the diagnostics report: the runtime's mode while active; otherwise the lifecycle state, with
    the runtime's last mode when it says more (``inactive (damping)``)."""
    if lifecycle == "active" or lifecycle not in LIFECYCLE_STATES:
        return mode
    return lifecycle if mode in ("unconfigured", "configured", lifecycle) else f"{lifecycle} ({mode})"


def event_log_level(event: Any) -> str | None:
    """How the deploy node logs a runtime event: faults (stale state, tilt, overrun, non-finite values, ...)
    as errors, like an e-stop; limit events (clamps, possibly every tick) only on the status topic."""
    return "error" if getattr(event, "fault", False) else None


def status_json(mode: str, events: Sequence[Any], stats: Mapping[str, Any] | None = None, **extra: Any) -> str:
    """The ``status`` topic's JSON text: mode, the events since the last status, optional stats and extras."""
    payload: dict[str, Any] = {"mode": mode, "events": to_jsonable(list(events))}
    payload.update(to_jsonable(extra))
    if stats is not None:
        payload["diagnostics"] = to_jsonable(stats)
    return json.dumps(payload, sort_keys=True, allow_nan=False)
